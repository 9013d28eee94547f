"""Environment settings of the training package (``PREWARM_`` prefix).

Read when :class:`Settings` is instantiated, never at import.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
"""MLflow's own embedded default: a SQLite file in the working directory."""


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
    """The tracking URI: the flag, else the environment, else the config, else the default."""
    if flag:
        return flag
    settings = settings if settings is not None else Settings()
    return settings.mlflow_tracking_uri or configured or DEFAULT_TRACKING_URI
