"""Backtest the workloads of a training config: what ``prewarm demo`` and
``prewarm backtest --config`` report.

Each workload's history comes from the config's source, over the window training pulls; the
forecasts come from the configured model. Every policy is tuned out of sample
(:mod:`forecaster.backtest.tuning`); hybrid's tuned setting is the policy training would
register. When the store has a champion with registered policies, hybrid is also scored at
the registered setting, on the same validation window: the numbers of what is served now.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.backtest.tuning import deployed_savings, score_setting
from forecaster.workload import WorkloadPolicy
from prewarm import backtest_report
from training.config import TrainConfig
from training.pipeline import model_params
from training.sources import FetchedHistory

DAY = 86400
RETRAIN_EVERY = 7 * DAY


def backtest_workloads(
    config: TrainConfig,
    config_path: Path,
    history: FetchedHistory,
    out: Path | None,
    *,
    registered: Mapping[str, WorkloadPolicy] | None = None,
    version: str | None = None,
    progress: Any = None,
) -> dict[str, dict[str, Any]]:
    """Each workload's backtest document (see :func:`prewarm.backtest_report.to_json`),
    with its report written below ``out`` when given.

    ``registered`` (of model ``version``) adds ``deployed.registered``: hybrid at the
    registered policy's setting, and its savings against the others' tuned settings.
    """
    documents = {}
    policies = config.policies
    for done, (name, policy) in enumerate(policies.items()):
        part = history.frame[history.frame["series"] == name]
        times = pd.DatetimeIndex(part["timestamp"])
        settings = BacktestSettings(
            spec=policy.spec,
            train_window=config.evaluation.train_window,
            retrain_every=RETRAIN_EVERY,
            model=config.model.name,
            model_params=model_params(config),
            hold=policy.hold,
            seed=config.evaluation.seed,
        )
        result = backtest(part["value"].to_numpy(), times, history.step, settings)
        document = backtest_report.to_json(result, {"path": str(config_path), "workload": name})
        if registered is not None and name in registered:
            served = score_setting(
                result.observation, "hybrid", registered[name].settings(), settings.seed
            )
            document["deployed"]["registered"] = {
                "version": version,
                **backtest_report.deployed_row(served),
                "savings": deployed_savings({**result.deployed, "hybrid": served}),
            }
        if out is not None:
            backtest_report.write_report(result, document, out / name, settings.seed)
        documents[name] = document
        if progress is not None:
            progress("backtest", done + 1, len(policies))
    return documents


def tuned_policies(
    config: TrainConfig, documents: Mapping[str, dict[str, Any]]
) -> dict[str, WorkloadPolicy]:
    """Each workload's policy with hybrid's settings as the backtest tuned them: the policy
    to register, so that what is served is what was backtested."""
    return {
        name: policy.tuned(**documents[name]["deployed"]["policies"]["hybrid"]["settings"])
        for name, policy in config.policies.items()
    }
