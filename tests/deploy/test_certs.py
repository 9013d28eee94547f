"""``prewarm certs``: the install without cert-manager. The folder it writes renders with
``kubectl kustomize``, every object validates, the APIService trusts the CA that signed the
Secret's certificate, and that certificate serves a real TLS handshake under the Service's
DNS names, and with ``--shards N`` under the host of every trigger ``prewarm manifests
--shards N`` renders."""

from __future__ import annotations

import base64
import os
import re
import socket
import ssl
import stat
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from prewarm.certs import (
    APISERVICE_CHECK,
    APPLY,
    CLIENT_FILE,
    KUSTOMIZATION,
    PATCH_FILE,
    SECRET_FILE,
    certificate_names,
)
from prewarm.cli import cli
from prewarm.manifests import Policies, render
from prewarm.services import service_names
from serving.shards import shard_of
from tests.deploy.rendered import DEPLOY, ROOT, container, kustomize, one, pod_spec
from tests.deploy.rendered import render as render_install
from training.config import parse_config

SERVICE_NAMES = service_names("prewarm-serve", "prewarm")
SHARDS = 4
CERT_MANAGER = "cert-manager.io"


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "install"
    result = CliRunner().invoke(cli, ["certs", "--out", str(out), "--deploy", str(DEPLOY)])
    assert result.exit_code == 0, result.output
    assert f"{APPLY} -k {out}" in result.output
    # The folder replaces the cluster's external metrics APIService: who serves it is
    # checked before the install line
    assert 0 <= result.output.find(APISERVICE_CHECK) < result.output.index("Install:")
    # and the token Secret and front-proxy ConfigMap the serving pods mount are made before it
    for made in ("Secret prewarm-serve-token", "ConfigMap prewarm-front-proxy"):
        assert 0 <= result.output.find(made) < result.output.index("Install:"), made
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


def _dns_names(secret: dict[str, Any]) -> list[str]:
    server = x509.load_pem_x509_certificate(_pem(secret, "tls.crt"))
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return list(sans.get_values_for_type(x509.DNSName))


def test_the_keys_are_readable_by_their_owner_only(install: Path) -> None:
    for name in (SECRET_FILE, PATCH_FILE, KUSTOMIZATION):
        assert stat.S_IMODE((install / name).stat().st_mode) == 0o600, name


