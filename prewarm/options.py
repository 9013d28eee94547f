"""Option types and error handling shared by the subcommands."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from forecaster.duration import parse_duration
from forecaster.exceptions import PrewarmError


class Duration(click.ParamType):
    """``30s``, ``5m``, ``2h``, ``14d`` -> seconds; ``auto`` -> None when ``allow_auto``."""

    name = "duration"

    def __init__(self, allow_auto: bool = False) -> None:
        self.allow_auto = allow_auto

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, int):
            return value
        if self.allow_auto and str(value).lower() == "auto":
            return None
        label = f"--{param.name.replace('_', '-')}" if param and param.name else "duration"
        try:
            return parse_duration(value, name=label)
        except PrewarmError as exc:
            self.fail(str(exc), param, ctx)


def split_names(value: str | None) -> list[str] | None:
    """``"a,b, c"`` -> ``["a", "b", "c"]``."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn prewarm's errors into one clear line and a non-zero exit, without a traceback."""
    try:
        yield
    except PrewarmError as exc:
        raise click.ClickException(str(exc)) from exc


def console() -> Any:
    """A rich console for tables: the terminal's width, or 160 columns when piped so that a
    table written to a file or a CI log is not squeezed into 80 columns and truncated."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 160)


def progress_bar() -> Any:
    """A rich progress bar on stderr, so stdout stays clean for tables."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
