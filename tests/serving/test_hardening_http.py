"""The HTTP endpoints' defences over a real uvicorn server: bounded selectors, bounded error
texts, workload names shown only to authenticated callers, the namespace of the metric URL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
import yaml

from forecaster.exceptions import ConfigError
from serving.api.app import create_app, uvicorn_config
from serving.api.external_metrics import workload_for_query
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings, refresh_config_from_project
from serving.wire import selector
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    fit_planner,
    free_port,
    history,
    refresh_config,
    running,
    specs,
    wait_until,
)
from training.config import load_config, parse_config

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0, "embed": 7.0}
TOKEN = "http-s3cret"
GROUP = "/apis/external.metrics.k8s.io/v1beta1"
METRIC = f"{GROUP}/namespaces/default/prewarm_desired_replicas"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    # `embed` runs in namespace `inference`, `chat` in the default one.
    config = replace(
        config,
        workloads=[
            replace(w, namespace="inference") if w.name == "embed" else w for w in config.workloads
        ],
    )
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN)
    settings = ServingSettings(port=free_port(), grpc_port=None, token_file=token_file)
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: all(s.forecast for s in runtime.store.current.states.values()))
        with httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=10) as client:
            yield client


class _CountingParser(selector._Parser):
    made = 0

    def __init__(self, text: str) -> None:
        type(self).made += 1
        super().__init__(text)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> type[_CountingParser]:
    """Counts the selectors parsed (the server runs in this process)."""
    workload_for_query.cache_clear()
    _CountingParser.made = 0
    monkeypatch.setattr(selector, "_Parser", _CountingParser)
    return _CountingParser


def _status(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["code"] == code
    return body


@pytest.mark.parametrize(
    "query",
    [
        # 63 KB (about the reported 65 KB; httpx sends at most 64 KiB of URL): refused
        # before it is even decoded.
        "labelSelector=workload%3Dchat%2C" + "k%3Dv%2C" * 7900 + "x%3Dy",
        # Short enough raw, but 5,000 characters decoded: refused before it is parsed.
        "labelSelector=workload=chat," + "a" * 5000,
    ],
    ids=["63KB-encoded", "5000-chars-decoded"],
)
def test_a_huge_selector_is_refused_unparsed(
    http: httpx.Client, parses: type[_CountingParser], query: str
) -> None:
    body = _status(http.get(f"{METRIC}?{query}"), 400)
    assert body["reason"] == "BadRequest"
    assert "too long" in body["message"]
    assert len(body["message"]) < 300
    assert parses.made == 0


def test_a_selector_at_the_limit_is_still_read(
    http: httpx.Client, parses: type[_CountingParser]
) -> None:
    # scaledobject.keda.sh/name=... requirements are ignored, but the text must parse.
    clause = ",app=" + "v" * 58
    text = "workload=chat" + clause * ((selector.MAX_SELECTOR_CHARS - 13) // len(clause))
    assert len(text) <= selector.MAX_SELECTOR_CHARS
    response = http.get(METRIC, params={"labelSelector": text})
    assert response.status_code == 200, response.text
    assert parses.made == 1
    # The second request is answered from the cache.
    assert http.get(METRIC, params={"labelSelector": text}).status_code == 200
    assert parses.made == 1


# -- bounded error texts, names shown only to authenticated callers --------------------------
BOUND = 400
"""Longest error message accepted: the fixed text plus at most ~100 characters of input."""


@pytest.mark.parametrize(
    ("path", "params", "code"),
    [
        (f"{GROUP}/namespaces/default/{'m' * 50_000}", {"labelSelector": "workload=chat"}, 404),
        (f"{GROUP}/namespaces/{'n' * 50_000}/nope", {"labelSelector": "workload=chat"}, 404),
        (METRIC, {"labelSelector": "workload=" + "w" * 4000}, 400),
        (METRIC, {"labelSelector": "workload in (" + "a," * 1900 + "b"}, 400),
        (METRIC, {"labelSelector": "workload!=" + "x" * 60 + ",app=" + "y" * 3000}, 400),
    ],
    ids=["metric-name", "namespace", "long-value", "unclosed-set", "no-pin"],
)
def test_error_texts_echo_a_bounded_part_of_the_input(
    http: httpx.Client, path: str, params: dict[str, str], code: int
) -> None:
    body = _status(http.get(path, params=params), code)
    assert len(body["message"]) < BOUND, body["message"][:500]
    assert len(body.get("details", {}).get("name", "")) <= 100


def test_an_unrouted_path_and_a_wrong_method_answer_bounded_statuses(http: httpx.Client) -> None:
    # Neither reaches a route: the app's 404/405 handler answers, and must not echo the path
    # whole nor drop the header a 405 needs.
    body = _status(http.get("/" + "p" * 20_000), 404)
    assert len(body["message"]) < BOUND, body["message"][:500]
    response = http.post("/readyz")
    _status(response, 405)
    assert response.headers["allow"] == "GET"


def test_keda_and_explain_404_of_a_huge_name_is_bounded_and_lists_the_workloads(
    http: httpx.Client,
) -> None:
    name = "w" * 50_000
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for path in (f"/v1/workloads/{name}/forecast", f"/v1/workloads/{name}/explain"):
        body = _status(http.get(path, headers=headers), 404)
        assert len(body["message"]) < BOUND, body["message"][:500]
        assert "chat" in body["message"] and "embed" in body["message"]
        assert len(body["details"]["name"]) <= 100


def test_an_unknown_workload_is_listed_only_to_a_caller_with_the_token(
    http: httpx.Client,
) -> None:
    params = {"labelSelector": "workload=nope"}
    anonymous = _status(http.get(METRIC, params=params), 404)["message"]
    assert "'nope'" in anonymous
    assert "chat" not in anonymous and "embed" not in anonymous
    wrong = http.get(METRIC, params=params, headers={"Authorization": "Bearer guess"})
    assert "chat" not in _status(wrong, 404)["message"]
    right = http.get(METRIC, params=params, headers={"Authorization": f"Bearer {TOKEN}"})
    assert "configured workloads: chat, embed" in _status(right, 404)["message"]


# -- credentials are never echoed --------------------------------------------------------------
SECRET = "S3CRETTOKEN123"


def _echoed(authorization: str, message: str) -> list[str]:
    """The words of ``authorization`` found in ``message``, the expected scheme's aside."""
    return [word for word in authorization.split() if word != "Bearer" and word in message]


