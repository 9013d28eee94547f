"""``prewarm certs``: the install without cert-manager. The folder it writes renders with
``kubectl kustomize``, every object validates, the APIService trusts the CA that signed the
Secret's certificate, and that certificate serves a real TLS handshake under the Service's
DNS names."""

from __future__ import annotations

import base64
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
from click.testing import CliRunner
from cryptography import x509

from prewarm.certs import KUSTOMIZATION, PATCH_FILE, SECRET_FILE
from prewarm.cli import cli
from prewarm.services import service_names
from tests.deploy.rendered import DEPLOY, container, kustomize, one, pod_spec

SERVICE_NAMES = service_names("prewarm-serve", "prewarm")


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "install"
    result = CliRunner().invoke(cli, ["certs", "--out", str(out), "--deploy", str(DEPLOY)])
    assert result.exit_code == 0, result.output
    assert f"kubectl apply -k {out}" in result.output
    return out


def _pem(secret: dict[str, object], key: str) -> bytes:
    data = secret["data"]
    assert isinstance(data, dict)
    return base64.b64decode(data[key])


def test_the_folder_renders_a_complete_valid_install(install: Path) -> None:
    objects = kustomize(install)
    for obj in objects:  # no custom resource here: no cert-manager
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    secret = one(objects, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == "prewarm"
    serve = one(objects, "Deployment", "prewarm-serve")
    volumes = {v["name"]: v for v in pod_spec(serve)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == secret["metadata"]["name"]
    assert any(a.startswith("--client-ca=") for a in container(serve)["args"])
    # The aggregator verifies prewarm with exactly the CA that signed the serving cert.
    api = one(objects, "APIService")
    ca = x509.load_pem_x509_certificate(base64.b64decode(api["spec"]["caBundle"]))
    assert base64.b64decode(api["spec"]["caBundle"]) == _pem(secret, "ca.crt")
    server = x509.load_pem_x509_certificate(_pem(secret, "tls.crt"))
    server.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(sans.get_values_for_type(x509.DNSName)) == sorted(SERVICE_NAMES)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True


def test_the_keys_are_readable_by_their_owner_only(install: Path) -> None:
    for name in (SECRET_FILE, PATCH_FILE, KUSTOMIZATION):
        assert stat.S_IMODE((install / name).stat().st_mode) == 0o600, name


@pytest.fixture()
def tls_server(install: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS listener on 127.0.0.1 with the Secret's key pair; yields (port, CA file)."""
    secret = one(kustomize(install), "Secret")
    (tmp_path / "tls.crt").write_bytes(_pem(secret, "tls.crt"))
    (tmp_path / "tls.key").write_bytes(_pem(secret, "tls.key"))
    (tmp_path / "ca.crt").write_bytes(_pem(secret, "ca.crt"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        while True:
            try:
                conn, _addr = listener.accept()
            except OSError:  # closed: the test is over
                return
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):  # a client that refused the certificate
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], tmp_path / "ca.crt"
    finally:
        listener.close()
        thread.join(timeout=10)


def test_the_certificate_serves_tls_under_every_service_name(
    tls_server: tuple[int, Path],
) -> None:
    port, ca = tls_server
    context = ssl.create_default_context(cafile=ca)  # hostname checked, as the aggregator does
    for name in SERVICE_NAMES:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=name) as tls,
        ):
            assert tls.recv(2) == b"ok", name
    other = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        other.wrap_socket(raw, server_hostname="prewarm-serve.elsewhere.svc")


def test_a_folder_that_is_not_deploy_is_a_clear_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["certs", "--out", str(tmp_path / "out"), "--deploy", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert "has no base/kustomization.yaml" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_an_unwritable_folder_exits_1_without_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(
        cli, ["certs", "--out", str(blocker / "out"), "--deploy", str(DEPLOY)]
    )
    assert result.exit_code == 1, result.output
    assert f"`--out` '{blocker / 'out'}'" in result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # exited, did not raise


def test_help_lists_the_exit_codes() -> None:
    text = CliRunner().invoke(cli, ["certs", "--help"]).output
    assert "Exit codes:" in text and "  1  a file could not be written" in text
