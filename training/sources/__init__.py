"""The registry of history sources: one name, one factory taking the config section.

>>> sorted(SOURCES)
['file', 'prometheus', 'replay']
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forecaster.exceptions import ConfigError, UnknownNameError
from training.sources.base import Clock, FetchedHistory, HistorySource

SourceFactory = Callable[[Any, Clock | None], HistorySource]
"""Builds a source from its config section and the clock of the sources that read one."""


def _prometheus(settings: Any, clock: Clock | None) -> HistorySource:
    import pandas as pd

    from training.sources.prometheus import PrometheusConfig, PrometheusSource

    token = None
    if settings.bearer_token_file is not None:
        token = _read_secret(settings.bearer_token_file, "bearer_token_file")
    elif settings.bearer_token_env is not None:
        token = _env_secret(settings.bearer_token_env, "bearer_token_env")
    auth = None
    if settings.basic_auth is not None:
        basic = settings.basic_auth
        password = (
            _read_secret(basic.password_file, "basic_auth.password_file")
            if basic.password_file is not None
            else _env_secret(basic.password_env, "basic_auth.password_env")
        )
        auth = (basic.username, password)
    config = PrometheusConfig(settings, bearer_token=token, basic_auth=auth)
    end = None
    if settings.end:
        end = pd.Timestamp(settings.end)
        end = end.tz_localize("UTC") if end.tzinfo is None else end.tz_convert("UTC")
    return PrometheusSource(config, end=end, clock=clock)


def _file(settings: Any, clock: Clock | None) -> HistorySource:
    from training.sources.files import FileSource

    return FileSource(
        settings.path,
        files=settings.files,
        value_col=settings.value_col,
        step=settings.step,
        max_fill=settings.max_fill,
    )


def _replay(settings: Any, clock: Clock | None) -> HistorySource:
    from training.sources.files import ReplaySource

    return ReplaySource(
        settings.path,
        files=settings.files,
        value_col=settings.value_col,
        step=settings.step,
        max_fill=settings.max_fill,
        holdback=int(settings.holdback),
        clock=clock,
    )


SOURCES: dict[str, SourceFactory] = {
    "prometheus": _prometheus,
    "file": _file,
    "replay": _replay,
}


def make_source(name: str, settings: Any, *, clock: Clock | None = None) -> HistorySource:
    """Build the source ``name`` from its config section (``settings.type == name``).

    ``clock`` returns the current UTC time (default: the wall clock): where a replay puts its
    present, and where a Prometheus pull without a configured ``end`` ends. A fixed clock
    makes their windows reproducible; file sources read none.

    Raises
    ------
    UnknownNameError
        Listing the registered source names.
    """
    try:
        factory = SOURCES[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown source {name!r}; registered sources: {', '.join(sorted(SOURCES))}"
        ) from None
    return factory(settings, clock)


def _read_secret(path: Path, field: str) -> str:
    from training.sources.files import read_small  # pandas: only when a secret is read

    try:
        return read_small(path).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"`{field}` {str(path)!r} cannot be read: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"`{field}` {str(path)!r} cannot be read: {exc.strerror}") from exc


def _env_secret(name: str, field: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"`{field}` names environment variable {name!r}, which is not set")
    return value


__all__ = ["SOURCES", "FetchedHistory", "HistorySource", "SourceFactory", "make_source"]
