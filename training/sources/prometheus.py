"""Demand history from a Prometheus server, one range query per workload.

Each workload is described by one PromQL query that must return **exactly one series**
(aggregate with ``sum(...)`` or ``avg(...)``). The source evaluates it with
``/api/v1/query_range`` through prometheus-api-client on a regular grid of ``step`` seconds
and returns the project's long frame: one row per (``series``, ``timestamp``), ``timestamp``
tz-aware UTC, ``value`` float with ``NaN`` where Prometheus had no point.

Writing counter queries that survive restarts
---------------------------------------------
Request counters (``vllm:request_success_total``, Triton's ``nv_inference_request_success``)
drop to zero whenever a pod restarts. Always turn them into a rate *inside PromQL*, and
apply ``rate`` before aggregating::

    sum(rate(vllm:request_success_total{model_name="m"}[5m]))        # requests per second
    sum(increase(nv_inference_request_success{model="m"}[1m]))       # requests per minute

``rate()`` and ``increase()`` treat any decrease as a reset and compensate for it. Never pull
the raw counter and difference it in pandas, and never write ``rate(sum(x)[5m])``: both turn
every restart into a large negative spike or hide it. Make the range window at least four
scrape intervals long so each window holds enough samples.

Time grid and chunking
----------------------
``start`` and ``end`` must be tz-aware; they are converted to UTC and aligned to multiples
of ``step`` since the Unix epoch (``start`` rounded up, ``end`` rounded down), so every
workload and every run share one grid. Prometheus rejects a request with more than 11,000
points per series, so a long range is split into chunks of at most
``max_points_per_request - point_margin`` grid points. Consecutive chunks start one step
after the previous one ends, so no grid point is fetched twice or skipped.

Missing data
------------
Prometheus leaves a grid point out when no sample is newer than its lookback delta (5
minutes by default), so gaps shorter than that are bridged with the last sample, and longer
ones come back as absent points. The source never fills them: they stay ``NaN`` and every
contiguous run is listed in a :class:`SeriesReport` (and logged as a warning). A query that
returns no series at all over the whole range raises :class:`HistoryFetchError`, because that
almost always means a wrong metric name or label.

Covariates
----------
Optional covariate queries (GPU utilisation, queue depth...) are returned as **extra
columns** of the same long frame, named after the covariate, on the same grid. This is the
layout exogenous-feature libraries expect and needs no second join. A workload that does not
declare a covariate other workloads declare gets ``NaN`` in that column.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, shown
from training.exceptions import HistoryFetchError, NoSeriesError
from training.redaction import redact
from training.sources.base import Clock, FetchedHistory, TimeLike, wall_clock
from training.sources.prometheus_config import PrometheusConfig
from training.sources.ranges import SeriesReport, TimeRange, missing_ranges, plan_chunks

__all__ = [
    "PrometheusConfig",
    "PrometheusSource",
    "SeriesReport",
    "TimeRange",
    "plan_chunks",
]

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_RESERVED_COLUMNS = frozenset({"series", "timestamp", "value"})


class _AttemptError(Exception):
    """One failed request; ``retryable`` tells whether another attempt may succeed."""

    def __init__(self, cause: str, *, retryable: bool) -> None:
        super().__init__(cause)
        self.retryable = retryable


class PrometheusSource:
    """Pull workload histories from Prometheus with chunked range queries.

    Parameters
    ----------
    config
        Server address, credentials, timeouts and limits.
    end
        Where a pull's window ends (the config's ``end``); ``None``: now, by ``clock``.
    clock
        Returns the current UTC time (default: the wall clock).

    Examples
    --------
    >>> from training.config import PrometheusSourceConfig
    >>> settings = PrometheusSourceConfig(type="prometheus", url="http://127.0.0.1:9090")
    >>> source = PrometheusSource(PrometheusConfig(settings))
    >>> history = source.fetch(  # doctest: +SKIP
    ...     {"chat": 'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))'},
    ...     start=pd.Timestamp("2025-05-01", tz="UTC"),
    ...     end=pd.Timestamp("2025-05-08", tz="UTC"),
    ...     step="1m",
    ...     covariates={"chat": {"gpu_util": 'avg(DCGM_FI_DEV_GPU_UTIL{pod=~"chat-.*"})'}},
    ... )
    >>> history.frame.columns.tolist()  # doctest: +SKIP
    ['series', 'timestamp', 'value', 'gpu_util']

    The source holds an HTTP session; use it as a context manager or call :meth:`close`.
    It is not safe to share one instance between threads.
    """

    name: ClassVar[str] = "prometheus"

    def __init__(
        self,
        config: PrometheusConfig,
        end: pd.Timestamp | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.end = end
        self.clock = clock or wall_clock
        self._client: PrometheusConnect | None = None
        self._last_response: requests.Response | None = None

    def window(
        self, step: int | None, lookback: int | None
    ) -> tuple[pd.Timestamp, pd.Timestamp, int]:
        """``lookback`` seconds up to :attr:`end` (default: now, on the grid of ``step``)."""
        if step is None or lookback is None:
            raise ConfigError(
                f"a Prometheus pull needs `step` and `lookback`, got {step!r} and {lookback!r}"
            )
        end = self.clock().floor(f"{step}s") if self.end is None else self.end
        return end - pd.Timedelta(seconds=lookback), end, step

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the HTTP session; the next fetch opens a new one."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: int | str,
        *,
        covariates: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FetchedHistory:
        """Evaluate one query per workload (and its covariates) over ``[start, end]``.

        Parameters
        ----------
        queries
            ``{workload: promql}``; each query must return one series over the range.
        start, end
            Tz-aware bounds, aligned inward to multiples of ``step`` (see module docs).
        step
            Grid step: seconds or a duration such as ``"1m"``.
        covariates
            ``{workload: {column: promql}}``; each becomes a column of the frame.

        Returns
        -------
        FetchedHistory
            The long frame and one report per query listing its missing ranges.

        Raises
        ------
        HistoryFetchError
            A request failed after its retries, the answer was malformed, or a query
            returned no series or more than one; the message names workload and query.
        ConfigError
            Bad arguments (naive datetimes, empty range, reserved covariate name...).
        """
        step_s = parse_duration(step, name="step")
        first, last = _grid_bounds(start, end, step_s)
        covariates = covariates or {}
        if not queries:
            raise ConfigError("`queries` must name at least one workload, got {}")
        unknown = sorted(set(covariates) - set(queries))
        if unknown:
            raise ConfigError(f"`covariates` names workloads without a query: {unknown}")
        columns: list[str] = []
        for extra in covariates.values():
            for column in extra:
                if column in _RESERVED_COLUMNS:
                    raise ConfigError(
                        f"covariate name {column!r} is reserved, pick another than "
                        f"{sorted(_RESERVED_COLUMNS)}"
                    )
                if column not in columns:
                    columns.append(column)

        grid = np.arange(first, last + 1, step_s, dtype=np.int64)
        timestamps = pd.to_datetime(grid, unit="s", utc=True)
        frames = []
        reports = []
        for workload, query in queries.items():
            data: dict[str, Any] = {"series": workload, "timestamp": timestamps}
            wanted = {"value": query, **covariates.get(workload, {})}
            for column in ["value", *columns]:
                if column not in wanted:
                    data[column] = np.full(len(grid), np.nan)
                    continue
                values, report = self._fetch_one(
                    workload, column, wanted[column], grid, step_s, timestamps
                )
                data[column] = values
                reports.append(report)
            frames.append(pd.DataFrame(data))
        frame = pd.concat(frames, ignore_index=True)
        return FetchedHistory(
            frame=frame,
            reports=tuple(reports),
            start=timestamps[0],
            end=timestamps[-1],
            step=step_s,
        )

    def _fetch_one(
        self,
        workload: str,
        column: str,
        query: str,
        grid: np.ndarray,
        step: int,
        timestamps: pd.DatetimeIndex,
    ) -> tuple[np.ndarray, SeriesReport]:
        label = workload if column == "value" else f"{workload} (covariate {column!r})"
        first = int(grid[0])
        values = np.full(len(grid), np.nan)
        chunks = plan_chunks(first, int(grid[-1]), step, self.config.points_per_chunk)
        seen_series = False
        non_finite = 0
        for chunk_start, chunk_end in chunks:
            result = self._request(label, query, chunk_start, chunk_end, step)
            samples = _single_series(label, query, result, self._where(chunk_start, chunk_end))
            if samples is None:
                continue
            seen_series = True
            for ts, value in samples:
                offset = ts - first
                if offset % step or not 0 <= offset // step < len(grid):
                    raise HistoryFetchError(
                        f"Prometheus answered a point off the requested grid for workload "
                        f"{label!r} (timestamp {ts}, grid {first} + k*{step}). "
                        f"Query: {shown(query)}"
                    )
                if math.isfinite(value):
                    values[offset // step] = value
                else:
                    non_finite += 1
        if not seen_series:
            raise NoSeriesError(
                f"Prometheus query for workload {label!r} returned no series between "
                f"{timestamps[0]} and {timestamps[-1]}: check the metric name, the label "
                f"matchers and the time range. Query: {shown(query)}"
            )
        missing = missing_ranges(values, timestamps)
        report = SeriesReport(
            workload=workload,
            column=column,
            query=query,
            expected_points=len(grid),
            received_points=int(np.isfinite(values).sum()),
            requests=len(chunks),
            missing=missing,
        )
        if missing:
            # Inf/NaN answers (e.g. 0/0 in the query) are reported like absent points:
            # neither is usable as demand, and the caller decides how to fill.
            logger.warning(
                "workload %r column %r: %d of %d points missing in %d ranges "
                "(%d non-finite values), first missing %s..%s",
                workload,
                column,
                report.expected_points - report.received_points,
                report.expected_points,
                len(missing),
                non_finite,
                missing[0].start,
                missing[0].end,
            )
        return values, report

    def _request(
        self, label: str, query: str, start: int, end: int, step: int
    ) -> list[dict[str, Any]]:
        attempts = self.config.settings.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._request_once(query, start, end, step)
            except _AttemptError as exc:
                cause = self._redact(str(exc))
                if not exc.retryable or attempt == attempts:
                    tried = f" after {attempt} attempts" if attempt > 1 else ""
                    # Not chained: the client's exception quotes the request URL, and a
                    # logged chain would carry the credentials this message leaves out.
                    raise HistoryFetchError(
                        f"Prometheus query for workload {label!r} failed{tried}: {cause}. "
                        f"Query: {shown(query)} ({self._where(start, end)}, step {step}s)"
                    ) from None
                settings = self.config.settings
                delay = min(settings.backoff_max, settings.backoff * 2 ** (attempt - 1))
                logger.warning(
                    "workload %r: attempt %d/%d failed (%s), retrying in %.2f s",
                    label,
                    attempt,
                    attempts,
                    cause,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _request_once(self, query: str, start: int, end: int, step: int) -> list[dict[str, Any]]:
        client = self._connect()
        timeout = self.config.settings.timeout
        self._last_response = None
        try:
            result = client.custom_query_range(
                query,
                start_time=datetime.fromtimestamp(start, tz=UTC),
                end_time=datetime.fromtimestamp(end, tz=UTC),
                step=str(step),
                timeout=timeout,
            )
        except requests.Timeout as exc:
            raise _AttemptError(
                f"no answer within the {timeout:g} s timeout", retryable=True
            ) from exc
        except requests.exceptions.JSONDecodeError as exc:
            raise _AttemptError(
                f"the answer is not valid JSON ({exc}); body starts with {self._body_head()!r}",
                retryable=False,
            ) from exc
        except requests.ConnectionError as exc:
            raise _AttemptError(
                f"cannot connect to {self.config.settings.url} ({_root_cause(exc)})", retryable=True
            ) from exc
        except PrometheusApiClientException as exc:
            status = self._last_response.status_code if self._last_response is not None else None
            raise _AttemptError(
                f"HTTP {status}: {self._error_detail()}", retryable=status in _RETRYABLE_STATUS
            ) from exc
        except requests.RequestException as exc:
            raise _AttemptError(f"request error: {exc}", retryable=False) from exc
        except (KeyError, TypeError) as exc:
            # The body was JSON but not a query_range answer (no data.result).
            raise _AttemptError(
                f"the answer is not a Prometheus query_range result (missing {exc}); body "
                f"starts with {self._body_head()!r}",
                retryable=False,
            ) from exc
        if not isinstance(result, list):
            raise _AttemptError(
                f"the answer's data.result is a {type(result).__name__}, not a list",
                retryable=False,
            )
        return result

    def _connect(self) -> PrometheusConnect:
        if self._client is None:
            config, settings = self.config, self.config.settings
            session = requests.Session()
            session.verify = (
                False
                if settings.insecure
                else str(settings.ca_bundle)
                if settings.ca_bundle
                else True
            )
            # Status codes must come back to us: the client's own retry adapter would turn
            # them into opaque RetryErrors, and we retry with our own backoff.
            session.hooks["response"].append(self._remember_response)
            headers = (
                {"Authorization": f"Bearer {config.bearer_token}"} if config.bearer_token else None
            )
            self._client = PrometheusConnect(
                url=settings.url.rstrip("/"),
                headers=headers,
                auth=config.basic_auth,
                session=session,
                retry=Retry(total=0, read=False),
                timeout=settings.timeout,
                method=settings.method,
            )
        return self._client

    def _redact(self, text: str) -> str:
        """``text`` without this server's credentials (see :func:`training.redaction.redact`)."""
        password = self.config.basic_auth[1] if self.config.basic_auth else None
        return redact(text, secrets=(self.config.bearer_token, password))

    def _remember_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last_response = response

    def _body_head(self) -> str:
        if self._last_response is None:
            return ""
        return self._last_response.text[:120]

    def _error_detail(self) -> str:
        response = self._last_response
        if response is None:
            return "no response"
        try:
            body = response.json()
            return f"{body['errorType']}: {body['error']}"
        except (ValueError, KeyError, TypeError):
            return f"{response.reason or ''} {response.text[:200]!r}".strip()

    @staticmethod
    def _where(start: int, end: int) -> str:
        return f"range {_iso(start)}..{_iso(end)}"


