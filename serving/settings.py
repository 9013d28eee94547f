"""Settings of the serving process and the per-workload view the refresher works from.

:class:`ServingSettings` holds what differs between deployments of the same config file
(addresses, TLS files, token, tracking URI, shard). Every field can come from the environment with
the ``PREWARM_`` prefix (``PREWARM_PORT=8443``, ``PREWARM_TOKEN_FILE=/var/run/token``); the
``prewarm serve`` options override them.

:class:`RefreshConfig` is what the refresher needs from the project config file: its
``serving:`` section as it is (:class:`training.config.ServingConfig`) and its workloads: demand
queries, each workload's policy as the file states it (checked against the registered one,
never planned with).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from forecaster.exceptions import ConfigError, shown
from forecaster.workload import WorkloadPolicy
from serving.shards import Shard
from training.config import ServingConfig, TrainConfig
from training.logs import LOG_LEVELS
from training.sources.files import read_small

__all__ = [
    "TLS_CHECK_INTERVAL",
    "RefreshConfig",
    "ServingSettings",
    "WorkloadConfig",
    "flag_of",
    "how_to_set",
    "variable_of",
]

_ENV_PREFIX = "PREWARM_"

TLS_CHECK_INTERVAL = 10.0
"""Default seconds between two looks at the TLS files for a renewal."""


def flag_of(field: str) -> str:
    """The ``prewarm serve`` flag that sets ``field`` (``--tls-key``)."""
    return f"--{field.replace('_', '-')}"


def variable_of(field: str) -> str:
    """The environment variable that sets ``field`` (``PREWARM_TLS_KEY``)."""
    return f"{_ENV_PREFIX}{field.upper()}"


def how_to_set(field: str) -> str:
    """How ``prewarm serve`` sets ``field``: ``--tls-key or PREWARM_TLS_KEY``."""
    return f"{flag_of(field)} or {variable_of(field)}"


class ServingSettings(BaseSettings):
    """Process settings of ``prewarm serve`` (environment prefix ``PREWARM_``)."""

    model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX, extra="ignore")

    host: str = Field("127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(8080, ge=0, le=65535, description="HTTP(S) port; 0 picks a free one.")
    grpc_port: int | None = Field(
        9000, ge=0, le=65535, description="KEDA external scaler port; None disables gRPC."
    )
    grpc_max_streams: int | None = Field(
        None,
        ge=1,
        description="StreamIsActive streams the gRPC scaler serves at once (one more answers "
        "RESOURCE_EXHAUSTED); default two per served workload, at least 16.",
    )
    tls_cert: Path | None = Field(None, description="PEM certificate; enables HTTPS.")
    tls_key: Path | None = Field(None, description="PEM private key of `tls_cert`.")
    client_ca: Path | None = Field(
        None,
        description="The aggregator's front-proxy CA (requestheader-client-ca-file): client "
        "certificates must chain to it, and the External Metrics API requires one.",
    )
    tls_check_interval: float = Field(
        TLS_CHECK_INTERVAL,
        ge=0,
        le=3600,
        description="Seconds between two looks at the TLS files (`tls_cert`, `tls_key`, "
        "`client_ca`) for a renewal, taken by the next new connection; 0 looks at every new "
        "connection. A changed, valid set is served to new connections without a restart.",
    )
    # NoDecode: the variable is read by _names below, so a malformed one is a field error
    # naming it, not pydantic-settings' own exception naming its "EnvSettingsSource".
    requestheader_allowed_names: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Common names the front-proxy client certificate may have "
        "(requestheader-allowed-names; empty: any the CA signed). From the environment as "
        "JSON, the form extension-apiserver-authentication holds ('[\"front-proxy-client\"]'), "
        "or comma-separated.",
    )
    token: SecretStr | None = Field(
        None, description="Bearer token required on the KEDA metrics-api endpoints."
    )
    token_file: Path | None = Field(
        None, description="File holding the bearer token (read at start; wins over `token`)."
    )
    tracking_uri: str | None = Field(None, description="MLflow tracking URI of the registry.")
    log_level: str = Field("INFO", description=f"Root log level: {', '.join(LOG_LEVELS)}.")
    shadow: bool = Field(
        False,
        description="Shadow mode: plan and export on /metrics, answer every autoscaling API "
        "with the hold error (503 / UNAVAILABLE), so the HPA and KEDA are never affected.",
    )
    shard: str | None = Field(
        None,
        description="K/N: serve only the workloads of shard K of N (serving.shards); "
        "default: every workload of the config.",
    )

    @field_validator("shard")
    @classmethod
    def _check_shard(cls, value: str | None) -> str | None:
        if value is not None:
            Shard.parse(value)  # its error names the form and echoes the value
        return value

    @field_validator("requestheader_allowed_names", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        """A JSON list of names (the ConfigMap's form) or comma-separated names, from text."""
        if not isinstance(value, str):
            return value
        if not value.lstrip().startswith("["):
            return [part.strip() for part in value.split(",") if part.strip()]
        try:
            names = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"is not a JSON list ({exc.msg} at character {exc.pos}): give "
                f"'[\"front-proxy-client\"]' or comma-separated names, got {shown(value)}"
            ) from None
        if not all(isinstance(name, str) for name in names):
            raise ValueError(f"must list names (strings), got {shown(value)}")
        return names

    @field_validator("log_level", mode="before")
    @classmethod
    def _check_log_level(cls, value: object) -> str:
        level = str(value).strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}, got {shown(value)}")
        return level

    def shard_spec(self) -> Shard | None:
        """The parsed ``shard``, or None when every workload is served."""
        return None if self.shard is None else Shard.parse(self.shard)

    @model_validator(mode="after")
    def _check_tls(self) -> ServingSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = (
                ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            )
            raise ValueError(
                f"`{given}` needs `{missing}` ({how_to_set(missing)}): TLS takes a certificate and "
                f"its key, got {given} {shown(str(getattr(self, given)))} alone"
            )
        if self.client_ca is not None and self.tls_cert is None:
            raise ValueError(
                f"`client_ca` needs TLS (`tls_cert` and `tls_key`: {how_to_set('tls_cert')}, "
                f"{how_to_set('tls_key')}), got client_ca {shown(str(self.client_ca))}"
            )
        if self.requestheader_allowed_names and self.client_ca is None:
            raise ValueError(
                "`requestheader_allowed_names` needs `client_ca` (the front-proxy CA: "
                f"{how_to_set('client_ca')}), got "
                f"requestheader_allowed_names={self.requestheader_allowed_names!r:.100}"
            )
        return self

    def bearer_token(self) -> str | None:
        """The configured token (from ``token_file`` first), or None when auth is off.

        Raises
        ------
        ConfigError
            If ``token_file`` cannot be read or holds only whitespace, or ``token`` is blank:
            an empty token would turn authentication off without a word. The message names
            the flag or variable, never the token.
        """
        if self.token_file is not None:
            where = f"`token_file` ({how_to_set('token_file')}) {shown(str(self.token_file))}"
            try:
                text = read_small(self.token_file).decode("utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise ConfigError(f"{where} cannot be read: {reason}") from exc
            if not text:
                raise ConfigError(f"{where} is empty or blank: it must hold the token")
            return text
        if self.token is not None:
            value = self.token.get_secret_value().strip()
            if not value:
                raise ConfigError(
                    f"`token` ({variable_of('token')}) is set but blank: set the token, or "
                    "unset it to serve without one"
                )
            return value
        return None


@dataclass(frozen=True)
class WorkloadConfig:
    """One served workload.

    Parameters
    ----------
    name : str
        Workload name, as in ``labelSelector=workload=NAME``.
    query : str
        Demand query (PromQL for the Prometheus source).
    policy : WorkloadPolicy
        The workload's policy as the config file states it. Serving plans with the policy
        registered with the model version; this one only has to agree with it (a workload
        whose policy differs is refused, see :mod:`serving.engine.drift`).
    covariates : mapping of str to str, default {}
        Covariate column -> query.
    deferred : sequence of str, default ()
        Fields the config file leaves to the registered policy, which stand and are not
        compared: unset tuned settings (names of :data:`forecaster.workload.TUNED`) and
        measured capacity fields (``spec.cold_start``, ``spec.capacity_per_replica``).
    namespace : str, default "default"
        Kubernetes namespace of the workload's HPA: the External Metrics API answers for the
        workload only under ``/namespaces/<namespace>/``.
    """

    name: str
    query: str
    policy: WorkloadPolicy
    covariates: Mapping[str, str] = field(default_factory=dict)
    deferred: Sequence[str] = ()
    namespace: str = "default"


@dataclass(frozen=True)
class RefreshConfig:
    """What the refresher does and how often.

    Parameters
    ----------
    workloads : sequence of WorkloadConfig
        Served workloads; names must be unique.
    model_name : str
        Registered model name; the ``champion`` alias is served.
    serving : ServingConfig, default ServingConfig()
        The config file's ``serving`` section: refresh interval, staleness limit, history
        window, registry poll interval, concurrent fetches.
    plan_in_process : bool, default False
        Plan in a child process (:mod:`serving.engine.planner`) instead of a thread of the
        serving process, so that planning does not hold the interpreter lock the requests
        need. ``prewarm serve`` turns it on.
    """

    workloads: Sequence[WorkloadConfig]
    model_name: str
    serving: ServingConfig = field(default_factory=ServingConfig)
    plan_in_process: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "workloads", tuple(self.workloads))
        if not self.workloads:
            raise ConfigError("`serving.workloads` must list at least one workload, got none")
        seen: set[str] = set()
        for workload in self.workloads:
            if not workload.name or workload.name in seen:
                raise ConfigError(
                    f"workload names must be unique and non-empty, got {workload.name!r} twice"
                    if workload.name
                    else "workload names must be non-empty, got ''"
                )
            seen.add(workload.name)

    def by_name(self) -> dict[str, WorkloadConfig]:
        """Workloads keyed by name."""
        return {w.name: w for w in self.workloads}


def refresh_config_from_project(config: TrainConfig, shard: Shard | None = None) -> RefreshConfig:
    """Build the refresher's view from the project config.

    Parameters
    ----------
    config : TrainConfig
        The validated config file: its ``workloads``, ``serving`` and ``mlflow`` sections.
    shard : Shard, optional
        Serve only the workloads this shard holds (default: every workload).

    Returns
    -------
    RefreshConfig

    Raises
    ------
    ConfigError
        When ``shard`` holds none of the config's workloads.
    """
    held = [w for w in config.workloads if shard is None or shard.holds(w.name)]
    if shard is not None and not held:
        raise ConfigError(
            f"shard {shard.index}/{shard.count} holds none of the config's "
            f"{len(config.workloads)} workload(s): use fewer shards"
        )
    workloads = [
        WorkloadConfig(
            name=w.name,
            # File and replay sources read the series named by `demand` (default: the name).
            query=w.demand or w.name,
            policy=w.declared_policy,
            covariates=dict(w.covariates),
            deferred=w.deferred,
            namespace=w.namespace,
        )
        for w in held
    ]
    return RefreshConfig(
        workloads=workloads,
        model_name=config.mlflow.registered_model,
        serving=config.serving,
        plan_in_process=True,
    )
