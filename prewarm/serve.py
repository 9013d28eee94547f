"""``prewarm serve``: external metrics for the HPA, KEDA's metrics-api and external scaler.

Every setting is checked before anything starts (the token read, the addresses bound once,
the MLflow store found), so a mistake ends in one ``Error:`` line naming the flag or
variable and exit code 2, not in a server that starts and then fails.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prewarm.exit_codes import ExitCode, epilog, fail
from prewarm.options import LOG_LEVELS, PORT, user_errors
from serving.shards import MAX_SHARDS

if TYPE_CHECKING:
    from pydantic import ValidationError

    from serving.settings import ServingSettings
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
    from training.settings import require_store, resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    source_config = config.source
    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    require_store(uri, "serving")
    return ServingComponents(
        config=refresh_config_from_project(config, shard),
        source_factory=lambda: make_source(source_config.type, source_config),
        registry=MlflowRegistry(uri),
    )


def _origin(field: str, flags: Mapping[str, Any]) -> str:
    """What set ``field``: its flag (``--shard``), else its variable (``PREWARM_SHARD``) when
    that is set, else the flag (the default, which the flag changes)."""
    from serving.settings import flag_of, variable_of

    variable = variable_of(field)
    return variable if field not in flags and variable in os.environ else flag_of(field)


def _settings_problems(error: ValidationError, flags: Mapping[str, Any]) -> str:
    """Pydantic's report as one line: each problem after the flag or variable at fault."""
    from forecaster.exceptions import shown

    problems = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["loc"]:  # a field's own check; the settings-wide ones name their fields
            field = str(item["loc"][0])
            if item["type"] != "value_error" and field != "token":  # never echo a token
                message = f"{message}, got {shown(item.get('input'))}"
            message = f"{_origin(field, flags)}: {message}"
        problems.append(message)
    return "; ".join(problems)


def _settings(flags: Mapping[str, Any]) -> ServingSettings:
    """The settings from ``flags`` over the environment, or one clear error."""
    from pydantic import ValidationError

    from forecaster.exceptions import ConfigError
    from serving.settings import ServingSettings

    try:
        return ServingSettings(**flags)
    except ValidationError as exc:
        raise ConfigError(_settings_problems(exc, flags)) from None


def _check_addresses(settings: ServingSettings, flags: Mapping[str, Any]) -> None:
    """Bind each address the server will listen on once, so that a host this machine does
    not have or a port in use is named now, not logged by a server that then exits."""
    from forecaster.exceptions import ConfigError, shown

    host = f"{_origin('host', flags)} {shown(settings.host)}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            settings.host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise ConfigError(f"{host} is not an address: {exc.strerror}") from None
    ports = {"port": settings.port, "grpc_port": settings.grpc_port}
    for field, port in ports.items():
        if port is None:
            continue
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
            try:
                sock.bind((address[0], port, *address[2:]))
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise ConfigError(f"{host} is not an address of this machine") from None
                raise ConfigError(
                    f"{_origin(field, flags)} {port}: cannot listen on it at "
                    f"{settings.host}: {exc.strerror}"
                ) from None


