"""Front-proxy (request-header) authentication over real TLS, as kube-apiserver's aggregator
calls an extension API server: real certificates (``prewarm.certs``), real uvicorn.

The serving certificate comes from one CA, the aggregator's client certificate from the
front-proxy CA (``client_ca``) with a name in ``requestheader_allowed_names``. A certificate
of another CA, a name that is not allowed and no certificate are each refused on the
metric paths; discovery, health and ``/metrics`` stay open to callers without one.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from prewarm.certs import Issued, issue, new_ca
from serving.api import app as app_module
from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.engine.observability import Throttle
from serving.settings import ServingSettings
from tests.serving.pki import VALID_DAYS, VALID_FROM, write_issued
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

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0}
GROUP = "/apis/external.metrics.k8s.io/v1beta1"
METRIC = f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3Dchat"
ALLOWED = "front-proxy-client"
# A fixed moment and a century: the certificates are valid whatever today is.
NOW, DAYS = VALID_FROM, VALID_DAYS


def _write(folder: Path, stem: str, issued: Issued) -> tuple[str, str]:
    cert, key = write_issued(folder, stem, issued)
    return str(cert), str(key)


@dataclass
class Proxy:
    base: str
    serving_ca: str
    clients: dict[str, tuple[str, str]]

    def client(self, who: str | None) -> httpx.Client:
        context = ssl.create_default_context(cafile=self.serving_ca)
        if who is not None:
            context.load_cert_chain(*self.clients[who])
        return httpx.Client(base_url=self.base, verify=context, timeout=5)


def _pki(folder: Path) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    serving_ca = new_ca("serving CA", NOW, days=DAYS)
    server = issue(
        serving_ca, "localhost", NOW, dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=DAYS
    )
    front_proxy_ca = new_ca("front-proxy-ca", NOW, days=DAYS)
    stranger_ca = new_ca("another CA", NOW, days=DAYS)
    (folder / "serving-ca.crt").write_bytes(serving_ca.certificate_pem())
    (folder / "front-proxy-ca.crt").write_bytes(front_proxy_ca.certificate_pem())
    cert, key = _write(folder, "server", server)
    clients = {
        "aggregator": _write(
            folder, "aggregator", issue(front_proxy_ca, ALLOWED, NOW, client=True, days=DAYS)
        ),
        "other-name": _write(
            folder,
            "other-name",
            issue(front_proxy_ca, "system:anonymous", NOW, client=True, days=DAYS),
        ),
        "other-ca": _write(
            folder, "other-ca", issue(stranger_ca, ALLOWED, NOW, client=True, days=DAYS)
        ),
    }
    files = {
        "tls_cert": cert,
        "tls_key": key,
        "client_ca": str(folder / "front-proxy-ca.crt"),
        "serving_ca": str(folder / "serving-ca.crt"),
    }
    return files, clients


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    files, clients = _pki(tmp_path_factory.mktemp("pki"))
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    settings = ServingSettings(
        port=free_port(),
        grpc_port=None,
        tls_cert=files["tls_cert"],
        tls_key=files["tls_key"],
        client_ca=files["client_ca"],
        requestheader_allowed_names=[ALLOWED],
    )
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.status("chat").fresh, timeout=30)
        yield Proxy(f"https://127.0.0.1:{settings.port}", files["serving_ca"], clients)


def test_the_aggregator_s_certificate_is_accepted(proxy: Proxy) -> None:
    with proxy.client("aggregator") as http:
        response = http.get(METRIC)
        assert response.status_code == 200, response.text
        (item,) = response.json()["items"]
        assert item["metricName"] == "prewarm_desired_replicas"


def test_no_certificate_is_refused_on_the_metric_but_discovery_and_health_answer(
    proxy: Proxy,
) -> None:
    with proxy.client(None) as http:
        for request in (http.get(METRIC), http.head(METRIC)):
            assert request.status_code == 401
        body = http.get(METRIC).json()
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)
        assert "no client certificate" in body["message"]
        # The aggregator's availability check, the kubelet's probes and Prometheus.
        for open_path in ("/apis", GROUP, "/healthz", "/readyz", "/metrics"):
            assert http.get(open_path).status_code == 200, open_path


def test_repeated_refusals_are_logged_once_per_reason(
    proxy: Proxy, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh limiter: the module's earlier refusals do not count against this interval.
    monkeypatch.setattr(app_module, "_REFUSED_LOG", Throttle(3600.0))
    with caplog.at_level(logging.WARNING, logger="serving.api.app"), proxy.client(None) as http:
        for _ in range(200):
            assert http.get(METRIC).status_code == 401
    refused = [r for r in caplog.records if r.getMessage() == "request refused"]
    assert len(refused) == 1


def test_a_name_that_is_not_allowed_is_refused(proxy: Proxy) -> None:
    with proxy.client("other-name") as http:
        response = http.get(METRIC)
    assert response.status_code == 401
    message = response.json()["message"]
    assert "'system:anonymous'" in message and ALLOWED in message


def test_a_certificate_of_another_ca_is_refused_at_the_handshake(proxy: Proxy) -> None:
    # TLS 1.3 reports the client certificate's rejection after the client's side of the
    # handshake: on connect or on the first read, never with an answer.
    with proxy.client("other-ca") as http, pytest.raises(httpx.TransportError):
        http.get(METRIC)


def test_allowed_names_need_the_front_proxy_ca() -> None:
    with pytest.raises(ValueError, match="`requestheader_allowed_names` needs `client_ca`"):
        ServingSettings(requestheader_allowed_names=[ALLOWED])


def test_allowed_names_read_the_configmap_s_json_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, _ = _pki(tmp_path)
    monkeypatch.setenv("PREWARM_REQUESTHEADER_ALLOWED_NAMES", '["front-proxy-client","aggregator"]')
    settings = ServingSettings(
        tls_cert=files["tls_cert"], tls_key=files["tls_key"], client_ca=files["client_ca"]
    )
    assert settings.requestheader_allowed_names == [ALLOWED, "aggregator"]


@pytest.mark.parametrize(
    ("value", "names"),
    [("front-proxy-client, aggregator", [ALLOWED, "aggregator"]), ("[]", [])],
)
def test_allowed_names_from_the_environment_may_be_comma_separated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, names: list[str]
) -> None:
    files, _ = _pki(tmp_path)
    monkeypatch.setenv("PREWARM_REQUESTHEADER_ALLOWED_NAMES", value)
    settings = ServingSettings(
        tls_cert=files["tls_cert"], tls_key=files["tls_key"], client_ca=files["client_ca"]
    )
    assert settings.requestheader_allowed_names == names


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["front-proxy-client"', "is not a JSON list (Expecting ',' delimiter at character 21)"),
        ("[1, 2]", "must list names (strings), got '[1, 2]'"),
    ],
)
def test_a_malformed_names_variable_is_named_by_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    """pydantic-settings' own error named its "EnvSettingsSource", not the variable."""
    from click.testing import CliRunner

    from prewarm.cli import cli

    config = tmp_path / "prewarm.yaml"
    config.write_text("workloads: []\n")
    monkeypatch.setenv("PREWARM_REQUESTHEADER_ALLOWED_NAMES", value)
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: PREWARM_REQUESTHEADER_ALLOWED_NAMES: {expected}")
    assert "EnvSettingsSource" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("given", ["a, b", '["a", "b"]'], ids=["commas", "configmap-json"])
