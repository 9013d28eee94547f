"""The nightly retraining job behind ``prewarm train``.

0. **measure** the cold start and capacity of workloads that set them to ``auto`` (see
   :mod:`training.measured`): the run plans, registers and logs the measured values;
1. **pull** each workload's history from the configured source over ``[end - lookback, end]``;
2. **validate** it (enough history, share of gaps, flat or dead series);
3. **skip** if a registered version was already trained on the same data with the same
   configuration (idempotence: a rerun never creates a second champion);
4. **fit and evaluate walk-forward**: ``evaluation.folds`` folds of ``evaluation.window``
   each; fold ``k``'s model is fitted on the ``train_window`` before it and forecasts every
   origin of the fold; forecasts drive the backtest policies (cost at SLO per workload).
   The last fold's model is the **candidate**: the model evaluated is the model registered;
5. **score the champion** on the same last window, with the same specs and simulator;
6. **log** params, metrics, plots, the resolved config, the data window and fingerprint and
   the model (a pyfunc with signature and input example) to MLflow; **register** a version
   with a readable description;
7. **promote**: move the ``champion`` alias only if :mod:`training.gate` says so.

Fitting on data strictly before the gate window keeps the comparison fair: the champion,
trained the night before, has not seen that window either when the job runs daily with a
one-day window.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster.backtest.run import seconds_of_day
from forecaster.buffer import learned
from forecaster.exceptions import (
    ConfigError,
    DataValidationError,
    NotEnoughHistoryError,
    PrewarmError,
)
from forecaster.frame import sorted_by_series
from forecaster.models import BaseForecaster, make_model
from forecaster.workload import WorkloadPolicy
from training.compute import usable_cpus
from training.config import TrainConfig
from training.documents import dumps
from training.exceptions import ModelLoadError
from training.folds import EvaluationFolds
from training.gate import GateDecision, decide
from training.measured import log_measured, resolve_measured
from training.registry import CHAMPION, champion_version, load_model_version
from training.scoring import ModelScore, score_model, scored_sample
from training.settings import resolve_tracking_uri
from training.skipping import Skipped, check_each, pull_each
from training.sources import FetchedHistory, HistorySource, make_source
from training.sources.ranges import describe_missing
from training.tracking import (
    TrainingRecord,
    log_run,
    open_store,
    registered_versions,
    run_name,
    same_version,
    utc_now,
)
from training.validation import check_history

if TYPE_CHECKING:
    from distributed import Client

    from training.pyfunc import PrewarmModel

logger = logging.getLogger(__name__)

TAG_MODEL, TAG_MODELS = "prewarm.model.", "prewarm.models"
# Per-workload model tags at most, and the summary tag's length (MLflow takes 8000 characters).
MODEL_TAGS, TAG_CHARS = 100, 5000

Progress = Callable[[str, int, int], None]
FrameTransform = Callable[[pd.DataFrame], pd.DataFrame]


class Outcome(StrEnum):
    """How a training run ended."""

    PROMOTED = "promoted"
    NOT_PROMOTED = "not-promoted"
    REGISTERED = "registered"  # --no-promote: registered, alias left alone
    UNCHANGED = "unchanged"  # same data and config as an existing version: nothing to do


@dataclass(frozen=True)
class TrainResult:
    """What ``run_training`` did, for the CLI's exit code and message."""

    outcome: Outcome
    registered_model: str
    version: str | None
    run_id: str | None
    champion_before: str | None
    champion_after: str | None
    decision: GateDecision | None
    data_fingerprint: str
    message: str
    model: PrewarmModel | None = None
    """The candidate as registered (``None`` when nothing was trained)."""


