"""A workload's policy: everything that decides its replicas, in one serializable object.

:class:`WorkloadPolicy` joins the workload's capacity spec (capacity per replica, cold start,
bounds, prices, SLO, ``tau``) with the settings of the two paths the HPA combines:

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
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from forecaster.backtest.workload import ColdStart, WorkloadSpec
from forecaster.exceptions import ConfigError

# The settings the backtest tunes, in report order.
TUNED = ("quantile", "forecast_utilization", "target_utilization", "tolerance")
# The Kubernetes HPA's default tolerance: a ratio within 10 % of 1 changes nothing.
DEFAULT_TOLERANCE = 0.1


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

    def __post_init__(self) -> None:
        if self.quantile is not None and not 0 < self.quantile < 1:
            raise ConfigError(f"`quantile` must be in (0, 1), got {self.quantile!r}")
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

    # -- what the paths use --------------------------------------------------------------------
    @property
    def tau(self) -> float:
        """The forecast path's quantile."""
        return float(self.spec.tau if self.quantile is None else self.quantile)

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

    def tuned(self, **settings: float) -> WorkloadPolicy:
        """This policy with the tuned settings replaced (names as in :data:`TUNED`)."""
        unknown = sorted(set(settings) - set(TUNED))
        if unknown:
            raise ConfigError(f"not tunable settings {unknown}; tunable: {list(TUNED)}")
        return replace(self, **settings)  # type: ignore[arg-type]  # names checked above

    def settings(self) -> dict[str, float]:
        """The resolved tuned settings, as the backtest's ``hybrid`` policy takes them."""
        return {
            "quantile": self.tau,
            "forecast_utilization": self.forecast_u,
            "target_utilization": self.reactive_u,
            "tolerance": self.tolerance,
        }

    # -- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready ``dict``; :meth:`from_dict` reads it back equal."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "spec"}
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

        ``ignore`` names top-level fields left out of the comparison (e.g. tuned settings
        one side leaves to the other).
        """
        skipped = set(ignore)
        ours, theirs = _flat(self.to_dict()), _flat(other.to_dict())
        return [
            f"{key} {ours.get(key)!r} -> {theirs.get(key)!r}"
            for key in sorted(set(ours) | set(theirs))
            if ours.get(key) != theirs.get(key) and key not in skipped
        ]


def _flat(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out
