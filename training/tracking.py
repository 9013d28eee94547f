"""MLflow plumbing: the store, the experiment, what a training run writes, tags and the
registry lookups of a run.

The default store is MLflow's embedded one, a SQLite file in the working directory
(``sqlite:///mlflow.db``), with artifacts in ``mlartifacts/`` beside it. Analysts browse it
with ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` (see docs/training.md).
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forecaster.backtest.frontier import headline_point, run_policy
from forecaster.exceptions import ConfigError, shown
from forecaster.workload import WorkloadPolicy
from training.documents import finite
from training.exceptions import TrackingError
from training.redaction import redact_document

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.entities.model_registry import ModelVersion
    from mlflow.models import ModelSignature

    from training.config import TrainConfig
    from training.gate import GateDecision
    from training.pyfunc import PrewarmModel
    from training.scoring import ModelScore
    from training.sources import FetchedHistory
    from training.validation import SeriesCheck

logger = logging.getLogger(__name__)

TAG_DATA = "prewarm.data_fingerprint"
TAG_CONFIG = "prewarm.config_fingerprint"
TAG_VERDICT = "prewarm.gate"
POLICIES_ARTIFACT = "policies.json"
"""The run's artifact holding each workload's registered policy (``WorkloadPolicy.to_dict``)."""
TUNING_DEPLOYED = "tuning/deployed.json"
"""A ``train --tune`` run's artifact: each tuned workload's out-of-sample deployed section."""
TUNING_PENDING = "tuning/pending.json"
"""A ``train --tune`` run's artifact: the workloads it registered with settings no backtest
has scored for their policy (past ``--tune-limit``, :mod:`training.rotation`), as
``{"workloads": [names]}``."""


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
    from mlflow.exceptions import MlflowException

    from training.store import store_client

    try:
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_registry_uri(tracking_uri)
        client = store_client(tracking_uri)
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
        finite({name: policy.to_dict() for name, policy in sorted(policies.items())}),
        POLICIES_ARTIFACT,
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
        document = _json_artifact(
            client, _version_run(client, name, version, label), POLICIES_ARTIFACT
        )
    except (MlflowException, OSError, ValueError) as exc:
        raise TrackingError(f"cannot read {label}: {exc}") from exc
    try:
        return {workload: WorkloadPolicy.from_dict(d) for workload, d in document.items()}
    except (ConfigError, TypeError, KeyError, AttributeError) as exc:
        raise TrackingError(f"{label} does not hold workload policies: {exc}") from exc


def pending_workloads(client: MlflowClient, name: str, version: str) -> set[str] | None:
    """The workloads of version ``version`` of model ``name`` whose registered settings no
    backtest has scored: its run's :data:`TUNING_PENDING`, none where a tuning run left no
    such artifact, and ``None`` (every one) where the run did not tune at all.

    Raises
    ------
    TrackingError
        The version's run or its artifacts cannot be read.
    """
    from mlflow.exceptions import MlflowException

    label = f"the tuning record of model {name!r} version {version}"
    try:
        run_id = _version_run(client, name, version, label)
        kept = {a.path for a in client.list_artifacts(run_id, TUNING_DEPLOYED.split("/")[0])}
        if TUNING_DEPLOYED not in kept:
            return None
        if TUNING_PENDING not in kept:
            return set()
        document = _json_artifact(client, run_id, TUNING_PENDING)
    except (MlflowException, OSError, ValueError) as exc:
        raise TrackingError(f"cannot read {label}: {exc}") from exc
    names = document.get("workloads") if isinstance(document, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrackingError(
            f'{label}: {TUNING_PENDING} is not {{"workloads": [names]}}: {shown(document)}'
        )
    return set(names)


def _version_run(client: MlflowClient, name: str, version: str, label: str) -> str:
    """The run that logged version ``version`` of model ``name``; ``label`` names what is
    read from it in the error."""
    run_id = client.get_model_version(name, version).run_id
    if run_id is None:
        raise TrackingError(f"cannot read {label}: the version has no run")
    return run_id


def _json_artifact(client: MlflowClient, run_id: str, path: str) -> Any:
    """The JSON artifact ``path`` of run ``run_id``, parsed."""
    with tempfile.TemporaryDirectory() as folder:
        return json.loads(Path(client.download_artifacts(run_id, path, folder)).read_text())


@dataclass(frozen=True)
class TrainingRecord:
    """Everything one training run writes to MLflow.

    Attributes
    ----------
    config : TrainConfig
        The validated configuration (logged resolved, and as params).
    planner : PrewarmModel
        The candidate, logged as the run's pyfunc model and registered.
    history : FetchedHistory
        The history it was trained on (window, missing ranges).
    checks : list of SeriesCheck
        The per-series history checks.
    scores : list of ModelScore
        One per walk-forward fold, the gate's last.
    champion : ModelScore or None
        The champion's score on the gate fold, when there is one.
    decision : GateDecision
        The gate's verdict.
    data_fingerprint, config_fingerprint : str
        What makes a version the same as another (tags of the run and the version).
    champion_before : str or None
        The champion version when the run started.
    fit_seconds : float
        Wall time of every fold's fit.
    run_name : str
        The MLflow run name (:func:`run_name`).
    tags : mapping of str to str
        Further run tags (the workloads a partial run skipped, see :mod:`training.skipping`).
    """

    config: TrainConfig
    planner: PrewarmModel
    history: FetchedHistory
    checks: list[SeriesCheck]
    scores: list[ModelScore]
    champion: ModelScore | None
    decision: GateDecision
    data_fingerprint: str
    config_fingerprint: str
    champion_before: str | None
    fit_seconds: float
    run_name: str
    tags: Mapping[str, str] = field(default_factory=dict)


@contextmanager
def _mlflow_quiet() -> Iterator[None]:
    """MLflow's printed lines held back ("Successfully registered model ...", "Created
    version ..."): they go to stderr outside any log handler, between a command's JSON records,
    and the run's own log says what was registered."""
    from mlflow.utils import logging_utils

    stream = logging_utils.MLFLOW_LOGGING_STREAM
    enabled = stream.enabled
    stream.enabled = False
    try:
        yield
    finally:
        stream.enabled = enabled


