"""Environment settings of the training package (``PREWARM_`` prefix).

Read when :class:`Settings` is instantiated, never at import.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from forecaster.exceptions import ConfigError
from training.redaction import redact

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
"""MLflow's own embedded default: a SQLite file in the working directory."""

STORE_SCHEMES = frozenset(
    [
        "file",
        "sqlite",
        "postgresql",
        "mysql",
        "mssql",
        "http",
        "https",
        "databricks",
        "databricks-uc",
        "uc",
    ]
)
"""The URI schemes MLflow keeps runs and models under (a database's may name its driver:
``postgresql+psycopg2``); a plain path is a ``file`` store."""


class Settings(BaseSettings):
    """Overrides from the environment.

    ``PREWARM_MLFLOW_TRACKING_URI`` overrides the config file's ``mlflow.tracking_uri``;
    ``--tracking-uri`` overrides both.
    """

    model_config = SettingsConfigDict(env_prefix="PREWARM_", extra="ignore")

    mlflow_tracking_uri: str | None = Field(
        default=None, description="MLflow tracking (and registry) URI, e.g. sqlite:///mlflow.db."
    )


def resolve_tracking_uri(
    flag: str | None = None, configured: str | None = None, settings: Settings | None = None
) -> str:
    """The tracking URI: the flag, else the environment, else the config, else the default.

    Raises
    ------
    ConfigError
        Its scheme is none MLflow stores by (``ftp://``, a misspelt ``postgres://``): the
        message names where the URI came from and shows it without its credentials.
    """
    settings = settings if settings is not None else Settings()
    for where, uri in (
        ("--tracking-uri", flag),
        ("PREWARM_MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri),
        ("mlflow.tracking_uri", configured),
    ):
        if uri:
            return _store_uri(where, uri)
    return DEFAULT_TRACKING_URI


def _store_uri(where: str, uri: str) -> str:
    scheme = urlsplit(uri).scheme.lower()
    if scheme and scheme.split("+")[0] not in STORE_SCHEMES:
        raise ConfigError(
            f"`{where}` has scheme {scheme!r}, which MLflow keeps no store under, in "
            f"{redact(uri)[:200]!r}; expected one of {', '.join(sorted(STORE_SCHEMES))} "
            "(a database's may name its driver: postgresql+psycopg2://), or a folder's path"
        )
    problem = _not_a_sqlite_store(uri)
    if problem:
        raise ConfigError(f"`{where}` {redact(uri)[:200]!r}: {problem}")
    return uri


_SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file (an empty file is an empty database)."""


def _not_a_sqlite_store(uri: str) -> str | None:
    """Why the existing file of a SQLite URI cannot be an MLflow store, or None.

    MLflow would open it and fail on its first query with a multi-line SQL error, after the
    command had pulled its history; a served registry would answer every workload with it.
    """
    path = _sqlite_path(uri)
    if path is None or not path.exists():
        return None
    if path.is_dir():
        return "is a folder, not a SQLite database file"
    try:
        with path.open("rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if head and head != _SQLITE_HEADER:
        # Its bytes are not shown: a path mistyped onto a token or key file would echo it.
        return "is not a SQLite database (it has no SQLite header)"
    return None


_SQLITE_PREFIX = "sqlite:///"


def missing_sqlite_store(tracking_uri: str) -> Path | None:
    """The file of a SQLite tracking URI when it does not exist, else None (not SQLite, an
    in-memory database, or the file is there).

    Opening a missing SQLite store creates it, folders included, empty: a command that only
    reads a registered model checks this first, so a misspelt path is named as such instead
    of reported as a store with nothing registered yet.

    Examples
    --------
    >>> missing_sqlite_store("sqlite:////nonexistent/folder/mlflow.db")
    PosixPath('/nonexistent/folder/mlflow.db')
    >>> missing_sqlite_store("postgresql://db/mlflow") is None
    True
    """
    path = _sqlite_path(tracking_uri)
    return None if path is None or path.exists() else path


def require_store(tracking_uri: str, reader: str) -> None:
    """Refuse a SQLite store that does not exist before ``reader`` (the command, as a user
    reads it) opens it: opening would create it, folders and all, and report "no champion"
    ever after.

    Raises
    ------
    ConfigError
        Naming the missing file and the (redacted) URI.
    """
    missing = missing_sqlite_store(tracking_uri)
    if missing is not None:
        raise ConfigError(
            f"the MLflow store {str(missing)!r} of tracking URI {redact(tracking_uri)!r} does "
            f"not exist: {reader} reads the champion registered there and creates no store "
            "(check the path, or run `prewarm train` first)"
        )


def _sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a SQLite tracking URI; None when not SQLite or in memory."""
    if not tracking_uri.startswith(_SQLITE_PREFIX):
        return None
    # SQLAlchemy's URL: the path, then optional ?query parameters (mode=ro...).
    path = tracking_uri[len(_SQLITE_PREFIX) :].partition("?")[0]
    return None if path in ("", ":memory:") else Path(path)
