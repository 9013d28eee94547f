"""A demand query that counts completions warns when the config loads; arrival-side ones do not."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from training.config import completion_side, load_config, parse_config


def document(*demands: str, source: str = "prometheus") -> dict[str, Any]:
    location = (
        {"type": "prometheus", "url": "http://127.0.0.1:9"}
        if source == "prometheus"
        else {"type": "file", "path": "demand.csv"}
    )
    return {
        "source": location,
        "workloads": [
            {"name": f"w{i}", "demand": d, "capacity": {"capacity_per_replica": 4}}
            for i, d in enumerate(demands)
        ],
    }


@pytest.mark.parametrize(
    ("query", "metric"),
    [
        (
            'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))',
            "vllm:request_success_total",
        ),
        ('sum(rate(nv_inference_request_success{model="e"}[1m]))', "nv_inference_request_success"),
        ("sum(rate(jobs_completed_total[5m]))", "jobs_completed_total"),
        (
            "sum(rate(vllm:e2e_request_latency_seconds_count[5m]))",
            "vllm:e2e_request_latency_seconds_count",
        ),
    ],
)
def test_a_completion_counter_is_named(query: str, metric: str) -> None:
    assert completion_side(query) == metric


@pytest.mark.parametrize(
    "query",
    [
        'sum(vllm:num_requests_running{model="c"} + vllm:num_requests_waiting{model="c"})',
        "sum(rate(vllm:prompt_tokens_total[5m]))",
        "sum(rate(envoy_cluster_upstream_rq_total[5m]))",
        # completions plus queue growth are the arrivals
        "sum(rate(vllm:request_success_total[5m])) + sum(deriv(vllm:num_requests_waiting[5m]))",
        "rate(nv_inference_request_success[5m]) + deriv(nv_inference_pending_request_count[5m])",
        # a label value is not a metric
        'sum(rate(requests_received_total{status="success"}[5m]))',
    ],
)
def test_an_arrival_side_query_is_not_flagged(query: str) -> None:
    assert completion_side(query) is None


def test_loading_warns_naming_the_workload_and_the_metric(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "prewarm.yaml"
    completions = 'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))'
    arrivals = 'sum(vllm:num_requests_running{model_name="code"})'
    path.write_text(yaml.safe_dump(document(arrivals, completions)))
    with caplog.at_level(logging.WARNING, logger="training.config"):
        config = load_config(path)
    (warning,) = config.warnings
    assert warning.startswith("workload 'w1': the demand query reads 'vllm:request_success_total'")
    assert "arrival-side" in warning and completions in warning
    assert warning in caplog.text


def test_the_echoed_query_is_bounded() -> None:
    long = "sum(rate(x_success_total[5m]))" + " + 0" * 500
    (warning,) = parse_config(document(long)).warnings
    assert len(warning) < 700
    assert "chars)" in warning


def test_a_file_source_names_series_not_queries() -> None:
    assert parse_config(document("request_success", source="file")).warnings == []
