"""What is being scaled and how: a workload's capacity spec and its policy.

:class:`WorkloadSpec` is a frozen, validated description of one workload (capacity, cold
start, bounds, cost and service level) shared by the policies, the simulator, the metrics and
the live planner. Every error names the field and echoes the value.

:class:`WorkloadPolicy` joins that spec with the settings of the two paths the HPA combines:

- the **forecast path**, prewarm's published metric: the ``quantile`` forecast over the lead
  window ``[t + L, t + L + hold]`` (``L`` = cold start + ``decision_delay``) divided by
  ``capacity_per_replica * forecast_utilization``;
- the **reactive path**, the HPA's own metric on the same demand signal, with target
  ``capacity_per_replica * target_utilization`` and the per-HPA ``tolerance``.

The backtester tunes it, training registers it with the model version, serving plans with
exactly the registered one, and the manifests are rendered from it: the one object all of
them read, so the backtested and the served configuration cannot drift apart unnoticed
(:meth:`WorkloadPolicy.differences`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np

from forecaster.exceptions import ConfigError, check_positive, shown
from forecaster.frame import MAX_VALUE

ColdStartKind = Literal["fixed", "uniform", "lognormal"]

# Quantile per tier when neither an explicit quantile nor miss/idle costs are given:
# tier 1 is latency critical, tier 3 is batch that tolerates queueing.
TIER_QUANTILES: dict[int, float] = {1: 0.99, 2: 0.95, 3: 0.8}

# z-score of the 95th percentile: a lognormal cold start is planned at its p95 so that a
# forecast-driven policy asks early enough for most replicas, not just the median one.
_Z95 = 1.6448536269514722


@dataclass(frozen=True)
class ColdStart:
    """Seconds from asking for a replica to it serving, fixed or drawn per replica.

    Parameters
    ----------
    kind
        ``"fixed"`` (``seconds``), ``"uniform"`` (between ``low`` and ``high``) or
        ``"lognormal"`` (median ``seconds``, log-space standard deviation ``sigma``).
    seconds, low, high, sigma
        Parameters of the chosen kind.

    Examples
    --------
    >>> ColdStart.fixed(300).planning_seconds
    300.0
    >>> ColdStart.uniform(120, 300).planning_seconds
    300.0
    """

    kind: ColdStartKind = "fixed"
    seconds: float = 300.0
    low: float = 0.0
    high: float = 0.0
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if self.kind == "fixed":
            if not (math.isfinite(self.seconds) and self.seconds >= 0):
                raise ConfigError(
                    f"`cold_start.seconds` must be a finite number >= 0, got {self.seconds!r}"
                )
        elif self.kind == "uniform":
            if not (0 <= self.low <= self.high and math.isfinite(self.high)):
                raise ConfigError(
                    "`cold_start` uniform range must satisfy 0 <= low <= high, "
                    f"got low={self.low!r}, high={self.high!r}"
                )
        elif self.kind == "lognormal":
            check_positive("cold_start.seconds", self.seconds, most=MAX_VALUE)
            check_positive("cold_start.sigma", self.sigma, most=MAX_VALUE)
        else:
            raise ConfigError(
                f"`cold_start.kind` must be one of fixed, uniform, lognormal, got {self.kind!r}"
            )

    @classmethod
    def fixed(cls, seconds: float) -> ColdStart:
        """Every replica takes exactly ``seconds``."""
        return cls(kind="fixed", seconds=float(seconds))

    @classmethod
    def uniform(cls, low: float, high: float) -> ColdStart:
        """Each replica draws its cold start uniformly in ``[low, high]``."""
        return cls(kind="uniform", low=float(low), high=float(high))

    @classmethod
    def lognormal(cls, median: float, sigma: float) -> ColdStart:
        """Each replica draws ``median * exp(sigma * N(0, 1))``."""
        return cls(kind="lognormal", seconds=float(median), sigma=float(sigma))

    @property
    def planning_seconds(self) -> float:
        """Lead time a forecast must cover: the value, the range's top, or the p95."""
        if self.kind == "fixed":
            return float(self.seconds)
        if self.kind == "uniform":
            return float(self.high)
        return float(self.seconds * math.exp(self.sigma * _Z95))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` cold starts in seconds; a fixed cold start consumes no randomness."""
        if self.kind == "fixed":
            return np.full(n, float(self.seconds))
        if self.kind == "uniform":
            return rng.uniform(self.low, self.high, size=n)
        return self.seconds * np.exp(self.sigma * rng.standard_normal(n))


MAX_REPLICAS = 100_000
"""Upper bound on any replica count: the simulator keeps one entry per replica warming up."""
MIN_CAPACITY = 1e-6
"""Least demand one replica may serve: less is a unit mistake (a millionth of a request per
second). The HPA reads its target in thousandths, so ``prewarm manifests`` also refuses a
target (capacity times utilization) under 0.001."""


@dataclass(frozen=True)
class WorkloadSpec:
    """Capacity, cost and service level of one inference workload.

    Parameters
    ----------
    capacity_per_replica
        Demand (units per second) one warm replica serves within the latency SLO.
    cold_start
        A :class:`ColdStart`, or a number of seconds for a fixed one.
    target_utilization
        Fraction of a replica's capacity the reactive and predictive sizing aim for.
    min_replicas, max_replicas
        Bounds on the replica count (the HPA's ``minReplicas`` / ``maxReplicas``).
    replica_hour_cost
        Price of one replica for one hour, warm-up included.
    slo_latency_seconds
        Work that would wait longer than this in the queue is unserved.
    slo_unserved_fraction
        Largest acceptable fraction of unserved work over the evaluation.
    tier
        1 (latency critical), 2 (default) or 3 (batch); picks the quantile when neither
        ``quantile`` nor the two costs are given.
    quantile
        Explicit forecast quantile ``tau`` in (0, 1).
    miss_cost, idle_cost
        Cost of a unit of unserved demand ``p`` and of the capacity that would have served
        it ``g``; together they give ``tau = p / (p + g)`` (the newsvendor quantile).

    Examples
    --------
    >>> WorkloadSpec(capacity_per_replica=10.0, miss_cost=9.0, idle_cost=1.0).tau
    0.9
    """

    capacity_per_replica: float
    cold_start: ColdStart | float = field(default_factory=ColdStart)
    target_utilization: float = 0.8
    min_replicas: int = 1
    max_replicas: int = 100
    replica_hour_cost: float = 4.0
    slo_latency_seconds: float = 30.0
    slo_unserved_fraction: float = 0.001
    tier: int = 2
    quantile: float | None = None
    miss_cost: float | None = None
    idle_cost: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.cold_start, ColdStart):
            _check_number("cold_start", self.cold_start)
            object.__setattr__(self, "cold_start", ColdStart.fixed(float(self.cold_start)))
        check_positive(
            "capacity_per_replica", self.capacity_per_replica, least=MIN_CAPACITY, most=MAX_VALUE
        )
        check_positive("replica_hour_cost", self.replica_hour_cost, most=MAX_VALUE)
        check_positive("slo_latency_seconds", self.slo_latency_seconds, most=MAX_VALUE)
        _unit_interval("target_utilization", self.target_utilization, closed_right=True)
        _unit_interval("slo_unserved_fraction", self.slo_unserved_fraction, closed_right=False)
        if not (isinstance(self.min_replicas, int) and self.min_replicas >= 0):
            raise ConfigError(f"`min_replicas` must be an integer >= 0, got {self.min_replicas!r}")
        if not (
            isinstance(self.max_replicas, int)
            and max(1, self.min_replicas) <= self.max_replicas <= MAX_REPLICAS
        ):
            raise ConfigError(
                "`max_replicas` must be an integer >= max(1, min_replicas) and "
                f"<= {MAX_REPLICAS:,}, "
                f"got {shown(self.max_replicas)} (min_replicas={shown(self.min_replicas)})"
            )
        if self.tier not in TIER_QUANTILES:
            raise ConfigError(f"`tier` must be one of {sorted(TIER_QUANTILES)}, got {self.tier!r}")
        self._check_quantile_source()

    def _check_quantile_source(self) -> None:
        costs = (self.miss_cost, self.idle_cost)
        if self.quantile is not None:
            if any(c is not None for c in costs):
                raise ConfigError(
                    "give either `quantile` or `miss_cost` and `idle_cost`, not both, "
                    f"got quantile={self.quantile!r}, miss_cost={self.miss_cost!r}, "
                    f"idle_cost={self.idle_cost!r}"
                )
            _unit_interval("quantile", self.quantile, closed_right=False)
        elif any(c is not None for c in costs):
            for name, value in (("miss_cost", self.miss_cost), ("idle_cost", self.idle_cost)):
                if value is None:
                    raise ConfigError(f"`{name}` is required with the other cost, got None")
                check_positive(name, value, most=MAX_VALUE)

    @property
    def cold_start_model(self) -> ColdStart:
        """The cold start as a :class:`ColdStart` (``__post_init__`` normalizes numbers)."""
        assert isinstance(self.cold_start, ColdStart)
        return self.cold_start

    @property
    def tau(self) -> float:
        """Forecast quantile: explicit, from the miss/idle costs, or from the tier."""
        if self.quantile is not None:
            return float(self.quantile)
        if self.miss_cost is not None and self.idle_cost is not None:
            return self.miss_cost / (self.miss_cost + self.idle_cost)
        return TIER_QUANTILES[self.tier]


def _check_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"`{name}` must be a number of seconds or a ColdStart, got {value!r}")


def _unit_interval(name: str, value: float, *, closed_right: bool) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value)):
        raise ConfigError(f"`{name}` must be a finite number in (0, 1), got {value!r}")
    if not (value > 0 and (value <= 1 if closed_right else value < 1)):
        right = "]" if closed_right else ")"
        raise ConfigError(f"`{name}` must be in (0, 1{right}, got {value!r}")


# The settings the backtest tunes, in report order.
TUNED = (
    "quantile",
    "forecast_utilization",
    "target_utilization",
    "tolerance",
    "buffer_quantile",
    "activation_probability",
)
# WorkloadPolicy fields training learns from the history, never stated in a config file.
LEARNED = ("buffer", "buffer_level")
# Hourly increments of a learned warm buffer (forecaster.buffer), one per UTC hour.
BUFFER_HOURS = 24
# The Kubernetes HPA's default tolerance: a ratio within 10 % of 1 changes nothing.
DEFAULT_TOLERANCE = 0.1


def horizon_range(lead_seconds: float, hold_seconds: float, data_step: float) -> tuple[int, int]:
    """Horizons (data steps from the origin) covering ``[t + lead, t + lead + hold]``.

    A forecast from origin ``j`` is used from ``(j + 1) * data_step`` until the next origin
    arrives one step later, so the target intervals start one step after the origin.

    Examples
    --------
    >>> horizon_range(300, 0, 60)
    (6, 6)
    >>> horizon_range(300, 300, 300)
    (2, 3)
    """
    first = 1 + math.floor(lead_seconds / data_step)
    last = 1 + math.ceil((lead_seconds + hold_seconds) / data_step)
    return first, max(first, last)


@dataclass(frozen=True)
class WorkloadPolicy:
    """One workload's spec and the settings of its forecast and reactive paths.

    Parameters
    ----------
    spec
        Capacity, cold start, bounds, prices and SLO.
    quantile
        Forecast quantile the forecast path plans on; ``None`` takes ``spec.tau``.
    forecast_utilization
        ``u`` of the forecast path; ``None`` takes ``spec.target_utilization``.
    target_utilization
        Of the reactive path; ``None`` takes ``spec.target_utilization``.
    tolerance
        The HPA's tolerance band around a ratio of 1 (both directions).
    hold, decision_delay
        Seconds a replica is kept past the lead, and the metric lag plus polling added to the
        cold start.
    buffer_quantile
        Quantile of the demand increase over the lead window kept warm on top of the demand
        at the origin (:mod:`forecaster.buffer`); 0 plans without a warm buffer.
    buffer, buffer_level
        The learned buffer: the increase per UTC hour of the origin relative to
        ``max(demand, buffer_level)`` (24 ratios), and the level (the training window's mean
        demand), learned at ``buffer_quantile``; empty and 0 until training learns them.
    activation_probability
        ``p`` of the KEDA activation rule (:mod:`forecaster.activation`): with
        ``min_replicas`` 0 the workload is woken when the forecast over the lead window gives
        ``P(demand > 0) > p``; ``None`` takes ``1 - tau``, the planned quantile.

    Examples
    --------
    >>> policy = WorkloadPolicy(WorkloadSpec(capacity_per_replica=2.0, cold_start=240),
    ...                         decision_delay=60)
    >>> policy.lead_seconds, policy.tau, policy.demand_target
    (300.0, 0.95, 1.6)
    """

    spec: WorkloadSpec
    quantile: float | None = None
    forecast_utilization: float | None = None
    target_utilization: float | None = None
    tolerance: float = DEFAULT_TOLERANCE
    hold: float = 0.0
    decision_delay: float = 0.0
    buffer_quantile: float = 0.0
    buffer: tuple[float, ...] = ()
    buffer_level: float = 0.0
    activation_probability: float | None = None

    def __post_init__(self) -> None:
        self._check_buffer()
        for name in ("quantile", "activation_probability"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise ConfigError(f"`{name}` must be in (0, 1), got {value!r}")
        for name in ("forecast_utilization", "target_utilization"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and 0 < value <= 1):
                raise ConfigError(f"`{name}` must be in (0, 1], got {value!r}")
        if not (math.isfinite(self.tolerance) and 0 <= self.tolerance < 1):
            raise ConfigError(f"`tolerance` must be in [0, 1), got {self.tolerance!r}")
        for name in ("hold", "decision_delay"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(
                    f"`{name}` must be a finite number of seconds >= 0, got {value!r}"
                )

    def _check_buffer(self) -> None:
        if not (math.isfinite(self.buffer_quantile) and 0 <= self.buffer_quantile < 1):
            raise ConfigError(
                f"`buffer_quantile` must be in [0, 1) (0: no warm buffer), "
                f"got {shown(self.buffer_quantile)}"
            )
        object.__setattr__(self, "buffer", tuple(float(v) for v in self.buffer))
        if self.buffer and (
            len(self.buffer) != BUFFER_HOURS
            or not all(math.isfinite(v) and v >= 0 for v in self.buffer)
        ):
            raise ConfigError(
                f"`buffer` must hold {BUFFER_HOURS} finite ratios >= 0 (one per UTC hour), "
                f"got {shown(list(self.buffer))}"
            )
        if not (math.isfinite(self.buffer_level) and self.buffer_level >= 0) or (
            bool(self.buffer) != (self.buffer_level > 0)
        ):
            raise ConfigError(
                "`buffer_level` must be finite, > 0 with a learned `buffer` and 0 without, "
                f"got {shown(self.buffer_level)}"
            )

    # -- what the paths use --------------------------------------------------------------------
    @property
    def tau(self) -> float:
        """The forecast path's quantile."""
        return float(self.spec.tau if self.quantile is None else self.quantile)

    @property
    def activation_p(self) -> float:
        """``p`` of the activation rule: active when ``P(demand > 0)`` over the lead window
        is above it."""
        if self.activation_probability is None:
            return round(1.0 - self.tau, 6)
        return float(self.activation_probability)

    @property
    def forecast_u(self) -> float:
        """The forecast path's utilization."""
        return float(self.forecast_utilization or self.spec.target_utilization)

    @property
    def reactive_u(self) -> float:
        """The reactive path's utilization."""
        return float(self.target_utilization or self.spec.target_utilization)

    @property
    def demand_target(self) -> float:
        """Demand per replica the reactive path aims for (the HPA's ``averageValue``)."""
        return self.spec.capacity_per_replica * self.reactive_u

    @property
    def forecast_target(self) -> float:
        """Demand per replica of the forecast path: the ``averageValue`` at which an HPA on
        the forecast demand asks for the replicas the plan wants."""
        return self.spec.capacity_per_replica * self.forecast_u

    @property
    def lead_seconds(self) -> float:
        """``L``: the cold start a plan must cover plus the decision delay."""
        return self.spec.cold_start_model.planning_seconds + self.decision_delay

    def horizon_range(self, step: float) -> tuple[int, int]:
        """First and last horizon (cells of ``step`` seconds) covering the lead window
        ``[t + L, t + L + hold]`` (see :func:`horizon_range`)."""
        return horizon_range(self.lead_seconds, self.hold, step)

    def horizons(self, step: float) -> tuple[int, ...]:
        """Every horizon of :meth:`horizon_range`, in order."""
        first, last = self.horizon_range(step)
        return tuple(range(first, last + 1))

    def tuned(self, **settings: float) -> WorkloadPolicy:
        """This policy with the tuned settings replaced (names as in :data:`TUNED`)."""
        unknown = sorted(set(settings) - set(TUNED))
        if unknown:
            raise ConfigError(f"not tunable settings {unknown}; tunable: {list(TUNED)}")
        return replace(self, **settings)  # type: ignore[arg-type]  # names checked above

    def settings(self) -> dict[str, float]:
        """The resolved tuned settings, as the backtest's ``hybrid`` policy takes them: the
        activation probability only with ``min_replicas`` 0, the one floor where it acts and
        hybrid's sweep tunes it."""
        settings = {
            "quantile": self.tau,
            "forecast_utilization": self.forecast_u,
            "target_utilization": self.reactive_u,
            "tolerance": self.tolerance,
            "buffer_quantile": self.buffer_quantile,
        }
        if self.spec.min_replicas == 0:
            settings["activation_probability"] = self.activation_p
        return settings

    # -- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready ``dict``; :meth:`from_dict` reads it back equal."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "spec"}
        out["buffer"] = list(self.buffer)
        spec = asdict(self.spec)
        spec["cold_start"] = asdict(self.spec.cold_start_model)
        return {"spec": spec, **out}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> WorkloadPolicy:
        """The policy :meth:`to_dict` wrote; unknown keys are refused, by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(document) - known)
        if unknown or "spec" not in document:
            raise ConfigError(
                f"a workload policy has keys {sorted(known)}, got unknown {unknown}"
                if unknown
                else "a workload policy needs `spec`"
            )
        spec = dict(document["spec"])
        spec["cold_start"] = ColdStart(**spec["cold_start"])
        return cls(**{**document, "spec": WorkloadSpec(**spec)})

    def differences(self, other: WorkloadPolicy, ignore: Iterable[str] = ()) -> list[str]:
        """``"field old -> new"`` for every setting where ``other`` differs from this one.

        ``ignore`` names fields left out of the comparison (e.g. tuned settings one side
        leaves to the other), in the dotted form the differences use: ``"quantile"``,
        ``"spec.cold_start"`` (with every field under it).
        """
        skipped = tuple(ignore)
        ours, theirs = _flat(self.to_dict()), _flat(other.to_dict())
        return [
            f"{key} {ours.get(key)!r} -> {theirs.get(key)!r}"
            for key in sorted(set(ours) | set(theirs))
            if ours.get(key) != theirs.get(key)
            and not any(key == s or key.startswith(f"{s}.") for s in skipped)
        ]


def _flat(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out
