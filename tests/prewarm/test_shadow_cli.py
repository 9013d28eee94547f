"""``prewarm shadow-report`` refuses bad input before it reads anything, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from prewarm.cli import cli
from prewarm.train import EXIT_CONFIG, EXIT_FAILURE

WORKLOAD = {"name": "chat", "demand": "demand", "capacity": {"capacity_per_replica": 2}}
PROMETHEUS = {"type": "prometheus", "url": "http://127.0.0.1:9"}


def invoke(tmp_path: Path, document: dict[str, Any], *options: str) -> Any:
    config = tmp_path / "prewarm.yaml"
    config.write_text(yaml.safe_dump(document))
    return CliRunner().invoke(
        cli,
        ["shadow-report", "--config", str(config), "--out", str(tmp_path / "out"),
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *options],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("document", "options", "named"),
    [
        ({"source": PROMETHEUS, "workloads": [WORKLOAD]}, ["--since", "soon"], "'soon'"),
        ({"source": PROMETHEUS, "workloads": [WORKLOAD]}, ["--until", "later"], "'later'"),
        (
            {"source": {"type": "file", "path": "x.csv"}, "workloads": [WORKLOAD]},
            [],
            "source.type must be 'prometheus'",
        ),
        (
            {"source": PROMETHEUS, "workloads": [{**WORKLOAD, "ready_replicas": "ready"}]},
            [],
            "workloads[0] (chat): `ready_replicas` needs a `replicas` query, got "
            "ready_replicas 'ready'",
        ),
        (
            {"source": PROMETHEUS, "workloads": [WORKLOAD]},
            ["--asks-query", "prewarm_desired_replicas"],
            "`--asks-query` must contain the {workload} placeholder (or be empty to replay the "
            "asks), got 'prewarm_desired_replicas'",
        ),
    ],
    ids=["since", "until", "file-source", "ready-without-replicas", "asks-query"],
)
def test_bad_input_is_refused_naming_it(
    tmp_path: Path, document: dict[str, Any], options: list[str], named: str
) -> None:
    outcome = invoke(tmp_path, document, *options)
    assert outcome.exit_code == EXIT_CONFIG, outcome.output
    assert named in outcome.output
    assert "Traceback" not in outcome.output


def test_a_missing_store_is_named_and_not_created(tmp_path: Path) -> None:
    """Opening it used to create it, folders and all, then report "no champion" there."""
    store = tmp_path / "nowhere" / "mlflow.db"
    outcome = invoke(
        tmp_path,
        {"source": PROMETHEUS, "workloads": [WORKLOAD]},
        "--tracking-uri",
        f"sqlite:///{store}",
    )
    assert outcome.exit_code == EXIT_CONFIG, outcome.output
    assert f"MLflow store '{store}'" in outcome.output and "prewarm train" in outcome.output
    assert not store.parent.exists()


def test_without_a_champion_it_says_to_train_first(tmp_path: Path) -> None:
    from training.store import store_client

    store_client(f"sqlite:///{tmp_path / 'mlflow.db'}").search_registered_models()  # empty
    outcome = invoke(tmp_path, {"source": PROMETHEUS, "workloads": [WORKLOAD]})
    assert outcome.exit_code == EXIT_FAILURE, outcome.output
    assert "prewarm train" in outcome.output


def test_the_period_ends_at_the_clock_floored_to_the_grid() -> None:
    from prewarm.shadow import period_of

    period = period_of(2 * 3600, None, 60, lambda: pd.Timestamp("2026-03-03T10:17:42Z"))
    assert (period.start, period.end) == (
        pd.Timestamp("2026-03-03T08:17:00Z"),
        pd.Timestamp("2026-03-03T10:17:00Z"),
    )
    assert period.cells == 120


@pytest.mark.parametrize(
    ("since", "until", "named"),
    [
        (99_999 * 86_400, None, "more than the 5,000,000 a series may hold"),
        (3600, pd.Timestamp("2026-03-04T00:00:00Z"), "is in the future"),
    ],
)
def test_a_period_no_report_can_replay_is_refused(
    since: int, until: pd.Timestamp | None, named: str
) -> None:
    from forecaster.exceptions import ConfigError
    from prewarm.shadow import period_of

    with pytest.raises(ConfigError, match=named):
        period_of(since, until, 60, lambda: pd.Timestamp("2026-03-03T10:17:42Z"))
