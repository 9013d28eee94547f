"""The service's own Prometheus metrics and its structured JSON logs.

Metrics live in a registry of their own (never the process-global default), so two apps in
one process (tests, benchmarks) do not collide and ``/metrics`` shows only prewarm's series.
Per-workload values (forecast, replicas, data age, freshness) are read from the current
snapshot when ``/metrics`` is scraped, so a stalled refresher shows as growing data age
instead of frozen numbers.

Refusals are counted one by one on ``/metrics`` but logged at most once per workload and
reason per minute (:class:`Throttle`): under load a stale workload is refused hundreds of
times a second, and a line for each would bury every other line and fill the disk.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from forecaster.metrics import pinball_losses
from serving.engine.snapshot import Snapshot
from serving.exceptions import ForecastUnavailableError
from training.logs import MLFLOW_LOGGERS, JsonFormatter, redacting, without_mlflow_handlers
from training.redaction import redact

__all__ = ["REFUSAL_LOG_INTERVAL", "ServingMetrics", "Throttle", "configure_logging"]

logger = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL = 60.0
"""Seconds between two log lines about the refusals of one workload for one reason."""

_REFRESH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class _SnapshotCollector(Collector):
    """Gauges computed from the current snapshot at scrape time."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot = self._snapshot()
        now = datetime.now(UTC)
        demand = GaugeMetricFamily(
            "prewarm_forecast_demand",
            "Forecast demand over the lead window (units per second), per workload",
            labels=["workload"],
        )
        replicas = GaugeMetricFamily(
            "prewarm_desired_replicas",
            "Replicas needed one lead time from now, per workload",
            labels=["workload"],
        )
        age = GaugeMetricFamily(
            "prewarm_data_age_seconds",
            "Age of the data behind the served forecast, per workload",
            labels=["workload"],
        )
        fresh = GaugeMetricFamily(
            "prewarm_workload_fresh",
            "1 when the workload's forecast is served, 0 when it answers 503 (stale)",
            labels=["workload"],
        )
        band = GaugeMetricFamily(
            "prewarm_forecast_quantile",
            "Largest forecast of each quantile over the lead window (units per second), per "
            "workload: the forecast band around prewarm_forecast_demand",
            labels=["workload", "quantile"],
        )
        lead = GaugeMetricFamily(
            "prewarm_lead_time_seconds",
            "How far ahead the plan looks (cold start plus decision delay), per workload",
            labels=["workload"],
        )
        drift = GaugeMetricFamily(
            "prewarm_policy_drift",
            "1 when the workload's config differs from the policy registered with the served "
            "model version (its metric answers 503 / UNAVAILABLE), 0 otherwise",
            labels=["workload"],
        )
        for name in snapshot.workloads:
            state = snapshot.states[name]
            status = snapshot.status(name, now)
            fresh.add_metric([name], 1.0 if status.fresh else 0.0)
            drift.add_metric([name], 0.0 if state.drift is None else 1.0)
            if status.data_age_seconds is not None:
                age.add_metric([name], status.data_age_seconds)
            forecast = state.forecast
            if forecast is not None:
                demand.add_metric([name], forecast.forecast_demand)
                replicas.add_metric([name], float(forecast.desired_replicas))
                lead.add_metric([name], forecast.lead_time_seconds)
                for quantile, value in forecast.quantiles.items():
                    band.add_metric([name, f"{quantile:g}"], value)
        shadow = GaugeMetricFamily(
            "prewarm_shadow_mode",
            "1 when the service runs in shadow mode (plans exported, every autoscaling API "
            "answers the hold error), 0 otherwise",
            value=1.0 if snapshot.shadow else 0.0,
        )
        yield from (demand, replicas, band, lead, age, fresh, drift, shadow)