@click.command(
    epilog=epilog(
        OK="stopped (SIGTERM, Ctrl-C)",
        FAILURE="the server did not start (the log says why), or an unexpected failure",
        CONFIG="bad configuration, flag or PREWARM_ variable, found before anything starts",
        DATA="not used: a source that fails while serving is answered with the hold error\n"
        "     (503 / UNAVAILABLE), and logged",
    )
)
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Config file (workloads, source, `serving:` and `mlflow:` sections).",
)
@click.option("--host", default=None, help="Bind address [default: 127.0.0.1].")
@click.option("--port", type=PORT, default=None, help="HTTP(S) port [default: 8080].")
@click.option(
    "--grpc-port", type=PORT, default=None, help="KEDA external scaler port [default: 9000]."
)
@click.option("--no-grpc", is_flag=True, help="Do not start the gRPC external scaler.")
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate (PEM; `prewarm certs` makes one), with --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The private key of --tls-cert (PEM).",
)
@click.option(
    "--client-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The front-proxy CA (requestheader-client-ca-file): verify client certificates "
    "against it and require one on the External Metrics API.",
)
@click.option(
    "--tls-check-interval",
    type=float,
    default=None,
    help="Seconds between two looks at the TLS files for a renewal, at a new connection; 0 "
    "looks at every one (or PREWARM_TLS_CHECK_INTERVAL) [default: 10].",
)
@click.option(
    "--requestheader-allowed-names",
    default=None,
    help="Common names the front-proxy client certificate may have, comma-separated or as "
    "the JSON list extension-apiserver-authentication holds (requestheader-allowed-names; "
    "or PREWARM_REQUESTHEADER_ALLOWED_NAMES) [default: any the CA signed].",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Require the bearer token this file holds on the KEDA endpoints (or "
    "PREWARM_TOKEN_FILE; PREWARM_TOKEN gives the token itself).",
)
@click.option("--tracking-uri", default=None, help="MLflow tracking URI of the registry.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default=None,
    help="Log level (or PREWARM_LOG_LEVEL) [default: INFO].",
)
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
    help=f"K/N: serve only the workloads of shard K of N (N at most {MAX_SHARDS}), by a "
    "stable hash of their names (or PREWARM_SHARD); `prewarm manifests --shards N` routes "
    "KEDA to each [default: all].",
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
    tls_check_interval: float | None,
    requestheader_allowed_names: str | None,
    token_file: Path | None,
    tracking_uri: str | None,
    log_level: str | None,
    shadow: bool | None,
    shard: str | None,
) -> None:
    """Serve forecasts to the HPA (External Metrics API) and to KEDA (HTTP and gRPC)."""
    from serving.api.app import create_app
    from serving.engine.observability import configure_logging

    with user_errors():
        flags: dict[str, Any] = {
            "host": host,
            "port": port,
            "grpc_port": grpc_port,
            "tls_cert": tls_cert,
            "tls_key": tls_key,
            "client_ca": client_ca,
            "tls_check_interval": tls_check_interval,
            # Given as text: ServingSettings reads it as it reads the variable.
            "requestheader_allowed_names": requestheader_allowed_names,
            "token_file": token_file,
            "tracking_uri": tracking_uri,
            "log_level": log_level,
            "shadow": shadow,
            "shard": shard,
        }
        given = {k: v for k, v in flags.items() if v is not None}
        settings = _settings(given)
        if no_grpc:
            settings = settings.model_copy(update={"grpc_port": None})
        settings.bearer_token()  # read now: the server would only find it blank once started
        _check_addresses(settings, given)
        configure_logging(settings.log_level)
        components = build_components(config_path, settings.tracking_uri, settings.shard_spec())
        app = create_app(settings, components)
    _run(app, settings)


def _stopped(signum: int, frame: Any) -> None:
    raise SystemExit(ExitCode.OK)


def _run(app: Any, settings: ServingSettings) -> None:
    """Serve until stopped, then exit 0; a server that could not start exits 1, not
    uvicorn's 3 (which prewarm's table gives to data errors).

    uvicorn shuts down gracefully on SIGTERM or Ctrl-C, then raises the signal again for
    the handler it found: the default one would end the process by SIGTERM (143 in a shell)
    and Ctrl-C's KeyboardInterrupt would print "Aborted!" and exit 1. A stop asked for is
    exit 0, as the exit-code table says.
    """
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from serving.api.app import uvicorn_config

    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.Server(uvicorn_config(app, settings)).run()
    except KeyboardInterrupt:
        return
    except SystemExit as exc:
        if exc.code != STARTUP_FAILURE:
            raise
        fail("the server did not start: the log above says why", ExitCode.FAILURE)
    finally:
        signal.signal(signal.SIGTERM, previous)
