"""Waking a workload from zero: KEDA's activation, and prewarm's rule for it.

With ``minReplicaCount: 0`` KEDA splits scaling in two phases (keda.sh, *Scaling Deployments*
and the *ScaledObject specification*, https://keda.sh/docs/latest/reference/scaledobject-spec):

- **activation**, 0 <-> 1, decided by KEDA itself: every ``pollingInterval`` (default 30 s)
  it asks each trigger whether it is active (``IsActive`` for an external scaler,
  https://keda.sh/docs/latest/concepts/external-scalers: "IsActive is called on
  pollingInterval [...] and scaling to 1 happens if this returns true"); the ScaledObject is
  active when any trigger is. When it is and the target runs 0 replicas, KEDA scales it to 1.
  When no trigger has been active for ``cooldownPeriod`` (default 300 s; it "only applies when
  scaling to 0"), KEDA scales it back to 0. A push scaler (``external-push``, the
  ``StreamIsActive`` stream) reports a change as it happens, and KEDA acts on it at once
  instead of at the next poll;
- **scaling**, 1 <-> N, left to the HPA KEDA creates, with ``minReplicas`` = max(1,
  ``minReplicaCount``).

:class:`KedaActivation` replays the activation phase over the HPA's sync ticks, and
:func:`awake_replicas` runs the HPA only while the target is awake, restarting it from the one
replica KEDA scaled to.

prewarm's trigger is active when the forecast over the next lead window gives a probability of
any demand above ``p``, the workload's registered ``activation_probability``: with quantile
forecasts, ``P(demand > threshold) > p`` exactly when the ``(1 - p)`` quantile of the
window's forecast is above the threshold (KEDA's ``activationThreshold``, default 0). The
window is the one the forecast path plans on, so KEDA wakes the workload one cold start
before the demand the forecast sees. The live scaler and the backtest both decide with
:func:`activation_quantile` and :func:`is_active`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from forecaster.exceptions import ConfigError, shown

DEFAULT_POLLING_SECONDS = 30.0
"""KEDA's default ``pollingInterval``."""
DEFAULT_COOLDOWN_SECONDS = 300.0
"""KEDA's default ``cooldownPeriod``."""
ACTIVATION_GRID = (0.2, 0.05, 0.01)
"""Activation probabilities a backtest tries: ``1 - p`` is a quantile every forecast carries
(:data:`forecaster.policies.predictive.QUANTILE_GRID`)."""


def activation_quantile(probability: float) -> float:
    """The forecast quantile whose value above the threshold means ``P(demand > threshold)``
    is above ``probability``: ``1 - probability``, rounded as the quantile grids are.

    Examples
    --------
    >>> activation_quantile(0.05)
    0.95
    """
    if not (isinstance(probability, int | float) and 0 < probability < 1):
        raise ConfigError(f"`activation_probability` must be in (0, 1), got {shown(probability)}")
    return round(1.0 - float(probability), 6)


def window_quantile(quantiles: Mapping[float, float], probability: float) -> float:
    """The ``1 - probability`` quantile of the lead window's forecast, from a plan's
    per-quantile window maxima.

    Raises
    ------
    ConfigError
        When the forecast does not carry that quantile, naming the ones it has.
    """
    level = activation_quantile(probability)
    for quantile, value in quantiles.items():
        if math.isclose(quantile, level):
            return float(value)
    raise ConfigError(
        f"`activation_probability` {probability:g} needs the forecast quantile {level:g}; "
        f"the model forecasts {sorted(quantiles)}"
    )


def is_active(window_value: np.ndarray | float, threshold: float = 0.0) -> np.ndarray:
    """Whether the window's ``(1 - p)`` quantile is above ``threshold``: ``P(demand >
    threshold) > p``."""
    return np.asarray(window_value, dtype=float) > threshold


