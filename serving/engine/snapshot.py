"""The forecasts the service answers with: an immutable snapshot, swapped whole.

The refresher builds a new :class:`Snapshot` every tick and publishes it to the
:class:`SnapshotStore`; every request reads the current one. A request never waits for a
forecast and never sees half of a refresh: the swap is one reference assignment.

Freshness is judged when a value is read, not when it was computed: if the refresher stalls
(a source that hangs, a slow model), the snapshot keeps ageing and the metric turns into an
error once its data is older than ``max_staleness``. A low number is never made up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Generic, Literal, TypeVar

from forecaster.capacity import check_plan_row
from serving.exceptions import ForecastUnavailableError, UnknownWorkloadError

__all__ = [
    "SHADOW_REASON",
    "Cause",
    "Snapshot",
    "SnapshotStore",
    "WorkloadForecast",
    "WorkloadState",
    "WorkloadStatus",
]

Cause = Literal["stale", "drift", "no_model", "no_forecast", "shadow"]
"""Why a workload's value is refused; the ``reason`` label of the refusal counter."""

SHADOW_REASON = (
    "shadow mode (`prewarm serve --shadow`): the plan is only exported on /metrics and "
    "/explain, every autoscaling API answers the hold error"
)


@dataclass(frozen=True)
class WorkloadForecast:
    """One workload's plan: the capacity it will need one lead time from now.

    Parameters
    ----------
    workload : str
        Workload name.
    desired_replicas : int
        Replicas needed, within ``[min_replicas, max_replicas]``.
    forecast_demand : float
        Demand forecast over the lead window (quantile ``quantile``), finite and ``>= 0``.
    quantile : float
        The forecast quantile the plan uses.
    lead_time_seconds : float
        How far ahead the plan looks.
    origin : datetime
        Time of the last data point the forecast used (UTC); the data age counts from here.
    generated_at : datetime
        When the plan was computed (UTC).
    model_version : str
        Registry version of the model that produced it.
    capacity_per_replica, target_utilization : float
        The registered policy's capacity per replica and forecast-path utilization; give the
        HPA target of ``prewarm_forecast_demand``.
    min_replicas, max_replicas : int
        Bounds of the workload's registered policy.
    quantiles : mapping of float to float, default {}
        Each quantile the model forecasts -> its largest forecast over the same lead window
        (empty when the model's plan does not carry them).
    peak_horizon_seconds : float or None, default None
        How far ahead of ``origin`` the planned quantile reached ``forecast_demand``.
    buffer_demand : float or None, default None
        The warm buffer's ask (``forecast_demand`` is the larger of it and the forecast);
        None without a buffer.
    served_by : str or None, default None
        The registered models that forecast the workload, when the model combines or selects
        them per workload (``PrewarmModel.served_by``); None for a single model.
    """

    workload: str
    desired_replicas: int
    forecast_demand: float
    quantile: float
    lead_time_seconds: float
    origin: datetime
    generated_at: datetime
    model_version: str
    capacity_per_replica: float
    target_utilization: float
    min_replicas: int
    max_replicas: int
    quantiles: Mapping[float, float] = field(default_factory=dict)
    peak_horizon_seconds: float | None = None
    buffer_demand: float | None = None
    served_by: str | None = None

    def __post_init__(self) -> None:
        # Last line of defence: whatever produced it, a forecast that could scale a workload
        # down by mistake never gets into a snapshot.
        check_plan_row(
            self.workload,
            self.forecast_demand,
            self.desired_replicas,
            self.lead_time_seconds,
            bounds=(self.min_replicas, self.max_replicas),
        )

    @property
    def demand_target(self) -> float:
        """HPA ``AverageValue`` target of ``prewarm_forecast_demand``: capacity x utilization."""
        return self.capacity_per_replica * self.target_utilization