def log_run(client: MlflowClient, experiment_id: str, record: TrainingRecord) -> tuple[str, str]:
    """Write ``record`` as one MLflow run (tags, params, policies, metrics, the resolved
    config, the data window, the gate, figures, the pyfunc model) and register its model.

    Returns
    -------
    (str, str)
        The run id and the registered version.

    Raises
    ------
    TrackingError
        MLflow refused a write.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    from training import __version__
    from training.pyfunc import to_naive_utc

    config, planner, history = record.config, record.planner, record.history
    name = config.mlflow.registered_model
    score = record.scores[-1]
    frame = history.frame
    shown = example_workloads(planner.workloads, config.mlflow.example_workloads)
    example = to_naive_utc(
        frame[frame["series"].isin(shown)]
        .sort_values(["series", "timestamp"])
        .groupby("series", sort=True, observed=True)
        .tail(planner.history_cells_needed)
        .reset_index(drop=True)
    )
    try:
        with (
            _mlflow_quiet(),
            mlflow.start_run(
                experiment_id=experiment_id,
                run_name=record.run_name,
            ) as run,
        ):
            mlflow.set_tags(
                {
                    "prewarm.version": __version__,
                    "git.commit": git_commit() or "unknown",
                    TAG_DATA: record.data_fingerprint,
                    TAG_CONFIG: record.config_fingerprint,
                    "prewarm.source": config.source.type,
                    "prewarm.champion_before": record.champion_before or "none",
                    TAG_VERDICT: "pass" if record.decision.promote else "fail",
                    **record.tags,
                }
            )
            mlflow.log_params(_params(config, planner, history))
            log_policies(planner.policies)
            metrics = score.metrics()
            for k, fold in enumerate(record.scores[:-1]):
                metrics.update(fold.metrics(prefix=f"fold{k + 1}."))
            metrics["walkforward.pinball_mean"] = float(
                np.mean([s.mean_pinball() for s in record.scores])
            )
            if record.champion is not None:
                metrics.update(record.champion.metrics(prefix="champion."))
            decision = record.decision
            metrics["gate.promote"] = float(decision.promote)
            if decision.candidate_cost is not None:
                metrics["gate.candidate_cost"] = decision.candidate_cost
            if decision.champion_cost is not None:
                metrics["gate.champion_cost"] = decision.champion_cost
            metrics["fit_seconds"] = record.fit_seconds
            mlflow.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)})
            # a URL's password (the source's, the store's) is no analyst's to read in the UI
            mlflow.log_dict(redact_document(config.model_dump(mode="json")), "config/resolved.yaml")
            mlflow.log_dict(
                finite(_window(history, record.checks, record.data_fingerprint, score)),
                "data/window.json",
            )
            mlflow.log_dict(
                {
                    "summary": decision.summary(),
                    "reasons": list(decision.reasons),
                    "workloads": len(config.workloads),
                    "scored": sorted(score.workloads),
                },
                "gate.json",
            )
            _log_figures(config, score)
            output = planner.predict(None, example)
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=planner,
                signature=plan_signature(example, output),
                input_example=example,
                pip_requirements=_requirements(),
            )
            version = mlflow.register_model(
                info.model_uri,
                name,
                tags={
                    TAG_DATA: record.data_fingerprint,
                    TAG_CONFIG: record.config_fingerprint,
                    TAG_VERDICT: "pass" if decision.promote else "fail",
                },
            )
            client.update_model_version(
                name,
                version.version,
                description=_description(record, run.info.run_id),
            )
            return run.info.run_id, str(version.version)
    except MlflowException as exc:
        raise TrackingError(f"MLflow refused the run: {exc}") from exc


def _params(config: TrainConfig, planner: PrewarmModel, history: FetchedHistory) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model.name": config.model.name,
        "model.quantiles": list(planner.forecaster.quantiles),
        "model.horizons": list(planner.forecaster.horizons),
        "data.step_seconds": history.step,
        "data.start": history.start.isoformat(),
        "data.end": history.end.isoformat(),
        "data.workloads": ",".join(planner.workloads),
        "evaluation.window_seconds": config.evaluation.window,
        "evaluation.folds": config.evaluation.folds,
        "evaluation.train_window_seconds": config.evaluation.train_window,
        "evaluation.policies": ",".join(config.scored_policies),
        "gate.policy": config.gate.policy,
        "gate.cost_tolerance": config.gate.cost_tolerance,
        "gate.pinball_tolerance": config.gate.pinball_tolerance,
        "gate.coverage_tolerance": config.gate.coverage_tolerance,
    }
    for key, value in planner.forecaster.get_params().items():
        if key not in ("horizons", "quantiles", "features"):
            params[f"model.{key}"] = value
    features = getattr(planner.forecaster, "features_", None)
    if features is not None:
        for key, value in features.to_dict().items():
            params[f"features.{key}"] = value
    return {k: str(v)[:6000] for k, v in params.items()}


def _window(
    history: FetchedHistory, checks: list[SeriesCheck], data_fp: str, score: ModelScore
) -> dict[str, Any]:
    return {
        "fingerprint": data_fp,
        "start": history.start.isoformat(),
        "end": history.end.isoformat(),
        "step_seconds": history.step,
        "gate_window": {"start": score.start.isoformat(), "end": score.end.isoformat()},
        "series": [check.__dict__ for check in checks],
        "missing": [
            {
                "workload": r.workload,
                "column": r.column,
                "query": r.query,
                "ranges": [[str(m.start), str(m.end), m.points] for m in r.missing],
            }
            for r in history.reports
            if r.missing
        ],
    }


def example_workloads(workloads: tuple[str, ...], count: int) -> list[str]:
    """The ``count`` workloads whose recent history is the model's input example, spread
    evenly over the sorted names (all of them when there are no more).

    Loading validates a version on its example (:func:`training.registry.validate_model`),
    so a sample keeps that check on every load while the example stays a few MiB: the whole
    fleet's at 1,000 workloads is ten million rows that MLflow writes as JSON. Serving checks
    every workload's plan on every refresh.

    >>> example_workloads(("a", "b", "c", "d", "e"), 3)
    ['a', 'c', 'e']
    """
    names = sorted(workloads)
    if len(names) <= count:
        return names
    # More names than picks: the picks lie over a cell apart, so rounding keeps them apart.
    picks = np.linspace(0, len(names) - 1, count).round().astype(int)
    return [names[i] for i in picks]


def plotted_workloads(config: TrainConfig, score: ModelScore) -> list[str]:
    """The scored workloads a run draws figures of: at most ``mlflow.plotted_workloads``.

    Drawing costs about a second per workload (the backtest day re-simulates every policy),
    so a large fleet gets figures of the workloads an analyst looks at first: those whose gate
    policy misses the SLO, then the costliest at it. Ties go by name, so a night's choice is
    reproducible.
    """

    def rank(name: str) -> tuple[bool, float, str]:
        cost = score.workloads[name].costs.get(config.gate.policy)
        return (cost is not None, -(cost or 0.0), name)

    names = sorted(score.workloads, key=rank)
    return sorted(names[: config.mlflow.plotted_workloads])


def _log_figures(config: TrainConfig, score: ModelScore) -> None:
    import mlflow

    from forecaster.backtest.plots import capacity_figure, frontier_figure
    from training.plots import forecast_figure

    specs = {w.name: w.spec for w in config.workloads}
    for name in plotted_workloads(config, score):
        result = score.workloads[name]
        spec = specs[name]
        horizon = min(result.pinball_by_horizon)
        mlflow.log_figure(
            forecast_figure(result, horizon, result.tau), f"plots/{name}/forecast.png"
        )
        mlflow.log_figure(
            frontier_figure(result.frontier, spec.slo_unserved_fraction),
            f"plots/{name}/frontier.png",
        )
        runs = {}
        for policy, points in result.frontier.items():
            point, _ = headline_point(points, spec.slo_unserved_fraction)
            runs[policy], _ = run_policy(
                result.observation, policy, point.params, config.evaluation.seed
            )
        mlflow.log_figure(
            capacity_figure(runs, spec.capacity_per_replica, f"{name}: backtest day"),
            f"plots/{name}/backtest_day.png",
        )


def _requirements() -> list[str]:
    """Pinned versions of what the pyfunc imports (inferring them costs seconds per run)."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in ("mlflow", "numpy", "pandas", "scikit-learn", "lightgbm", "cloudpickle"):
        try:
            out.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            continue
    return out


def _description(record: TrainingRecord, run_id: str) -> str:
    config, history, decision = record.config, record.history, record.decision
    data_fp, champion_before = record.data_fingerprint, record.champion_before
    workloads = ", ".join(w.name for w in config.workloads)
    verdict = "passed" if decision.promote else "did not pass"
    versus = f"champion version {champion_before}" if champion_before else "no champion"
    lines = [
        f"Forecaster `{config.model.name}` for {len(config.workloads)} workload(s): {workloads}.",
        f"Trained on {config.source.type} history {history.start:%Y-%m-%d %H:%M} .. "
        f"{history.end:%Y-%m-%d %H:%M} UTC at {history.step}s steps "
        f"(data fingerprint `{data_fp}`).",
        f"Gate against {versus} on the last {config.evaluation.window / 3600:g} h: {verdict}.",
        *(f"- {reason}" for reason in decision.reasons),
        f"Run `{run_id}`: see its metrics, plots/ (forecast, backtest day, frontier) and "
        "config/resolved.yaml.",
    ]
    return "\n".join(lines)