@dataclass(frozen=True)
class KedaActivation:
    """KEDA's activation phase: polling, an optional push trigger, and the cooldown.

    Parameters
    ----------
    polling_interval
        ``pollingInterval`` in seconds.
    cooldown_period
        ``cooldownPeriod`` in seconds.
    """

    polling_interval: float = DEFAULT_POLLING_SECONDS
    cooldown_period: float = DEFAULT_COOLDOWN_SECONDS

    def __post_init__(self) -> None:
        for name in ("polling_interval", "cooldown_period"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"`{name}` must be a positive number of seconds, got {value!r}")

    def awake(
        self,
        times: np.ndarray,
        polled: np.ndarray,
        pushed: np.ndarray | None = None,
        sustained: np.ndarray | None = None,
    ) -> np.ndarray:
        """Whether the target runs (1 or more replicas) after KEDA's decision at each tick.

        Parameters
        ----------
        times
            Tick times in seconds from the first data point, evenly spaced; the polling
            interval must be a whole number of ticks. KEDA polls at the multiples of
            ``polling_interval``.
        polled
            Activity of the pull triggers at each tick (read only at polls).
        pushed
            Activity of the push trigger at each tick, or ``None`` without one; KEDA acts on
            it the tick it turns true, and reads it at polls like the others.
        sustained
            Activity of a polled trigger on a metric only running pods report (a GPU
            utilization): it keeps an awake target awake but cannot wake one at zero.

        Returns
        -------
        numpy.ndarray
            Booleans, one per tick. The target starts awake when a trigger is active at the
            first tick (a scaler that has been running), asleep otherwise.
        """
        self._check_ticks(times)
        pull = np.asarray(polled, dtype=bool)
        push = np.zeros_like(pull) if pushed is None else np.asarray(pushed, dtype=bool)
        keeps = pull | push if sustained is None else pull | push | np.asarray(sustained, bool)
        any_active = (pull | push).tolist()
        keep = keeps.tolist()
        rises = (push & ~np.concatenate([[True], push[:-1]])).tolist()
        phase = np.remainder(times, self.polling_interval)
        polls = ((phase < 1e-6) | (self.polling_interval - phase < 1e-6)).tolist()
        out = [False] * len(any_active)
        awake = bool(keep[0]) if keep else False
        last_active = float(times[0]) if awake else -math.inf
        for k, t in enumerate(times.tolist()):
            if polls[k] or rises[k]:
                if any_active[k] or (awake and keep[k]):
                    awake, last_active = True, t
                elif awake and t - last_active > self.cooldown_period:
                    # KEDA scales to zero once lastActiveTime + cooldownPeriod is before now
                    awake = False
            out[k] = awake
        return np.asarray(out, dtype=bool)

    def _check_ticks(self, times: np.ndarray) -> None:
        if len(times) < 2:
            return
        period = float(times[1] - times[0])
        ticks = self.polling_interval / period
        if not (period > 0 and abs(ticks - round(ticks)) < 1e-9 and round(ticks) >= 1):
            raise ConfigError(
                f"`polling_interval` ({self.polling_interval:g} s) must be a whole number of "
                f"controller ticks ({period:g} s)"
            )


Run = Callable[[int, int, int], np.ndarray]
"""``run(begin, end, initial)``: the HPA's replicas over ticks ``[begin, end)`` from
``initial`` replicas."""


def awake_replicas(awake: np.ndarray, run: Run, initial: int) -> np.ndarray:
    """Replicas per tick when KEDA owns 0 <-> 1 and the HPA runs only while awake.

    Asleep, the target runs 0 replicas. A segment that starts awake at tick 0 runs the HPA
    from ``initial`` (its steady state); a later one starts with the 1 replica KEDA scaled
    to at the waking tick, and the HPA takes over from the next tick.
    """
    out = np.zeros(len(awake), dtype=int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], awake.astype(int), [0]])))
    for begin, end in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        if begin == 0:
            out[begin:end] = run(begin, end, initial)
            continue
        out[begin] = 1
        if end > begin + 1:
            out[begin + 1 : end] = run(begin + 1, end, 1)
    return out
