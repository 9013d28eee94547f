"""MLflow plumbing: the store, the experiment, tags and the registry lookups of a run.

The default store is MLflow's embedded one, a SQLite file in the working directory
(``sqlite:///mlflow.db``), with artifacts in ``mlartifacts/`` beside it. Analysts browse it
with ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` (see docs/training.md).
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecaster.exceptions import ConfigError
from forecaster.workload import WorkloadPolicy
from training.exceptions import TrackingError

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.entities.model_registry import ModelVersion
    from mlflow.models import ModelSignature

logger = logging.getLogger(__name__)

TAG_DATA = "prewarm.data_fingerprint"
TAG_CONFIG = "prewarm.config_fingerprint"
TAG_VERDICT = "prewarm.gate"
POLICIES_ARTIFACT = "policies.json"
"""The run's artifact holding each workload's registered policy (``WorkloadPolicy.to_dict``)."""


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def run_name(started: datetime) -> str:
    """``train 2026-05-01 03:17 UTC``: when the run started, so runs sort and read by the
    night they ran (the window of data they used is in their params)."""
    return f"train {started.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def plan_signature(example: pd.DataFrame, output: pd.DataFrame) -> ModelSignature:
    """The pyfunc's signature, inferred from an input example and the plan it returns.

    MLflow warns about every integer column it infers, because a missing value would break
    schema enforcement of an *input*. The plan's integer column (replicas) is an output and
    always set: it is inferred as a float, so no warning, and then declared ``long``.
    """
    from mlflow.models import ModelSignature, infer_signature
    from mlflow.types import ColSpec, DataType, Schema

    integers = set(output.select_dtypes("integer").columns)
    inferred = infer_signature(example, output.astype(dict.fromkeys(integers, float)))
    assert inferred.outputs is not None
    outputs = Schema(
        [
            ColSpec(DataType.long, column.name, column.required)
            if column.name in integers
            else column
            for column in inferred.outputs.inputs
        ]
    )
    return ModelSignature(inferred.inputs, outputs)


def default_artifact_location(tracking_uri: str) -> str | None:
    """``mlartifacts/`` beside a SQLite store; ``None`` (the server decides) otherwise."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    database = Path(tracking_uri[len(prefix) :])
    return (database.resolve().parent / "mlartifacts").as_uri()


def open_store(
    tracking_uri: str, experiment: str, artifact_location: str | None = None
) -> tuple[MlflowClient, str]:
    """Point MLflow at ``tracking_uri`` and return a client and the experiment's id.

    The experiment is created on first use with ``artifact_location`` (default
    :func:`default_artifact_location`), so artifacts never land in a surprise folder.
    """
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_registry_uri(tracking_uri)
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            return client, found.experiment_id
        location = artifact_location or default_artifact_location(tracking_uri)
        return client, client.create_experiment(experiment, artifact_location=location)
    except MlflowException as exc:
        raise TrackingError(f"cannot open MLflow store {tracking_uri!r}: {exc}") from exc


def registered_versions(client: MlflowClient, name: str) -> list[ModelVersion]:
    """Every version of ``name`` (empty when the model is not registered yet)."""
    from mlflow.exceptions import MlflowException

    try:
        return list(client.search_model_versions(f"name = '{name}'"))
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return []
        raise TrackingError(f"cannot list versions of model {name!r}: {exc}") from exc


def same_version(
    versions: list[ModelVersion], data_fingerprint: str, config_fingerprint: str
) -> ModelVersion | None:
    """The newest version trained on the same data with the same configuration, if any."""
    matches = [
        v
        for v in versions
        if v.tags.get(TAG_DATA) == data_fingerprint and v.tags.get(TAG_CONFIG) == config_fingerprint
    ]
    return max(matches, key=lambda v: int(v.version), default=None)


def git_commit() -> str | None:
    """The commit of the working tree prewarm runs from, when it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def policy_params(policies: Mapping[str, WorkloadPolicy]) -> dict[str, str]:
    """``policy.<workload>.<field>`` -> value: each policy's fields and resolved settings
    (``quantile`` is the one planned with), so runs compare side by side in the MLflow UI."""
    params: dict[str, str] = {}
    for name, policy in sorted(policies.items()):
        base = f"policy.{name}."
        spec = policy.spec
        fields: dict[str, Any] = {
            **policy.settings(),
            "hold_seconds": policy.hold,
            "decision_delay_seconds": policy.decision_delay,
            "lead_seconds": policy.lead_seconds,
            "capacity_per_replica": spec.capacity_per_replica,
            "cold_start_seconds": spec.cold_start_model.planning_seconds,
            "replicas": f"{spec.min_replicas}..{spec.max_replicas}",
            "slo_unserved_fraction": spec.slo_unserved_fraction,
        }
        params.update({base + key: str(value) for key, value in fields.items()})
    return params


def log_policies(policies: Mapping[str, WorkloadPolicy]) -> None:
    """Record the policies in the active run: :data:`POLICIES_ARTIFACT` and their params."""
    import mlflow

    mlflow.log_dict(
        {name: policy.to_dict() for name, policy in sorted(policies.items())}, POLICIES_ARTIFACT
    )
    mlflow.log_params(policy_params(policies))


def registered_policies(client: MlflowClient, name: str, version: str) -> dict[str, WorkloadPolicy]:
    """The policies registered with version ``version`` of model ``name``.

    Raises
    ------
    TrackingError
        The version or its :data:`POLICIES_ARTIFACT` cannot be read, or the artifact does
        not hold valid policies.
    """
    from mlflow.exceptions import MlflowException

    label = f"{POLICIES_ARTIFACT} of model {name!r} version {version}"
    try:
        run_id = client.get_model_version(name, version).run_id
        if run_id is None:
            raise TrackingError(f"cannot read {label}: the version has no run")
        with tempfile.TemporaryDirectory() as folder:
            path = client.download_artifacts(run_id, POLICIES_ARTIFACT, folder)
            document = json.loads(Path(path).read_text())
    except (MlflowException, OSError, ValueError) as exc:
        raise TrackingError(f"cannot read {label}: {exc}") from exc
    try:
        return {workload: WorkloadPolicy.from_dict(d) for workload, d in document.items()}
    except (ConfigError, TypeError, KeyError, AttributeError) as exc:
        raise TrackingError(f"{label} does not hold workload policies: {exc}") from exc
