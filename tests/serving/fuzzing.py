"""A live server for the fuzz tests, and the server log they check for tracebacks."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    fit_planner,
    free_port,
    history,
    refresh_config,
    running,
    specs,
    wait_until,
)

LEVELS = {"chat": 40.0, "embed": 7.0}
TOKEN = "fuzz-s3cret"


class ServerLog(logging.Handler):
    """Every record the process logs at WARNING or above, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def problems(self) -> list[str]:
        """Lines that carry a traceback or report a failed request."""
        return [
            line
            for line in self.lines
            if "Traceback" in line or "request failed" in line or "Exception in ASGI" in line
        ]


@dataclass
class Live:
    app: Any
    base: str
    log: ServerLog
    statuses: list[int] = field(default_factory=list)


def make_app() -> Any:
    """The app, not started: two workloads with fresh data, a bearer token required."""
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    settings = ServingSettings(port=free_port(), grpc_port=None, token=TOKEN)
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    app.state.settings = settings
    return app


@contextmanager
def live_server(app: Any) -> Iterator[Live]:
    """Run ``app`` (from :func:`make_app`) over uvicorn until its forecasts are served; its
    log captured."""
    settings = app.state.settings
    log = ServerLog()
    root = logging.getLogger()
    root.addHandler(log)
    try:
        with running(app, lambda a: uvicorn_config(a, settings)):
            runtime = app.state.runtime
            wait_until(lambda: all(s.forecast for s in runtime.store.current.states.values()))
            yield Live(app, f"http://127.0.0.1:{settings.port}", log)
    finally:
        root.removeHandler(log)
