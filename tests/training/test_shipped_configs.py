"""Every config the project ships loads without a warning: an example that cannot work as
meant (e.g. a staleness limit shorter than its data's step) teaches the wrong setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*ROOT.glob("examples/*.yaml"), ROOT / "deploy" / "base" / "prewarm.yaml"])


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_a_shipped_config_loads_without_warnings(path: Path) -> None:
    assert load_config(path).warnings == []


def test_every_example_is_checked() -> None:
    assert len(SHIPPED) >= 5