@dataclass(frozen=True)
class WorkloadState:
    """What the service knows of one workload after a refresh.

    Parameters
    ----------
    workload : str
        Workload name.
    forecast : WorkloadForecast or None
        The last good forecast (kept across failed ticks until it goes stale), or None.
    last_data : datetime or None
        Time of the newest data point received for the workload.
    problem : str or None
        Why the last refresh could not renew the forecast (source error, failed prediction,
        no data, unknown to the model); None when it did.
    drift : str or None
        How the served config's policy differs from the registered one (see
        :mod:`serving.engine.drift`); such a workload is never served, whatever its forecast.
    last_value : float or None
        The demand at ``last_data``.
    """

    workload: str
    forecast: WorkloadForecast | None = None
    last_data: datetime | None = None
    last_value: float | None = None
    problem: str | None = None
    drift: str | None = None


@dataclass(frozen=True)
class WorkloadStatus:
    """Freshness of one workload at a given moment.

    Attributes
    ----------
    fresh : bool
        True when a forecast exists and its data is at most ``max_staleness`` old.
    reason : str
        Empty when fresh; otherwise why the workload is stale, for humans.
    data_age_seconds : float or None
        Age of the data behind the served forecast (or of the newest data when there is no
        forecast); None when no data ever arrived.
    cause : str or None
        The kind of ``reason`` (see :data:`Cause`); None when fresh.
    """

    fresh: bool
    reason: str
    data_age_seconds: float | None
    cause: Cause | None = None


@dataclass(frozen=True)
class Snapshot:
    """Every workload's state at the end of one refresh; never mutated.

    Parameters
    ----------
    states : mapping of str to WorkloadState
        One entry per configured workload.
    max_staleness : float
        Seconds after which a forecast's data is too old to serve.
    generated_at : datetime or None
        End of the refresh that built it; None for the empty snapshot before the first one.
    model_name, model_version : str or None
        The model loaded when the snapshot was built.
    shadow : bool, default False
        Shadow mode: forecasts are kept (for ``/metrics`` and explanations) but none is
        served; :meth:`forecast` refuses every workload with :data:`SHADOW_REASON`.
    """

    states: Mapping[str, WorkloadState]
    max_staleness: float
    generated_at: datetime | None = None
    model_name: str | None = None
    model_version: str | None = None
    sequence: int = field(default=0)
    shadow: bool = False

    @cached_property
    def workloads(self) -> tuple[str, ...]:
        """Configured workload names, sorted (once: the snapshot never changes)."""
        return tuple(sorted(self.states))

    def state(self, workload: str) -> WorkloadState:
        """Return the state of ``workload``.

        Raises
        ------
        UnknownWorkloadError
            If no workload of that name is configured (HTTP 404, gRPC NOT_FOUND).
        """
        try:
            return self.states[workload]
        except KeyError:
            # The configured names are listed: an API whose caller may not see them
            # re-raises with UnknownWorkloadError.of(name, None).
            raise UnknownWorkloadError.of(workload, self.workloads) from None

    def status(self, workload: str, now: datetime | None = None) -> WorkloadStatus:
        """Tell whether ``workload`` has a forecast fit to serve at ``now``, and if not, why.

        Raises
        ------
        UnknownWorkloadError
            If no workload of that name is configured.
        """
        state = self.state(workload)
        now = now or datetime.now(UTC)
        forecast = state.forecast
        if state.drift is not None:
            return WorkloadStatus(False, state.drift, _age(now, state.last_data), "drift")
        if forecast is None:
            age = _age(now, state.last_data)
            reason = state.problem or "no forecast yet: waiting for the first refresh"
            cause: Cause = "no_model" if self.model_version is None else "no_forecast"
            return WorkloadStatus(False, reason, age, cause)
        age = _age(now, forecast.origin)
        assert age is not None
        if age > self.max_staleness:
            reason = f"data is {age:.0f} s old, more than max_staleness {self.max_staleness:g} s"
            if state.problem:
                reason += f"; last problem: {state.problem}"
            return WorkloadStatus(False, reason, age, "stale")
        return WorkloadStatus(True, "", age)

    def refusal(self, workload: str, now: datetime | None = None) -> tuple[Cause, str] | None:
        """Why ``workload``'s value would be refused at ``now``: ``(cause, reason)``, or None
        when it is served.

        Raises
        ------
        UnknownWorkloadError
            If no workload of that name is configured.
        """
        status = self.status(workload, now)
        if status.cause is not None:
            return status.cause, status.reason
        return ("shadow", SHADOW_REASON) if self.shadow else None

    def forecast(self, workload: str, now: datetime | None = None) -> WorkloadForecast:
        """Return the forecast of ``workload`` if it is fit to serve.

        Raises
        ------
        UnknownWorkloadError
            If no workload of that name is configured (HTTP 404, gRPC NOT_FOUND).
        ForecastUnavailableError
            If there is no forecast, its data is older than ``max_staleness``, its policy
            drifted or the service runs in shadow mode (HTTP 503, gRPC UNAVAILABLE), with the
            reason.
        """
        refused = self.refusal(workload, now)
        if refused is not None:
            cause, reason = refused
            raise ForecastUnavailableError(
                f"workload {workload!r} gets no value to scale on: {reason}", cause=cause
            )
        forecast = self.states[workload].forecast
        assert forecast is not None
        return forecast


