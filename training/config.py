"""The training and serving configuration file (YAML), validated with pydantic.

One file configures both ``prewarm train`` and ``prewarm serve``. Every error names the field
path and echoes the bad value, e.g.::

    config.yaml: workloads[0] (chat).capacity.capacity_per_replica: must be a positive
    finite number, got -3

Reference (every field; durations accept ``30s``, ``5m``, ``2h``, ``14d`` or seconds)
-------------------------------------------------------------------------------------

``source`` (required), one of:

* ``type: prometheus``: ``url``; ``step`` (grid, default ``1m``); ``lookback`` (history
  pulled, default ``28d``); ``end`` (ISO time, default now); ``timeout`` (``30s``);
  ``retries`` (3), ``backoff`` (0.5 s, doubling) and ``backoff_max`` (30 s);
  ``bearer_token_file`` / ``bearer_token_env`` (read at run time, never logged) or
  ``basic_auth`` (``username`` and ``password_file`` or ``password_env``); ``ca_bundle`` or
  ``insecure``; ``max_points_per_request`` (11000) less ``point_margin`` (10) points per
  request; ``method`` (GET/POST).
* ``type: file``: ``path`` (one long CSV/Parquet file with a ``series`` column, or a
  single-series file) or ``files`` (``{workload: path}``, one series per file); relative
  paths are resolved against the config file's folder; ``value_col``; ``step`` (default: the
  data's own); ``lookback`` (default: all of it); ``max_fill`` (cells interpolated, 3).
* ``type: replay``: the fields of ``file`` plus ``holdback``: the file is shifted so that
  its end minus ``holdback`` is "now"; the held-back tail appears as time passes.

``workloads`` (list, at least one): ``name`` (DNS-label style, unique); ``namespace`` (the
Kubernetes namespace of its HPA, default ``default``: serving answers its External Metrics
value only under that namespace); ``demand`` (PromQL
returning one series for ``prometheus``; the series name in ``path`` for file sources,
default the workload's name); ``covariates`` (``{column: promql}``, prometheus only);
``replicas`` and ``ready_replicas`` (PromQL returning one series each, prometheus only,
optional: the replicas the cluster ran and how many were ready, e.g.
``kube_deployment_status_replicas{deployment="chat"}`` and
``kube_deployment_status_replicas_available{deployment="chat"}``; read by
``prewarm shadow-report`` only, ``ready_replicas`` needs ``replicas``);
``capacity`` (maps onto :class:`forecaster.workload.WorkloadSpec`:
``capacity_per_replica`` (required), ``cold_start`` (duration or ``{kind, seconds, low,
high, sigma}``), ``target_utilization``, ``min_replicas``, ``max_replicas``,
``replica_hour_cost``, ``slo_latency``, ``slo_unserved_fraction``, ``tier``, ``quantile`` or
``miss_cost`` + ``idle_cost``; ``tier`` is 1 (latency critical), 2 (default) or 3 (batch)
and sets the defaults of ``quantile`` (0.99, 0.95, 0.8) and of ``slo_latency`` (30 s, 30 s,
``5m``: batch work queued for minutes is still served within its budget);
``cold_start`` and ``capacity_per_replica`` may be ``auto``:
measured by training, see :mod:`training.measured`); ``measured`` (prometheus only:
``pods``, label matchers of the workload's pods in kube-state-metrics, e.g.
``pod=~"chat-.*"``; ``queue``, PromQL of the requests waiting; ``cold_start_quantile``
(0.9), ``min_starts`` (5), ``cold_start_fallback`` (``5m``), ``load_quantile`` (0.95));
``hpa_metric`` (what the workload's HPA scales on today: ``demand``, the default, or
``gpu-utilization``, DCGM GPU utilization: ``prewarm backtest --config`` then also runs the
``gpu-utilization`` policy and reports hybrid's savings against it); ``policy`` (maps onto
:class:`forecaster.workload.WorkloadPolicy`: ``hold``, ``decision_delay``, and the tuned
settings of the two paths, each optional: ``quantile`` (the forecast path's, in (0, 1),
default ``capacity``'s tau), ``forecast_utilization`` and ``target_utilization`` (of the
forecast and the reactive path, in (0, 1], default ``capacity.target_utilization``),
``tolerance`` (the HPA's, in [0, 1), default 0.1), ``buffer_quantile`` (the warm buffer's
quantile of the demand increase over the lead window, in [0, 1), 0 for none, the default;
training learns the buffer itself from the history, :mod:`forecaster.buffer`),
``activation_probability`` (with ``min_replicas`` 0, KEDA wakes the workload when the
forecast gives ``P(demand > 0)`` over the lead window above it, in (0, 1), default
``1 - quantile``; see :mod:`forecaster.activation`)). The policies are registered with the
model version; ``prewarm serve`` plans with the registered ones and refuses a workload whose
section here disagrees with them (settings left unset here defer to the registered ones).

``model``: ``name`` (registered forecast model, default ``lightgbm-window``); ``params`` (its
constructor arguments, checked when the file is read); ``features``
(:class:`forecaster.features.FeatureConfig` fields); ``quantiles`` (levels forecast; the
backtest grid and every workload's quantile are added). Horizons are not configured: they are
derived from each workload's cold start, decision delay and hold. ``name: auto`` selects one
model per workload: ``params.candidates`` (registered single models, default ``[lightgbm,
lightgbm-window, seasonal-naive-weekly, ewma, mstl]``) are fitted before the last
``params.validation_window`` of each fold's training data (default one day, or 288 cells
when that is longer, or a quarter of a shorter history); the one whose forecast of the lead
window's largest demand (its window target, else the largest of its per-horizon quantiles:
what the plan sizes for) has the lowest pinball loss there at the workload's quantile, among
those whose forecast covered the windows at least that quantile less three standard errors
of a coverage over that many windows (among all when none did), serves it, refitted on all of
the training data;
``params.candidate_params`` (``{model: {argument: value}}``) sets their arguments.
``name: combination`` takes the same parameters (its default candidates lack
``lightgbm-window``) and weighs the candidates per workload and quantile instead (non-negative
weights summing to one, fitted by pinball loss on that window). The run tags
``prewarm.model.<workload>`` name each workload's model(s) (the first 100 workloads by name;
``prewarm.models`` counts the workloads per model), as ``prewarm serve``'s explain does for
every workload (``servedBy``); see :mod:`forecaster.models.combination`.

``evaluation``: ``window`` (the recent window candidate and champion are compared on,
``1d``); ``folds`` (walk-forward folds of ``window`` each, the last one is the gate's, 1);
``train_window`` (history each fold's model is fitted on, ``14d``); ``policies`` (simulated
in the backtest, default reactive and predictive); ``seed``; ``tuning_margin`` (the share of
the SLO's unserved work each tuned setting may leave on the tuning half, 0.5);
``scored_workloads`` (at most this many workloads are scored and gated per fold, 200: a
larger fleet is sampled evenly over tiers and mean demand, named in the run's
``gate.json``; ``null`` scores every one).

``validation``: ``min_history`` (``2d``), ``max_gap_fraction`` (0.2), ``dead_window`` (a
series whose last ``dead_window`` is all zero or missing is dead, ``6h``).

``gate``: ``policy`` (whose cost at SLO decides, ``predictive``); ``cost_tolerance`` and
``pinball_tolerance`` (relative slack, 0); ``coverage_tolerance`` (how far below ``tau``
the empirical coverage of each workload's quantile may fall, 0.1).

``mlflow``: ``tracking_uri`` (default ``sqlite:///mlflow.db``; ``PREWARM_MLFLOW_TRACKING_URI``
and ``--tracking-uri`` override it); ``experiment`` (``prewarm``); ``registered_model``
(``prewarm-forecaster``); ``artifact_location`` (default ``./mlartifacts`` beside a SQLite
store); ``plotted_workloads`` (how many workloads get figures in a run, the costliest at the
SLO first, 20: drawing them costs about a second each; every workload's metrics are logged);
``example_workloads`` (how many workloads' recent history the model stores as its input
example, which loading validates it on, 20, spread evenly over the sorted names: at 1,000
workloads a whole-fleet example is millions of rows written as JSON).

``serving`` (read by ``prewarm serve``): ``refresh_interval`` (``15s``), ``max_staleness``
(``2m``, at least ``refresh_interval``; loading warns, in ``train`` as in ``serve``, when it is
shorter than the source's ``step`` plus ``refresh_interval``), ``history_window`` (default:
what the model needs), ``poll_model_every`` (``1m``), ``fetch_workers`` (batches fetched
concurrently, 8).

``training``: ``on_workload_failure`` (``fail``, the default: a workload whose history cannot
be fetched or fails validation stops the run; ``skip``: the other workloads are trained and
the skipped ones named in the log, the result message and the MLflow run's tags).

``compute``: ``scheduler`` (the address of an existing Dask scheduler, ``tcp://HOST:8786``:
the per-workload backtests of ``prewarm backtest --config`` and ``prewarm train --tune``, and
the gate's per-workload policy sweeps of ``prewarm train``, run on its workers;
``--dask-scheduler`` overrides it; see ``docs/scale.md``).
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import math
import re
import typing
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from forecaster.activation import activation_quantile
from forecaster.backtest.tuning import TUNING_MARGIN
from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, PrewarmError, shown
from forecaster.features import FeatureConfig
from forecaster.frame import MAX_GRID_CELLS
from forecaster.models import DEFAULT_MODEL, MODELS, make_model, unknown_model
from forecaster.policies import POLICIES
from forecaster.policies.predictive import QUANTILE_GRID
from forecaster.workload import (
    DEFAULT_TOLERANCE,
    LEARNED,
    TUNED,
    ColdStart,
    WorkloadPolicy,
    WorkloadSpec,
)
from training.compute import scheduler_address
from training.documents import dumps
from training.redaction import redact

logger = logging.getLogger(__name__)

DURATION_EXPECTED = "must be a duration like '5m' or a number of seconds > 0"

# PromQL string literals (label values), left out before the names are read.
_QUOTED = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""")
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# Counters of answered requests (vLLM's request_success_total, Triton's
# nv_inference_request_success, *_completed*, a latency histogram's _count, observed when a
# request ends): they flatten at what the ready replicas serve while the fleet is saturated.
COMPLETION_SIDE = re.compile(r"success|complet|finished|(latency|duration)\w*_count$")
# A queue term makes completions arrivals again: arrivals = completions + queue growth.
QUEUE_SIDE = re.compile(r"waiting|pending|queue")