class _ChangesCollector(Collector):
    """A counter of changes by result, read from their owner's counts at scrape time, so
    that it agrees with the owner at every moment (the model watcher refuses a version in its
    own thread between two refreshes; a TLS reload happens in a handshake).

    Parameters
    ----------
    name, documentation : str
        The counter (without ``_total``) and its help text.
    results : tuple of str
        The ``result`` label of each count, in the order ``counts`` returns them.
    counts : callable
        The current counts.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        results: tuple[str, ...],
        counts: Callable[[], tuple[int, ...]],
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._results = results
        self._counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self._name, self._documentation, labels=["result"])
        for result, count in zip(self._results, self._counts(), strict=True):
            family.add_metric([result], count)
        yield family


class Throttle:
    """Lets one event per key through per interval and counts the others.

    Parameters
    ----------
    interval : float
        Seconds after a let-through event during which the same key is held back.
    clock : callable, default time.monotonic
        Returns the current time in seconds.

    Examples
    --------
    >>> now = [0.0]
    >>> throttle = Throttle(60.0, clock=lambda: now[0])
    >>> throttle.admit("a"), throttle.admit("a"), throttle.admit("a")
    (0, None, None)
    >>> now[0] = 60.0
    >>> throttle.admit("a")
    2
    """

    max_keys: ClassVar[int] = 4096
    """Keys remembered at most: beyond it, keys let through over an interval ago are forgot
    (a key may be an error text, and error texts vary)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._keys: dict[Hashable, tuple[float, int]] = {}  # key -> (let through at, held back)

    def admit(self, key: Hashable) -> int | None:
        """Record one event of ``key``.

        Returns
        -------
        int or None
            None when the event is held back; otherwise how many events of ``key`` were held
            back since the last one let through.
        """
        now = self.clock()
        with self._lock:
            last = self._keys.get(key)
            if last is not None and now - last[0] < self.interval:
                self._keys[key] = (last[0], last[1] + 1)
                return None
            if last is None and len(self._keys) >= self.max_keys:
                self._forget(now)
            self._keys[key] = (now, 0)
            return 0 if last is None else last[1]

    def warn(
        self, log: logging.Logger, key: Hashable, message: str, fields: dict[str, Any]
    ) -> None:
        """Log ``message`` with ``fields`` at WARNING if :meth:`admit` lets ``key``
        through, adding how many events of it went unlogged and the interval."""
        held_back = self.admit(key)
        if held_back is not None:
            counts = {"repeats_not_logged": held_back, "log_interval_seconds": self.interval}
            log.warning(message, extra=fields | counts)

    def _forget(self, now: float) -> None:
        """Drop the keys whose interval has passed; if none has, the oldest half."""
        expired = [k for k, (at, _) in self._keys.items() if now - at >= self.interval]
        for key in expired or list(self._keys)[: len(self._keys) // 2]:
            del self._keys[key]


class ServingMetrics:
    """Every metric the service exports, in one private registry.

    Parameters
    ----------
    snapshot : callable
        Returns the current :class:`~serving.engine.snapshot.Snapshot` (read at scrape time).
    refusal_log : Throttle or None
        How often a refusal is logged per workload and reason; default once per
        :data:`REFUSAL_LOG_INTERVAL` seconds.
    model_changes : callable or None
        Returns the versions loaded and refused so far (the model watcher's ``reloads`` and
        ``failures``), exported as ``prewarm_model_reloads_total``; None exports zeros.
    tls_changes : callable or None
        Returns the TLS certificate pairs reloaded and the changed files refused so far (the
        :class:`~serving.api.certificates.ServingCertificate`'s ``reloads`` and ``failures``),
        exported as ``prewarm_tls_reloads_total``; None (no TLS) exports nothing.
    tls_expiry : callable or None
        Returns the Unix time the certificate new connections get stops being valid
        (``notAfter``), exported as ``prewarm_tls_certificate_expiry_timestamp_seconds``, so
        an alert fires before it expires and when a renewal was never taken; None (no TLS)
        exports nothing.
    rejected_versions : callable or None
        Returns how many registered versions are refused now (tried again, not served since),
        exported as ``prewarm_model_versions_rejected``; None exports 0.
    registry_busy : callable or None
        Returns the seconds the registry call under way has run (the model watcher's
        ``busy_for``), exported as ``prewarm_registry_call_running_seconds``; None exports 0.
    """

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        *,
        refusal_log: Throttle | None = None,
        model_changes: Callable[[], tuple[int, int]] | None = None,
        tls_changes: Callable[[], tuple[int, int]] | None = None,
        tls_expiry: Callable[[], float] | None = None,
        rejected_versions: Callable[[], int] | None = None,
        registry_busy: Callable[[], float] | None = None,
    ) -> None:
        self.refusal_log = refusal_log or Throttle(REFUSAL_LOG_INTERVAL)
        # Each workload's accuracy series, looked up once (see score_many).
        self._accuracy: dict[str, tuple[Any, Any, Any, Any]] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.refresh_duration = Histogram(
            "prewarm_refresh_duration_seconds",
            "Wall time of one refresh cycle (fetch, plan, publish)",
            buckets=_REFRESH_BUCKETS,
            registry=registry,
        )
        self.fetch_duration = Histogram(
            "prewarm_fetch_duration_seconds",
            "Wall time of the incremental history fetch within a refresh",
            buckets=_REFRESH_BUCKETS,
            registry=registry,
        )
        self.refreshes = Counter(
            "prewarm_refreshes",
            "Refresh cycles, by result (ok, partial, failed)",
            ["result"],
            registry=registry,
        )
        self.source_errors = Counter(
            "prewarm_source_errors",
            "History fetches that failed, per workload",
            ["workload"],
            registry=registry,
        )
        self.refused_values = Counter(
            "prewarm_refused_values",
            "Values received that the data contract refuses (negative or infinite demand, a "
            "value of 1e12 or more), kept as missing, per workload",
            ["workload"],
            registry=registry,
        )
        self.prediction_errors = Counter(
            "prewarm_prediction_errors",
            "Plans that failed or gave an unusable value, per workload",
            ["workload"],
            registry=registry,
        )
        self.unavailable = Counter(
            "prewarm_unavailable_responses",
            "Requests answered 503 / UNAVAILABLE because no value could be served, by "
            "reason (stale, drift, no_model, no_forecast, shadow)",
            ["api", "workload", "reason"],
            registry=registry,
        )
        self.model_info = Gauge(
            "prewarm_model_info",
            "The model version being served (value 1)",
            ["name", "version"],
            registry=registry,
        )
        self.abs_error = Summary(
            "prewarm_forecast_abs_error",
            "Absolute error of the forecast issued one lead time ago against the demand that "
            "arrived at its target time, per workload",
            ["workload"],
            registry=registry,
        )
        self.last_abs_error = Gauge(
            "prewarm_forecast_last_abs_error",
            "Latest absolute error of a forecast issued one lead time ago, per workload",
            ["workload"],
            registry=registry,
        )
        self.pinball = Summary(
            "prewarm_forecast_pinball_loss",
            "Pinball loss, at the workload's quantile, of the forecast issued one lead time ago "
            "against the demand that arrived at its target time, per workload",
            ["workload"],
            registry=registry,
        )
        self.covered = Counter(
            "prewarm_forecast_covered",
            "Scored forecasts whose target-time demand was at most the forecast, per workload: "
            "divided by prewarm_forecast_pinball_loss_count it is the online coverage",
            ["workload"],
            registry=registry,
        )
        Gauge(
            "prewarm_model_versions_rejected",
            "Registered model versions refused now (each tried again with a doubling delay "
            "and not served since): the champion alias names one when this is above 0",
            registry=registry,
        ).set_function(rejected_versions or (lambda: 0))
        Gauge(
            "prewarm_registry_call_running_seconds",
            "Seconds the model registry look-up (or load) under way has run, 0 when none is: "
            "far past serving.poll_model_every, MLflow is not answering",
            registry=registry,
        ).set_function(registry_busy or (lambda: 0.0))
        registry.register(_SnapshotCollector(snapshot))
        registry.register(
            _ChangesCollector(
                "prewarm_model_reloads",
                "Model version changes, by result (loaded; rejected: versions refused, each "
                "once however often it is tried again)",
                ("loaded", "rejected"),
                model_changes or (lambda: (0, 0)),
            )
        )
        if tls_changes is not None:
            registry.register(
                _ChangesCollector(
                    "prewarm_tls_reloads",
                    "Changes of the TLS certificate files, by result (loaded: new connections "
                    "get the new certificate; failed: files refused, the previous certificate "
                    "still served, each change once)",
                    ("loaded", "failed"),
                    tls_changes,
                )
            )
        if tls_expiry is not None:
            Gauge(
                "prewarm_tls_certificate_expiry_timestamp_seconds",
                "notAfter of the serving certificate new connections get, as a Unix time "
                "(the files are looked at first, as for a new connection)",
                registry=registry,
            ).set_function(tls_expiry)
        self._model: tuple[str, str] | None = None

    def refused(self, api: str, workload: str, exc: ForecastUnavailableError) -> None:
        """Count one refused request; log it unless the same refusal was logged recently.

        The line that follows a quiet interval says how many refusals it stood for.
        """
        self.unavailable.labels(api, workload, exc.cause).inc()
        fields = {"workload": workload, "api": api, "cause": exc.cause, "reason": redact(str(exc))}
        self.refusal_log.warn(logger, (workload, exc.cause), "forecast unavailable", fields)

    def track(self, workload: str) -> None:
        """Start ``workload``'s counted series at 0 (refused values and the online accuracy),
        so that ``increase()`` sees their first event.

        The refresher calls it for every workload when it starts: made at the first scoring
        instead, 10,000 workloads' series took about 0.3 s of the interpreter lock in one
        refresh, a stall of the requests served beside it (``benchmarks/serving_latency.py``).
        The last error's gauge starts at NaN, no forecast scored yet: at 0 it would read as a
        perfect forecast, and a comparison with NaN never fires an alert.
        """
        self.refused_values.labels(workload)
        self._accuracy_of(workload)[3].set(math.nan)

    def _accuracy_of(self, workload: str) -> tuple[Any, Any, Any, Any]:
        """``workload``'s absolute error, pinball loss, covered count and last error."""
        if workload not in self._accuracy:
            self._accuracy[workload] = (
                self.abs_error.labels(workload),
                self.pinball.labels(workload),
                self.covered.labels(workload),
                self.last_abs_error.labels(workload),
            )
        return self._accuracy[workload]

    def score_many(
        self,
        workloads: Sequence[str],
        predicted: Sequence[float],
        actual: Sequence[float],
        quantiles: Sequence[float],
    ) -> None:
        """Record forecasts against the demand that arrived at their target times: one entry
        per scored forecast, ``workloads[i]``'s ``predicted[i]`` at its ``quantiles[i]``.

        Errors and pinball losses are computed over all of them at once, and each
        workload's series are looked up once per process: scored one by one (a loss of
        one-element arrays, four label look-ups), 10,000 took about 0.2 s of the interpreter
        lock in every refresh where they fell due, stalling the requests served beside it.
        """
        forecast = np.asarray(predicted, dtype=float)
        demand = np.asarray(actual, dtype=float)
        levels = np.asarray(quantiles, dtype=float)
        errors = np.abs(forecast - demand)
        losses = np.empty(len(forecast))
        for level in np.unique(levels):
            at = levels == level
            losses[at] = pinball_losses(demand[at], forecast[at], float(level))
        covered = demand <= forecast
        for i, workload in enumerate(workloads):
            abs_error, pinball, hits, last_error = self._accuracy_of(workload)
            abs_error.observe(errors[i])
            pinball.observe(losses[i])
            if covered[i]:
                hits.inc()
            last_error.set(errors[i])

    def set_model(self, name: str, version: str) -> None:
        """Point ``prewarm_model_info`` at the served version."""
        if self._model == (name, version):
            return
        if self._model is not None:
            self.model_info.remove(*self._model)
        self.model_info.labels(name, version).set(1)
        self._model = (name, version)


def configure_logging(level: str = "INFO") -> None:
    """Send every log record (uvicorn's and MLflow's included) to stderr as JSON lines.

    Called by the ``prewarm serve`` entry point only; library modules configure nothing.

    Parameters
    ----------
    level : str, default "INFO"
        Root log level name.
    """
    without_mlflow_handlers()
    handler = redacting(logging.StreamHandler(sys.stderr))
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", *MLFLOW_LOGGERS):
        library = logging.getLogger(name)
        library.handlers[:] = []
        library.propagate = True
        if name in MLFLOW_LOGGERS:
            # The model store's database set-up says nine lines at INFO on every start.
            library.setLevel("DEBUG" if level.upper() == "DEBUG" else "WARNING")
