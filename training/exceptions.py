"""Errors raised at training's I/O boundaries (files, Prometheus, MLflow)."""

from __future__ import annotations

from forecaster.exceptions import PrewarmError


class SourceError(PrewarmError):
    """A history source could not deliver data (unreadable file, server down, bad answer)."""


class HistoryFetchError(SourceError):
    """A query to a remote source failed; the message names the workload and the query."""