@pytest.fixture(scope="module")
def sharded_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "sharded"
    result = CliRunner().invoke(
        cli,
        ["certs", "--out", str(out), "--deploy", str(DEPLOY), "--shards", str(SHARDS),
         "--dns", "Prewarm.Example.com", "--dns", "*.prewarm.example.com"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"prewarm-serve-1 to prewarm-serve-{SHARDS}" in result.output
    return out


def test_a_sharded_certificate_names_every_shard_service_and_the_dns_names(
    sharded_install: Path,
) -> None:
    names = _dns_names(one(kustomize(sharded_install), "Secret"))
    expected = SERVICE_NAMES + [
        name for k in range(1, SHARDS + 1) for name in service_names(f"prewarm-serve-{k}")
    ]
    # names compare without case: kept in lower case, and each once
    assert names == [*expected, "prewarm.example.com", "*.prewarm.example.com"]
    assert "prewarm-serve-3.prewarm.svc.cluster.local" in names


def _fleet_config() -> dict[str, Any]:
    """Workloads on every shard of ``SHARDS``, each shard with one of each trigger: the
    metrics-api (min_replicas 1) and the external-push (min_replicas 0)."""
    workloads = []
    for least in (0, 1):
        for shard in range(1, SHARDS + 1):
            name = next(
                f"w{least}-{i}" for i in range(1000) if shard_of(f"w{least}-{i}", SHARDS) == shard
            )
            workloads.append({
                "name": name,
                "namespace": "inference",
                "demand": f'sum(rate(requests_total{{model="{name}"}}[5m]))',
                "capacity": {"capacity_per_replica": 4, "min_replicas": least, "max_replicas": 8},
            })  # fmt: skip
    return {
        "source": {"type": "prometheus", "url": "http://prometheus.monitoring.svc:9090"},
        "workloads": workloads,
    }


def _trigger_hosts(shards: int) -> dict[str, str]:
    """Each prewarm trigger ``prewarm manifests --kind keda --shards shards`` renders for
    :func:`_fleet_config`, as ``workload/type`` -> the host it connects to."""
    config = parse_config(_fleet_config())
    files = render(config, Policies(config.policies, "the config"), "keda", "unused", shards)
    hosts = {}
    documents = [d for text in files.values() for d in yaml.safe_load_all(text)]
    for document in documents:
        if document["kind"] != "ScaledObject":
            continue
        for trigger in document["spec"]["triggers"]:
            metadata = trigger["metadata"]
            if trigger["type"] == "metrics-api":
                host = urlsplit(metadata["url"]).hostname
            elif trigger["type"] == "external-push":
                host = urlsplit(f"//{metadata['scalerAddress']}").hostname
            else:
                continue
            assert host is not None
            hosts[f"{document['metadata']['name']}/{trigger['type']}"] = host
    return hosts


def test_every_sharded_trigger_host_is_a_name_of_the_certificate(sharded_install: Path) -> None:
    # manifests' addresses and certs' names come from prewarm/services.py: rendered side by
    # side, they cannot drift apart unseen
    hosts = _trigger_hosts(SHARDS)
    assert len(hosts) == 2 * SHARDS
    assert {h.split(".")[0] for h in hosts.values()} == {
        f"prewarm-serve-{k}" for k in range(1, SHARDS + 1)
    }
    names = set(_dns_names(one(kustomize(sharded_install), "Secret")))
    assert {t: h for t, h in hosts.items() if h not in names} == {}


def test_an_unsharded_trigger_host_is_a_name_of_the_certificate(install: Path) -> None:
    hosts = _trigger_hosts(1)
    assert set(hosts.values()) == {"prewarm-serve.prewarm.svc"}
    assert set(hosts.values()) <= set(_dns_names(one(kustomize(install), "Secret")))


def test_the_cert_manager_patch_of_scale_md_names_every_sharded_trigger_host(
    tmp_path: Path,
) -> None:
    text = (ROOT / "docs" / "scale.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "dnsNames" in b]
    (loop,) = re.findall(r"`(for k in \$\(seq 1 N\).*?done; done)`", text)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    keda = os.path.relpath(DEPLOY / "overlays" / "keda", overlay)
    kustomization = {"resources": [keda], **yaml.safe_load(textwrap.dedent(block))}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    certificate = one(kustomize(overlay), "Certificate", "prewarm-serve")
    names = certificate["spec"]["dnsNames"]
    assert names == certificate_names(shards=2)
    assert set(_trigger_hosts(2).values()) <= set(names)
    # the loop it gives for N shards prints the same patch lines
    printed = subprocess.run(
        ["bash", "-c", loop.replace("seq 1 N", "seq 1 2")],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    patch = kustomization["patches"][0]["patch"]
    assert printed.splitlines() == patch.splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--shards", "0"), "`--shards` must be a whole number in [1, 256], got 0"),
        (("--shards", "257"), "`--shards` must be a whole number in [1, 256], got 257"),
        (("--dns", "bad_name"), "`--dns` must be a DNS name (RFC 1123"),
        (("--dns", "a..b"), "got 'a..b'"),
        (("--dns", "-a.example.com"), "got '-a.example.com'"),
        (("--dns", "a.*.example.com"), "got 'a.*.example.com'"),
        (("--dns", "10.0.0.1"), "got '10.0.0.1'"),  # an IP address is no DNS name
        (("--dns", "a" * 64), "got 'aaaa"),  # a label of 64
        (("--dns", "x" * 500), "... (502 chars)"),  # the echo is bounded
    ],
    ids=["zero", "above-serve", "underscore", "empty-label", "hyphen", "inner-star", "ip",
         "label-64", "long"],
)  # fmt: skip
def test_a_bad_shard_count_or_dns_name_exits_2_naming_the_flag(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["certs", "--out", str(out), "--deploy", str(DEPLOY), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()  # refused before anything is written


@contextmanager
def _tls_listener(
    secret: dict[str, Any], folder: Path, *, client_certificates: bool = False
) -> Iterator[tuple[int, Path]]:
    """A TLS listener on 127.0.0.1 with ``secret``'s key pair; yields (port, CA file). With
    ``client_certificates`` it requires a client certificate signed by ``secret``'s CA, as
    serving does with ``--client-ca`` set to that ``ca.crt`` (deploy/components/keda)."""
    (folder / "tls.crt").write_bytes(_pem(secret, "tls.crt"))
    (folder / "tls.key").write_bytes(_pem(secret, "tls.key"))
    (folder / "ca.crt").write_bytes(_pem(secret, "ca.crt"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    if client_certificates:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(folder / "ca.crt")
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
        yield listener.getsockname()[1], folder / "ca.crt"
    finally:
        # close() alone leaves accept() blocked in the thread until its timeout; shutdown()
        # ends it at once (Linux).
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)
        assert not thread.is_alive()


@pytest.fixture()
def tls_server(install: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS listener on 127.0.0.1 with the Secret's key pair; yields (port, CA file)."""
    with _tls_listener(one(kustomize(install), "Secret"), tmp_path) as server:
        yield server


def _handshake(port: int, ca: Path, name: str) -> bytes:
    """What the listener says over TLS to a client that checks ``name`` as KEDA does."""
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=name) as tls,
    ):
        return tls.recv(2)


def test_the_certificate_serves_tls_under_every_service_name(
    tls_server: tuple[int, Path],
) -> None:
    port, ca = tls_server
    for name in SERVICE_NAMES:  # hostname checked, as the aggregator does
        assert _handshake(port, ca, name) == b"ok", name
    other = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        other.wrap_socket(raw, server_hostname="prewarm-serve.elsewhere.svc")


def test_each_sharded_trigger_verifies_the_certificate_under_its_host(
    sharded_install: Path, tmp_path: Path
) -> None:
    with _tls_listener(one(kustomize(sharded_install), "Secret"), tmp_path) as (port, ca):
        for trigger, host in _trigger_hosts(SHARDS).items():
            assert _handshake(port, ca, host) == b"ok", trigger


def test_a_folder_that_is_not_deploy_is_a_clear_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["certs", "--out", str(tmp_path / "out"), "--deploy", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert "has no base/kustomization.yaml" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_folder_under_a_file_is_refused_before_any_certificate_is_made(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(
        cli, ["certs", "--out", str(blocker / "out"), "--deploy", str(DEPLOY)]
    )
    assert result.exit_code == 2, result.output  # a flag no run can satisfy, as --json
    assert f"--out '{blocker / 'out'}': '{blocker}' is a file" in result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # exited, did not raise


def test_help_lists_the_exit_codes() -> None:
    text = CliRunner().invoke(cli, ["certs", "--help"]).output
    assert "Exit codes:" in text and "  1  a file could not be written" in text


@pytest.fixture(scope="module")
def keda_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("certs") / "keda"
    result = CliRunner().invoke(
        cli, ["certs", "--kind", "keda", "--out", str(out), "--deploy", str(DEPLOY)]
    )
    assert result.exit_code == 0, result.output
    return out, result.output


def test_the_keda_folder_prints_the_keda_steps(keda_install: tuple[Path, str]) -> None:
    out, output = keda_install
    assert f"Wrote {out / SECRET_FILE}, {out / CLIENT_FILE}, {out / KUSTOMIZATION}" in output
    # KEDA keeps the APIService: nothing to check about who serves it
    assert APISERVICE_CHECK not in output and "prewarm-front-proxy" not in output
    install = output.index(f"Install: {APPLY} -k {out}")
    # the token Secret the serving pods mount is made before the install, the Secrets are
    # copied to the workloads after it
    assert 0 <= output.find("Secret prewarm-serve-token") < install
    assert install < output.find("prewarm-grpc-client") and "new CA" in output[install:]


def test_the_keda_folder_is_the_keda_overlay_with_secrets_for_cert_manager(
    keda_install: tuple[Path, str],
) -> None:
    objects = kustomize(keda_install[0])
    for obj in objects:  # no custom resource here: no cert-manager
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    # Everything of deploy/overlays/keda but what cert-manager makes, exactly (the serving
    # patches and KEDA's NetworkPolicy: deploy/components/keda), and in place of
    # cert-manager's Issuers and Certificates the two Secrets they would have written.
    overlay = [
        o for o in render_install("overlays/keda") if not o["apiVersion"].startswith(CERT_MANAGER)
    ]
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert [o for o in objects if o["kind"] != "Secret"] == overlay
    assert {s["metadata"]["name"] for s in secrets} == {"prewarm-serve-tls", "prewarm-grpc-client"}
    for secret in secrets:
        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["namespace"] == "prewarm"
        assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}  # as cert-manager's
    assert not [o for o in objects if o["kind"] == "APIService"]
    assert not [o for o in objects if o["apiVersion"].startswith(CERT_MANAGER)]
    serve = one(objects, "Deployment", "prewarm-serve")
    volumes = {v["name"]: v for v in pod_spec(serve)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "prewarm-serve-tls"
    assert volumes["token"]["secret"]["secretName"] == "prewarm-serve-token"
    assert "--client-ca=/etc/prewarm/tls/ca.crt" in container(serve)["args"]


def test_the_keda_client_certificate_is_for_client_auth_from_the_serving_ca(
    keda_install: tuple[Path, str],
) -> None:
    objects = kustomize(keda_install[0])
    serving = one(objects, "Secret", "prewarm-serve-tls")
    client = one(objects, "Secret", "prewarm-grpc-client")
    assert _pem(client, "ca.crt") == _pem(serving, "ca.crt")
    ca = x509.load_pem_x509_certificate(_pem(serving, "ca.crt"))
    certificate = x509.load_pem_x509_certificate(_pem(client, "tls.crt"))
    certificate.verify_directly_issued_by(ca)
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    (cn,) = certificate.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    assert cn.value == "keda"  # as deploy/overlays/keda/grpc-client.yaml's commonName
    # the key is the certificate's
    key = serialization.load_pem_private_key(_pem(client, "tls.key"), password=None)
    assert key.public_key() == certificate.public_key()


def test_serving_s_tls_accepts_the_keda_client_certificate_and_refuses_none(
    keda_install: tuple[Path, str], tmp_path: Path
) -> None:
    objects = kustomize(keda_install[0])
    client = one(objects, "Secret", "prewarm-grpc-client")
    (tmp_path / "client.crt").write_bytes(_pem(client, "tls.crt"))
    (tmp_path / "client.key").write_bytes(_pem(client, "tls.key"))
    server = tmp_path / "server"
    server.mkdir()
    serving = one(objects, "Secret", "prewarm-serve-tls")
    with _tls_listener(serving, server, client_certificates=True) as (port, ca):
        # KEDA's scaler trusts the client Secret's ca.crt, as its TriggerAuthentication says
        (tmp_path / "ca.crt").write_bytes(_pem(client, "ca.crt"))
        context = ssl.create_default_context(cafile=tmp_path / "ca.crt")
        context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="prewarm-serve.prewarm.svc") as tls,
        ):
            assert tls.recv(2) == b"ok"
        # Without a client certificate: refused (under TLS 1.3 the client learns it on its
        # first read, as the server's alert)
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            pytest.raises(ssl.SSLError),
            ssl.create_default_context(cafile=ca).wrap_socket(
                raw, server_hostname="prewarm-serve.prewarm.svc"
            ) as tls,
        ):
            tls.recv(2)


def test_the_keda_keys_are_readable_by_their_owner_only(keda_install: tuple[Path, str]) -> None:
    for name in (SECRET_FILE, CLIENT_FILE, KUSTOMIZATION):
        assert stat.S_IMODE((keda_install[0] / name).stat().st_mode) == 0o600, name
    assert not (keda_install[0] / PATCH_FILE).exists()


def test_a_bad_kind_exits_2_naming_the_flag(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["certs", "--kind", "vpa", "--out", str(out), "--deploy", str(DEPLOY)]
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--kind'" in result.output and "'hpa', 'keda'" in result.output
    assert not out.exists()
