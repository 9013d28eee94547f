"""Every shipped example config trains: ``prewarm train --config examples/X.yaml`` exits 0 or 4.

File, replay and demo examples run as shipped. The Prometheus example runs against a real
server backfilled with the series its queries name (a vLLM counter and queue, a Triton counter
without the ``_total`` suffix and its pending requests, DCGM GPU utilization); only where it
points is changed: the server's
URL, a token file, a fixed end, a local MLflow store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from tests.integration.prometheus import Counter, Gauge

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAINED = (0, 4)  # promoted, or trained and kept the champion (docs/training.md)
END = 1_767_225_600  # 2026-01-01T00:00:00Z
STEP = 60
# The example's 28-day lookback, shortened to what its 14-day train window and 1-day gate
# window need, so the backfill stays a few seconds.
DAYS = 16


def train(config: Path, tmp_path: Path) -> Any:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return CliRunner().invoke(
        cli, ["train", "--config", str(config), "--tracking-uri", uri, "--no-progress"]
    )


def test_every_example_is_covered():
    shipped = {path.name for path in EXAMPLES.glob("*.yaml")}
    assert shipped == {*FILE_EXAMPLES, "prometheus.yaml"}


FILE_EXAMPLES = ("demo.yaml", "file.yaml", "replay.yaml")


@pytest.mark.parametrize("name", FILE_EXAMPLES)
def test_file_example_trains(name: str, tmp_path: Path) -> None:
    outcome = train(EXAMPLES / name, tmp_path)
    assert outcome.exit_code in TRAINED, outcome.output


def counter(rate: np.ndarray, start: int) -> list[tuple[float, float]]:
    totals = np.cumsum(rate * STEP)
    return [(float(start + i * STEP), round(float(t), 3)) for i, t in enumerate(totals)]


def gauge(values: np.ndarray, start: int) -> list[tuple[float, float]]:
    return [(float(start + i * STEP), round(float(v), 2)) for i, v in enumerate(values)]


@pytest.fixture(scope="module")
def server(prometheus_factory: Callable[..., Any]) -> Any:
    start = END - DAYS * 86400
    chat = gpu_inference_demand(days=DAYS, step=STEP, seed=3, base_rate=60.0)["value"]
    embed = gpu_inference_demand(days=DAYS, step=STEP, seed=4, base_rate=600.0)["value"]
    chat, embed = chat.to_numpy(), embed.to_numpy()
    empty = gauge(np.zeros(chat.size), start)
    return prometheus_factory([
        Counter("vllm:request_success", [({"model_name": "llama-70b-chat"}, counter(chat, start))]),
        # Triton's counters carry no _total suffix: written as the series a scrape stores.
        Gauge("nv_inference_request_success", [({"model": "embeddings"}, counter(embed, start))]),
        # The queues whose growth the demand queries add to the completions (empty here).
        Gauge("vllm:num_requests_waiting", [({"model_name": "llama-70b-chat"}, empty)]),
        Gauge("nv_inference_pending_request_count", [({"model": "embeddings"}, empty)]),
        Gauge("DCGM_FI_DEV_GPU_UTIL", [
            ({"pod": "llama-70b-chat-0"}, gauge(np.clip(chat / chat.max() * 95, 0, 100), start)),
            ({"pod": "embeddings-0"}, gauge(np.clip(embed / embed.max() * 95, 0, 100), start)),
        ]),
    ])  # fmt: skip


def test_prometheus_example_trains(server: Any, tmp_path: Path) -> None:
    document = yaml.safe_load((EXAMPLES / "prometheus.yaml").read_text())
    token = tmp_path / "token"
    token.write_text("not-a-secret\n")
    document["source"].update(
        url=server.url,
        bearer_token_file=str(token),
        end="2026-01-01T00:00:00Z",
        lookback=f"{DAYS}d",
    )
    config = tmp_path / "prometheus.yaml"
    config.write_text(yaml.safe_dump(document))
    outcome = train(config, tmp_path)
    assert outcome.exit_code in TRAINED, outcome.output
