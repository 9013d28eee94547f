"""Fixtures shared by every test package."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from prewarm.options import PROGRESS_LOGGER
from training.logs import LIBRARIES, PACKAGES


@pytest.fixture
def isolated_logging() -> Iterator[None]:
    """Undo what a command's logging setup does to the process-wide loggers, so that later
    tests do not log through a handler bound to a finished test's output."""
    loggers = [logging.getLogger(name) for name in (*PACKAGES, *LIBRARIES, PROGRESS_LOGGER)]
    saved = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    # A command run earlier in this process may have left warnings captured through a hook
    # that pytest has since replaced: start from scratch.
    logging.captureWarnings(False)
    yield
    logging.captureWarnings(False)
    for logger, handlers, level, propagate in saved:
        logger.handlers = handlers
        logger.setLevel(level)
        logger.propagate = propagate
