"""Training learns each warm buffer on the last training window, keyed by the UTC hour."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.workload import WorkloadPolicy, WorkloadSpec
from training.pipeline import learn_buffers

STEP = 60
SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=120, quantile=0.9)


def frame(start: str, days: int = 3, burst_hour: int = 9) -> pd.DataFrame:
    times = pd.date_range(start, periods=days * 1440, freq="60s", tz="UTC")
    rng = np.random.default_rng(1)
    values = 20 + rng.normal(0, 1, len(times))
    values[(times.hour == burst_hour) & (times.minute % 20 < 3)] += 100
    calm = pd.DataFrame({"series": "calm", "timestamp": times, "value": 5.0 + 0 * values})
    return pd.concat([pd.DataFrame({"series": "chat", "timestamp": times, "value": values}), calm])


def test_the_buffer_is_learned_on_the_last_window_by_utc_hour() -> None:
    policies = {
        "chat": WorkloadPolicy(SPEC, buffer_quantile=0.95),
        "calm": WorkloadPolicy(SPEC),
    }
    learned = learn_buffers(policies, frame("2026-03-02 00:00"), STEP, 86400)
    chat = learned["chat"]
    assert learned["calm"] == policies["calm"]  # no buffer asked, none learned
    assert len(chat.buffer) == 24
    assert int(np.argmax(chat.buffer)) == 9  # the hour of the bursts, on the UTC clock
    values = frame("2026-03-02 00:00").query("series == 'chat'")["value"].to_numpy()
    assert chat.buffer_level == pytest.approx(values[-1440:].mean())
    # The same history starting 3 hours later bursts at 12 UTC, and the buffer follows it.
    shifted = learn_buffers(policies, frame("2026-03-02 03:00", burst_hour=12), STEP, 86400)
    assert int(np.argmax(shifted["chat"].buffer)) == 12
