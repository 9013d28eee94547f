"""The `auto` cold start and capacity in the configuration file: accepted, and errors named."""

from __future__ import annotations

from typing import Any

import pytest

from forecaster.exceptions import ConfigError
from training.config import parse_config


def document(
    capacity: dict[str, Any], measured: dict[str, Any] | None = None, **source: Any
) -> dict[str, Any]:
    workload: dict[str, Any] = {"name": "chat", "demand": "up", "capacity": capacity}
    if measured is not None:
        workload["measured"] = measured
    return {
        "source": {"type": "prometheus", "url": "http://127.0.0.1:9", **source},
        "workloads": [workload],
    }


def error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return str(caught.value)


def test_auto_is_accepted_with_a_pods_selector_and_refused_as_a_spec() -> None:
    config = parse_config(
        document(
            {"capacity_per_replica": "auto", "cold_start": "auto"},
            {"pods": 'pod=~"chat-.*"', "cold_start_fallback": "7m", "min_starts": 3},
        )
    )
    workload = config.workloads[0]
    assert workload.capacity.auto == ("cold_start", "capacity_per_replica")
    assert workload.measured.cold_start_fallback == 420
    assert workload.measures
    with pytest.raises(ConfigError, match=r"capacity.cold_start is `auto`: `prewarm train`"):
        _ = workload.spec


@pytest.mark.parametrize(
    ("capacity", "measured", "line"),
    [
        pytest.param(
            {"capacity_per_replica": 1, "cold_start": "auto"},
            None,
            "workloads[0] (chat): `capacity.cold_start: auto` needs a `measured.pods` selector",
            id="cold-start-without-pods",
        ),
        pytest.param(
            {"capacity_per_replica": "auto"},
            {"queue": "sum(q)"},
            "workloads[0] (chat): `capacity.capacity_per_replica: auto` needs `ready_replicas` "
            "or a `measured.pods` selector (the ready pods)",
            id="capacity-without-ready",
        ),
        pytest.param(
            {"capacity_per_replica": "atuo"},
            None,
            "workloads[0] (chat).capacity.capacity_per_replica: must be a number, got 'atuo'",
            id="typo",
        ),
        pytest.param(
            {"capacity_per_replica": 1},
            {"pods": 'pod=~"chat-.*"', "cold_start_quantile": 1.5},
            "workloads[0] (chat).measured.cold_start_quantile: must be less than 1.0, got 1.5",
            id="quantile",
        ),
    ],
)
def test_errors_name_the_field(
    capacity: dict[str, Any], measured: dict[str, Any] | None, line: str
) -> None:
    assert error(document(capacity, measured)).splitlines()[1:] == [f"  {line}"]


def test_auto_needs_a_prometheus_source() -> None:
    data = document({"capacity_per_replica": "auto"}, {"pods": 'pod=~"chat-.*"'})
    data["source"] = {"type": "file", "path": "demand.csv"}
    assert "`auto` and `measured` are read from Prometheus only; workloads ['chat']" in error(data)


def test_serve_checks_a_measured_workload_against_its_registered_policy_but_the_auto_fields() -> (
    None
):
    from dataclasses import replace

    from forecaster.workload import ColdStart
    from serving.engine.drift import policy_drift
    from serving.settings import refresh_config_from_project

    config = parse_config(
        document(
            {"capacity_per_replica": "auto", "cold_start": "auto", "max_replicas": 40},
            {"pods": 'pod=~"chat-.*"'},
        )
    )
    (served,) = refresh_config_from_project(config).workloads
    assert set(served.deferred) >= {"spec.cold_start", "spec.capacity_per_replica"}
    # What training registered: the measured values in place of the stand-ins.
    stand_in = served.policy.spec
    measured = replace(stand_in, capacity_per_replica=4.2, cold_start=ColdStart.fixed(187.0))
    registered = replace(served.policy, spec=measured)
    assert policy_drift(served, registered, "3") is None
    # Any field the file states is still compared.
    other = replace(registered, spec=replace(measured, max_replicas=20))
    assert policy_drift(served, other, "3") == (
        "workload chat: max_replicas 20 -> 40 since version 3: retrain or revert"
    )


def test_the_hpa_metric_defaults_to_the_demand_and_names_a_bad_value() -> None:
    workload = document({"capacity_per_replica": 4})
    assert parse_config(workload).workloads[0].hpa_metric == "demand"
    workload["workloads"][0]["hpa_metric"] = "gpu-utilization"
    assert parse_config(workload).workloads[0].hpa_metric == "gpu-utilization"
    workload["workloads"][0]["hpa_metric"] = "gpu"
    message = error(workload)
    assert "workloads[0] (chat).hpa_metric" in message and "'gpu'" in message
