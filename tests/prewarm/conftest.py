"""One ``prewarm demo`` run, shared by the tests that read its report (it takes a minute)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import prewarm.demo
from prewarm.cli import cli

# Days and hours apart, and on different days of the week: the demo's replay clocks.
CLOCKS = (
    pd.Timestamp("2031-03-04 09:17:00", tz="UTC"),  # a Tuesday morning
    pd.Timestamp("2031-03-09 02:41:30", tz="UTC"),  # the next Sunday night
)


def fixed(now: pd.Timestamp) -> Callable[[], pd.Timestamp]:
    return lambda: now


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """``prewarm demo`` through the CLI with its replay at ``CLOCKS[0]``, not the wall clock:
    the report folder, the MLflow store's URI and what the command printed."""
    root = tmp_path_factory.mktemp("demo")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    at_first_clock = functools.partial(prewarm.demo.run_demo, clock=fixed(CLOCKS[0]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prewarm.demo, "run_demo", at_first_clock)
        result = CliRunner().invoke(
            cli, ["demo", "--out", str(root / "report"), "--tracking-uri", uri]
        )
    assert result.exit_code == 0, result.output
    return root / "report", uri, result.output
