"""Config errors name the field path and echo the bad value (table-driven)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from forecaster.exceptions import ConfigError, UnknownNameError
from forecaster.workload import WorkloadPolicy
from training.config import load_config, parse_config
from training.sources import SOURCES, make_source

BASE: dict[str, Any] = {
    "source": {"type": "prometheus", "url": "http://prom:9090"},
    "workloads": [
        {"name": "chat", "demand": "sum(rate(x[5m]))", "capacity": {"capacity_per_replica": 5}}
    ],
}


def edit(path: str, value: Any) -> dict[str, Any]:
    """``BASE`` with ``value`` at the dotted ``path`` (``workloads.0.capacity.x``)."""
    data = copy.deepcopy(BASE)
    node: Any = data
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


DELETE = object()

CASES = [
    ("negative-capacity", "workloads.0.capacity.capacity_per_replica", -3,
     r"workloads\[0\] \(chat\)\.capacity: `capacity_per_replica` must be a finite number "
     r">= 1e-06 .*got -3"),
    ("bad-duration", "workloads.0.capacity.cold_start", "5 minutes",
     r"workloads\[0\] \(chat\)\.capacity\.cold_start.*'5 minutes'"),
    ("quantile-out-of-range", "workloads.0.capacity.quantile", 1.5,
     r"`quantile` must be in \(0, 1\), got 1.5"),
    ("unknown-key", "workloads.0.capacity.capacity", 5,
     r"workloads\[0\] \(chat\)\.capacity\.capacity: unknown field"),
    ("missing-capacity", "workloads.0.capacity", DELETE,
     r"workloads\[0\] \(chat\)\.capacity: required field is missing"),
    ("bad-name", "workloads.0.name", "Chat Model",
     r"workloads\[0\] \(Chat Model\)\.name: .*'Chat Model'"),
    ("unknown-source", "source.type", "influx",
     r"source: .*'prometheus', 'file', 'replay'"),
    ("bad-url", "source.url", 5, r"source\.url: .*5"),
    ("unknown-model", "model.name", "prophet", r"model\.name: unknown model 'prophet'"),
    ("model-typo", "model.name", "lightgbm-windw",
     r"model\.name: unknown model 'lightgbm-windw'; did you mean 'lightgbm-window'\?"),
    ("managed-param", "model.params", {"horizons": [1]}, r"model\.params: \['horizons'\]"),
    ("bad-engine", "model.params", {"engine": "xgboost"},
     r"model: .*params: `engine` must be one of \['lightgbm', 'hist-gbm'\], got 'xgboost'"),
    ("no-booster", "model.params", {"n_seeds": 0},
     r"model: .*params: `n_seeds` must be a whole number >= 1, got 0"),
    ("bad-feature", "model.features", {"calendar": ["moon_phase"]},
     r"model\.features: `calendar` has unknown entries \['moon_phase'\]"),
    ("unknown-policy", "evaluation.policies", ["magic"], r"evaluation\.policies: unknown"),
    ("tuning-margin", "evaluation.tuning_margin", 0,
     r"evaluation\.tuning_margin: .*greater than 0.*, got 0"),
    ("tuning-margin-over-1", "evaluation.tuning_margin", 2,
     r"evaluation\.tuning_margin: .*less than or equal to 1.*, got 2"),
    ("gate-policy", "gate.policy", "static", r"gate\.policy: must be 'predictive' or 'hybrid'"),
    ("negative-retries", "source.retries", -1, r"source\.retries: .*-1"),
    ("policy-quantile", "workloads.0.policy.quantile", 1.5,
     r"workloads\[0\] \(chat\)\.policy\.quantile: .*less than 1.*1\.5"),
    ("policy-forecast-utilization", "workloads.0.policy.forecast_utilization", 0,
     r"workloads\[0\] \(chat\)\.policy\.forecast_utilization: .*greater than 0.*, got 0"),
    ("policy-target-utilization", "workloads.0.policy.target_utilization", 1.2,
     r"workloads\[0\] \(chat\)\.policy\.target_utilization: .*less than or equal to 1.*1\.2"),
    ("policy-tolerance", "workloads.0.policy.tolerance", -0.1,
     r"workloads\[0\] \(chat\)\.policy\.tolerance: .*greater than or equal to 0.*-0\.1"),
    ("policy-tolerance-nan", "workloads.0.policy.tolerance", float("nan"),
     r"workloads\[0\] \(chat\)\.policy\.tolerance: .*finite.*nan"),
    ("serving-interval", "serving.refresh_interval", 0,
     r"serving\.refresh_interval: .*greater than 0"),
    ("serving-staleness", "serving", {"refresh_interval": "1m", "max_staleness": "30s"},
     r"serving: .*`max_staleness` must be at least `refresh_interval`.*30\.0"),
    ("serving-fetch-workers", "serving.fetch_workers", 0,
     r"serving\.fetch_workers: .*greater than or equal to 1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_config_error_names_field_and_value(path: str, value: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(edit(path, value), "train.yaml")


def test_prometheus_workloads_need_a_query() -> None:
    data = copy.deepcopy(BASE)
    del data["workloads"][0]["demand"]
    with pytest.raises(ConfigError, match=r"workloads \['chat'\] need a `demand`"):
        parse_config(data)


def test_duplicate_workloads_are_refused() -> None:
    data = copy.deepcopy(BASE)
    data["workloads"].append(copy.deepcopy(data["workloads"][0]))
    with pytest.raises(ConfigError, match=r"duplicates \['chat'\]"):
        parse_config(data)


def test_file_sources_refuse_covariates_and_resolve_relative_paths(tmp_path: Path) -> None:
    data = copy.deepcopy(BASE)
    data["source"] = {"type": "file", "path": "demand.csv"}
    data["workloads"][0]["covariates"] = {"gpu": "x"}
    with pytest.raises(ConfigError, match="covariates"):
        parse_config(data)
    del data["workloads"][0]["covariates"]
    (tmp_path / "train.yaml").write_text(__import__("yaml").safe_dump(data))
    assert load_config(tmp_path / "train.yaml").source.path == tmp_path / "demand.csv"  # type: ignore[union-attr]


def test_not_yaml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("source: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


def test_derived_horizons_and_quantiles() -> None:
    data = edit("workloads.0.policy", {"hold": "2m", "decision_delay": "30s"})
    data["workloads"][0]["capacity"] |= {"cold_start": "3m", "quantile": 0.97}
    config = parse_config(data)
    # lead 210 s, hold 120 s: cells 1 + floor(210/60) .. 1 + ceil(330/60)
    assert config.horizons(60) == (4, 5, 6, 7)
    assert 0.97 in config.quantiles() and 0.99 in config.quantiles()


def test_examples_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    for name in ("prometheus.yaml", "file.yaml", "replay.yaml"):
        assert load_config(root / name).workloads


def test_sources_registry_lists_names_on_unknown() -> None:
    assert sorted(SOURCES) == ["file", "prometheus", "replay"]
    with pytest.raises(UnknownNameError, match="registered sources: file, prometheus, replay"):
        make_source("influx", None)


def test_policies_join_capacity_and_policy_sections() -> None:
    data = edit(
        "workloads.0.policy",
        {
            "hold": "2m",
            "decision_delay": "30s",
            "quantile": 0.6,
            "forecast_utilization": 1,
            "tolerance": 0,
        },
    )
    data["workloads"][0]["capacity"] |= {"cold_start": "3m", "quantile": 0.97}
    config = parse_config(data)
    policy = config.policies["chat"]
    assert policy == WorkloadPolicy(
        config.specs["chat"],
        quantile=0.6,
        forecast_utilization=1.0,
        tolerance=0.0,
        hold=120.0,
        decision_delay=30.0,
    )
    assert config.workloads[0].policy.unset == (
        "target_utilization",
        "buffer_quantile",
        "activation_probability",
    )
    # The model forecasts the quantile each policy plans at, beside the spec's own.
    assert {0.6, 0.97} <= set(config.quantiles())
    tuned = {"chat": policy.tuned(quantile=0.42)}
    assert 0.42 in config.quantiles(tuned) and 0.42 not in config.quantiles()
    # ... and the one its activation rule reads: P(demand > 0) > 0.33 is the 0.67 quantile.
    waking = {"chat": policy.tuned(activation_probability=0.33)}
    assert 0.67 in config.quantiles(waking) and 0.67 not in config.quantiles()


def test_unset_policy_settings_take_the_defaults() -> None:
    policy = parse_config(BASE).policies["chat"]
    assert policy == WorkloadPolicy(parse_config(BASE).specs["chat"])