def _single_series(
    label: str, query: str, result: Sequence[Any], where: str
) -> list[tuple[int, float]] | None:
    """The samples of the only series in ``result``, or None when it holds none."""
    if not result:
        return None
    if len(result) > 1:
        labels = ", ".join(str(item.get("metric", {})) for item in result[:3])
        raise HistoryFetchError(
            f"Prometheus query for workload {label!r} returned {len(result)} series "
            f"({labels}{', ...' if len(result) > 3 else ''}) in {where}; a workload needs "
            f"exactly one: aggregate it, e.g. sum(...) or avg(...). Query: {shown(query)}"
        )
    item = result[0]
    try:
        if "histograms" in item and "values" not in item:
            raise HistoryFetchError(
                f"Prometheus query for workload {label!r} returned native histograms; "
                f"wrap it in histogram_quantile(), histogram_count() or rate(). "
                f"Query: {shown(query)}"
            )
        return [(round(float(ts)), float(value)) for ts, value in item["values"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise HistoryFetchError(
            f"Prometheus answered a malformed series for workload {label!r} ({exc!r}). "
            f"Query: {shown(query)}"
        ) from exc


def _grid_bounds(start: TimeLike, end: TimeLike, step: int) -> tuple[int, int]:
    seconds = []
    for name, value in (("start", start), ("end", end)):
        stamp = pd.Timestamp(value)
        if stamp.tzinfo is None:
            raise ConfigError(
                f"`{name}` must be tz-aware (a naive time is ambiguous), got {value!r}"
            )
        seconds.append(stamp.tz_convert("UTC").value / 1e9)
    first = math.ceil(seconds[0] / step) * step
    last = math.floor(seconds[1] / step) * step
    if last < first:
        raise ConfigError(
            f"`end` must leave at least one {step}s grid point after `start`, got "
            f"start={start!r}, end={end!r}"
        )
    return first, last


def _iso(seconds: int) -> str:
    return pd.Timestamp(seconds, unit="s", tz="UTC").isoformat()


def _root_cause(exc: BaseException) -> str:
    # requests wraps urllib3 wraps the OSError; the innermost message is the useful one.
    for _ in range(10):
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return str(exc) or type(exc).__name__
