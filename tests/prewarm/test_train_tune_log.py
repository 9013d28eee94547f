"""What ``prewarm train --tune`` logs per workload: the setting it registers, what that bought
out of sample against every baseline, and a warning where the tuned reactive HPA alone was
cheaper, since the registered policy is what ``prewarm serve`` publishes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from forecaster.backtest.frontier import compared
from prewarm.train import _log_tuned

pytestmark = pytest.mark.usefixtures("isolated_logging")

SETTINGS = {"quantile": 0.9, "forecast_utilization": 1.0, "target_utilization": 0.9}


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    handler = Records()
    logger = logging.getLogger("prewarm.train")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler.records
    logger.removeHandler(handler)


def document(hybrid: float, reactive: float, settings: dict[str, float]) -> dict[str, Any]:
    """A backtest document's deployed section: hybrid and the reactive HPA meet the SLO, the
    other baselines did not run (no saving against them)."""
    row = {"meets_slo": True, "unserved_fraction": 5e-4}
    savings: dict[str, float | None] = dict.fromkeys([*compared(["hybrid"]), "oracle_gap"])
    return {
        "deployed": {
            "policies": {
                "hybrid": row | {"cost": hybrid, "settings": settings},
                "reactive": row | {"cost": reactive, "settings": {}},
            },
            "savings": savings | {"vs_reactive": 1 - hybrid / reactive},
        }
    }


def test_a_hybrid_dearer_than_the_reactive_hpa_is_a_warning(
    records: list[logging.LogRecord],
) -> None:
    _log_tuned("chat", SETTINGS, document(1_250.0, 1_000.0, SETTINGS))
    info, warning = records
    assert info.levelno == logging.INFO
    assert "tuned {'quantile': 0.9" in info.getMessage()
    assert "meets the SLO (5.00e-04 unserved)" in info.getMessage()
    assert "-25.0% vs reactive" in info.getMessage()
    assert warning.levelno == logging.WARNING
    assert "costs 25.0% more than the tuned reactive HPA" in warning.getMessage()
    assert warning.workload == "chat"  # type: ignore[attr-defined]


def test_a_saving_is_said_without_a_warning(records: list[logging.LogRecord]) -> None:
    _log_tuned("chat", SETTINGS, document(800.0, 1_000.0, SETTINGS))
    (info,) = records
    assert "+20.0% vs reactive" in info.getMessage()


def test_a_rung_of_reach_is_named(records: list[logging.LogRecord]) -> None:
    rung = SETTINGS | {"target_utilization": 0.15}
    _log_tuned("chat", rung, document(1_000.0, 1_000.0, rung))
    info, headroom = records
    assert "+0.0% vs reactive" in info.getMessage()
    assert "its reactive path at utilization 0.15" in headroom.getMessage()
    assert all(record.levelno == logging.INFO for record in records)
