"""One workload's failing file affects only that workload: in the files source, in training
with ``training.on_workload_failure: skip``, and in serving's real refresher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from serving.engine.models import ModelWatcher
from serving.engine.observability import ServingMetrics
from serving.engine.refresher import Refresher, empty_snapshot
from serving.engine.snapshot import SnapshotStore
from serving.exceptions import ForecastUnavailableError
from serving.wire.replies import Replies
from tests.integration.test_prometheus_failures import FakePrometheus
from tests.serving.support import DictRegistry, fit_planner, history, refresh_config, specs
from tests.training.support import prometheus_config
from training.config import parse_config
from training.exceptions import SourceError
from training.pipeline import run_training
from training.skipping import TAG_SKIPPED, pull_each
from training.sources.files import FileSource
from training.sources.prometheus import PrometheusSource

pytestmark = pytest.mark.timeout(300)


def single_series_file(path: Path, frame: pd.DataFrame) -> Path:
    frame[["timestamp", "value"]].to_csv(path, index=False)
    return path


def test_a_missing_file_fails_only_its_workload(tmp_path: Path) -> None:
    frame = gpu_inference_demand(days=1, step=300, seed=1, series="chat")
    source = FileSource(
        files={
            "chat": single_series_file(tmp_path / "chat.csv", frame),
            "code": tmp_path / "no.csv",
        }
    )
    start, end, step = source.window(None, None)
    fetched = source.fetch({"chat": "chat"}, start, end, step)
    assert set(fetched.frame["series"]) == {"chat"}
    assert fetched.frame["value"].notna().all()
    with pytest.raises(SourceError, match=r"workload 'code': data file '.*no\.csv' does not exist"):
        source.fetch({"code": "code"}, start, end, step)


def test_every_file_missing_is_one_error_naming_each(tmp_path: Path) -> None:
    source = FileSource(files={"chat": tmp_path / "a.csv", "code": tmp_path / "b.csv"})
    with pytest.raises(SourceError, match=r"no file .* 'chat': .*a\.csv.*; workload 'code'"):
        source.window(None, None)


def train_config(tmp_path: Path, policy: str | None) -> Any:
    frame = gpu_inference_demand(days=4, step=300, seed=3, series="chat", bursts_per_day=0)
    document: dict[str, Any] = {
        "source": {
            "type": "file",
            "files": {
                "chat": str(single_series_file(tmp_path / "chat.csv", frame)),
                "code": str(tmp_path / "code.csv"),  # never written
            },
        },
        "workloads": [
            {"name": name, "capacity": {"capacity_per_replica": 8, "quantile": 0.9}}
            for name in ("chat", "code")
        ],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "1d", "train_window": "2d", "policies": ["predictive"]},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "iso"},
    }
    if policy is not None:
        document["training"] = {"on_workload_failure": policy}
    return parse_config(document)


def test_training_fails_on_a_missing_file_by_default(tmp_path: Path) -> None:
    config = train_config(tmp_path, None)
    assert config.training.on_workload_failure == "fail"
    with pytest.raises(SourceError, match=r"workload 'code': data file .*code\.csv"):
        run_training(config, promote=False)


@pytest.mark.integration
def test_training_with_skip_trains_the_rest_and_says_which_were_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = train_config(tmp_path, "skip")
    result = run_training(config, promote=False)
    assert result.model is not None
    assert set(result.model.policies) == {"chat"}
    assert "; skipped workloads: code (" in result.message
    assert "code.csv" in result.message
    assert any("workload code skipped" in r.getMessage() for r in caplog.records)
    assert result.run_id is not None
    tags = MlflowClient(config.mlflow.tracking_uri).get_run(result.run_id).data.tags
    assert tags[TAG_SKIPPED] == "code"
    assert "does not exist" in tags["prewarm.skipped.code"]


def test_the_refresher_keeps_the_other_workloads_fresh(tmp_path: Path) -> None:
    levels = {"chat": 40.0, "embed": 7.0}
    now = pd.Timestamp.now(tz="UTC")
    frame = history(levels, now, 200)
    chat = single_series_file(tmp_path / "chat.csv", frame[frame["series"] == "chat"])
    files = {"chat": chat, "embed": tmp_path / "embed.csv"}  # embed's file is missing
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(levels)))
    config = refresh_config(levels)
    store = SnapshotStore(empty_snapshot(config), Replies)
    watcher = ModelWatcher(registry, config.model_name, poll_interval=0.0)
    watcher.check()  # what the watcher's thread does when the refresher runs
    refresher = Refresher(
        config,
        lambda: FileSource(files=files),
        watcher,
        store,
        ServingMetrics(lambda: store.current),
    )
    try:
        snapshot = refresher.tick(now.to_pydatetime())
        assert snapshot.forecast("chat", now.to_pydatetime()).desired_replicas >= 1
        with pytest.raises(ForecastUnavailableError, match=r"embed\.csv' does not exist"):
            snapshot.forecast("embed", now.to_pydatetime())
    finally:
        refresher.close()


def test_skip_pulls_around_a_failing_prometheus_query() -> None:
    def answer(params: dict[str, list[str]]) -> tuple[int, str, bytes]:
        if "broken" in params["query"][0]:
            body = '{"status":"error","errorType":"bad_data","error":"parse error"}'
            return 400, "application/json", body.encode()
        start, end, step = (int(float(params[k][0])) for k in ("start", "end", "step"))
        values = ",".join(f'[{t},"5"]' for t in range(start, end + 1, step))
        series = f'{{"metric":{{}},"values":[{values}]}}'
        body = f'{{"status":"success","data":{{"resultType":"matrix","result":[{series}]}}}}'
        return 200, "application/json", body.encode()

    config = parse_config(
        {
            "source": {"type": "prometheus", "url": "http://127.0.0.1:9", "step": "1m"},
            "workloads": [
                {"name": "chat", "demand": "sum(up)", "capacity": {"capacity_per_replica": 1}},
                {"name": "code", "demand": "broken(", "capacity": {"capacity_per_replica": 1}},
            ],
            "training": {"on_workload_failure": "skip"},
        }
    )
    end = pd.Timestamp("2025-05-01T06:00:00Z")
    with FakePrometheus(answer) as server:
        source = PrometheusSource(prometheus_config(server.url, retries=0), end=end)
        with source:
            history, skipped = pull_each(config, source, (end - pd.Timedelta("1h"), end, 60))
    assert set(history.frame["series"]) == {"chat"}
    assert len(history.frame) == 61 and (history.frame["value"] == 5).all()
    assert list(skipped.reasons) == ["code"]
    assert "HTTP 400: bad_data: parse error" in skipped.reasons["code"]