@pytest.mark.parametrize(
    "authorization",
    [SECRET, f"Token {SECRET}", f"Basic {SECRET}", f"{SECRET} Bearer", SECRET * 1500],
    ids=["token-alone", "other-scheme", "basic", "scheme-second", "20000-chars"],
)
@pytest.mark.parametrize("path", ["/v1/workloads/chat/forecast", "/v1/workloads"])
def test_a_refused_authorization_header_is_not_echoed(
    http: httpx.Client, authorization: str, path: str
) -> None:
    """The reported case: a token sent without its scheme came back in the 401 as the
    "scheme" it used; a 20,000-character header came back whole."""
    body = _status(http.get(path, headers={"Authorization": authorization}), 401)
    assert not _echoed(authorization, body["message"])
    assert "Authorization: Bearer <token>" in body["message"]
    assert len(body["message"]) < BOUND


# -- the namespace of the metric URL ----------------------------------------------------------
def _metric_in(namespace: str, workload: str) -> str:
    return (
        f"{GROUP}/namespaces/{namespace}/prewarm_desired_replicas"
        f"?labelSelector=workload%3D{workload}"
    )


def test_a_workload_is_served_only_under_its_namespace(http: httpx.Client) -> None:
    assert http.get(_metric_in("inference", "embed")).status_code == 200
    assert http.get(_metric_in("default", "chat")).status_code == 200
    for namespace, workload in (("default", "embed"), ("inference", "chat"), ("other", "chat")):
        body = _status(http.get(_metric_in(namespace, workload)), 404)
        # Answered as an unknown workload: nothing says where it is served.
        assert body["message"].startswith(f"unknown workload '{workload}' in namespace")
        assert "inference" not in body["message"].replace(f"'{namespace}'", "")


def test_the_config_file_sets_a_workload_namespace() -> None:
    path = Path(__file__).parents[2] / "examples" / "file.yaml"
    config = load_config(path)
    assert {w.namespace for w in refresh_config_from_project(config).workloads} == {"default"}
    data = yaml.safe_load(path.read_text())
    name = data["workloads"][0]["name"]
    data["workloads"][0]["namespace"] = "inference"
    placed = parse_config(data, base_dir=path.parent)
    assert refresh_config_from_project(placed).by_name()[name].namespace == "inference"
    # The namespace says where the workload is served, not what the model learns.
    assert placed.fingerprint() == config.fingerprint()
    data["workloads"][0]["namespace"] = "Not A Namespace"
    with pytest.raises(ConfigError, match="namespace"):
        parse_config(data, base_dir=path.parent)