def completion_side(query: str) -> str | None:
    """The completion-side metric ``query`` reads without a queue term, or ``None``.

    Examples
    --------
    >>> completion_side('sum(rate(vllm:request_success_total{model_name="chat"}[5m]))')
    'vllm:request_success_total'
    >>> completion_side('sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)')
    >>> completion_side('sum(rate(x_success_total[5m])) + sum(deriv(x_pending[5m]))')
    """
    names = _NAME.findall(_QUOTED.sub("", query))
    if any(QUEUE_SIDE.search(name) for name in names):
        return None
    return next((name for name in names if COMPLETION_SIDE.search(name)), None)


def _seconds(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str | int | float):
        try:
            return parse_duration(value, name="duration")
        except PrewarmError as exc:
            raise ValueError(f"{DURATION_EXPECTED}, got {shown(value)}") from exc
    return value


Seconds = Annotated[int, BeforeValidator(_seconds)]
"""A duration: ``30s``, ``5m``, ``2h``, ``14d`` or a number of seconds, stored as seconds."""


def _float_seconds(value: Any) -> Any:
    # A number is taken as it is: an interval or a timeout may be a fraction of a second.
    return (
        value if isinstance(value, int | float) and not isinstance(value, bool) else _seconds(value)
    )


FloatSeconds = Annotated[float, BeforeValidator(_float_seconds), Field(gt=0, allow_inf_nan=False)]
"""A positive duration, written as :data:`Seconds` or as any positive number of seconds."""


