"""Out-of-sample tuning: each policy's setting is chosen on one window and scored on the next.

The evaluation span is cut in two at :data:`TUNING_FRACTION`: the **tuning** window, where
every policy, the reactive HPA included, picks the cheapest of its swept settings that meets
the SLO there (or, when none does, the one that comes closest), and the later **validation**
window, where that setting is scored. A tuning margin below 1 holds every policy alike to
that share of the SLO's unserved work on the tuning window, so that the setting keeps room
for a second half that differs from the first (``benchmarks/tuning_rules.py`` measures what
it buys); validation is scored against the SLO itself. The simulation runs once over the
whole span, so the validation window starts from the state the tuning window left: replicas
and queue carry.

The deployed numbers are what a user who tuned on the past would have paid in the future, and
the savings prewarm reports are computed from them: hybrid's validation cost against each
other policy's, only where both meet the SLO on validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from forecaster.backtest.frontier import RECOMMENDED, PolicyPoint, compared, run_policy
from forecaster.backtest.metrics import Metrics, compute_metrics
from forecaster.exceptions import ConfigError
from forecaster.policies import Observation

TUNING_FRACTION = 0.5
# Each tuned setting may leave this share of the SLO's unserved work on the tuning half: room
# for a second half that differs from the first (benchmarks/results/tuning_rules*.md).
TUNING_MARGIN = 0.5
TUNING, VALIDATION = "tuning", "validation"


def split(
    n_steps: int, scored: np.ndarray, fraction: float = TUNING_FRACTION
) -> dict[str, np.ndarray]:
    """Masks over ``n_steps`` simulation steps: the scored steps of each window.

    Examples
    --------
    >>> masks = split(4, np.array([True, False, True, True]))
    >>> masks["tuning"].tolist(), masks["validation"].tolist()
    ([True, False, False, False], [False, False, True, True])
    """
    if not 0 < fraction < 1:
        raise ConfigError(f"`fraction` must be in (0, 1), got {fraction!r}")
    boundary = boundary_step(n_steps, fraction)
    later = np.arange(n_steps) >= boundary
    return {TUNING: scored & ~later, VALIDATION: scored & later}


def hours(mask: np.ndarray, sim_step: float) -> float:
    """Hours covered by the steps ``mask`` selects."""
    return float(mask.sum()) * sim_step / 3600.0


def boundary_step(n_steps: int, fraction: float = TUNING_FRACTION) -> int:
    """First simulation step of the validation window."""
    return round(n_steps * fraction)


@dataclass(frozen=True)
class Deployed:
    """A policy at the setting tuned on the tuning window, and what it did on validation.

    Attributes
    ----------
    policy, params
        The policy and its chosen setting.
    tuning, validation
        Its metrics on each window.
    slo_unserved
        The SLO's largest unserved fraction, which both windows are held to.
    settings_tried
        Settings simulated to choose it: every policy is tuned at the same resolution.
    validation_hours
        Length of the validation window's scored steps, for the hourly rates.
    """

    policy: str
    params: dict[str, float]
    tuning: Metrics
    validation: Metrics
    slo_unserved: float
    settings_tried: int
    validation_hours: float

    @property
    def tuned_meets_slo(self) -> bool:
        """Whether the setting met the SLO on the tuning window (else it is the closest)."""
        return self.tuning.unserved_fraction <= self.slo_unserved

    @property
    def meets_slo(self) -> bool:
        """Whether it met the SLO on the validation window."""
        return self.validation.unserved_fraction <= self.slo_unserved

    @property
    def cold_starts_per_hour(self) -> float:
        """Replicas asked for per hour of validation."""
        return self.validation.cold_starts / self.validation_hours if self.validation_hours else 0.0

    @property
    def scale_events_per_hour(self) -> float:
        """Changes of the replica count per hour of validation."""
        if not self.validation_hours:
            return 0.0
        return self.validation.scale_events / self.validation_hours


def deploy(
    frontier: Mapping[str, Sequence[PolicyPoint]],
    slo_unserved: float,
    validation_hours: float,
    margin: float = TUNING_MARGIN,
) -> dict[str, Deployed]:
    """Each policy's setting tuned on the tuning window, scored on validation.

    Every point of ``frontier`` must carry its metrics per window (``PolicyPoint.windows``).
    A setting qualifies when its tuning window left at most ``margin * slo_unserved``
    unserved; the cheapest qualifying one is chosen, else :func:`safest`.
    """
    check_margin(margin)
    allowed = slo_unserved * margin
    out = {}
    for name, points in frontier.items():
        meeting = [p for p in points if p.windows[TUNING].unserved_fraction <= allowed]
        chosen = min(meeting, key=lambda p: p.windows[TUNING].cost) if meeting else safest(points)
        out[name] = Deployed(
            policy=name,
            params=dict(chosen.params),
            tuning=chosen.windows[TUNING],
            validation=chosen.windows[VALIDATION],
            slo_unserved=slo_unserved,
            settings_tried=len(points),
            validation_hours=validation_hours,
        )
    return out


def check_margin(margin: float) -> None:
    """A :class:`ConfigError` unless ``margin`` is a share of the SLO, in (0, 1]."""
    if not 0 < margin <= 1:
        raise ConfigError(f"`tuning_margin` must be in (0, 1], got {margin!r}")


def rule_text(margin: float) -> str:
    """What a tuned setting did on the tuning window, for reports: "the cheapest setting
    that ...".

    >>> rule_text(1.0), rule_text(0.5)
    ('meets the SLO', "leaves at most 0.5 of the SLO's unserved work")
    """
    if margin == 1:
        return "meets the SLO"
    return f"leaves at most {margin:g} of the SLO's unserved work"


def safest(points: Sequence[PolicyPoint]) -> PolicyPoint:
    """A policy's setting with the least unserved work on the tuning window (the cheapest of
    ties): the one :func:`deploy` takes when none meets the SLO, and, scored on validation,
    the lowest unserved fraction the policy reaches out of sample."""
    if not points:
        raise ConfigError("`points` must hold at least one swept setting, got none")
    return min(points, key=lambda p: (p.windows[TUNING].unserved_fraction, p.windows[TUNING].cost))


def deployed_savings(deployed: Mapping[str, Deployed]) -> dict[str, float | None]:
    """``vs_X = 1 - hybrid / X`` on validation cost, only where both meet the SLO there;
    ``oracle_gap = hybrid / oracle - 1``. ``None`` where a side misses the SLO or is absent.

    Examples
    --------
    >>> from forecaster.backtest.metrics import Metrics
    >>> m = lambda cost, lost: Metrics(cost / 4, cost, lost, 0.0, 0, 0, 1.0)
    >>> run = lambda name, cost, ok: Deployed(name, {}, m(cost, 0.0), m(cost, 0.0 if ok else 0.1),
    ...                                       0.001, 1, 1.0)
    >>> deployed_savings({"hybrid": run("hybrid", 75.0, True),
    ...                   "reactive": run("reactive", 100.0, True),
    ...                   "static": run("static", 90.0, False),
    ...                   "oracle": run("oracle", 60.0, True)})
    {'vs_reactive': 0.25, 'vs_static': None, 'vs_seasonal_naive': None, 'oracle_gap': 0.25}
    """
    ours = deployed.get(RECOMMENDED)
    met = ours is not None and ours.meets_slo

    def cost(name: str) -> float | None:
        other = deployed.get(name)
        return other.validation.cost if other is not None and other.meets_slo else None

    result: dict[str, float | None] = {}
    for key, name in compared(deployed).items():
        theirs = cost(name)
        result[key] = 1.0 - ours.validation.cost / theirs if met and theirs and ours else None
    oracle = cost("oracle")
    result["oracle_gap"] = ours.validation.cost / oracle - 1.0 if met and oracle and ours else None
    return result


def score_setting(obs: Observation, name: str, params: dict[str, float], seed: int) -> Deployed:
    """Policy ``name`` at a given setting (a registered one), measured on both windows as
    :func:`deploy` measures a tuned one; ``settings_tried`` is 0: nothing was chosen here."""
    trajectory, _ = run_policy(obs, name, params, seed)
    windows = split(len(obs.sim_rate), obs.scored)
    tuning, validation = (
        compute_metrics(trajectory, obs.spec, windows[w]) for w in (TUNING, VALIDATION)
    )
    return Deployed(
        policy=name,
        params=dict(params),
        tuning=tuning,
        validation=validation,
        slo_unserved=obs.spec.slo_unserved_fraction,
        settings_tried=0,
        validation_hours=hours(windows[VALIDATION], obs.sim_step),
    )
