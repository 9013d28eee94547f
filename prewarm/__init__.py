"""prewarm's command line: the composition root that wires forecaster, training and serving."""

from __future__ import annotations

from training import __version__

__all__ = ["__version__"]
