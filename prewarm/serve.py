"""``prewarm serve``: external metrics for the HPA, KEDA's metrics-api and external scaler."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prewarm.options import PORT, split_names, user_errors

if TYPE_CHECKING:
    from serving.shards import Shard


def build_components(
    config_path: Path, tracking_uri: str | None, shard: Shard | None = None
) -> Any:
    """Read the config file and assemble the serving components (source, registry, config);
    with ``shard`` (a :class:`serving.shards.Shard`), for its workloads only."""
    from serving.api.runtime import ServingComponents
    from serving.engine.models import MlflowRegistry
    from serving.settings import refresh_config_from_project
    from training.config import load_config
    from training.settings import resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    source_config = config.source
    return ServingComponents(
        config=refresh_config_from_project(config, shard),
        source_factory=lambda: make_source(source_config.type, source_config),
        registry=MlflowRegistry(resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)),
    )


@click.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Config file (workloads, source, `serving:` and `mlflow:` sections).",
)
@click.option("--host", default=None, help="Bind address [default: 127.0.0.1].")
@click.option("--port", type=PORT, default=None, help="HTTP(S) port [default: 8080].")
@click.option("--grpc-port", type=PORT, default=None, help="KEDA external scaler port [9000].")
@click.option("--no-grpc", is_flag=True, help="Do not start the gRPC external scaler.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--client-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The front-proxy CA (requestheader-client-ca-file): verify client certificates "
    "against it and require one on the External Metrics API.",
)
@click.option(
    "--requestheader-allowed-names",
    default=None,
    help="Comma-separated common names the front-proxy client certificate may have "
    "(requestheader-allowed-names; or PREWARM_REQUESTHEADER_ALLOWED_NAMES as JSON) "
    "[default: any the CA signed].",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Require this bearer token on the KEDA metrics-api endpoints (or PREWARM_TOKEN).",
)
@click.option("--tracking-uri", default=None, help="MLflow tracking URI of the registry.")
@click.option("--log-level", default=None, help="Log level [default: INFO].")
@click.option(
    "--shadow",
    is_flag=True,
    default=None,
    help="Shadow mode: plan and export on /metrics and /explain, answer every autoscaling API "
    "with the hold error (or PREWARM_SHADOW=true).",
)
@click.option(
    "--shard",
    default=None,
    help="K/N: serve only the workloads of shard K of N, by a stable hash of their names "
    "(or PREWARM_SHARD); `prewarm manifests --shards N` routes KEDA to each [default: all].",
)
def serve(
    config_path: Path,
    host: str | None,
    port: int | None,
    grpc_port: int | None,
    no_grpc: bool,
    tls_cert: Path | None,
    tls_key: Path | None,
    client_ca: Path | None,
    requestheader_allowed_names: str | None,
    token_file: Path | None,
    tracking_uri: str | None,
    log_level: str | None,
    shadow: bool | None,
    shard: str | None,
) -> None:
    """Serve forecasts to the HPA (External Metrics API) and to KEDA (HTTP and gRPC)."""
    import uvicorn

    from serving.api.app import create_app, uvicorn_config
    from serving.engine.observability import configure_logging
    from serving.settings import ServingSettings

    with user_errors():
        flags: dict[str, Any] = {
            "host": host,
            "port": port,
            "grpc_port": grpc_port,
            "tls_cert": tls_cert,
            "tls_key": tls_key,
            "client_ca": client_ca,
            "requestheader_allowed_names": split_names(requestheader_allowed_names),
            "token_file": token_file,
            "tracking_uri": tracking_uri,
            "log_level": log_level,
            "shadow": shadow,
            "shard": shard,
        }
        try:
            settings = ServingSettings(**{k: v for k, v in flags.items() if v is not None})
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
        if no_grpc:
            settings = settings.model_copy(update={"grpc_port": None})
        configure_logging(settings.log_level)
        components = build_components(config_path, settings.tracking_uri, settings.shard_spec())
        app = create_app(settings, components)
        uvicorn.Server(uvicorn_config(app, settings)).run()
