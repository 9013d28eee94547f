"""Which workloads a ``train --tune --tune-limit`` run tunes, what the others keep, and the
champion's record of the workloads no backtest has scored (a real MLflow store)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from forecaster.exceptions import ConfigError
from forecaster.workload import WorkloadPolicy, WorkloadSpec
from training.exceptions import TrackingError
from training.rotation import CHANGED, DUE, NEW, PENDING, rotation
from training.tracking import TUNING_DEPLOYED, TUNING_PENDING, pending_workloads

CONFIGURED = WorkloadPolicy(WorkloadSpec(capacity_per_replica=8.0, cold_start=300))
# what an earlier --tune registered: the configured policy with tuned settings and the warm
# buffer training learned
TUNED = replace(
    CONFIGURED.tuned(quantile=0.95, forecast_utilization=0.8, target_utilization=0.5),
    buffer_quantile=0.9,
    buffer=(1.0,) * 24,
    buffer_level=2.0,
)


def fleet(n: int) -> dict[str, WorkloadPolicy]:
    return {f"w{k:02d}": CONFIGURED for k in range(n)}


def test_without_a_limit_every_workload_is_tuned() -> None:
    turn = rotation(fleet(5), {}, (), None, 0)
    assert turn.tuned == tuple(fleet(5)) and turn.kept == {} and turn.pending == []


def test_the_rotation_tunes_the_limit_each_day_and_every_workload_within_n_over_k_days() -> None:
    policies = fleet(10)
    registered = dict.fromkeys(policies, TUNED)
    days = [rotation(policies, registered, (), 3, day) for day in range(20_000, 20_008)]
    assert all(len(turn.tuned) == 3 for turn in days)
    for first in range(len(days) - 3):  # any 4 consecutive days (10 / 3, rounded up)
        assert {n for turn in days[first : first + 4] for n in turn.tuned} == set(policies)
    # the same data's day tunes the same workloads: a rerun is the same run
    assert rotation(policies, registered, (), 3, 20_001).tuned == days[1].tuned


def test_new_then_changed_then_pending_then_due() -> None:
    policies = fleet(6)
    moved = replace(CONFIGURED, spec=replace(CONFIGURED.spec, cold_start=600))
    policies["w03"] = moved
    registered = dict.fromkeys(policies, TUNED)
    del registered["w05"]  # new
    turn = rotation(policies, registered, {"w01"}, 3, 0)
    assert turn.reasons == {
        "w00": DUE, "w01": PENDING, "w02": DUE, "w03": CHANGED, "w04": DUE, "w05": NEW,
    }  # fmt: skip
    assert turn.tuned == ("w01", "w03", "w05")
    assert turn.pending == []  # everything left out is due
    two = rotation(policies, registered, {"w01"}, 2, 0)
    assert two.tuned == ("w03", "w05") and two.pending == ["w01"]
    one = rotation(policies, registered, {"w01"}, 1, 0)
    assert one.tuned == ("w05",) and one.pending == ["w01", "w03"]
    # a changed workload past the limit keeps the tuned settings on its new policy
    assert one.kept["w03"].spec == moved.spec
    assert one.kept["w03"].settings() == TUNED.settings()


def test_a_due_workload_keeps_the_registered_settings_and_a_new_one_the_configs() -> None:
    policies = fleet(2)
    turn = rotation(policies, {"w00": TUNED}, (), 1, 0)
    assert turn.tuned == ("w01",)  # new first
    assert turn.kept["w00"].settings() == TUNED.settings()
    assert turn.kept["w00"].spec == TUNED.spec and turn.pending == []
    skipped = rotation(policies, {"w00": TUNED, "w01": TUNED}, (), 1, 1)
    assert skipped.tuned == ("w01",) and "w00" in skipped.kept
    past = rotation(fleet(3), {"w00": TUNED}, (), 1, 0)
    assert past.reasons["w02"] == NEW and past.kept["w02"] == CONFIGURED
    assert past.pending == ["w02"]


def test_a_relearned_buffer_or_a_retuned_setting_is_not_a_change() -> None:
    policies = {"w00": replace(CONFIGURED, buffer_quantile=0.5)}
    relearned = replace(TUNED, buffer=(3.0,) * 24, buffer_level=5.0)
    assert rotation(policies, {"w00": relearned}, (), 1, 0).reasons == {"w00": DUE}
    policies = {"w00": replace(CONFIGURED, hold=600.0)}
    assert rotation(policies, {"w00": TUNED}, (), 1, 0).reasons == {"w00": CHANGED}


def test_a_limit_below_one_names_the_argument() -> None:
    with pytest.raises(ConfigError, match=r"`limit` must be at least 1, got 0"):
        rotation(fleet(2), {}, (), 0, 0)


def registered_run(folder: Path, artifacts: dict[str, Any]) -> tuple[MlflowClient, str]:
    """A store holding version 1 of model ``m``, whose run carries ``artifacts``."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    run = client.create_run(client.create_experiment("tune", (folder / "art").as_uri()))
    for path, document in artifacts.items():
        client.log_dict(run.info.run_id, document, path)
    client.create_registered_model("m")
    client.create_model_version("m", f"{run.info.artifact_uri}/model", run_id=run.info.run_id)
    return client, "1"


@pytest.mark.parametrize(
    ("artifacts", "pending"),
    [
        ({}, None),  # trained without --tune: none of its settings were backtested
        ({TUNING_DEPLOYED: {"chat": {}}}, set()),  # tuned before --tune-limit existed
        ({TUNING_DEPLOYED: {"chat": {}}, TUNING_PENDING: {"workloads": ["code"]}}, {"code"}),
    ],
    ids=["untuned", "all-tuned", "limited"],
)
def test_the_champions_pending_workloads_are_read_from_its_run(
    tmp_path: Path, artifacts: dict[str, Any], pending: set[str] | None
) -> None:
    client, version = registered_run(tmp_path, artifacts)
    assert pending_workloads(client, "m", version) == pending


def test_a_malformed_pending_record_is_an_error_that_shows_it(tmp_path: Path) -> None:
    bad = {TUNING_DEPLOYED: {"chat": {}}, TUNING_PENDING: {"names": ["code"]}}
    client, version = registered_run(tmp_path, bad)
    with pytest.raises(TrackingError, match=r"pending.json is not .*'names': \['code'\]"):
        pending_workloads(client, "m", version)