def _age(now: datetime, then: datetime | None) -> float | None:
    if then is None:
        return None
    return max(0.0, (now - then).total_seconds())


EncodedT = TypeVar("EncodedT")
"""What a :class:`SnapshotStore` derives from each snapshot it publishes."""


class SnapshotStore(Generic[EncodedT]):
    """Holds the current :class:`Snapshot` and what ``encode`` made of it; readers never
    block, waiters get woken on swaps.

    Parameters
    ----------
    initial : Snapshot
        The snapshot served before the first refresh (every workload without a forecast).
    encode : callable
        ``encode(snapshot, previous)`` derives a value from a snapshot once, when it is
        published, in the publisher's thread (the API's reply bodies,
        :class:`serving.wire.replies.Replies`); ``previous`` is the value derived from the
        snapshot it replaces (None for ``initial``), so unchanged parts can be kept.
    """

    def __init__(
        self, initial: Snapshot, encode: Callable[[Snapshot, EncodedT | None], EncodedT]
    ) -> None:
        self._encode = encode
        # One tuple, so that a reader never sees a snapshot with another snapshot's encoding.
        self._published = (initial, encode(initial, None))
        self._changed = threading.Condition()
        self._wakes = 0  # wake_all's count: a waiter woken by it returns without a new snapshot

    @property
    def current(self) -> Snapshot:
        """The latest snapshot (a plain attribute read: atomic)."""
        return self._published[0]

    @property
    def encoded(self) -> EncodedT:
        """What ``encode`` derived from :attr:`current`."""
        return self._published[1]

    def publish(self, snapshot: Snapshot) -> None:
        """Encode ``snapshot``, swap both in and wake every :meth:`wait_for_change` caller.

        The encoding happens here, in the publisher's thread, so that no request pays for it.
        """
        published = (snapshot, self._encode(snapshot, self._published[1]))
        with self._changed:
            self._published = published
            self._changed.notify_all()

    def wait_for_change(self, seen: Snapshot, timeout: float) -> Snapshot:
        """Block until a snapshot other than ``seen`` is published or ``timeout`` passes.

        Returns
        -------
        Snapshot
            The current snapshot (``seen`` itself on timeout).
        """
        with self._changed:
            wakes = self._wakes
            self._changed.wait_for(
                lambda: self.current is not seen or self._wakes != wakes, timeout=timeout
            )
            return self.current

    def wake_all(self) -> None:
        """End every :meth:`wait_for_change` now, without a new snapshot (shutdown).

        A plain notify woke the waiters only to find their predicate still false: they slept
        on to their timeout, and open streams outlived the server's stop by up to its length.
        """
        with self._changed:
            self._wakes += 1
            self._changed.notify_all()
