"""Sharded serving: ``--shard K/N`` serves the workloads a stable hash of their names gives K."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.capacity import required_horizons
from forecaster.exceptions import ConfigError
from forecaster.models.baseline import LastValue
from prewarm.cli import cli
from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings, refresh_config_from_project
from serving.shards import Shard, shard_of
from tests.serving.support import STEP, DictRegistry, FrameSource, history, running, wait_until
from training.config import TrainConfig, parse_config
from training.pyfunc import PrewarmModel

NAMES = ("chat", "image", "embed", "rerank", "speech", "vision")


def _config(names: tuple[str, ...] = NAMES) -> TrainConfig:
    return parse_config({
        "source": {"type": "file", "path": "unused.csv"},
        "workloads": [{"name": name, "capacity": {"capacity_per_replica": 10,
                                                  "cold_start": "30s", "quantile": 0.9}}
                      for name in names],
        "serving": {"refresh_interval": 0.2, "max_staleness": "1m",
                    "history_window": 30 * STEP, "poll_model_every": 0.1},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [("2/4", None), (" 1 / 1 ", None), ("0/4", "1 <= K <= N, got 0/4"),
     ("5/4", "1 <= K <= N, got 5/4"), ("two", "a shard is K/N, e.g. 2/4, got 'two'"),
     ("1/0", "got 1/0"), ("256/256", None), ("1/257", "N at most 256, got 1/257")],
)  # fmt: skip
def test_a_shard_is_k_of_n(text: str, message: str | None) -> None:
    if message is None:
        shard = Shard.parse(text)
        assert 1 <= shard.index <= shard.count
    else:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            Shard.parse(text)


def test_every_workload_is_held_by_exactly_one_shard_and_the_shards_are_even() -> None:
    names = [f"model-{k}" for k in range(4000)]
    shards = [Shard(k, 4) for k in range(1, 5)]
    holders = [[s.index for s in shards if s.holds(name)] for name in names]
    assert all(len(h) == 1 for h in holders)
    sizes = Counter(h[0] for h in holders)
    assert min(sizes.values()) > 0.9 * 1000 and max(sizes.values()) < 1.1 * 1000, sizes


def test_a_workloads_shard_does_not_move_between_processes_or_versions() -> None:
    # CRC-32 of the name: Python's salted hash would move workloads at every restart, and
    # the manifests' routing with them.
    assert [shard_of(name, 4) for name in ("chat", "batch")] == [3, 1]


def test_the_refresher_plans_only_the_shards_workloads() -> None:
    config = _config()
    served = [
        [w.name for w in refresh_config_from_project(config, Shard(k, 3)).workloads]
        for k in (1, 2, 3)
    ]
    assert sorted(n for names in served for n in names) == sorted(NAMES)  # each once
    for k, names in enumerate(served, start=1):
        assert all(shard_of(name, 3) == k for name in names)
    assert [w.name for w in refresh_config_from_project(config).workloads] == list(NAMES)


def test_a_shard_that_holds_nothing_is_a_config_error() -> None:
    (alone,) = ("chat",)
    empty = next(k for k in range(1, 4) if k != shard_of(alone, 3))
    with pytest.raises(ConfigError, match=f"shard {empty}/3 holds none of the config's 1"):
        refresh_config_from_project(_config((alone,)), Shard(empty, 3))


@pytest.mark.integration
def test_a_shard_answers_its_workloads_and_holds_the_hpa_on_the_others() -> None:
    config = _config()
    shard = Shard(1, 2)
    held = sorted(n for n in NAMES if shard.holds(n))
    others = sorted(n for n in NAMES if not shard.holds(n))
    assert held and others
    frame = history(dict.fromkeys(NAMES, 6.0), pd.Timestamp.now(tz="UTC"), 200)
    step = STEP
    horizons = sorted(
        {h for p in config.policies.values() for h in required_horizons(p.spec, step)}
    )
    model = LastValue(horizons=horizons, quantiles=(0.5, 0.9), scale_window="10m").fit(frame)
    registry = DictRegistry(config.mlflow.registered_model)
    registry.add(PrewarmModel(model, config.policies))  # one model for every shard
    components = ServingComponents(
        refresh_config_from_project(config, shard), lambda: FrameSource(frame), registry
    )
    settings = ServingSettings(port=0, grpc_port=None, shard="1/2")
    app = create_app(settings, components)
    with running(app, lambda a: uvicorn_config(a, settings)) as server:
        runtime = app.state.runtime
        # The first plan starts the planning child process: seconds, more on a busy machine.
        wait_until(lambda: all(runtime.store.current.states[n].forecast for n in held), timeout=120)
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        for name in held:
            answer = httpx.get(f"{base}/v1/workloads/{name}/forecast", timeout=5)
            assert answer.status_code == 200, answer.text
        metric = f"{base}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/"
        for name in others:  # another shard's: an error the HPA holds on, never a value
            answer = httpx.get(f"{base}/v1/workloads/{name}/forecast", timeout=5)
            assert answer.status_code == 404 and f"unknown workload '{name}'" in answer.text
            answer = httpx.get(
                f"{metric}prewarm_desired_replicas?labelSelector=workload%3D{name}", timeout=5
            )
            assert answer.status_code == 404


@pytest.mark.parametrize(
    ("shard", "message"),
    [("0/2", "1 <= K <= N, got 0/2"), ("x", "a shard is K/N")],
)
def test_serve_refuses_a_bad_shard_with_exit_2(tmp_path: Path, shard: str, message: str) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text("source: {type: file, path: unused.csv}\nworkloads: [{name: chat}]\n")
    result = CliRunner().invoke(cli, ["serve", "--config", str(path), "--shard", shard])
    assert result.exit_code == 2, result.output
    assert message in result.output
