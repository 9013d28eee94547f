"""``IsActive`` / ``StreamIsActive`` follow the registered activation rule, over a real gRPC
channel to the served app: active when the lead window's ``(1 - p)`` quantile is above the
trigger's ``activationThreshold``, ``p`` the workload's registered ``activation_probability``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pandas as pd
import pytest

from forecaster.models.baseline import LastValue
from forecaster.workload import WorkloadPolicy
from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import RefreshConfig, ServingSettings, WorkloadConfig
from serving.wire.stubs import load_externalscaler
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    free_port,
    history,
    running,
    specs,
    wait_until,
)
from training.config import ServingConfig
from training.pyfunc import PrewarmModel

pytestmark = pytest.mark.integration

# The same demand three times; each workload registers its own activation probability.
LEVELS = {"eager": 6.0, "reluctant": 6.0, "unforecast": 6.0}
PROBABILITY = {"eager": 0.01, "reluctant": 0.5, "unforecast": 0.2}
QUANTILES = (0.5, 0.9, 0.99)  # no 0.8: the "unforecast" rule (p = 0.2) reads a missing one


@pytest.fixture(scope="module")
def scaler() -> Iterator[tuple[Any, Any, Any]]:
    now = pd.Timestamp.now(tz="UTC")
    frame = history(LEVELS, now, 200)
    source = FrameSource(frame)
    workload_specs = specs(LEVELS, min_replicas=0, quantile=0.9)
    policies = {
        name: WorkloadPolicy(spec, activation_probability=PROBABILITY[name])
        for name, spec in workload_specs.items()
    }
    model = LastValue(horizons=(4,), quantiles=QUANTILES, scale_window="10m")
    model.fit(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(PrewarmModel(model, policies))
    config = RefreshConfig(
        workloads=[WorkloadConfig(n, n, policies[n]) for n in LEVELS],
        model_name="prewarm-test",
        serving=ServingConfig(
            refresh_interval=0.2,
            max_staleness=3600.0,
            history_window=300,
            poll_model_every=0.1,
            fetch_workers=2,
        ),
    )
    settings = ServingSettings(port=free_port(), grpc_port=0)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.model_version is not None)
        wait_until(lambda: runtime.store.current.states["eager"].forecast is not None)
        stubs = load_externalscaler()
        with grpc.insecure_channel(f"127.0.0.1:{runtime.grpc_port}") as channel:
            yield stubs.pb2, stubs.pb2_grpc.ExternalScalerStub(channel), runtime


def _ref(pb2: Any, workload: str, threshold: float) -> Any:
    metadata = {"workload": workload, "activationThreshold": repr(threshold)}
    return pb2.ScaledObjectRef(name="so", namespace="default", scalerMetadata=metadata)


def _window(runtime: Any, workload: str) -> dict[float, float]:
    forecast = runtime.store.current.forecast(workload)
    assert forecast.quantile == 0.9
    return dict(forecast.quantiles)


@pytest.mark.parametrize(("workload", "level"), [("eager", 0.99), ("reluctant", 0.5)])
def test_is_active_reads_the_registered_quantile(
    scaler: tuple[Any, Any, Any], workload: str, level: float
) -> None:
    pb2, stub, runtime = scaler
    window = _window(runtime, workload)
    assert window[0.5] < window[0.9] < window[0.99]  # a band, so each rule answers its own
    read = window[level]
    # Just below and just above the quantile the rule reads: active, then not.
    assert stub.IsActive(_ref(pb2, workload, read * 0.999), timeout=5).result is True
    assert stub.IsActive(_ref(pb2, workload, read * 1.001), timeout=5).result is False
    # Between the planned quantile (0.9) and the registered one, the planned forecast demand
    # alone would answer the other way: the rule is p's, not the plan's.
    between = (window[0.9] + read) / 2
    planned_would_say = window[0.9] > between
    assert stub.IsActive(_ref(pb2, workload, between), timeout=5).result is not planned_would_say


def test_stream_is_active_pushes_the_registered_rule(scaler: tuple[Any, Any, Any]) -> None:
    pb2, stub, runtime = scaler
    window = _window(runtime, "eager")
    between = (window[0.9] + window[0.99]) / 2  # above the planned demand, below q0.99
    received: list[bool] = []
    stream = stub.StreamIsActive(_ref(pb2, "eager", between), timeout=30)

    def read() -> None:
        for message in stream:
            received.append(message.result)
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)
    stream.cancel()
    assert received == [True]


def test_a_rule_reading_a_quantile_the_model_lacks_answers_unavailable(
    scaler: tuple[Any, Any, Any],
) -> None:
    pb2, stub, _ = scaler
    with pytest.raises(grpc.RpcError) as caught:
        stub.IsActive(_ref(pb2, "unforecast", 0.0), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    details = caught.value.details() or ""
    assert "unforecast" in details and "0.8" in details and "[0.5, 0.9, 0.99]" in details
