"""redact(): no credential survives in an error or log text."""

from __future__ import annotations

import pytest

from training.redaction import redact, redact_document


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        pytest.param("cannot connect to http://bob:s3cret@prom:9090 (refused)", "s3cret", id="url"),
        pytest.param("GET https://user:pa%40ss@h/api?x=1", "pa%40ss", id="url-escaped"),
        pytest.param("https://onlytoken@h:9090/", "onlytoken", id="url-user-only"),
        pytest.param("headers={'Authorization': 'Bearer abc.DEF-123'}", "abc.DEF-123", id="dict"),
        pytest.param('{"authorization": "Basic Ym9iOnMzY3JldA=="}', "Ym9iOnMzY3JldA", id="json"),
        pytest.param("Authorization: Token zzz-999\nnext", "zzz-999", id="header-line"),
        pytest.param("sent Bearer eyJhbGciOi.J9x_y", "eyJhbGciOi", id="bearer"),
        pytest.param("http://h/q?query=up&access_token=tok42&x=1", "tok42", id="query-param"),
    ],
)
def test_credentials_are_masked(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert "***" in cleaned


def test_known_secrets_are_masked_anywhere() -> None:
    cleaned = redact(
        "server said: bad password hunter2, token t0k", secrets=["hunter2", "t0k", None]
    )
    assert cleaned == "server said: bad password ***, token ***"


@pytest.mark.parametrize(
    "text",
    [
        'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))',
        "cannot connect to http://prom:9090/api/v1/query_range (refused)",
        "mail me at ops@example.com",
    ],
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_a_document_is_redacted_in_every_string() -> None:
    document = {
        "source": {"url": "http://bob:s3cret@prom:9090", "step": 60},
        "mlflow": {"tracking_uri": "postgresql://admin:pw2@db/mlflow"},
        "workloads": [{"demand": "up", "headers": ["Authorization: Bearer abc"]}],
    }
    assert redact_document(document) == {
        "source": {"url": "http://***@prom:9090", "step": 60},
        "mlflow": {"tracking_uri": "postgresql://***@db/mlflow"},
        "workloads": [{"demand": "up", "headers": ["Authorization: ***"]}],
    }
