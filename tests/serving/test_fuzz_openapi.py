"""Schemathesis against prewarm's own JSON endpoints on a live server.

The OpenAPI document is the one the app builds from its routes (``app.openapi()``, what
FastAPI would serve at ``/openapi.json``); every answer must be documented (status code,
content type, body schema), none may be a 5xx, and the server log must hold no traceback.
Examples are bounded and derandomized, so the run is the same every time and takes seconds.

Each operation is a test of its own (``test[GET /apis]``), fuzzed with Hypothesis on
Schemathesis' strategies, positive and negative. Schemathesis' own pytest items share one
node id per function, which ``make test``'s workers (pytest-xdist, scheduling by node id)
would run some of twice and others never.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.serving.fuzzing import LEVELS, TOKEN, Live, live_server, make_app

pytestmark = pytest.mark.integration

FUZZ = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


# The app's document, built from its routes (no server needed to read it); /metrics is
# Prometheus text, not JSON.
schema = schemathesis.openapi.from_dict(make_app().openapi()).exclude(path="/metrics")
OPERATIONS = {result.ok().label: result.ok() for result in schema.get_all_operations()}


def _fuzz(label: str, check: Any) -> None:
    """Run ``check(case)`` on the generated cases of operation ``label``, valid and not."""
    operation = OPERATIONS[label]
    cases = st.one_of(*(operation.as_strategy(mode) for mode in GenerationMode))
    FUZZ(given(case=cases)(check))()


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    with live_server(make_app()) as server:
        yield server
    # After every example of the module: the log holds no traceback.
    assert server.log.problems() == []
    assert max(server.statuses) < 500
    # Both the answers and the refusals were reached.
    assert {200, 401, 404} <= set(server.statuses)


def _check(live: Live, case: Any, headers: dict[str, str] | None = None) -> None:
    response = case.call(base_url=live.base, headers=headers, timeout=10)
    live.statuses.append(response.status_code)
    assert response.status_code < 500, response.text[:500]
    case.validate_response(response)
    assert live.log.problems() == []


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_any_caller_gets_a_documented_answer(live: Live, label: str) -> None:
    _fuzz(label, lambda case: _check(live, case))


KNOWN = {
    "name": list(LEVELS),
    "namespace": ["default"],
    "metric": ["prewarm_desired_replicas", "prewarm_forecast_demand"],
}
"""Values that reach an answer; generated path parameters rarely hit one."""


def _steered(case: Any) -> None:
    """Replace two thirds of the generated path parameters with known values (picked by the
    generated text's length: deterministic), so the answers' bodies are checked too."""
    for key, known in KNOWN.items():
        generated = (case.path_parameters or {}).get(key)
        if generated is not None:
            choices = [*known, generated, generated][: 2 * len(known) + 1]
            pick = choices[len(str(generated)) % len(choices)]
            case.path_parameters[key] = pick
    if case.path_parameters and "metric" in case.path_parameters:
        case.query = {"labelSelector": f"workload={KNOWN['name'][0]}"}


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_a_caller_with_the_token_gets_a_documented_answer(live: Live, label: str) -> None:
    def check(case: Any) -> None:
        _steered(case)
        _check(live, case, headers={"authorization": f"Bearer {TOKEN}"})

    _fuzz(label, check)
