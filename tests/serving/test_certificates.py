"""A renewed TLS certificate reaches new connections without a restart, on HTTP and gRPC.

Real certificates (``prewarm certs``' functions), the real app under uvicorn with its gRPC
server, real handshakes over loopback. Two generations, each from its own CA: the one the
server starts with (``old``) and the renewal (``new``). The server looks at its files at
every new connection (``tls_check_interval=0``), so each assertion follows the change of the
files without waiting on any clock.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest
from cryptography import x509

from forecaster.exceptions import ConfigError
from prewarm.certs import Issued, issue, new_ca
from serving.api import certificates
from serving.api.app import PrewarmApp, create_app, uvicorn_config
from serving.api.certificates import ServingCertificate
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from serving.wire.stubs import load_externalscaler
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
METRIC = (
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
    "?labelSelector=workload%3Dchat"
)
FAILED = 'prewarm_tls_reloads_total{result="failed"} '
LOADED = 'prewarm_tls_reloads_total{result="loaded"} '


@dataclass(frozen=True)
class Generation:
    """One issue of the Secret: a CA, the server certificate it signs, and a client
    certificate it signs (the CA is also the client CA, as in the KEDA overlay), whose PEM
    files are ``client_files``."""

    ca: Issued
    server: Issued
    client: Issued
    client_files: tuple[str, str]

    @property
    def serial(self) -> int:
        return int(self.server.certificate.serial_number)

    def secret(self) -> dict[str, bytes]:
        """The Secret's keys, as cert-manager writes them."""
        return {
            "tls.crt": self.server.certificate_pem(),
            "tls.key": self.server.key_pem(),
            "ca.crt": self.ca.certificate_pem(),
        }


def _generation(name: str, folder: Path, days: int = VALID_DAYS) -> Generation:
    ca = new_ca(f"{name} CA", VALID_FROM, VALID_DAYS)
    names = {"dns_names": ["localhost"], "ip_addresses": ["127.0.0.1"]}
    server = issue(ca, f"{name} server", VALID_FROM, days=days, **names)
    client = issue(ca, f"{name} client", VALID_FROM, client=True, days=VALID_DAYS)
    cert, key = write_issued(folder, f"{name}-client", client)
    return Generation(ca, server, client, (str(cert), str(key)))


@pytest.fixture(scope="module")
def old(tmp_path_factory: pytest.TempPathFactory) -> Generation:
    return _generation("old", tmp_path_factory.mktemp("clients"))


@pytest.fixture(scope="module")
def new(tmp_path_factory: pytest.TempPathFactory) -> Generation:
    return _generation("new", tmp_path_factory.mktemp("clients"))


