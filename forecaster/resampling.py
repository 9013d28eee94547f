"""Demand on the simulation grid: the step policies decide at and the simulator runs at.

Both the policies (their :class:`~forecaster.policies.Observation`) and the simulator read
demand per simulation step; the conversion from the data grid lives here so that neither
imports the other.
"""

from __future__ import annotations

import math

import numpy as np

from forecaster.exceptions import ConfigError, DataValidationError

DEFAULT_SIM_STEP = 15.0


def resample_demand(
    demand: np.ndarray, data_step: float, sim_step: float = DEFAULT_SIM_STEP
) -> np.ndarray:
    """Demand rate per simulation step from a rate per data step.

    Demand is **held** (piecewise constant) within each data step; a simulation step that
    straddles data steps gets the time-weighted mean. Total work is conserved exactly.

    Parameters
    ----------
    demand
        Rate (units per second) per data step; value ``k`` covers
        ``[k * data_step, (k + 1) * data_step)``. Must be finite and >= 0.
    data_step, sim_step
        Step lengths in seconds.

    Returns
    -------
    numpy.ndarray
        Rate per simulation step, ``ceil(len(demand) * data_step / sim_step)`` entries.

    Examples
    --------
    >>> resample_demand(np.array([1.0, 3.0]), 60, 30).tolist()
    [1.0, 1.0, 3.0, 3.0]
    """
    demand = np.asarray(demand, dtype=float)
    if demand.ndim != 1 or not np.all(np.isfinite(demand)) or np.any(demand < 0):
        raise DataValidationError(
            "`demand` must be a 1-D array of finite values >= 0 "
            f"(fill gaps before simulating), got shape {demand.shape}"
        )
    if data_step <= 0 or sim_step <= 0:
        raise ConfigError(
            f"`data_step` and `sim_step` must be > 0, got {data_step!r} and {sim_step!r}"
        )
    if data_step % sim_step == 0:  # the usual case, exact without integrating
        return np.repeat(demand, int(data_step // sim_step))
    span = len(demand) * data_step
    cumulative = np.concatenate([[0.0], np.cumsum(demand * data_step)])
    edges = np.minimum(np.arange(math.ceil(span / sim_step) + 1) * sim_step, span)
    work = np.diff(np.interp(edges, np.arange(len(demand) + 1) * data_step, cumulative))
    return work / sim_step
