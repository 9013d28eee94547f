"""The exit codes of every ``prewarm`` command, and which error ends in which.

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      success
1      unexpected failure: the MLflow store, a model that does not load, a file
       that cannot be written, a bug
2      configuration or usage error: the config file, a flag or a name (the
       message names the field and the value)
3      data or source error: the history cannot be read or fetched, or holds
       values that cannot be right (the message names the row or the query)
4      trained and registered, but not promoted (``prewarm train`` only)
=====  ==========================================================================
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import IntEnum
from typing import NoReturn

import click

from forecaster.exceptions import ConfigError, DataValidationError, PrewarmError
from training.exceptions import SourceError
from training.redaction import redact


class ExitCode(IntEnum):
    """A ``prewarm`` command's exit status."""

    OK = 0
    FAILURE = 1
    CONFIG = 2
    DATA = 3
    NOT_PROMOTED = 4


# First match wins: a subclass listed before its base would be shadowed otherwise.
ERROR_CODES: tuple[tuple[type[PrewarmError], ExitCode], ...] = (
    (ConfigError, ExitCode.CONFIG),
    (SourceError, ExitCode.DATA),
    (DataValidationError, ExitCode.DATA),
)

SUMMARY: Mapping[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.FAILURE: "unexpected failure (MLflow store, model loading, writing a file)",
    ExitCode.CONFIG: "bad configuration, flag or name",
    ExitCode.DATA: "data or source error (unreadable, unreachable, or values out of range)",
}


def exit_code(error: PrewarmError) -> ExitCode:
    """The code a command exits with when ``error`` ends it.

    Examples
    --------
    >>> exit_code(ConfigError("`step` must be positive, got -1"))
    <ExitCode.CONFIG: 2>
    >>> exit_code(SourceError("data file 'x.csv' does not exist"))
    <ExitCode.DATA: 3>
    """
    return next((code for kind, code in ERROR_CODES if isinstance(error, kind)), ExitCode.FAILURE)


def fail(message: str, code: ExitCode) -> NoReturn:
    """Print ``Error: message`` on stderr, without credentials, and exit with ``code``."""
    click.echo(f"Error: {redact(message)}", err=True)
    sys.exit(int(code))


def epilog(**meanings: str) -> str:
    """A command's ``--help`` epilog: the codes it can exit with, each with what it means there.

    ``meanings`` are keyed by :class:`ExitCode` member names (``OK="report written"``);
    a code not given keeps its :data:`SUMMARY` text, and ``NOT_PROMOTED`` is listed only
    when given.

    Examples
    --------
    >>> print(epilog(OK="manifests written").splitlines()[1])
    Exit codes:
    """
    lines = ["\b", "Exit codes:"]
    for code in ExitCode:
        text = meanings.get(code.name, SUMMARY.get(code))
        if text is not None:
            lines.append(f"  {int(code)}  {text}")
    return "\n".join(lines)
