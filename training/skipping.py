"""Training with some workloads left out: ``training.on_workload_failure: skip``.

With ``fail`` (the default) one workload whose history cannot be fetched, or fails the
history checks, stops the run: the model must cover every configured workload. With
``skip`` each workload is fetched and checked on its own; those that fail are left out of
this run, which trains, scores and registers the others, and says which were skipped and
why (the log, the result message, the MLflow run's tags).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from forecaster.exceptions import DataValidationError, shown
from training.config import TrainConfig
from training.exceptions import SourceError
from training.sources import FetchedHistory, HistorySource
from training.validation import SeriesCheck, check_history, series_parts

logger = logging.getLogger(__name__)

TAG_SKIPPED = "prewarm.skipped_workloads"
"""Run tag: the skipped workloads, comma-separated; ``prewarm.skipped.<name>`` says why."""
REASON_CHARS = 500


@dataclass(frozen=True)
class Skipped:
    """Workloads left out of a run, each with the error that made it so."""

    reasons: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.reasons)

    def note(self) -> str:
        """``"; skipped workloads: a (why), b (why)"``, or ``""`` when none was."""
        if not self.reasons:
            return ""
        listed = ", ".join(f"{name} ({shown(why, 200)})" for name, why in self.reasons.items())
        return f"; skipped workloads: {listed}"

    def tags(self) -> dict[str, str]:
        """The MLflow run tags naming the skipped workloads and why."""
        if not self.reasons:
            return {}
        tags = {TAG_SKIPPED: ",".join(self.reasons)}
        tags.update(
            {f"prewarm.skipped.{name}": why[:REASON_CHARS] for name, why in self.reasons.items()}
        )
        return tags

    def config_without(self, config: TrainConfig) -> TrainConfig:
        """``config`` with the skipped workloads removed."""
        kept = [w for w in config.workloads if w.name not in self.reasons]
        return config.model_copy(update={"workloads": kept})


def pull_each(
    config: TrainConfig, source: HistorySource, window: tuple[pd.Timestamp, pd.Timestamp, int]
) -> tuple[FetchedHistory, Skipped]:
    """Fetch every workload alone over ``window``; the ones that fail are skipped.

    Raises
    ------
    SourceError
        When every workload fails (the message lists each one's error).
    """
    start, end, step = window
    histories: list[FetchedHistory] = []
    reasons: dict[str, str] = {}
    for workload in config.workloads:
        try:
            histories.append(
                source.fetch(
                    {workload.name: workload.demand or workload.name},
                    start,
                    end,
                    step,
                    covariates={workload.name: dict(workload.covariates)}
                    if workload.covariates
                    else None,
                )
            )
        except (SourceError, DataValidationError) as exc:
            reasons[workload.name] = str(exc)
            logger.warning(
                "workload %s skipped: %s", workload.name, exc, extra={"workload": workload.name}
            )
    if not histories:
        raise SourceError("every workload failed: " + "; ".join(reasons.values()))
    frame = pd.concat([h.frame for h in histories], ignore_index=True)
    reports = tuple(report for h in histories for report in h.reports)
    first = histories[0]
    return FetchedHistory(frame, reports, first.start, first.end, first.step), Skipped(reasons)


def check_each(
    frame: pd.DataFrame, step: int, config: TrainConfig
) -> tuple[list[SeriesCheck], Skipped]:
    """The history checks of every workload alone; the ones that fail are skipped."""
    validation = config.validation
    checks: list[SeriesCheck] = []
    reasons: dict[str, str] = {}
    for name, part in series_parts(frame):
        try:
            checks.extend(
                check_history(
                    part,
                    step,
                    min_history=validation.min_history,
                    max_gap_fraction=validation.max_gap_fraction,
                    dead_window=validation.dead_window,
                )
            )
        except SourceError as exc:  # HistoryValidationError
            reasons[str(name)] = str(exc)
            logger.warning("workload %s skipped: %s", name, exc, extra={"workload": str(name)})
    if not checks:
        raise SourceError("no workload passed the history checks: " + "; ".join(reasons.values()))
    return checks, Skipped(reasons)
