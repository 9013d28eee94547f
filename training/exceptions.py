"""Errors raised at training's I/O boundaries (files, Prometheus, MLflow)."""

from __future__ import annotations

from forecaster.exceptions import PrewarmError
from training.redaction import redact


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
    """The MLflow tracking or registry store could not be reached or refused a write.

    Its message is redacted where it is made: MLflow's errors quote the store's URI, which
    may hold a user's password (``http://user:password@mlflow:5000``), and every message
    built from one ends in a log, an error line or a served reply.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))
