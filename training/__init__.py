"""Training: sources of history, the retraining job, MLflow tracking and the model registry.

``__version__`` is the installed distribution's version, read here (the lowest layer that may
read package metadata) so that the runs training logs and the CLI (``prewarm``, which
re-exports it) report the same one.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prewarm")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
