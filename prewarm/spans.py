"""Scored spans: how much of a short trace to score, and how a report states a span."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
# Share of a short trace that is always left before the scored span (an 80/20 split).
HISTORY_SHARE = 0.8


def scored_span(total: float, preferred: float) -> float:
    """``preferred`` seconds, shortened on short data so that the history before the scored
    span keeps ``preferred`` seconds or 80% of the data, whichever is less.

    Parameters
    ----------
    total
        Seconds the data spans.
    preferred
        Seconds to score when the data is long enough.

    Examples
    --------
    >>> DAY = 86400
    >>> scored_span(14 * DAY, 3 * DAY) / DAY  # long enough: 3 days scored, 11 before
    3.0
    >>> scored_span(4 * DAY, 3 * DAY) / DAY  # 3 days of history kept, the last day scored
    1.0
    >>> scored_span(3600, 3 * DAY) / 60  # an hour: its last 20%
    12.0
    """
    history = min(preferred, HISTORY_SHARE * total)
    return min(preferred, total - history)


def duration_text(seconds: float) -> str:
    """``11d``, ``47m 20s``, ``1d 5m``: every non-zero unit, largest first.

    >>> duration_text(3 * 86400 + 300)
    '3d 5m'
    """
    left = round(seconds)
    parts = []
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"


def span_text(start: str | pd.Timestamp, end: str | pd.Timestamp) -> str:
    """``2023-11-16 19:01:20 to 2023-11-16 19:13:10 UTC (11m 50s)`` from two UTC instants
    (timestamps or the ISO-8601 text a JSON report holds)."""
    import pandas as pd

    first, last = pd.Timestamp(start), pd.Timestamp(end)
    fmt = "%Y-%m-%d %H:%M:%S" if first.second or last.second else "%Y-%m-%d %H:%M"
    seconds = (last - first).total_seconds()
    return f"{first.strftime(fmt)} to {last.strftime(fmt)} UTC ({duration_text(seconds)})"
