"""Load a registered prewarm model for serving, validated before it is handed out.

Serving codes against exactly these names::

    version = champion_version("prewarm-forecaster")          # "3", or None without one
    loaded = load_champion("prewarm-forecaster")              # LoadedModel[PrewarmModel]
    plan = loaded.model.plan(recent_history)                  # forecaster.capacity columns

A model that cannot be loaded, or whose prediction on its own stored input example (the
recent history of up to ``mlflow.example_workloads`` of its workloads) is missing columns,
not finite or negative, raises :class:`~training.exceptions.ModelLoadError`
so the caller keeps the last good model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import pandas as pd

from forecaster.capacity import check_plan
from forecaster.exceptions import PlanError
from forecaster.workload import WorkloadPolicy
from training.exceptions import ModelLoadError, TrackingError
from training.settings import resolve_tracking_uri

logger = logging.getLogger(__name__)

CHAMPION = "champion"
"""The registry alias of the model in service."""

if TYPE_CHECKING:  # mlflow stays out of import time
    from mlflow import MlflowClient

    from training.pyfunc import PrewarmModel


class PlanningModel(Protocol):
    """What planning needs from a trained model (:class:`~training.pyfunc.PrewarmModel` is one;
    serving's tests plan with others)."""

    @property
    def workloads(self) -> Sequence[str]:
        """Workloads the model was trained for and holds capacity specs of."""
        ...

    @property
    def policies(self) -> Mapping[str, WorkloadPolicy]:
        """Workload -> the policy registered with the model: what its plan follows."""
        ...

    @property
    def step(self) -> int:
        """Grid step of the history it expects, in seconds."""
        ...

    @property
    def history_cells_needed(self) -> int:
        """Cells of recent history one plan needs per workload."""
        ...

    def plan(self, history: pd.DataFrame) -> pd.DataFrame:
        """Plan every workload of ``history`` at its last cell (see ``PLAN_COLUMNS``)."""
        ...


ModelT = TypeVar("ModelT", bound=PlanningModel, covariant=True)
"""The kind of model a :class:`LoadedModel` holds."""


@dataclass(frozen=True)
class LoadedModel(Generic[ModelT]):
    """A registered model version: the model plus the name and version it was registered as.

    Attributes
    ----------
    name, version
        Registered model name and version (a string, as MLflow spells it).
    model
        The model: the unwrapped :class:`~training.pyfunc.PrewarmModel` when read from the
        registry (``plan(history)``, ``workloads``, ``step``, ``history_cells_needed``).
    run_id
        The MLflow run that produced it, when known.
    """

    name: str
    version: str
    model: ModelT
    run_id: str | None = None

    @property
    def workloads(self) -> Sequence[str]:
        """Workloads the model plans for."""
        return self.model.workloads

    @property
    def step(self) -> int:
        """Grid step of the history the model expects (seconds)."""
        return self.model.step

    @property
    def history_cells_needed(self) -> int:
        """Cells of recent history per workload the model reads."""
        return self.model.history_cells_needed

    def plan(self, history: pd.DataFrame) -> pd.DataFrame:
        """``model.plan(history)``: desired replicas now, one row per workload."""
        return self.model.plan(history)


def _client(tracking_uri: str | None) -> MlflowClient:
    from training.store import store_client

    return store_client(resolve_tracking_uri(tracking_uri))


def champion_version(name: str, tracking_uri: str | None = None) -> str | None:
    """Version the ``champion`` alias of ``name`` points at, or ``None`` when unset.

    Raises
    ------
    TrackingError
        The registry could not be read (other than "no such model or alias").
    """
    from mlflow.exceptions import MlflowException

    client = _client(tracking_uri)
    try:
        version = client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return None
        raise TrackingError(f"cannot read alias {CHAMPION!r} of model {name!r}: {exc}") from exc
    return str(version.version)


def load_model_version(
    name: str, version: str, tracking_uri: str | None = None
) -> LoadedModel[PrewarmModel]:
    """Load version ``version`` of ``name`` and validate it on its stored input example.

    Raises
    ------
    ModelLoadError
        The version cannot be loaded, is not a prewarm model, or fails validation.
    """
    import mlflow.pyfunc

    from training.pyfunc import PrewarmModel

    uri = resolve_tracking_uri(tracking_uri)
    label = f"model {name!r} version {version}"
    try:
        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)
        pyfunc = mlflow.pyfunc.load_model(f"models:/{name}/{version}")
        python_model = pyfunc.unwrap_python_model()
        example = pyfunc.input_example
    except Exception as exc:  # anything from unpickling to a missing artifact
        raise ModelLoadError(f"cannot load {label} from {uri}: {exc}") from exc
    if not isinstance(python_model, PrewarmModel):
        raise ModelLoadError(f"{label} is a {type(python_model).__name__}, not a PrewarmModel")
    if not isinstance(getattr(python_model, "policies", None), dict):
        # Versions registered before policies travelled with the model carry bare specs:
        # serving them would plan with settings nobody can check against the config.
        raise ModelLoadError(
            f"{label} was registered without workload policies: retrain it (`prewarm train`)"
        )
    if not isinstance(example, pd.DataFrame) or example.empty:
        raise ModelLoadError(f"{label} has no stored input example to validate it with")
    validate_model(python_model, example, label)
    run_id = getattr(pyfunc.metadata, "run_id", None)
    logger.info("loaded %s", label, extra={"model_version": str(version)})
    return LoadedModel(name=name, version=str(version), model=python_model, run_id=run_id)


def load_champion(name: str, tracking_uri: str | None = None) -> LoadedModel[PrewarmModel]:
    """Load and validate the version the ``champion`` alias of ``name`` points at.

    Raises
    ------
    ModelLoadError
        No champion is set, or it fails to load or validate.
    """
    version = champion_version(name, tracking_uri)
    if version is None:
        raise ModelLoadError(f"model {name!r} has no {CHAMPION!r} alias yet: run `prewarm train`")
    return load_model_version(name, version, tracking_uri)


def validate_model(model: PrewarmModel, example: pd.DataFrame, label: str = "model") -> None:
    """Plan on ``example`` and check the answer's shape and values.

    Raises
    ------
    ModelLoadError
        Missing columns, a workload without a row, non-finite or negative numbers, or
        replicas outside a workload's bounds.
    """
    from training.pyfunc import _as_history

    try:
        plan = model.plan(_as_history(example))
    except Exception as exc:  # a model that cannot predict is unusable whatever the reason
        raise ModelLoadError(f"{label} failed to predict on its input example: {exc}") from exc
    try:
        check_plan(plan, sorted(set(example["series"].astype(str))), model.policies)
    except PlanError as exc:
        raise ModelLoadError(f"{label}: {exc}") from exc
