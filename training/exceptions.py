"""Errors raised at training's I/O boundaries (files, Prometheus, MLflow)."""

from __future__ import annotations

from forecaster.exceptions import PrewarmError


class SourceError(PrewarmError):
    """A history source could not deliver data (unreadable file, server down, bad answer)."""


class HistoryFetchError(SourceError):
    """A query to a remote source failed; the message names the workload and the query."""


class NoSeriesError(HistoryFetchError):
    """A query answered, but with no series over the whole range (nothing recorded)."""


class HistoryValidationError(SourceError):
    """The history arrived but cannot train a model: too short, too gappy, flat or dead.

    It is a data failure like a failed fetch: retraining on the same data cannot succeed.
    """


class ModelLoadError(PrewarmError):
    """A registered model version could not be loaded, or failed its validation predict."""


class TrackingError(PrewarmError):
    """The MLflow tracking or registry store could not be reached or refused a write."""