def _logged(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    """The certificate's own records at ``level`` (the server's others depend on what
    earlier tests of the process left the root logger at)."""
    return [
        r for r in caplog.records if r.name == "serving.api.certificates" and r.levelno == level
    ]


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole at once: a new file renamed over it (a new inode)."""
    part = path.with_name(f".{path.name}.part")
    part.write_bytes(data)
    os.replace(part, path)


class SecretVolume:
    """A folder laid out as the kubelet lays out a Secret volume.

    Each key is a symlink to ``..data/<key>``, ``..data`` a symlink to a folder of this
    version's files. An update writes a new folder, swaps ``..data`` to it in one rename,
    then removes the old folder, so a reader sees the old set or the new one, never a mix.
    """

    def __init__(self, root: Path, files: Mapping[str, bytes]) -> None:
        self.root = root
        self.version = 0
        root.mkdir()
        self.update(files)
        for key in files:
            (root / key).symlink_to(Path("..data") / key)

    def path(self, key: str) -> Path:
        return self.root / key

    def update(self, files: Mapping[str, bytes]) -> None:
        previous = self.root / f"..{self.version}"
        self.version += 1
        folder = self.root / f"..{self.version}"
        folder.mkdir()
        for key, data in files.items():
            (folder / key).write_bytes(data)
        swap = self.root / "..data_tmp"
        swap.symlink_to(folder.name)
        os.replace(swap, self.root / "..data")
        if previous.exists():
            for child in previous.iterdir():
                child.unlink()
            previous.rmdir()


@dataclass
class Served:
    app: PrewarmApp
    http_port: int
    grpc_port: int

    def served_serial(self, host: str = "127.0.0.1") -> int:
        """Serial of the certificate a new HTTPS connection is presented (no SNI for an
        address, SNI for a name)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection(("127.0.0.1", self.http_port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)

    def https(self, trusted: Generation, client: Generation | None = None) -> httpx.Client:
        """A client trusting only ``trusted``'s CA, presenting ``client``'s certificate."""
        context = ssl.create_default_context(cadata=trusted.ca.certificate_pem().decode())
        if client is not None:
            context.load_cert_chain(*client.client_files)
        return httpx.Client(base_url=f"https://127.0.0.1:{self.http_port}", verify=context)

    def metrics(self) -> str:
        with httpx.Client(verify=False, timeout=5) as http:  # reads the counters only
            return http.get(f"https://127.0.0.1:{self.http_port}/metrics").text

    def grpc_answers(self, trusted: Generation, client: Generation) -> bool:
        """True when a new gRPC connection trusting only ``trusted``'s CA, with ``client``'s
        certificate, gets an answer; False when its handshake fails."""
        stubs = load_externalscaler()
        credentials = grpc.ssl_channel_credentials(
            root_certificates=trusted.ca.certificate_pem(),
            private_key=client.client.key_pem(),
            certificate_chain=client.client.certificate_pem(),
        )
        # A channel of its own connection: gRPC shares connections between channels of
        # the same target otherwise.
        options = [("grpc.use_local_subchannel_pool", 1)]
        with grpc.secure_channel(f"127.0.0.1:{self.grpc_port}", credentials, options) as channel:
            ref = stubs.pb2.ScaledObjectRef(
                name="so", namespace="default", scalerMetadata={"workload": "chat"}
            )
            try:
                stubs.pb2_grpc.ExternalScalerStub(channel).IsActive(ref, timeout=10)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE:
                    return False
                raise
        return True


@contextmanager
def _serving(cert: Path, key: Path, client_ca: Path | None = None) -> Iterator[Served]:
    """The app over TLS (HTTP and gRPC), once its forecast is fresh."""
    settings = ServingSettings(
        port=free_port(),
        grpc_port=0,
        tls_cert=cert,
        tls_key=key,
        client_ca=client_ca,
        tls_check_interval=0,
    )
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.status("chat").fresh, timeout=30)
        assert runtime.grpc_port
        yield Served(app, settings.port, runtime.grpc_port)


def test_a_renewed_secret_volume_reaches_new_https_and_grpc_connections(
    tmp_path: Path, old: Generation, new: Generation
) -> None:
    """cert-manager's renewal as the pod sees it: the ``..data`` symlink swapped to a folder
    of new files. Certificate, key and client CA all change; the server follows all three."""
    volume = SecretVolume(tmp_path / "tls", old.secret())
    files = (volume.path("tls.crt"), volume.path("tls.key"), volume.path("ca.crt"))
    with _serving(*files) as served:
        assert served.served_serial() == old.serial
        assert served.grpc_answers(old, old)
        assert not served.grpc_answers(new, new)
        with served.https(old, old) as http:
            assert http.get(METRIC).status_code == 200

        volume.update(new.secret())

        # Without SNI (an address: the kubelet, Prometheus) and with it (a name: the
        # aggregator, KEDA).
        assert served.served_serial() == new.serial
        assert served.served_serial("localhost") == new.serial
        assert served.grpc_answers(new, new)
        # The old CA is no longer trusted: its client certificate fails the handshake.
        assert not served.grpc_answers(new, old)
        assert not served.grpc_answers(old, old)
        with served.https(new, new) as http:
            assert http.get(METRIC).status_code == 200
        with served.https(new, old) as http, pytest.raises(httpx.TransportError):
            http.get(METRIC)
        assert LOADED + "1.0" in served.metrics()


def _expiry(metrics: str) -> float:
    name = "prewarm_tls_certificate_expiry_timestamp_seconds "
    [value] = [line[len(name) :] for line in metrics.splitlines() if line.startswith(name)]
    return float(value)


def _healthz(
    served: Served, context: ssl.SSLContext, session: ssl.SSLSession | None = None
) -> tuple[bytes, ssl.SSLSession | None]:
    """``GET /healthz`` on a connection of its own (resuming ``session`` if given): the
    answer, and the session to resume later (its tickets come with the answer)."""
    with (
        socket.create_connection(("127.0.0.1", served.http_port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost", session=session) as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := tls.recv(4096):
            answer += chunk
        return answer, tls.session


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_session_from_before_a_client_ca_change_does_not_resume_past_it(
    tmp_path: Path, old: Generation, new: Generation, version: ssl.TLSVersion
) -> None:
    """Changing the client CA is how a leaked client key is revoked: a client holding a
    session ticket from before must not resume into the server with the old certificate."""
    volume = SecretVolume(tmp_path / "tls", old.secret())
    files = (volume.path("tls.crt"), volume.path("tls.key"), volume.path("ca.crt"))
    context = ssl.create_default_context(
        cadata=old.ca.certificate_pem().decode() + new.ca.certificate_pem().decode()
    )
    context.minimum_version = context.maximum_version = version
    context.load_cert_chain(*old.client_files)
    with _serving(*files) as served:
        answer, session = _healthz(served, context)
        assert answer.startswith(b"HTTP/1.1 200")
        volume.update(new.secret())
        assert served.served_serial() == new.serial  # the change is taken
        # Without the fix: resumed, and answered 200 on the old client certificate. Now the
        # handshake is refused (no ticket to resume: a full one, whose old certificate the
        # new CA refuses) or, resuming a session ID, the connection is closed unanswered.
        try:
            answer, _ = _healthz(served, context, session)
        except (ssl.SSLError, ConnectionError):
            answer = b""
        assert answer == b""


def test_certificate_files_replaced_in_place_reach_new_connections(
    tmp_path: Path, old: Generation
) -> None:
    """``prewarm certs`` run again, or a copy over the files: each file rewritten. The
    expiry on /metrics follows, so an alert on it sees the renewal taken."""
    renewed = _generation("renewed", tmp_path, days=VALID_DAYS + 60)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.server.certificate_pem())
    key.write_bytes(old.server.key_pem())
    with _serving(cert, key) as served:
        assert served.served_serial() == old.serial
        old_expiry = old.server.certificate.not_valid_after_utc.timestamp()
        assert _expiry(served.metrics()) == old_expiry
        cert.write_bytes(renewed.server.certificate_pem())
        key.write_bytes(renewed.server.key_pem())
        assert served.served_serial() == renewed.serial
        with served.https(renewed) as http:
            assert http.get("/healthz").status_code == 200
        assert _expiry(served.metrics()) == old_expiry + 60 * 86400


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("tls_key", "is not the key of the certificate"),
        ("tls_cert", "holds no readable PEM certificate"),
    ],
    ids=["key-of-another-certificate", "half-written-certificate"],
)
def test_a_bad_pair_keeps_the_old_certificate_and_is_counted_until_a_good_one_comes(
    tmp_path: Path,
    old: Generation,
    new: Generation,
    caplog: pytest.LogCaptureFixture,
    setting: str,
    reason: str,
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.server.certificate_pem())
    key.write_bytes(old.server.key_pem())
    with (
        _serving(cert, key) as served,
        caplog.at_level(logging.INFO, logger="serving.api.certificates"),
    ):
        if setting == "tls_key":  # the renewal's key arrives before its certificate
            _replace(key, new.server.key_pem())
        else:  # a certificate caught half-written
            pem = new.server.certificate_pem()
            cert.write_bytes(pem[: len(pem) // 2])
        for _ in range(3):  # every new connection is still served, the old certificate
            assert served.served_serial() == old.serial
            assert served.grpc_answers(old, old)
        assert FAILED + "1.0" in served.metrics()  # once for one change, however often seen
        (warning,) = _logged(caplog, logging.WARNING)
        assert warning.setting == setting  # type: ignore[attr-defined]
        assert warning.file == str(key if setting == "tls_key" else cert)  # type: ignore[attr-defined]
        assert reason in warning.reason  # type: ignore[attr-defined]

        _replace(cert, new.server.certificate_pem())
        _replace(key, new.server.key_pem())

        assert served.served_serial() == new.serial
        assert served.grpc_answers(new, old)  # the client CA is unset: no client certificate
        metrics = served.metrics()
        assert FAILED + "1.0" in metrics and LOADED + "1.0" in metrics
        # the reload's (the start's own INFO is caught too when the root logger is at INFO)
        (info,) = [r for r in _logged(caplog, logging.INFO) if "reloaded" in r.getMessage()]
        assert info.not_after == new.server.certificate.not_valid_after_utc.isoformat()  # type: ignore[attr-defined]
    logged = "\n".join(str(vars(record)) for record in caplog.records)
    assert "PRIVATE KEY" not in logged


# -- without a server -------------------------------------------------------------------------
def _files(folder: Path, generation: Generation, key_of: Generation | None = None) -> list[Path]:
    cert, key = folder / "tls.crt", folder / "tls.key"
    _replace(cert, generation.server.certificate_pem())
    _replace(key, (key_of or generation).server.key_pem())
    return [cert, key]


def test_the_files_are_looked_at_once_per_interval(
    tmp_path: Path, old: Generation, new: Generation
) -> None:
    now = [0.0]
    certificate = ServingCertificate(
        *_files(tmp_path, old), check_interval=10.0, clock=lambda: now[0]
    )
    first = certificate.current()
    _files(tmp_path, new)
    now[0] = 9.9
    assert certificate.current() is first
    now[0] = 10.0
    assert certificate.current().certificate == new.server.certificate_pem()
    assert certificate.reloads == 1


def test_a_rewrite_that_stat_does_not_show_is_taken(
    tmp_path: Path, old: Generation, new: Generation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files rewritten in place within one tick of the filesystem's clock, at the same size,
    show the same times, size and inode: a filesystem whose ``stat`` never moves stands for
    that. The new bytes are taken all the same, the refused ones once, and a set back to the
    served one is not a reload."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.server.certificate_pem())
    key.write_bytes(old.server.key_pem())
    first: dict[str, os.stat_result] = {}
    real_stat = os.stat

    def frozen(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        return first.setdefault(os.fspath(path), real_stat(path, *args, **kwargs))

    monkeypatch.setattr(os, "stat", frozen)
    certificate = ServingCertificate(cert, key, check_interval=0)
    key.write_bytes(new.server.key_pem())  # a key of another certificate: refused, once
    for _ in range(2):
        assert certificate.current().certificate == old.server.certificate_pem()
    assert (certificate.failures, certificate.reloads) == (1, 0)
    key.write_bytes(old.server.key_pem())  # back to the served pair
    assert certificate.current().key == old.server.key_pem()
    assert certificate.reloads == 0
    cert.write_bytes(new.server.certificate_pem())
    key.write_bytes(new.server.key_pem())
    assert certificate.current().certificate == new.server.certificate_pem()
    assert (certificate.failures, certificate.reloads) == (1, 1)


def test_a_bad_pair_at_start_is_a_config_error_naming_the_setting(
    tmp_path: Path, old: Generation, new: Generation
) -> None:
    with pytest.raises(ConfigError) as caught:
        ServingCertificate(*_files(tmp_path, old, key_of=new))
    message = str(caught.value)
    assert message.startswith("`tls_key` (--tls-key or PREWARM_TLS_KEY) ")
    assert "is not the key of the certificate in" in message
    assert "PRIVATE KEY" not in message


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), 3601.0])
def test_the_check_interval_is_a_number_of_seconds_up_to_an_hour(value: float) -> None:
    with pytest.raises(ValueError, match="tls_check_interval"):
        ServingSettings(tls_check_interval=value)


@pytest.mark.parametrize(
    ("before_expiry", "level", "message"),
    [
        (timedelta(days=30), logging.INFO, "serving certificate loaded"),
        (timedelta(days=13), logging.WARNING, "expires within 14 days"),
        (timedelta(days=-1), logging.WARNING, "has expired"),
    ],
    ids=["valid", "near-expiry", "expired"],
)
def test_the_certificate_s_validity_is_logged_at_start(
    tmp_path: Path,
    old: Generation,
    caplog: pytest.LogCaptureFixture,
    before_expiry: timedelta,
    level: int,
    message: str,
) -> None:
    cert, key = _files(tmp_path, old)
    settings = ServingSettings(tls_cert=cert, tls_key=key)
    not_after = old.server.certificate.not_valid_after_utc
    with caplog.at_level(logging.INFO, logger="serving.api.certificates"):
        assert ServingCertificate.of(settings, now=not_after - before_expiry) is not None
    (record,) = _logged(caplog, level)
    assert message in record.getMessage()
    assert record.not_after == not_after.isoformat()  # type: ignore[attr-defined]
    assert record.days_left == round(before_expiry.total_seconds() / 86400, 1)  # type: ignore[attr-defined]


def _served_certificate(context: ssl.SSLContext) -> x509.Certificate:
    """The certificate ``context`` presents: a real handshake over memory buffers."""
    client_context = ssl.create_default_context()
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, to_server, server_hostname="localhost")
    server = context.wrap_bio(to_server, to_client, server_side=True)
    done = {client: False, server: False}
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
        if done[client]:
            der = client.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der)
    raise AssertionError("the handshake did not complete")


def test_https_serves_the_pair_that_was_checked_when_the_files_change_while_it_loads(
    tmp_path: Path, old: Generation, new: Generation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy written over the files between their check and OpenSSL's load: the HTTP context
    presents the checked certificate, the one gRPC is handed, not the copy."""
    files = _files(tmp_path, old)
    check = certificates._check_key

    def check_then_overwritten(*args: Any, **kwargs: Any) -> None:
        check(*args, **kwargs)
        _files(tmp_path, new)

    monkeypatch.setattr(certificates, "_check_key", check_then_overwritten)
    pair = ServingCertificate(*files).current()
    assert pair.certificate == old.server.certificate_pem()
    assert _served_certificate(pair.context).serial_number == old.serial
