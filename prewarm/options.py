"""Option types and error handling shared by the subcommands."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from forecaster.duration import parse_duration
from forecaster.exceptions import PrewarmError
from training.logs import LOG_LEVELS

F = TypeVar("F", bound=Callable[..., Any])


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
        label = _flag(param, "duration")
        try:
            return parse_duration(value, name=label)
        except PrewarmError as exc:
            self.fail(str(exc), param, ctx)


class Durations(click.ParamType):
    """``5s,30s,5m`` -> ``(5, 30, 300)``: distinct durations, shortest first."""

    name = "durations"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, tuple):
            return value
        label = _flag(param, "durations")
        parts = split_names(str(value)) or []
        if not parts:
            self.fail(f"{label} needs at least one duration, got {str(value)[:80]!r}", param, ctx)
        try:
            return tuple(sorted({parse_duration(part, name=label) for part in parts}))
        except PrewarmError as exc:
            self.fail(str(exc), param, ctx)


class PositiveNumber(click.ParamType):
    """A finite number above 0: click's ``float`` and ``FloatRange`` let ``nan`` and ``inf``
    through, which no count of days or demand per replica is."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None:
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            label = _flag(param, "number")
            self.fail(f"{label} must be a finite number > 0, got {str(value)[:80]!r}", param, ctx)
        return number


class OutputFile(click.ParamType):
    """A file a command will write, checked before any work: not a folder, and in a folder
    that exists and can be written or can be made (a report lost to a typo after an hour of
    backtesting is the failure this prevents)."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, Path):
            return value
        path = Path(value)
        label = _flag(param, "file")
        if path.is_dir():
            self.fail(f"{label} {str(value)[:120]!r} is a folder, not a file", param, ctx)
        _check_writable(self, path, label, param, ctx)
        return path


class OutputFolder(click.Path):
    """A folder a command writes into, checked before any work: an empty value (an unset shell
    variable) is refused, not taken for the working directory (a repository's, say, where
    files would land), and so is one that could not be made (under a file) or written."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        label = _flag(param, "folder")
        if isinstance(value, str) and not value.strip():
            self.fail(f"{label} names no folder, got {value!r}", param, ctx)
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        _check_writable(self, path, label, param, ctx)
        return path


def _check_writable(
    kind: click.ParamType,
    path: Path,
    label: str,
    param: click.Parameter | None,
    ctx: click.Context | None,
) -> None:
    """Fail unless ``path`` can be written, or made and written: its nearest existing folder
    is a folder (not a file), and the path (or that folder) is writable."""
    folder = next((p for p in path.absolute().parents if p.exists()), Path("/"))
    if not path.exists() and not folder.is_dir():
        kind.fail(f"{label} {str(path)[:120]!r}: {str(folder)!r} is a file", param, ctx)
    if not os.access(path if path.exists() else folder, os.W_OK):
        kind.fail(f"{label} {str(path)[:120]!r} cannot be written here", param, ctx)


SEED = click.IntRange(0, 2**31 - 1)
"""A random seed: the boosting libraries take a 32-bit signed one."""
PORT = click.IntRange(0, 65535)
"""A TCP port; 0 lets the system pick a free one."""


def _flag(param: click.Parameter | None, default: str) -> str:
    """The option's flag (``--cold-start``, as typed: ``--json`` stores ``json_path``) for
    an error message, else ``default``."""
    return param.opts[0] if param is not None and param.opts else default


def split_names(value: str | None) -> list[str] | None:
    """``"a,b, c"`` -> ``["a", "b", "c"]``."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def given_names(value: str | None, flag: str) -> list[str] | None:
    """:func:`split_names` of a flag that, when given, must name something: an empty list
    (an unset shell variable) is a usage error, not the default.

    >>> given_names(None, "--models"), given_names("a, b", "--models")
    (None, ['a', 'b'])
    """
    names = split_names(value)
    if names == []:
        raise click.UsageError(f"`{flag}` names nothing, got {str(value)[:80]!r}")
    return names


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn prewarm's errors into one clear line and the exit code of their kind (see
    :mod:`prewarm.exit_codes`), without a traceback."""
    from prewarm.exit_codes import exit_code, fail

    try:
        yield
    except PrewarmError as exc:
        fail(str(exc), exit_code(exc))


