from __future__ import annotations

import json
from dataclasses import replace

import pytest

from forecaster.exceptions import ConfigError
from forecaster.workload import ColdStart, WorkloadPolicy, WorkloadSpec

SPEC = WorkloadSpec(
    capacity_per_replica=0.05, cold_start=ColdStart.lognormal(240, 0.3), tier=1, max_replicas=30
)


def test_json_round_trip_gives_an_equal_policy():
    policy = WorkloadPolicy(SPEC, quantile=0.9, target_utilization=0.7, tolerance=0.0, hold=120)
    assert WorkloadPolicy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy


def test_defaults_resolve_to_the_spec():
    policy = WorkloadPolicy(SPEC)
    assert policy.settings() == {
        "quantile": 0.99,
        "forecast_utilization": 0.8,
        "target_utilization": 0.8,
        "tolerance": 0.1,
        "buffer_quantile": 0.0,
    }
    assert policy.tuned(quantile=0.5, tolerance=0.0).settings()["quantile"] == 0.5
    # Only a workload that can sleep has an activation rule to tune and serve.
    sleeping = WorkloadPolicy(replace(SPEC, min_replicas=0))
    # 1 - the planned quantile: the old activation rule
    assert sleeping.settings()["activation_probability"] == pytest.approx(0.01)


def test_differences_name_each_field_and_both_values():
    served = WorkloadPolicy(SPEC, hold=60)
    changed = WorkloadPolicy(
        WorkloadSpec(capacity_per_replica=0.1, cold_start=ColdStart.lognormal(240, 0.3), tier=1,
                     max_replicas=30),
        hold=60,
        tolerance=0.0,
    )  # fmt: skip
    assert served.differences(changed) == [
        "spec.capacity_per_replica 0.05 -> 0.1",
        "tolerance 0.1 -> 0.0",
    ]
    assert served.differences(served) == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("quantile", 1.0, "`quantile` must be in (0, 1), got 1.0"),
        ("target_utilization", 0.0, "`target_utilization` must be in (0, 1], got 0.0"),
        ("tolerance", -0.1, "`tolerance` must be in [0, 1), got -0.1"),
        ("activation_probability", 0.0, "`activation_probability` must be in (0, 1), got 0.0"),
        ("hold", float("nan"), "`hold` must be a finite number of seconds >= 0, got nan"),
    ],
)
def test_bad_settings_are_refused_by_name(field, value, message):
    with pytest.raises(ConfigError) as error:
        WorkloadPolicy(SPEC, **{field: value})
    assert str(error.value) == message


def test_unknown_keys_and_untunable_settings_are_refused():
    document = WorkloadPolicy(SPEC).to_dict() | {"surprise": 1}
    with pytest.raises(ConfigError, match=r"unknown \['surprise'\]"):
        WorkloadPolicy.from_dict(document)
    with pytest.raises(ConfigError, match=r"not tunable settings \['hold'\]"):
        WorkloadPolicy(SPEC).tuned(hold=5.0)