def test_serve_takes_the_names_comma_separated_or_as_json_and_checks_them(
    tmp_path: Path, given: str
) -> None:
    """The flag reads the ConfigMap's JSON as the variable does (it was split at commas
    into the one name '["a"', '"b"]', and every aggregator request refused with 401)."""
    from click.testing import CliRunner

    from prewarm.cli import cli

    config = tmp_path / "prewarm.yaml"
    config.write_text("workloads: []\n")
    result = CliRunner().invoke(
        cli, ["serve", "--config", str(config), "--requestheader-allowed-names", given]
    )
    assert result.exit_code == 2, result.output
    assert "`requestheader_allowed_names` needs `client_ca`" in result.output
    assert "['a', 'b']" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_prewarm_serve_with_the_deployment_s_flags_and_environment(tmp_path: Path) -> None:
    """The real process, configured as deploy/components/apiservice configures it: TLS,
    ``--client-ca`` and the allowed names as the ConfigMap's JSON in the environment. No
    model is registered yet, so a request that passes authentication gets the hold error
    (503) and one that does not gets 401: the two are told apart before any data exists."""
    import os
    import subprocess
    import sys
    import time

    files, clients = _pki(tmp_path)
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 50)
    frame.to_csv(tmp_path / "demand.csv", index=False)
    (tmp_path / "prewarm.yaml").write_text(
        "source: {type: file, path: demand.csv}\n"
        "workloads:\n  - name: chat\n    capacity: {capacity_per_replica: 10, cold_start: 1m}\n"
        f"mlflow: {{tracking_uri: 'sqlite:///{tmp_path / 'mlflow.db'}', registered_model: m}}\n"
    )
    # A store with nothing registered in it (an empty file is an empty SQLite database):
    # serve refuses a missing store, which a misspelt path would be.
    (tmp_path / "mlflow.db").touch()
    port = free_port()
    env = {**os.environ, "PREWARM_REQUESTHEADER_ALLOWED_NAMES": f'["{ALLOWED}"]'}
    log = (tmp_path / "serve.log").open("w")
    args = ["--config", str(tmp_path / "prewarm.yaml"), "--port", str(port), "--no-grpc"]
    tls = [
        f"--tls-cert={files['tls_cert']}",
        f"--tls-key={files['tls_key']}",
        f"--client-ca={files['client_ca']}",
    ]
    server = subprocess.Popen(
        [sys.executable, "-m", "prewarm", "serve", *args, *tls],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proxy = Proxy(f"https://127.0.0.1:{port}", files["serving_ca"], clients)
    try:
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with proxy.client(None) as http:
                    if http.get("/readyz").status_code == 200:
                        break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "prewarm serve did not become ready"
            time.sleep(0.5)
        with proxy.client(None) as http:
            assert http.get(METRIC).status_code == 401
        with proxy.client("other-name") as http:
            assert http.get(METRIC).status_code == 401
        with proxy.client("aggregator") as http:
            held = http.get(METRIC)
        assert held.status_code == 503, held.text
        assert held.json()["reason"] == "ServiceUnavailable"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