def console() -> Any:
    """A rich console on stdout. In a terminal, text wraps at its width and tables split to
    fit it (see :mod:`prewarm.tables`); piped or written to a file, no line is wrapped or
    cut whatever the width, and tables print as Markdown."""
    from rich.console import Console

    return Console(soft_wrap=not sys.stdout.isatty())


def progress_bar() -> Any:
    """A rich progress bar on stderr, so stdout stays clean for tables.

    It draws on the console that prewarm's logs print through (see :func:`configure_logging`):
    rich then prints each record above the live bar, where two writers of one terminal
    would run a log line into the bar's line.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from training.logs import log_console

    terminal = log_console() or Console(stderr=True)
    if not terminal.is_terminal:
        return LoggedProgress()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=terminal,
        transient=True,
    )


PROGRESS_LOGGER = "prewarm.progress"
"""Where :class:`LoggedProgress` logs, at INFO."""


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0
    said: int | None = None  # the tenth of the total last logged


class LoggedProgress:
    """:func:`progress_bar` where stderr is not a terminal (a CI job, a pipe to a file): a bar
    draws nothing there until the work is done, so each task is logged (``prewarm.progress``,
    at INFO) when it starts or is renamed, at each tenth of its total, and at its end: a
    bounded number of lines however many steps it has.
    """

    def __init__(self) -> None:
        self._tasks: list[_Task] = []
        self._log = logging.getLogger(PROGRESS_LOGGER)

    def __enter__(self) -> LoggedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        self._tasks.append(_Task(description, total))
        self._say(self._tasks[-1])
        return len(self._tasks) - 1

    def update(
        self,
        task_id: int,
        *,
        description: str | None = None,
        completed: float | None = None,
        total: float | None = None,
        **_: Any,
    ) -> None:
        task = self._tasks[task_id]
        if description is not None and description != task.description:
            task.description, task.said = description, None
        task.total = task.total if total is None else total
        task.completed = task.completed if completed is None else completed
        self._say(task)

    def _say(self, task: _Task) -> None:
        tenth = int(10 * task.completed // task.total) if task.total else 0
        if task.said is not None and tenth <= task.said:
            return
        task.said = tenth
        # A task with no total yet is said once, when it starts or is renamed: "train: 0"
        # read as a count of nothing.
        counted = f"{task.completed:g}/{task.total:g}" if task.total else "started"
        self._log.info("%s: %s", task.description, counted)


Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``, as the pipelines report their stages."""


@contextmanager
def stage_progress(name: str, hidden: bool = False) -> Iterator[Progress | None]:
    """A :data:`Progress` callback drawing :func:`progress_bar`, or ``None`` when ``hidden``."""
    if hidden:
        yield None
        return
    with progress_bar() as bar:
        task = bar.add_task(name, total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        yield progress


def log_level_option(default: str) -> Callable[[F], F]:
    """``--log-level`` of a command that calls :func:`configure_logging` with it."""
    return click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default=default,
        show_default=True,
        help="Level of prewarm's logs (JSON lines when stderr is not a terminal); "
        "DEBUG also shows the libraries' warnings.",
    )


def config_option(help: str = "YAML configuration (see examples/).") -> Callable[[F], F]:
    """The required ``--config FILE`` of a command that reads a training config."""
    return click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help=help,
    )


def tracking_uri_option() -> Callable[[F], F]:
    """``--tracking-uri``, which wins over ``PREWARM_MLFLOW_TRACKING_URI`` and the config."""
    return click.option(
        "--tracking-uri",
        help="MLflow tracking URI; overrides PREWARM_MLFLOW_TRACKING_URI and the config "
        "(default sqlite:///mlflow.db).",
    )


def configure_logging(level: str) -> None:
    """A command's logs on stderr: readable lines on a terminal, above the bar of
    :func:`progress_bar`; JSON lines otherwise (a CronJob, a pipe), one record a line."""
    from rich.console import Console

    from training.logs import configure_logging as configure

    terminal = Console(stderr=True)
    configure(level, terminal if terminal.is_terminal else None)
    # Off a terminal the bar is log records (LoggedProgress): a command that keeps its logs to
    # WARNING for a quiet terminal, where the bar shows, would otherwise say nothing until done.
    logging.getLogger(PROGRESS_LOGGER).setLevel("ERROR" if level.upper() == "ERROR" else "INFO")
