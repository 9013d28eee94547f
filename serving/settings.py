"""Settings of the serving process and the per-workload view the refresher works from.

:class:`ServingSettings` holds what differs between deployments of the same config file
(addresses, TLS files, token, tracking URI). Every field can come from the environment with
the ``PREWARM_`` prefix (``PREWARM_PORT=8443``, ``PREWARM_TOKEN_FILE=/var/run/token``); the
``prewarm serve`` options override them.

:class:`RefreshConfig` is what the refresher needs from the project config file's
``serving:`` section and its workloads: demand queries, each workload's policy as the file
states it (checked against the registered one, never planned with), intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from forecaster.exceptions import ConfigError
from forecaster.workload import WorkloadPolicy

__all__ = ["RefreshConfig", "ServingSettings", "WorkloadConfig"]


class ServingSettings(BaseSettings):
    """Process settings of ``prewarm serve`` (environment prefix ``PREWARM_``)."""

    model_config = SettingsConfigDict(env_prefix="PREWARM_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(8080, ge=0, le=65535, description="HTTP(S) port; 0 picks a free one.")
    grpc_port: int | None = Field(
        9000, ge=0, le=65535, description="KEDA external scaler port; None disables gRPC."
    )
    tls_cert: Path | None = Field(None, description="PEM certificate; enables HTTPS.")
    tls_key: Path | None = Field(None, description="PEM private key of `tls_cert`.")
    client_ca: Path | None = Field(
        None,
        description="CA (the aggregator's front-proxy CA) that client certificates must chain to.",
    )
    token: SecretStr | None = Field(
        None, description="Bearer token required on the KEDA metrics-api endpoints."
    )
    token_file: Path | None = Field(
        None, description="File holding the bearer token (read at start; wins over `token`)."
    )
    tracking_uri: str | None = Field(None, description="MLflow tracking URI of the registry.")
    log_level: str = Field("INFO", description="Root log level.")
    shadow: bool = Field(
        False,
        description="Shadow mode: plan and export on /metrics, answer every autoscaling API "
        "with the hold error (503 / UNAVAILABLE), so the HPA and KEDA are never affected.",
    )

    @model_validator(mode="after")
    def _check_tls(self) -> ServingSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError(
                "`tls_cert` and `tls_key` go together, got "
                f"tls_cert={self.tls_cert!r}, tls_key={self.tls_key!r}"
            )
        if self.client_ca is not None and self.tls_cert is None:
            raise ValueError(
                "`client_ca` needs TLS (`tls_cert` and `tls_key`), got "
                f"client_ca={self.client_ca!r}"
            )
        return self

    def bearer_token(self) -> str | None:
        """The configured token (from ``token_file`` first), or None when auth is off.

        Raises
        ------
        ConfigError
            If ``token_file`` cannot be read or is empty.
        """
        if self.token_file is not None:
            try:
                text = self.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"`token_file` {str(self.token_file)!r}: {exc}") from exc
            if not text:
                raise ConfigError(f"`token_file` {str(self.token_file)!r} is empty")
            return text
        if self.token is not None:
            value = self.token.get_secret_value().strip()
            if not value:
                raise ConfigError("`token` is set but empty")
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
        Tuned settings (names of :data:`forecaster.workload.TUNED`) the config file leaves
        unset: the registered policy's values stand and are not compared.
    """

    name: str
    query: str
    policy: WorkloadPolicy
    covariates: Mapping[str, str] = field(default_factory=dict)
    deferred: Sequence[str] = ()


@dataclass(frozen=True)
class RefreshConfig:
    """What the refresher does and how often.

    Parameters
    ----------
    workloads : sequence of WorkloadConfig
        Served workloads; names must be unique.
    model_name : str
        Registered model name; the ``champion`` alias is served.
    refresh_interval : float, default 15
        Seconds between two refreshes.
    max_staleness : float, default 120
        Seconds after which a forecast's data is too old to serve (503 / UNAVAILABLE).
    history_window : float or None, default None
        Seconds of history kept in memory; None (or less than the model needs) keeps what
        the model needs.
    model_poll_interval : float, default 60
        Seconds between two look-ups of the registry alias.
    fetch_workers : int, default 8
        Batches of workloads fetched concurrently (one source call per batch).
    plan_in_process : bool, default False
        Plan in a child process (:mod:`serving.engine.planner`) instead of a thread of the serving
        process, so that planning does not hold the interpreter lock the requests need.
        ``prewarm serve`` turns it on.
    """

    workloads: Sequence[WorkloadConfig]
    model_name: str
    refresh_interval: float = 15.0
    max_staleness: float = 120.0
    history_window: float | None = None
    model_poll_interval: float = 60.0
    fetch_workers: int = 8
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
        for name in ("refresh_interval", "max_staleness", "history_window", "model_poll_interval"):
            value = getattr(self, name)
            if value is None and name == "history_window":
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ConfigError(f"`serving.{name}` must be positive seconds, got {value!r}")
        if self.max_staleness < self.refresh_interval:
            raise ConfigError(
                "`serving.max_staleness` must be at least `serving.refresh_interval`, got "
                f"max_staleness={self.max_staleness!r}, refresh_interval={self.refresh_interval!r}"
            )
        if not (isinstance(self.fetch_workers, int) and self.fetch_workers >= 1):
            raise ConfigError(
                f"`serving.fetch_workers` must be an int >= 1, got {self.fetch_workers!r}"
            )

    def by_name(self) -> dict[str, WorkloadConfig]:
        """Workloads keyed by name."""
        return {w.name: w for w in self.workloads}


def refresh_config_from_project(config: Any) -> RefreshConfig:
    """Build the refresher's view from the project config (``training.config.TrainConfig``).

    Parameters
    ----------
    config : TrainConfig
        The validated config file: its ``workloads``, ``serving`` and ``mlflow`` sections.

    Returns
    -------
    RefreshConfig
    """
    serving = config.serving
    workloads = [
        WorkloadConfig(
            name=w.name,
            # File and replay sources read the series named by `demand` (default: the name).
            query=w.demand or w.name,
            policy=w.workload_policy,
            covariates=dict(w.covariates),
            deferred=w.policy.unset,
        )
        for w in config.workloads
    ]
    window = serving.history_window
    return RefreshConfig(
        workloads=workloads,
        model_name=config.mlflow.registered_model,
        refresh_interval=float(serving.refresh_interval),
        max_staleness=float(serving.max_staleness),
        history_window=float(window) if window else None,
        model_poll_interval=float(serving.poll_model_every),
        plan_in_process=True,
    )
