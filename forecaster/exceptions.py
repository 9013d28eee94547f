"""Errors raised by the forecasting core.

Every message names the argument or column at fault and echoes the offending value, so a
user can fix the input without reading the code.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


class PrewarmError(Exception):
    """Base class of every error prewarm raises on purpose."""


class DataValidationError(PrewarmError, ValueError):
    """The input frame breaks the data contract (see :mod:`forecaster.frame`)."""


class ConfigError(PrewarmError, ValueError):
    """A parameter, feature declaration or duration is invalid."""


class PlanError(DataValidationError):
    """A capacity plan lacks columns or workloads, or holds a value no workload can run on."""


class NotEnoughHistoryError(DataValidationError):
    """A series is too short for the requested windows, lags or evaluation period."""


class UnknownNameError(ConfigError, KeyError):
    """A registry lookup failed; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


SHOWN_CHARS = 100
"""At most this many characters of any input value are echoed in an error message."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with a note of how long it was.

    Error messages echo the offending value; a bounded echo keeps a megabyte of bad input
    out of the terminal and the logs.

    Examples
    --------
    >>> shown("5m")
    "'5m'"
    >>> long = shown("x" * 500)
    >>> len(long), long[-16:]
    (100, 'x... (502 chars)')
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    suffix = f"... ({len(text)} chars)"
    return text[: max(limit - len(suffix), 1)] + suffix


def check_whole(name: str, value: object, least: int, most: int | None = None) -> None:
    """Raise :class:`ConfigError` naming parameter ``name`` unless ``value`` is a whole
    number (not a bool) in ``[least, most]``."""
    whole = isinstance(value, Integral) and not isinstance(value, bool)
    if not whole or value < least or (most is not None and value > most):  # type: ignore[operator]
        bound = f"in [{least}, {most:,}]" if most is not None else f">= {least}"
        raise ConfigError(f"`{name}` must be a whole number {bound}, got {shown(value)}")


def check_positive(name: str, value: object, least: float = 0.0, most: float = math.inf) -> None:
    """Raise :class:`ConfigError` naming parameter ``name`` unless ``value`` is a finite
    number (not a bool) above 0, or at least ``least`` when that is given, and at most
    ``most``."""
    number = isinstance(value, Real) and not isinstance(value, bool)
    above = number and (value >= least if least else value > 0)  # type: ignore[operator]
    if not (above and math.isfinite(value) and value <= most):  # type: ignore[arg-type,operator]
        bound = f">= {least:g}" if least else "> 0"
        upper = f" and <= {most:g}" if math.isfinite(most) else ""
        raise ConfigError(f"`{name}` must be a finite number {bound}{upper}, got {shown(value)}")
