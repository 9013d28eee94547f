"""prewarm's command line: the composition root that wires forecaster, training and serving."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prewarm")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