def _takes_bool(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` holds a bool (itself, ``Any``, or a union or
    container of one)."""
    if annotation is bool or annotation is Any:
        return True
    return any(_takes_bool(arg) for arg in get_args(annotation))


class _Strict(BaseModel):
    # Unknown keys are errors: a typo in a YAML key must not silently keep the default.
    # No number is infinite or NaN: YAML's .inf and .nan are never a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        # pydantic takes true as 1: `cold_start: yes` would be a 1-second cold start
        for key, value in data.items() if isinstance(data, dict) else ():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if isinstance(value, bool) and field is not None and not _takes_bool(field.annotation):
                raise ValueError(
                    f"`{key}` got {str(value).lower()}, a boolean, where it takes no boolean "
                    "(YAML reads yes, no, on, off, true and false unquoted as booleans)"
                )
        return data


# -- sources -------------------------------------------------------------------------------


class BasicAuth(_Strict):
    """HTTP basic auth; the password comes from a file or an environment variable."""

    username: str = Field(description="User name.")
    password_file: Path | None = Field(default=None, description="File holding the password.")
    password_env: str | None = Field(
        default=None, description="Environment variable with the password."
    )

    @model_validator(mode="after")
    def _one_password(self) -> BasicAuth:
        if (self.password_file is None) == (self.password_env is None):
            raise ValueError("give exactly one of `password_file` and `password_env`")
        return self


class PrometheusSourceConfig(_Strict):
    """Pull history from a Prometheus server with chunked range queries."""

    type: Literal["prometheus"] = Field(description="Source kind.")
    url: str = Field(description="Base URL, e.g. http://prometheus.monitoring:9090.")
    step: Seconds = Field(default=60, description="Grid step of the history.")
    lookback: Seconds = Field(default=28 * 86400, description="How much history to pull.")
    end: str | None = Field(
        default=None, description="Last instant pulled (ISO-8601), default now."
    )
    timeout: FloatSeconds = Field(
        default=30.0, description="Seconds per request before it is retried."
    )
    retries: int = Field(default=3, ge=0, description="Retries after a timeout or a 5xx answer.")
    backoff: float = Field(
        default=0.5, ge=0, description="Seconds before the first retry; doubles at each retry."
    )
    backoff_max: float = Field(default=30.0, ge=0, description="Longest delay between retries.")
    bearer_token_file: Path | None = Field(default=None, description="File with a bearer token.")
    bearer_token_env: str | None = Field(
        default=None, description="Env variable with a bearer token."
    )
    basic_auth: BasicAuth | None = Field(default=None, description="HTTP basic auth.")
    ca_bundle: Path | None = Field(
        default=None, description="PEM CA bundle of the server's certificate."
    )
    insecure: bool = Field(default=False, description="Skip TLS verification (test clusters only).")
    max_points_per_request: int = Field(
        default=11_000,
        ge=3,
        description="Server's limit of points per series and request (11,000 for Prometheus).",
    )
    point_margin: int = Field(
        default=10,
        ge=0,
        description="Points kept below `max_points_per_request`, so rounding never reaches it.",
    )
    method: Literal["GET", "POST"] = Field(default="GET", description="HTTP method of the queries.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"must start with http:// or https://, got {shown(redact(url))}")
        return url

    @model_validator(mode="after")
    def _consistent(self) -> PrometheusSourceConfig:
        if self.bearer_token_file is not None and self.bearer_token_env is not None:
            raise ValueError("give at most one of `bearer_token_file` and `bearer_token_env`")
        token = self.bearer_token_file is not None or self.bearer_token_env is not None
        if token and self.basic_auth is not None:
            raise ValueError("a bearer token and `basic_auth` are exclusive: set only one")
        if (token or self.basic_auth is not None) and urlsplit(self.url).username is not None:
            # the client sends the URL's user:password as basic auth and drops the token
            raise ValueError(
                "`url` holds a user and password, and a bearer token or `basic_auth` is set "
                f"too: only one would be sent; set one ({shown(redact(self.url))})"
            )
        if self.insecure and self.ca_bundle is not None:
            raise ValueError("`insecure` and `ca_bundle` are exclusive: set only one")
        if self.backoff_max < self.backoff:
            raise ValueError(
                "`backoff_max` must be >= `backoff`, got "
                f"backoff={self.backoff!r}, backoff_max={self.backoff_max!r}"
            )
        if self.lookback // self.step + 1 > MAX_GRID_CELLS:
            raise ValueError(
                f"`lookback` / `step` must stay within {MAX_GRID_CELLS:,} grid points per "
                f"workload, got lookback={self.lookback!r} s and step={self.step!r} s"
            )
        if self.max_points_per_request - self.point_margin < 2:
            raise ValueError(
                "`max_points_per_request` - `point_margin` must be at least 2, got "
                f"{self.max_points_per_request!r} - {self.point_margin!r}"
            )
        return self


class FileSourceConfig(_Strict):
    """Read history from CSV or Parquet files."""

    type: Literal["file"] = Field(description="Source kind.")
    path: Path | None = Field(default=None, description="One file holding every workload's series.")
    files: dict[str, Path] | None = Field(
        default=None, description="One single-series file per workload."
    )
    value_col: str | None = Field(default=None, description="Column holding the demand.")
    step: Seconds | None = Field(default=None, description="Grid step (default: the data's own).")
    lookback: Seconds | None = Field(default=None, description="Keep only this much of the end.")
    max_fill: int = Field(default=3, ge=0, description="Longest gap (cells) that is interpolated.")

    @model_validator(mode="after")
    def _one_location(self) -> FileSourceConfig:
        if (self.path is None) == (self.files is None):
            raise ValueError("give exactly one of `path` and `files`")
        return self


class ReplaySourceConfig(FileSourceConfig):
    """A file replayed as if live: shifted so that its end minus ``holdback`` is now."""

    type: Literal["replay"] = Field(description="Source kind.")  # type: ignore[assignment]
    holdback: Seconds | Literal[0] = Field(
        default=0, description="Tail of the file kept in the future and released as time passes."
    )


SourceConfig = Annotated[
    PrometheusSourceConfig | FileSourceConfig | ReplaySourceConfig, Field(discriminator="type")
]


# -- workloads -----------------------------------------------------------------------------


class ColdStartConfig(_Strict):
    """A cold start drawn per replica (see :class:`forecaster.workload.ColdStart`)."""

    kind: Literal["fixed", "uniform", "lognormal"] = Field(
        default="fixed", description="Distribution."
    )
    seconds: Seconds | None = Field(default=None, description="Fixed value or lognormal median.")
    low: Seconds | Literal[0] | None = Field(default=None, description="Uniform lower bound.")
    high: Seconds | None = Field(default=None, description="Uniform upper bound.")
    sigma: float | None = Field(default=None, gt=0, description="Lognormal log-space deviation.")

    def to_cold_start(self) -> ColdStart:
        """The core's :class:`ColdStart`."""
        if self.kind == "uniform":
            return ColdStart.uniform(float(self.low or 0), float(self.high or 0))
        if self.kind == "lognormal":
            return ColdStart.lognormal(float(self.seconds or 0), float(self.sigma or 0))
        return ColdStart.fixed(float(self.seconds if self.seconds is not None else 300))


AUTO = "auto"
"""A ``cold_start`` or ``capacity_per_replica`` measured by training (:mod:`training.measured`)."""


HPAMetric = Literal["demand", "gpu-utilization"]
# The policy that simulates the HPA a workload runs today, by the metric it scales on.
CURRENT_HPA: dict[str, str] = {"demand": "reactive", "gpu-utilization": "gpu-utilization"}


def with_current_hpa(policies: tuple[str, ...], metric: str) -> tuple[str, ...]:
    """``policies`` with the one simulating the workload's current HPA, added when missing.

    >>> with_current_hpa(("static", "reactive", "hybrid"), "gpu-utilization")
    ('static', 'reactive', 'hybrid', 'gpu-utilization')
    """
    current = CURRENT_HPA[metric]
    return policies if current in policies else (*policies, current)


class MeasuredConfig(_Strict):
    """Where a workload's ``auto`` cold start and capacity are measured (Prometheus only)."""

    pods: str | None = Field(
        default=None,
        min_length=1,
        description='Label matchers of the workload\'s pods, e.g. pod=~"chat-.*".',
    )
    queue: str | None = Field(
        default=None, min_length=1, description="PromQL of the requests waiting (one series)."
    )
    cold_start_quantile: float = Field(
        default=0.9, gt=0, lt=1, description="Quantile of the observed cold starts used."
    )
    min_starts: int = Field(default=5, ge=1, description="Fewer observed starts fall back.")
    cold_start_fallback: Seconds = Field(
        default=300, description="Cold start used when fewer than `min_starts` were observed."
    )
    load_quantile: float = Field(
        default=0.95, gt=0, lt=1, description="Without `queue`: quantile of demand per replica."
    )


# SLO latency per tier when `slo_latency` is not given: real-time work is late after 30 s,
# batch work (tier 3) may queue for minutes and still be served within its budget.
TIER_SLO_LATENCY: dict[int, int] = {1: 30, 2: 30, 3: 300}


class CapacityConfig(_Strict):
    """Capacity, cost and service level of a workload (becomes a ``WorkloadSpec``)."""

    capacity_per_replica: float | Literal["auto"] = Field(
        description="Demand one warm replica serves, or `auto` (measured)."
    )
    cold_start: Seconds | ColdStartConfig | Literal["auto"] = Field(
        default=300, description="Seconds from asking for a replica to it serving, or `auto`."
    )
    target_utilization: float = Field(default=0.8, description="Fraction of capacity aimed for.")
    min_replicas: int = Field(default=1, description="Lower bound on replicas.")
    max_replicas: int = Field(default=100, description="Upper bound on replicas.")
    replica_hour_cost: float = Field(default=4.0, description="Price of one replica-hour.")
    slo_latency: Seconds | None = Field(
        default=None,
        description="Work queued longer than this is unserved; default by `tier`.",
    )
    slo_unserved_fraction: float = Field(default=0.001, description="Acceptable unserved fraction.")
    tier: int = Field(default=2, description="1 latency critical, 2 default, 3 batch.")
    quantile: float | None = Field(default=None, description="Explicit forecast quantile tau.")
    miss_cost: float | None = Field(default=None, description="Cost of a unit of unserved demand.")
    idle_cost: float | None = Field(default=None, description="Cost of the capacity serving it.")

    @property
    def slo_latency_seconds(self) -> int:
        """``slo_latency`` as given, else the tier's (:data:`TIER_SLO_LATENCY`)."""
        if self.slo_latency is not None:
            return self.slo_latency
        # an unknown tier is refused by the spec's validation, which names it
        return TIER_SLO_LATENCY.get(self.tier, TIER_SLO_LATENCY[2])

    @property
    def auto(self) -> tuple[str, ...]:
        """The fields left to be measured (``auto``)."""
        return tuple(f for f in ("cold_start", "capacity_per_replica") if getattr(self, f) == AUTO)

    def to_spec(self) -> WorkloadSpec:
        """The core's validated :class:`WorkloadSpec`.

        Raises
        ------
        ConfigError
            A field is still ``auto``: training measures it first.
        """
        if self.auto:
            raise ConfigError(
                f"capacity.{self.auto[0]} is `auto`: `prewarm train` measures it; "
                "give a value to use it elsewhere"
            )
        cold = self.cold_start
        assert not isinstance(cold, str) and not isinstance(self.capacity_per_replica, str)
        return WorkloadSpec(
            capacity_per_replica=self.capacity_per_replica,
            cold_start=cold.to_cold_start() if isinstance(cold, ColdStartConfig) else float(cold),
            target_utilization=self.target_utilization,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            replica_hour_cost=self.replica_hour_cost,
            slo_latency_seconds=float(self.slo_latency_seconds),
            slo_unserved_fraction=self.slo_unserved_fraction,
            tier=self.tier,
            quantile=self.quantile,
            miss_cost=self.miss_cost,
            idle_cost=self.idle_cost,
        )

    def stand_in_spec(self) -> WorkloadSpec:
        """The spec with a stand-in for each ``auto`` field: what the other fields validate
        against, and what is compared with a registered policy that holds the measured
        values (the stand-ins are left out of that comparison)."""
        stand_in = {"cold_start": 300, "capacity_per_replica": 1.0}
        return self.model_copy(update={f: stand_in[f] for f in self.auto}).to_spec()

    @model_validator(mode="after")
    def _valid_spec(self) -> CapacityConfig:
        # An `auto` field is checked once measured; the others are checked now.
        try:
            self.stand_in_spec()
        except ConfigError as exc:  # the core names the field; pydantic adds the path
            raise ValueError(str(exc)) from None
        return self


class PolicyConfig(_Strict):
    """How forecasts become replicas for a workload."""

    hold: Seconds | Literal[0] = Field(
        default=0, description="Keep a replica this long past the lead if demand comes back."
    )
    decision_delay: Seconds | Literal[0] = Field(
        default=0, description="Metric lag plus HPA/KEDA polling, added to the cold start."
    )
    quantile: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="Forecast path's quantile (default: the capacity spec's tau).",
    )
    forecast_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Forecast path's utilization (default: capacity.target_utilization).",
    )
    target_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Reactive path's utilization (default: capacity.target_utilization).",
    )
    tolerance: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description=f"The HPA's tolerance around a ratio of 1 (default {DEFAULT_TOLERANCE}).",
    )
    buffer_quantile: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Quantile of the demand increase over the lead window kept warm beside the "
        "forecast (the warm buffer; training learns it); 0 for none (default 0).",
    )
    activation_probability: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="With min_replicas 0, KEDA wakes the workload when the forecast gives "
        "P(demand > 0) over the lead window above this (default: 1 - quantile).",
    )

    @property
    def unset(self) -> tuple[str, ...]:
        """Tuned settings this section leaves to the policy's defaults, in report order."""
        return tuple(name for name in TUNED if getattr(self, name) is None)


class WorkloadConfig(_Strict):
    """One scalable inference deployment and its demand signal."""

    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$",
        max_length=63,
        description="Workload name (lower case, digits, '-', '_', '.').",
    )
    namespace: str = Field(
        default="default",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="Kubernetes namespace of the workload's HPA: its External Metrics value "
        "is served only under /namespaces/<namespace>/.",
    )
    demand: str | None = Field(
        default=None,
        description="PromQL returning one series (prometheus) or the series name (files).",
    )
    covariates: dict[str, str] = Field(
        default_factory=dict, description="Extra series as {column: promql} (prometheus)."
    )
    replicas: str | None = Field(
        default=None, description="PromQL of the replicas the cluster ran (shadow-report)."
    )
    ready_replicas: str | None = Field(
        default=None, description="PromQL of the ready replicas (shadow-report)."
    )
    capacity: CapacityConfig = Field(description="Capacity, cost and service level.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="Planning settings.")
    measured: MeasuredConfig = Field(
        default_factory=MeasuredConfig, description="Where `auto` values are measured."
    )
    hpa_metric: HPAMetric = Field(
        default="demand",
        description="What the workload's current HPA scales on: its demand, or DCGM GPU "
        "utilization (`gpu-utilization`: the backtest also runs that HPA and reports the "
        "savings against it).",
    )

    @model_validator(mode="after")
    def _ready_needs_replicas(self) -> WorkloadConfig:
        if self.ready_replicas is not None and self.replicas is None:
            raise ValueError(
                f"`ready_replicas` needs a `replicas` query, got ready_replicas "
                f"{self.ready_replicas!r} without one"
            )
        auto = self.capacity.auto
        if "cold_start" in auto and self.measured.pods is None:
            raise ValueError("`capacity.cold_start: auto` needs a `measured.pods` selector")
        no_ready = self.measured.pods is None and self.ready_replicas is None
        if "capacity_per_replica" in auto and no_ready:
            raise ValueError(
                "`capacity.capacity_per_replica: auto` needs `ready_replicas` or a "
                "`measured.pods` selector (the ready pods)"
            )
        return self

    @property
    def measures(self) -> bool:
        """Whether training measures this workload (an `auto` field or a `measured` query)."""
        measured = self.measured
        return bool(self.capacity.auto) or measured.pods is not None or measured.queue is not None

    @field_validator("covariates")
    @classmethod
    def _covariate_names(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = {"series", "timestamp", "value"}
        bad = sorted(set(value) & reserved)
        if bad:
            raise ValueError(f"covariate names {bad} are reserved; pick other names")
        return value

    @property
    def spec(self) -> WorkloadSpec:
        """The workload's :class:`WorkloadSpec`."""
        return self.capacity.to_spec()

    @property
    def workload_policy(self) -> WorkloadPolicy:
        """The workload's :class:`WorkloadPolicy`: its capacity and policy sections."""
        return self._policy(self.spec)

    @property
    def declared_policy(self) -> WorkloadPolicy:
        """The policy as the file states it, a stand-in for each ``auto`` field: what a
        registered policy is checked against, leaving out :attr:`deferred`."""
        return self._policy(self.capacity.stand_in_spec())

    @property
    def deferred(self) -> tuple[str, ...]:
        """Fields the registered policy decides: tuned settings the file leaves unset, the
        measured (``auto``) capacity fields and what training learns from the history (the
        warm buffer), as :meth:`WorkloadPolicy.differences` names them."""
        return (
            *self.policy.unset,
            *(f"spec.{name}" for name in self.capacity.auto),
            *LEARNED,
        )

    def _policy(self, spec: WorkloadSpec) -> WorkloadPolicy:
        policy = self.policy
        return WorkloadPolicy(
            spec,
            quantile=policy.quantile,
            forecast_utilization=policy.forecast_utilization,
            target_utilization=policy.target_utilization,
            tolerance=DEFAULT_TOLERANCE if policy.tolerance is None else policy.tolerance,
            activation_probability=policy.activation_probability,
            hold=float(policy.hold),
            decision_delay=float(policy.decision_delay),
            buffer_quantile=policy.buffer_quantile or 0.0,
        )


# -- model, evaluation, gate ---------------------------------------------------------------


class ModelConfig(_Strict):
    """The forecast model and its features."""

    name: str = Field(default=DEFAULT_MODEL, description="Registered forecast model name.")
    params: dict[str, Any] = Field(default_factory=dict, description="Constructor arguments.")
    features: dict[str, Any] = Field(
        default_factory=dict, description="FeatureConfig fields (lags, windows, ...)."
    )
    quantiles: tuple[float, ...] = Field(
        default=QUANTILE_GRID, description="Quantile levels forecast."
    )

    @field_validator("name")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(unknown_model(value))
        return value

    @field_validator("params")
    @classmethod
    def _no_managed_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        managed = sorted(set(value) & {"horizons", "quantiles", "features", "taus"})
        if managed:
            raise ValueError(
                f"{managed} are set by prewarm (horizons and taus from the workloads, quantiles "
                "and features from their own fields), not in `params`"
            )
        return value

    @model_validator(mode="after")
    def _valid_params(self) -> ModelConfig:
        # A combination's candidates (and every model's checked parameters) are refused at
        # load, not after the history is pulled.
        try:
            make_model(self.name, **self.params).check_params()
        except (ConfigError, TypeError, ValueError) as exc:  # a model's own, of a wrong type
            raise ValueError(f"params: {exc}") from None
        return self

    @field_validator("features")
    @classmethod
    def _valid_features(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            FeatureConfig.from_dict(value)
        except (ConfigError, TypeError) as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("quantiles")
    @classmethod
    def _valid_quantiles(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [q for q in value if not (math.isfinite(q) and 0 < q < 1)]
        if bad or not value:
            raise ValueError(f"quantiles must lie in (0, 1), got {list(value)}")
        return value

    @property
    def feature_config(self) -> FeatureConfig:
        """The :class:`FeatureConfig` of ``features``."""
        return FeatureConfig.from_dict(self.features)


class EvaluationConfig(_Strict):
    """Walk-forward evaluation on the most recent data."""

    window: Seconds = Field(default=86400, description="Length of each evaluation fold.")
    folds: int = Field(
        default=1, ge=1, le=30, description="Walk-forward folds; the last is the gate's."
    )
    train_window: Seconds = Field(default=14 * 86400, description="History each fold is fitted on.")
    policies: tuple[str, ...] = Field(
        default=("reactive", "predictive"), description="Policies simulated in the backtest."
    )
    seed: int = Field(
        default=0, ge=0, le=2**31 - 1, description="Seed of the model and of cold-start draws."
    )
    tuning_margin: float = Field(
        default=TUNING_MARGIN,
        gt=0,
        le=1,
        description="Share of the SLO's unserved work the tuned setting (`train --tune`, "
        "`backtest --config`) may leave on the tuning half.",
    )
    scored_workloads: int | None = Field(
        default=200,
        ge=1,
        description="Workloads each fold scores (a sample over tiers and sizes); null: all.",
    )

    @field_validator("policies")
    @classmethod
    def _known_policies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(POLICIES))
        if unknown or not value:
            raise ValueError(f"unknown policies {unknown or value}; valid: {list(POLICIES)}")
        return value


class ValidationConfig(_Strict):
    """Checks the pulled history must pass before anything is trained."""

    min_history: Seconds = Field(
        default=2 * 86400, description="Shortest usable history per workload."
    )
    max_gap_fraction: float = Field(
        default=0.2, ge=0, le=1, description="Largest share of missing cells."
    )
    dead_window: Seconds = Field(
        default=6 * 3600, description="All zero or missing at the end: dead."
    )


class GateConfig(_Strict):
    """When a candidate replaces the champion."""

    policy: str = Field(default="predictive", description="Policy whose cost at SLO is compared.")
    cost_tolerance: float = Field(default=0.0, ge=0, description="Relative slack on cost at SLO.")
    pinball_tolerance: float = Field(
        default=0.0, ge=0, description="Relative slack on pinball loss."
    )
    coverage_tolerance: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Largest shortfall of coverage below each workload's tau.",
    )

    @field_validator("policy")
    @classmethod
    def _forecast_policy(cls, value: str) -> str:
        if value not in ("predictive", "hybrid"):
            raise ValueError(f"must be 'predictive' or 'hybrid' (uses forecasts), got {value!r}")
        return value


class MlflowConfig(_Strict):
    """Where runs and models are recorded."""

    tracking_uri: str | None = Field(default=None, description="Default sqlite:///mlflow.db.")
    experiment: str = Field(default="prewarm", min_length=1, description="Experiment name.")
    registered_model: str = Field(
        default="prewarm-forecaster", min_length=1, description="Registered model name."
    )
    artifact_location: str | None = Field(
        default=None, description="Artifact root of a new experiment (default ./mlartifacts)."
    )
    plotted_workloads: int = Field(
        default=20,
        ge=0,
        description="Workloads whose figures a run logs: the costliest at the SLO.",
    )
    example_workloads: int = Field(
        default=20,
        ge=1,
        description="Workloads whose recent history is the model's stored input example.",
    )


class ServingConfig(_Strict):
    """How ``prewarm serve`` refreshes: the file's ``serving`` section, and the settings the
    refresher runs with (:class:`serving.settings.RefreshConfig` holds one)."""

    refresh_interval: FloatSeconds = Field(
        default=15.0, description="Seconds between forecast refreshes."
    )
    max_staleness: FloatSeconds = Field(
        default=120.0, description="Older data makes the metric answer 503."
    )
    history_window: FloatSeconds | None = Field(
        default=None,
        description="Rolling window kept per workload (default: what the model needs).",
    )
    poll_model_every: FloatSeconds = Field(
        default=60.0, description="How often the champion alias is read."
    )
    fetch_workers: int = Field(
        default=8, ge=1, description="Batches of workloads fetched concurrently (one call each)."
    )

    @model_validator(mode="after")
    def _staleness_covers_a_refresh(self) -> ServingConfig:
        if self.max_staleness < self.refresh_interval:
            raise ValueError(
                "`max_staleness` must be at least `refresh_interval`, got "
                f"max_staleness={self.max_staleness!r}, refresh_interval={self.refresh_interval!r}"
            )
        return self


class TrainingConfig(_Strict):
    """How ``prewarm train`` treats a workload whose history cannot be had."""

    on_workload_failure: Literal["fail", "skip"] = Field(
        default="fail",
        description="fail: the run stops at the first workload whose source or history "
        "fails; skip: the others are trained, and the skipped ones are named in the log, "
        "the result message and the MLflow run's tags.",
    )


class ComputeConfig(_Strict):
    """Where the per-workload backtests (``prewarm backtest --config``, ``train --tune``) and
    the gate's policy sweeps (``train``) run."""

    scheduler: str | None = Field(
        default=None,
        description="Address of an existing Dask scheduler, tcp://HOST:8786 (default: none, "
        "this process); --dask-scheduler overrides it. See docs/scale.md.",
    )

    @field_validator("scheduler")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else scheduler_address(value)


class TrainConfig(_Strict):
    """The whole file."""

    source: SourceConfig = Field(description="Where history comes from.")
    workloads: list[WorkloadConfig] = Field(min_length=1, description="Workloads to forecast.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Forecast model.")
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig, description="Walk-forward evaluation."
    )
    validation: ValidationConfig = Field(
        default_factory=ValidationConfig, description="History checks."
    )
    gate: GateConfig = Field(default_factory=GateConfig, description="Promotion rule.")
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig, description="Tracking and registry.")
    serving: ServingConfig = Field(default_factory=ServingConfig, description="Serving settings.")
    training: TrainingConfig = Field(
        default_factory=TrainingConfig, description="Partial-failure policy of training."
    )
    compute: ComputeConfig = Field(
        default_factory=ComputeConfig, description="Where the backtests and sweeps run."
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        names = [w.name for w in self.workloads]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"workload names must be unique, got duplicates {duplicates}")
        if isinstance(self.source, PrometheusSourceConfig):
            missing = [w.name for w in self.workloads if not w.demand]
            if missing:
                raise ValueError(f"workloads {missing} need a `demand` PromQL query")
        else:
            measuring = [w.name for w in self.workloads if w.measures]
            if measuring:
                raise ValueError(
                    f"`auto` and `measured` are read from Prometheus only; workloads "
                    f"{measuring} use them with source type {self.source.type!r}"
                )
            with_covariates = [w.name for w in self.workloads if w.covariates]
            if with_covariates:
                raise ValueError(
                    f"`covariates` are read from Prometheus only; workloads {with_covariates} "
                    f"declare them with source type {self.source.type!r}"
                )
            if self.source.files is not None:
                unknown = sorted(set(names) - set(self.source.files))
                if unknown:
                    raise ValueError(
                        files_missing(unknown, sorted(set(self.source.files) - set(names)))
                    )
        for w in self.workloads:
            if w.measures:  # its cold start is measured when it trains
                continue
            policy = w.workload_policy
            window = policy.lead_seconds + policy.hold
            if window >= self.evaluation.train_window:
                # no training origin would have an observed target ("only 0 training rows")
                raise ValueError(
                    f"workload {w.name!r}: its lead window (cold start, decision delay and "
                    f"hold: {window:g} s) is as long as evaluation.train_window "
                    f"({self.evaluation.train_window} s); lower its cold_start or policy.hold, "
                    "or lengthen evaluation.train_window"
                )
        covariate_sets = {tuple(sorted(w.covariates)) for w in self.workloads}
        if len(covariate_sets) > 1:
            raise ValueError(
                "every workload must declare the same covariate columns (one global model), "
                f"got {sorted(covariate_sets)}"
            )
        return self

    # -- derived --------------------------------------------------------------------------
    @property
    def warnings(self) -> list[str]:
        """Settings that validate but cannot work as meant, each naming the values at odds."""
        return [*self._staleness_warnings, *self._demand_warnings]

    @property
    def _staleness_warnings(self) -> list[str]:
        step = self.source.step
        serving = self.serving
        if step is None or serving.max_staleness >= step + serving.refresh_interval:
            return []
        least = step + serving.refresh_interval
        return [
            f"serving.max_staleness ({serving.max_staleness:g} s) is shorter than the data "
            f"step ({step} s) plus serving.refresh_interval ({serving.refresh_interval:g} s): "
            f"the newest point can be {least:g} s old just before a refresh, so the metric "
            f"would often answer 503 and the HPA hold; set max_staleness to at least {least:g} s"
        ]

    @property
    def _demand_warnings(self) -> list[str]:
        """Demand queries that count completions, which are capped by the fleet's capacity."""
        if not isinstance(self.source, PrometheusSourceConfig):
            return []
        found = [(w, completion_side(w.demand or "")) for w in self.workloads]
        return [
            f"workload {w.name!r}: the demand query reads {metric!r}, which counts requests "
            "when they are answered: while the fleet is saturated it flattens at what the "
            "ready replicas serve, so the forecast learns the fleet's ceiling, not the demand. "
            "Use an arrival-side signal (requests received, running + waiting requests, or "
            "completions + queue growth; docs/measured.md). Query: "
            f"{shown(w.demand)}"
            for w, metric in found
            if metric is not None
        ]

    @property
    def specs(self) -> dict[str, WorkloadSpec]:
        """Workload name -> :class:`WorkloadSpec`."""
        return {w.name: w.spec for w in self.workloads}

    @property
    def policies(self) -> dict[str, WorkloadPolicy]:
        """Workload name -> :class:`WorkloadPolicy` (capacity and policy sections)."""
        return {w.name: w.workload_policy for w in self.workloads}

    @property
    def covariates(self) -> tuple[str, ...]:
        """Covariate columns shared by every workload."""
        return tuple(sorted(self.workloads[0].covariates))

    def quantiles(self, policies: Mapping[str, WorkloadPolicy] | None = None) -> tuple[float, ...]:
        """Quantiles the model forecasts: configured, the backtest's grid, every spec's tau and
        every policy's, and the one each policy's activation rule reads (``policies``,
        default :attr:`policies`)."""
        planned = (policies or self.policies).values()
        wanted = {
            *self.model.quantiles,
            *QUANTILE_GRID,
            *(s.tau for s in self.specs.values()),
            *(p.tau for p in planned),
            *(activation_quantile(p.activation_p) for p in planned),
        }
        return tuple(sorted({round(q, 6) for q in wanted}))

    def horizons(
        self, step: int, policies: Mapping[str, WorkloadPolicy] | None = None
    ) -> tuple[int, ...]:
        """Cells covering every policy's ``[lead, lead + hold]`` window (``policies``, default
        :attr:`policies`)."""
        cells: set[int] = set()
        for policy in (policies or self.policies).values():
            cells.update(policy.horizons(step))
        return tuple(sorted(cells))

    @property
    def scored_policies(self) -> list[str]:
        """The policies each evaluation fold scores: the evaluation's, then the gate's."""
        return list(dict.fromkeys([*self.evaluation.policies, self.gate.policy]))

    def fingerprint(self) -> str:
        """Hash of everything that shapes the model (not the source, MLflow or serving)."""
        shaped = self.model_dump(
            mode="json", include={"workloads", "model", "evaluation", "validation", "gate"}
        )
        for workload in shaped["workloads"]:
            workload.pop("demand", None)  # the data fingerprint covers what the query returned
            workload.pop("namespace", None)  # where it is served, not what is learned
            for observed in ("replicas", "ready_replicas"):  # read by shadow-report only
                workload.pop(observed, None)
        text = dumps(shaped, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- loading ---------------------------------------------------------------------------------


# Parts of a pydantic error location that name a member of a union, not a key of the file:
# "function-before[_seconds(), int]", "literal[0]", "ColdStartConfig", the source tags, and
# the "float" of a number that may also be `auto`.
_UNION_TAG = re.compile(r"[\[(]|^[A-Z]|^function-|^(prometheus|file|replay|float)$")

# pydantic's error types, said in the project's words ({...} filled from the error's ctx).
_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field (check the spelling)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_too_short": "must have at least {min_length} character(s)",
    "string_too_long": "must have at most {max_length} characters",
    "string_pattern_mismatch": "must match {pattern}",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be greater than or equal to {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be less than or equal to {le}",
    "literal_error": "must be {expected}",
    "too_short": "must hold at least {min_length} item(s)",
    "too_long": "must hold at most {max_length} item(s)",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "path_type": "must be a file path",
    "union_tag_invalid": "{discriminator} must be one of {expected_tags}, got {tag!r}",
    "union_tag_not_found": "needs a `{discriminator}`",
}


_LISTED_PROBLEMS = 10  # a file wrong everywhere is fixed from the top, a few fields at a time


def _location(loc: tuple[int | str, ...], data: Any) -> str:
    """``('workloads', 0, 'capacity', 'x')`` -> ``workloads[0] (chat).capacity.x``."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            try:
                node = node[part]
                if isinstance(node, dict) and "name" in node:
                    out += f" ({_bounded(node['name'], 40)})"
            except (IndexError, KeyError, TypeError):
                node = None
            continue
        if _UNION_TAG.search(part):
            continue
        out += f".{_bounded(part, 60)}" if out else _bounded(part, 60)
        node = node.get(part) if isinstance(node, dict) else None
    return out or "(top level)"


def _bounded(value: object, limit: int) -> str:
    """``str(value)``, or its bounded repr when longer than ``limit``."""
    text = str(value)
    return text if len(text) <= limit else shown(value, limit)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config sections a field's annotation admits, through optionals, unions,
    ``Annotated``, lists and mappings."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _sections_at(loc: tuple[int | str, ...]) -> list[type[BaseModel]]:
    """The sections that may hold the fields at ``loc``; list indices, mapping keys and
    union tags, which name no field, leave the sections as they are."""
    sections: list[type[BaseModel]] = [TrainConfig]
    for part in loc:
        inner = [
            m
            for section in sections
            if isinstance(part, str) and part in section.model_fields
            for m in _models_in(section.model_fields[part].annotation)
        ]
        sections = inner or sections
    return sections


def _unknown_field(loc: tuple[int | str, ...]) -> str:
    """``unknown field``, with the field it likely is: the section under it that has the
    name (``capacity`` for ``cold_start``), else a near spelling in its own section."""
    key = str(loc[-1])
    sections = _sections_at(loc[:-1])
    under = sorted(
        {
            name
            for section in sections
            for name, field in section.model_fields.items()
            if any(key in inner.model_fields for inner in _models_in(field.annotation))
        }
    )
    if under:
        return f"unknown field here (it belongs under `{'` or `'.join(under)}`)"
    names = sorted({name for section in sections for name in section.model_fields})
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
    if close:
        return f"unknown field (did you mean `{close[0]}`?)"
    return _MESSAGES["extra_forbidden"]


def files_missing(workloads: list[str], keys: list[str]) -> str:
    """Why ``workloads`` have no file in ``source.files``, and which of its ``keys`` that
    name no workload is likely a typo of one of them."""
    hints = []
    for name in workloads:
        close = difflib.get_close_matches(name, keys, n=1, cutoff=0.6)
        if close:
            hints.append(f"its key {shown(close[0])} names no workload: did you mean {name!r}?")
    return "; ".join([f"`source.files` has no file for workloads {workloads}", *hints])


def _problem(item: Any) -> str:
    """What is wrong with one field, and the value given (bounded)."""
    kind = item["type"]
    if kind == "extra_forbidden":
        message = _unknown_field(tuple(item["loc"]))
    elif kind in ("value_error", "assertion_error") or kind not in _MESSAGES:
        message = str(item["msg"]).removeprefix("Value error, ")
    else:
        message = _MESSAGES[kind].format_map(_Context(item.get("ctx") or {}))
    if kind == "missing" or "got" in message:
        return message
    value = item.get("input")
    return message if isinstance(value, dict | list) else f"{message}, got {shown(value)}"


class _Context(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def format_validation_error(error: ValidationError, data: Any, origin: str = "config") -> str:
    """One line per bad field: the field path, what is wrong, and the value given.

    A field that may take several forms (a duration or a mapping) fails each of them; the
    line says what the field accepts once, from its own check when it has one.
    """
    problems: dict[str, list[Any]] = {}
    for item in error.errors():
        problems.setdefault(_location(tuple(item["loc"]), data), []).append(item)
    lines = []
    for where, items in list(problems.items())[:_LISTED_PROBLEMS]:
        own = [i for i in items if i["type"] == "value_error"]
        lines.append(f"{where}: {_problem((own or items)[0])}")
    if len(problems) > _LISTED_PROBLEMS:
        lines.append(f"... and {len(problems) - _LISTED_PROBLEMS} more fields")
    head = f"{_bounded(origin, 200)}: invalid configuration"
    return head + "\n  " + "\n  ".join(lines)


def parse_config(data: Any, origin: str = "config", base_dir: Path | None = None) -> TrainConfig:
    """Validate ``data`` (parsed YAML) into a :class:`TrainConfig`.

    Relative file paths of file sources are resolved against ``base_dir``.

    Raises
    ------
    ConfigError
        Listing each bad field with its path and value.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the file must hold a mapping, got {type(data).__name__}")
    try:
        config = TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, origin)) from None
    if base_dir is not None and isinstance(config.source, FileSourceConfig):
        source = config.source
        update: dict[str, Any] = {}
        if source.path is not None and not source.path.is_absolute():
            update["path"] = base_dir / source.path
        if source.files is not None:
            update["files"] = {
                k: v if v.is_absolute() else base_dir / v for k, v in source.files.items()
            }
        config = config.model_copy(update={"source": source.model_copy(update=update)})
    return config


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: YAML keeps the last
    silently, so a second ``capacity:`` under a workload would drop the first unseen."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor`: its keys may be given again, to override them
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"key {shown(key)} given twice (first on line {seen[key] + 1})",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path) -> TrainConfig:
    """Read and validate the YAML file at ``path``.

    Raises
    ------
    ConfigError
        The file is missing, is not YAML, or a field is invalid (path and value named).
    """
    path = Path(path)
    try:
        # bytes: YAML's reader takes UTF-8, and UTF-16 by its byte-order mark; its marks
        # then name the file
        with path.open("rb") as stream:
            data = yaml.load(stream, Loader=_UniqueKeys)  # a SafeLoader: no tags that run code
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from exc
    except yaml.reader.ReaderError as exc:
        byte = f"0x{exc.character:02x}" if isinstance(exc.character, int) else shown(exc.character)
        raise ConfigError(
            f"{path}: not UTF-8 text (nor UTF-16 with a byte-order mark): byte "
            f"{exc.position} is {byte}; save the file as UTF-8"
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    config = parse_config(data, str(path), path.parent)
    for warning in config.warnings:
        logger.warning("%s: %s", path, warning)
    return config
