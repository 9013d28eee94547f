"""Human durations (``30s``, ``5m``, ``2h``, ``14d``) to seconds."""

from __future__ import annotations

import re

from forecaster.exceptions import ConfigError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str | int | float, *, name: str = "duration") -> int:
    """Return the number of whole seconds in ``text``.

    Parameters
    ----------
    text
        ``"30s"``, ``"5m"``, ``"2h"``, ``"14d"``, ``"1w"``, or a number of seconds.
    name
        The argument's name, used in the error message.

    Examples
    --------
    >>> parse_duration("5m")
    300
    >>> parse_duration(90)
    90
    """
    if isinstance(text, bool):
        raise ConfigError(f"`{name}` must be a duration such as 30s, 5m, 2h or 14d, got {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        match = _PATTERN.match(str(text))
        if match is None:
            raise ConfigError(
                f"`{name}` must be a duration such as 30s, 5m, 2h or 14d, got {text!r}"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0 or seconds != int(seconds):
        raise ConfigError(f"`{name}` must be a positive whole number of seconds, got {text!r}")
    return int(seconds)
