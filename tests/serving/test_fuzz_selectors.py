"""Generated label selectors against the External Metrics path of a live server.

Selectors are built from the grammar's pieces (keys, operators, values, sets), from arbitrary
text, from raw percent-escapes (some not UTF-8) and at sizes up to five times the limit. Every
answer must be a value of a configured workload or a bounded ``metav1.Status`` (400 or 404),
never a 5xx, and the server log must hold no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.wire.selector import MAX_SELECTOR_CHARS
from tests.serving.fuzzing import LEVELS, Live, live_server, make_app

pytestmark = pytest.mark.integration

PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
FUZZ = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

_words = st.sampled_from(
    ["workload", "app", "scaledobject.keda.sh/name", "tier", "a/b/c", "-x", "x" * 70, ""]
) | st.text(max_size=12)
_values = st.sampled_from([*LEVELS, "nope", "", "v" * 64, "(", ")", ","]) | st.text(max_size=12)
_operators = st.sampled_from(["=", "==", "!=", " in ", " notin ", ">", "<", "", " ", "!"])


@st.composite
def _requirement(draw: st.DrawFn) -> str:
    key, operator = draw(_words), draw(_operators)
    if operator.strip() in ("in", "notin"):
        members = draw(st.lists(_values, max_size=4))
        closing = draw(st.sampled_from([")", "", "))"]))
        return f"{key}{operator}({','.join(members)}{closing}"
    prefix = draw(st.sampled_from(["", "!", " "]))
    return f"{prefix}{key}{operator}{draw(_values)}"


selectors = st.one_of(
    st.sampled_from([*LEVELS, "nope"]).map(lambda w: f"workload={w}"),
    st.lists(_requirement(), max_size=5).map(",".join),
    st.builds(lambda r, w: f"{r},workload={w}", _requirement(), st.sampled_from([*LEVELS, "nope"])),
    st.text(max_size=200),
    st.integers(MAX_SELECTOR_CHARS - 10, 5 * MAX_SELECTOR_CHARS).map(
        lambda n: "workload=chat," + "a" * n
    ),
)
"""Decoded selector texts."""

raw_queries = st.lists(
    st.sampled_from(["%3D", "%2C", "%28", "%29", "%ff", "%C3", "%", "%zz", "+", "=", "&", "w"])
    | st.sampled_from(["workload", "labelSelector=", "chat", "in", "!"]),
    max_size=40,
).map(lambda parts: "labelSelector=" + "".join(parts))
"""Raw query strings, escapes as sent (some malformed, some not UTF-8)."""


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    with live_server(make_app()) as server:
        yield server
    assert server.log.problems() == []
    assert {200, 400, 404} <= set(server.statuses)


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.base, timeout=10) as client:
        yield client


def _answered(live: Live, response: httpx.Response) -> None:
    live.statuses.append(response.status_code)
    assert response.status_code in (200, 400, 404), response.text[:300]
    body = response.json()
    if response.status_code == 200:
        (item,) = body["items"]
        assert item["metricLabels"]["workload"] in LEVELS
    else:
        assert body["kind"] == "Status" and body["code"] == response.status_code
        assert len(body["message"]) < 400, body["message"][:500]
    assert live.log.problems() == []


@FUZZ
@given(text=selectors)
def test_generated_selectors(live: Live, http: httpx.Client, text: str) -> None:
    _answered(live, http.get(f"{PATH}?labelSelector={quote(text, safe='')}"))


@FUZZ
@given(query=raw_queries)
def test_raw_query_strings(live: Live, http: httpx.Client, query: str) -> None:
    _answered(live, http.get(f"{PATH}?{query}"))
