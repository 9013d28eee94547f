"""Reply bodies encoded once per snapshot, and the parsed-selector cache."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from serving.api.external_metrics import workload_for_query
from serving.engine.snapshot import Snapshot, SnapshotStore, WorkloadForecast, WorkloadState
from serving.exceptions import SelectorError
from serving.wire import k8s
from serving.wire.replies import Replies, forecast_document

NOW = datetime(2026, 5, 1, 12, 0, 30, 250000, tzinfo=UTC)


def forecast(name: str, origin: datetime, **overrides: object) -> WorkloadForecast:
    fields: dict[str, object] = {
        "workload": name,
        "desired_replicas": 3,
        "forecast_demand": 21.5,
        "quantile": 0.9,
        "lead_time_seconds": 240.0,
        "origin": origin,
        "generated_at": NOW - timedelta(seconds=1),
        "model_version": "7",
        "capacity_per_replica": 10.0,
        "target_utilization": 0.8,
        "min_replicas": 1,
        "max_replicas": 50,
    }
    fields.update(overrides)
    return WorkloadForecast(**fields)  # type: ignore[arg-type]


def snapshot() -> Snapshot:
    return Snapshot(
        states={
            "chat": WorkloadState("chat", forecast("chat", NOW - timedelta(seconds=30))),
            "embed": WorkloadState(
                "embed", forecast("embed", NOW - timedelta(seconds=50), forecast_demand=0.0004)
            ),
            "new": WorkloadState("new", problem="no data received yet"),
        },
        max_staleness=60.0,
        generated_at=NOW,
    )


def test_metric_bodies_are_the_documents() -> None:
    replies = Replies(snapshot())
    now = NOW
    for name, metric, value in (
        ("chat", k8s.METRIC_DESIRED_REPLICAS, 3.0),
        ("chat", k8s.METRIC_FORECAST_DEMAND, 21.5),
        ("embed", k8s.METRIC_FORECAST_DEMAND, 0.0004),
    ):
        item = k8s.ExternalMetricValue(
            metric, value, NOW - timedelta(seconds=1), {"workload": name}
        )
        expected = k8s.encode_json(k8s.external_metric_value_list([item]))
        assert replies.metric(name, metric, now) == expected
    body = json.loads(replies.metric("embed", k8s.METRIC_FORECAST_DEMAND, now) or b"")
    assert body["items"][0]["value"] == "400u"


def test_keda_body_carries_the_age_at_read_time() -> None:
    snap = snapshot()
    replies = Replies(snap)
    for later in (0.0, 1.2345, 9.9999):
        moment = NOW + timedelta(seconds=later)
        body = replies.keda("chat", moment)
        assert body is not None
        expected = forecast_document(
            snap.states["chat"].forecast,  # type: ignore[arg-type]
            snap.status("chat", moment).data_age_seconds,
        )
        assert body == k8s.encode_json(expected)


def test_nothing_is_served_stale_unknown_or_without_forecast() -> None:
    replies = Replies(snapshot())
    at_limit = NOW + timedelta(seconds=10)  # embed's data: exactly 60 s old
    assert replies.metric("embed", k8s.METRIC_DESIRED_REPLICAS, at_limit) is not None
    later = at_limit + timedelta(microseconds=1)
    assert replies.metric("embed", k8s.METRIC_DESIRED_REPLICAS, later) is None
    assert replies.keda("embed", later) is None
    assert replies.metric("chat", k8s.METRIC_DESIRED_REPLICAS, later) is not None
    assert replies.metric("new", k8s.METRIC_DESIRED_REPLICAS, NOW) is None
    assert replies.metric("nope", k8s.METRIC_DESIRED_REPLICAS, NOW) is None
    assert replies.metric("chat", "not_a_metric", NOW) is None


def test_publish_encodes_before_the_swap() -> None:
    encoded: list[Snapshot] = []

    def encode(snap: Snapshot, previous: Replies | None) -> Replies:
        encoded.append(snap)
        return Replies(snap, previous)

    store = SnapshotStore(snapshot(), encode)
    fresh = snapshot()
    store.publish(fresh)
    assert encoded[-1] is fresh  # built by publish, not by the first request
    assert store.current is fresh


def test_selector_cache_by_raw_query() -> None:
    workload_for_query.cache_clear()
    query = "labelSelector=scaledobject.keda.sh%2Fname%3Dso%2Cworkload+in+%28chat%29"
    assert workload_for_query(query) == "chat"
    assert workload_for_query(query) == "chat"
    assert workload_for_query.cache_info().hits == 1
    for _ in range(2):  # errors are not cached: each request raises again
        with pytest.raises(SelectorError):
            workload_for_query("labelSelector=workload+in+%28chat")
    assert workload_for_query.cache_info().maxsize == 1024


def test_unchanged_forecasts_keep_their_bodies_across_publishes() -> None:
    first = snapshot()
    store = SnapshotStore(first, Replies)
    before = store.encoded
    renewed = forecast("chat", NOW, desired_replicas=4)
    second = Snapshot(
        states={**first.states, "chat": WorkloadState("chat", renewed)},
        max_staleness=60.0,
        generated_at=NOW,
    )
    store.publish(second)
    now = NOW + timedelta(seconds=1)
    embed_before = before.metric("embed", k8s.METRIC_DESIRED_REPLICAS, now)
    embed_after = store.encoded.metric("embed", k8s.METRIC_DESIRED_REPLICAS, now)
    assert embed_after is embed_before  # carried over, not encoded again
    chat = json.loads(store.encoded.metric("chat", k8s.METRIC_DESIRED_REPLICAS, now) or b"")
    assert chat["items"][0]["value"] == "4"


def test_bodies_are_encoded_on_first_read_and_kept() -> None:
    replies = Replies(snapshot())
    now = NOW + timedelta(seconds=1)
    # Publishing encodes nothing: at 10,000 workloads that would hold the interpreter lock
    # for most of a second in one piece.
    assert all(not entry._metrics and entry._keda is None for entry in replies._entries.values())
    first = replies.metric("chat", k8s.METRIC_DESIRED_REPLICAS, now)
    assert first is not None
    assert replies.metric("chat", k8s.METRIC_DESIRED_REPLICAS, now) is first
    assert replies.keda("chat", now) is not None
    assert replies._entries["embed"]._metrics == {}  # only what was asked was encoded


def test_wake_all_ends_a_wait_without_a_new_snapshot() -> None:
    # at shutdown: a plain notify left each open stream asleep until its poll timeout
    store = SnapshotStore(snapshot(), Replies)
    seen = store.current
    returned = threading.Event()

    def wait() -> None:
        store.wait_for_change(seen, timeout=600)
        returned.set()

    threading.Thread(target=wait, daemon=True).start()
    for _ in range(1200):  # again until the waiter is inside its wait; a minute at most
        store.wake_all()
        if returned.wait(0.05):
            break
    assert returned.is_set(), "wait_for_change slept through wake_all"