def run_training(
    config: TrainConfig,
    *,
    tracking_uri: str | None = None,
    promote: bool = True,
    progress: Progress | None = None,
    source: HistorySource | None = None,
    fit_transform: FrameTransform | None = None,
    clock: Callable[[], datetime] = utc_now,
    policies: Mapping[str, WorkloadPolicy] | None = None,
    compute: Client | None = None,
) -> TrainResult:
    """Run the whole job (see the module docs).

    Parameters
    ----------
    config
        The validated configuration.
    tracking_uri
        Overrides ``PREWARM_MLFLOW_TRACKING_URI`` and ``config.mlflow.tracking_uri``.
    promote
        ``False`` registers the candidate but never moves the alias.
    progress
        Called as ``progress(stage, done, total)``.
    source
        A ready source instead of the configured one (e.g. a replay with a fixed clock).
    fit_transform
        Applied to each fold's training rows before fitting, never to evaluation data:
        ablations, or a deliberately damaged candidate to exercise the gate.
    clock
        Returns the current, tz-aware time: the MLflow run is named after it.
    policies
        Workload name -> the policy to evaluate and register with the model (e.g. tuned by
        a backtest); default ``config.policies``. Every configured workload needs one.
    compute
        A Dask client: the scored workloads' policy sweeps (each fold's and the champion's)
        run on its cluster's workers, with the same result (:func:`score_model`).

    Raises
    ------
    SourceError
        The history could not be pulled or is unusable (``HistoryFetchError``,
        ``HistoryValidationError``).
    ConfigError
        The configuration does not fit the data (e.g. a step the files do not have).
    TrackingError
        MLflow refused a read or a write.
    """
    stages = 5 + config.evaluation.folds
    done = 0

    def tick(stage: str) -> None:
        nonlocal done
        logger.info("stage %s", stage, extra={"stage": stage})
        if progress is not None:
            progress(stage, done, stages)
        done += 1

    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    name = config.mlflow.registered_model
    own_source = source is None
    source = source or make_source(config.source.type, config.source)
    skip = config.training.on_workload_failure == "skip"
    try:
        # `auto` cold starts and capacities are measured first: they shape the horizons.
        config, measured = resolve_measured(config, source)
        policies = _resolve_policies(config, policies)
        tick("pull history")
        history, skipped = pull_workloads(config, source)
    finally:
        if own_source:
            source.close()
    frame, step = history.frame, history.step
    for report in history.incomplete:  # a note: validation, next, fails on too many gaps
        logger.info(
            describe_missing(report, history.start, history.end),
            extra={"workload": report.workload, "query": report.query},
        )
    tick("validate history")
    if skip:
        checks, unusable = check_each(frame, step, config)
        skipped = Skipped({**skipped.reasons, **unusable.reasons})
    else:
        checks = check_history(
            frame,
            step,
            min_history=config.validation.min_history,
            max_gap_fraction=config.validation.max_gap_fraction,
            dead_window=config.validation.dead_window,
        )
    if skipped:
        config = skipped.config_without(config)
        policies = {n: p for n, p in policies.items() if n not in skipped.reasons}
        frame = frame[~frame["series"].isin(list(skipped.reasons))].reset_index(drop=True)
        history = replace(history, frame=frame)
    policies = learn_buffers(policies, frame, step, config.evaluation.train_window)
    data_fp = data_fingerprint(frame)
    config_fp = config.fingerprint()
    if fit_transform is not None:  # a transformed training set is another model
        label = f"{fit_transform.__module__}.{getattr(fit_transform, '__qualname__', '?')}"
        config_fp = hashlib.sha256(f"{config_fp}+{label}".encode()).hexdigest()[:16]
    if policies != config.policies:  # other policies than the file's: another model version
        chosen = dumps({n: p.to_dict() for n, p in sorted(policies.items())}, sort_keys=True)
        config_fp = hashlib.sha256(f"{config_fp}+{chosen}".encode()).hexdigest()[:16]
    client, experiment_id = open_store(
        uri, config.mlflow.experiment, config.mlflow.artifact_location
    )
    champion_before = champion_version(name, uri)
    existing = same_version(registered_versions(client, name), data_fp, config_fp)
    if existing is not None:
        message = (
            f"version {existing.version} of {name!r} was trained on the same data "
            f"(fingerprint {data_fp}) with the same configuration; nothing to do "
            f"(champion: {champion_before or 'none'}){skipped.note()}"
        )
        if str(existing.version) != champion_before:
            # a rerun never promotes (idempotence): say how that version is served if wanted
            message += (
                f"; version {existing.version} is not the champion: its gate verdict is in "
                f"run {existing.run_id}, and setting the {CHAMPION!r} alias on it (MLflow UI, "
                "or MlflowClient.set_registered_model_alias) serves it"
            )
        logger.info(message, extra={"model_version": existing.version})
        return TrainResult(
            Outcome.UNCHANGED, name, str(existing.version), existing.run_id, champion_before,
            champion_before, None, data_fp, message,
        )  # fmt: skip

    scored = scored_sample(policies, frame, config.evaluation.scored_workloads)
    if len(scored) < len(policies):
        logger.info(
            "scoring %d of %d workloads per fold (evaluation.scored_workloads)",
            len(scored), len(policies), extra={"scored": len(scored)},
        )  # fmt: skip
    gated = {name: policies[name] for name in scored}
    folds = _fold_times(frame, step, config)
    scores: list[ModelScore] = []
    candidate: BaseForecaster | None = None
    fit_seconds = 0.0
    for k, (fit_start, fold_start, fold_end) in enumerate(folds):
        tick(f"fit and score fold {k + 1}/{len(folds)}")
        began = time.perf_counter()
        train = _cells(frame, fit_start, fold_start)
        candidate = _fit(config, policies, train, step, fit_transform)
        fit_seconds += time.perf_counter() - began
        context = _context_start(candidate, frame, fold_start, step)
        part = _cells(frame, context, fold_end)
        scores.append(_score(config, gated, candidate, part, fold_start, compute))
    assert candidate is not None
    score = scores[-1]
    gate_start = folds[-1][1]

    tick("score the champion")
    champion_score, champion_note = _score_champion(
        config, gated, name, champion_before, uri, frame, gate_start, step, compute
    )
    decision = decide(score, champion_score, config.gate)
    if champion_note:
        decision = GateDecision(
            decision.promote,
            (champion_note, *decision.reasons),
            decision.candidate_cost,
            decision.champion_cost,
            decision.candidate_pinball,
            decision.champion_pinball,
        )
    logger.info("gate: %s", decision.summary(), extra={"promote": decision.promote})

    tick("log to MLflow")
    from training.pyfunc import PrewarmModel

    planner = PrewarmModel(candidate, policies)
    record = TrainingRecord(
        config=config,
        planner=planner,
        history=history,
        checks=checks,
        scores=scores,
        champion=champion_score,
        decision=decision,
        data_fingerprint=data_fp,
        config_fingerprint=config_fp,
        champion_before=champion_before,
        fit_seconds=fit_seconds,
        run_name=run_name(clock()),
        tags={**skipped.tags(), **served_tags(planner, config.model.name)},
    )
    run_id, version = log_run(client, experiment_id, record)
    log_measured(client, run_id, measured)
    tick("promote")
    if promote and decision.promote:
        client.set_registered_model_alias(name, CHAMPION, version)
        outcome = Outcome.PROMOTED
    elif promote:
        outcome = Outcome.NOT_PROMOTED
    else:
        outcome = Outcome.REGISTERED
    client.set_model_version_tag(name, version, "prewarm.outcome", outcome.value)
    champion_after = champion_version(name, uri)
    message = (
        f"{name!r} version {version}: {outcome.value} ({decision.summary()}); "
        f"champion: {champion_after or 'none'}{skipped.note()}"
    )
    logger.info(message, extra={"model_version": version, "outcome": outcome.value})
    if progress is not None:
        progress("done", stages, stages)
    return TrainResult(
        outcome, name, version, run_id, champion_before, champion_after, decision, data_fp,
        message, planner,
    )  # fmt: skip


# -- steps ---------------------------------------------------------------------------------


def served_tags(planner: PrewarmModel, model_name: str) -> dict[str, str]:
    """MLflow run tags naming the registered models that forecast each workload (the
    configured model, or what a selection or combination chose for it).

    ``prewarm.models`` counts the workloads per (leading) model, e.g. ``lightgbm 812, mstl
    150`` (ties in the order of the workloads' names); ``prewarm.model.<workload>`` names each
    of the first :data:`MODEL_TAGS` workloads' (by name), so a fleet's tags stay bounded
    (explain names every workload's).
    """
    served = {name: planner.served_by(name) or model_name for name in planner.workloads}
    leading = Counter(text.split(" ")[0] for text in served.values())
    summary = ", ".join(f"{name} {n}" for name, n in leading.most_common())
    tags = {f"{TAG_MODEL}{name}": served[name] for name in sorted(served)[:MODEL_TAGS]}
    return {TAG_MODELS: summary[:TAG_CHARS], **tags}


def learn_buffers(
    policies: Mapping[str, WorkloadPolicy], frame: pd.DataFrame, step: int, window: int
) -> dict[str, WorkloadPolicy]:
    """Each policy with its warm buffer learned on the last ``window`` seconds of its
    history, as the backtest learns it at each retrain (:mod:`forecaster.buffer`)."""
    out = dict(policies)
    for name, policy in policies.items():
        if policy.buffer_quantile <= 0:
            continue
        part = frame[frame["series"] == name].sort_values("timestamp").tail(window // step)
        first = pd.Timestamp(part["timestamp"].iloc[0])
        values = part["value"].to_numpy(dtype=float)
        out[name] = learned(policy, values, step, seconds_of_day(first))
    return out


def pull_history(config: TrainConfig, source: HistorySource) -> FetchedHistory:
    """Every workload's history over the configured window, as the job pulls it."""
    queries = {w.name: w.demand or w.name for w in config.workloads}
    covariates = {w.name: dict(w.covariates) for w in config.workloads if w.covariates}
    start, end, step = _window(config, source)
    return source.fetch(queries, start, end, step, covariates=covariates or None)


def pull_workloads(config: TrainConfig, source: HistorySource) -> tuple[FetchedHistory, Skipped]:
    """:func:`pull_history`, or with ``training.on_workload_failure: skip`` each workload
    alone, with the ones whose fetch failed (see :mod:`training.skipping`)."""
    if config.training.on_workload_failure == "skip":
        return pull_each(config, source, _window(config, source))
    return pull_history(config, source), Skipped()


def _window(config: TrainConfig, source: HistorySource) -> tuple[pd.Timestamp, pd.Timestamp, int]:
    """The configured window on the source's grid, logged."""
    settings = config.source
    start, end, step = source.window(settings.step, settings.lookback)
    logger.info(
        "pulling %d workloads from %s, %s .. %s every %ss",
        len(config.workloads),
        settings.type,
        start,
        end,
        step,
        extra={"source": settings.type, "start": str(start), "end": str(end), "step": step},
    )
    return start, end, step


def data_fingerprint(frame: pd.DataFrame) -> str:
    """Hash of the history's names, timestamps and values (NaN-safe, order-independent)."""
    ordered = (
        frame  # as validate_frame leaves it: no sorted copy of the whole history
        if sorted_by_series(frame["series"], frame["timestamp"])
        else frame.sort_values(["series", "timestamp"], ignore_index=True)
    )
    digest = hashlib.sha256()
    for chunk in _joined_names(ordered["series"]):
        digest.update(chunk)
    digest.update(ordered["timestamp"].astype("int64").to_numpy().tobytes())
    for column in ordered.columns.drop(["series", "timestamp"]):
        digest.update(column.encode())
        values = np.round(ordered[column].to_numpy(dtype=float), 9)
        digest.update(np.nan_to_num(values, copy=False, nan=-1.2345e300).tobytes())
    return digest.hexdigest()[:16]


NAMES_CHUNK = 1 << 20
"""Names joined at a time by :func:`_joined_names`."""


def _joined_names(names: pd.Series) -> Iterator[bytes]:
    """The bytes of ``"\\0".join(names.astype(str)).encode()``, a chunk at a time: joined
    whole, the names of 43 million rows (1,000 workloads x 30 days at 1 minute) held a copy
    of the column, their text and its bytes at once: the run's peak, 3,952 MiB, was here."""
    for begin in range(0, len(names), NAMES_CHUNK):
        text = "\0".join(names.iloc[begin : begin + NAMES_CHUNK].astype(str))
        yield (text if begin == 0 else "\0" + text).encode()


def _fold_times(
    frame: pd.DataFrame, step: int, config: TrainConfig
) -> list[tuple[pd.Timestamp, pd.Timestamp, pd.Timestamp]]:
    """``(fit_start, fold_start, fold_end)`` of each fold, oldest first; end is exclusive.

    The series share one grid: cell ``c`` is ``first + c * step``."""
    evaluation = config.evaluation
    splitter = EvaluationFolds(evaluation.folds, evaluation.window, evaluation.train_window, step)
    first = frame["timestamp"].min()
    grid = pd.Timedelta(seconds=step)
    n = (frame["timestamp"].max() - first) // grid + 1
    return [
        (first + train.start * grid, first + test.start * grid, first + test.stop * grid)
        for train, test in splitter.split(n)
    ]


def _cells(frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """Rows with ``start <= timestamp < end``."""
    stamps = frame["timestamp"]
    return frame[(stamps >= start) & (stamps < end)]


def _context_start(
    model: BaseForecaster, frame: pd.DataFrame, fold_start: pd.Timestamp, step: int
) -> pd.Timestamp:
    from training.pyfunc import history_cells

    cells = history_cells(getattr(model, "features_", None), step, tuple(model.horizons))
    return max(frame["timestamp"].min(), fold_start - pd.Timedelta(seconds=(cells + 1) * step))


def build_model(
    config: TrainConfig, step: int, policies: Mapping[str, WorkloadPolicy] | None = None
) -> BaseForecaster:
    """A new, unfitted model as configured, with horizons and quantiles covering every
    workload's policy (``policies``, default ``config.policies``)."""
    return make_model(
        config.model.name,
        horizons=config.horizons(step, policies),
        quantiles=config.quantiles(policies),
        **model_params(config),
    )


def model_params(config: TrainConfig) -> dict[str, Any]:
    """The configured model's parameters besides horizons and quantiles: its params, its
    features when it takes them, each workload's quantile when it selects a model per
    workload (``taus``), and the evaluation seed unless a random state is set."""
    accepted = make_model(config.model.name).get_params()
    params = dict(config.model.params)
    if "features" in accepted:
        params["features"] = config.model.feature_config
    if "taus" in accepted:
        params["taus"] = {name: policy.tau for name, policy in config.policies.items()}
    if "random_state" in accepted and "random_state" not in params:
        params["random_state"] = config.evaluation.seed
    return params


def _fit(
    config: TrainConfig,
    policies: Mapping[str, WorkloadPolicy],
    train: pd.DataFrame,
    step: int,
    transform: FrameTransform | None,
) -> BaseForecaster:
    if transform is not None:
        train = transform(train.copy())
    model = build_model(config, step, policies)
    # Unless configured, the fit takes every CPU the job may use (a model's regressors side by
    # side: the same model); the model registered forecasts as configured, on one thread.
    side_by_side = "n_jobs" in model.get_params() and "n_jobs" not in config.model.params
    configured = model.get_params().get("n_jobs")
    if side_by_side:
        model.set_params(n_jobs=usable_cpus())
    try:
        fitted = model.fit(train, covariates=config.covariates)
    except NotEnoughHistoryError:
        raise
    except DataValidationError as exc:
        raise DataValidationError(f"cannot fit {config.model.name!r}: {exc}") from exc
    if side_by_side:
        fitted.set_params(n_jobs=configured)
    return fitted


def _resolve_policies(
    config: TrainConfig, policies: Mapping[str, WorkloadPolicy] | None
) -> dict[str, WorkloadPolicy]:
    """``policies`` (or the config's), checked to cover exactly the configured workloads."""
    if policies is None:
        return config.policies
    names = {w.name for w in config.workloads}
    if set(policies) != names:
        raise ConfigError(
            f"`policies` must hold one policy per configured workload {sorted(names)}, "
            f"got {sorted(policies)}"
        )
    return dict(policies)


def _score(
    config: TrainConfig,
    policies: Mapping[str, WorkloadPolicy],
    model: BaseForecaster,
    frame: pd.DataFrame,
    start: pd.Timestamp,
    compute: Client | None,
) -> ModelScore:
    names = set(frame["series"].astype(str)) & set(policies)
    return score_model(
        model,
        frame[frame["series"].isin(list(names))],
        start,
        {name: policy for name, policy in policies.items() if name in names},
        policies=config.scored_policies,
        seed=config.evaluation.seed,
        client=compute,
    )


def _score_champion(
    config: TrainConfig,
    policies: Mapping[str, WorkloadPolicy],
    name: str,
    version: str | None,
    uri: str,
    frame: pd.DataFrame,
    start: pd.Timestamp,
    step: int,
    compute: Client | None,
) -> tuple[ModelScore | None, str]:
    """The champion's score on the gate window, or ``None`` and why it could not be scored."""
    if version is None:
        return None, ""
    try:
        champion = load_model_version(name, version, uri)
    except ModelLoadError as exc:
        logger.warning("champion cannot be loaded: %s", exc, extra={"model_version": version})
        return None, f"champion v{version} cannot be loaded ({exc}); judged on the guardrail"
    model = champion.model
    common = sorted(set(model.workloads) & set(policies))
    problem = ""
    if model.step != step:
        problem = f"its step is {model.step}s, the data's {step}s"
    elif not common:
        problem = "it serves none of the configured workloads"
    elif not set(model.covariates) <= set(frame.columns):
        problem = f"it needs covariates {list(model.covariates)}"
    if problem:
        note = f"champion v{version} is not comparable ({problem}); judged on the guardrail"
        logger.warning(note, extra={"model_version": version})
        return None, note
    part = frame[frame["series"].isin(common)]
    part = _cells(
        part,
        _context_start(model.forecaster, part, start, step),
        frame["timestamp"].max() + pd.Timedelta(seconds=step),
    )
    try:
        score = _score(config, policies, model.forecaster, part, start, compute)
    except PrewarmError as exc:
        note = f"champion v{version} cannot forecast this window ({exc}); judged on the guardrail"
        logger.warning(note, extra={"model_version": version})
        return None, note
    return score, f"champion v{version} scored on the same window"
