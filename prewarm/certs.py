"""``prewarm certs``: the install's certificates without cert-manager.

Writes a self-signed CA and a serving certificate it signs, for the names the APIService,
KEDA and the kubelet use to reach ``prewarm-serve`` (``<service>``, ``<service>.<namespace>``,
``<service>.<namespace>.svc``, ``<service>.<namespace>.svc.cluster.local``; with ``--shards N``
those of each shard's Service ``prewarm-serve-K`` too, and any ``--dns`` names), as a
``kubernetes.io/tls`` Secret manifest (``tls.crt``, ``tls.key``, ``ca.crt``, as cert-manager
writes it), and a ``kustomization.yaml`` installing deploy/base with it. What else depends on
``--kind`` (:data:`KINDS`):

- ``hpa``: a patch setting the APIService's ``caBundle`` to that CA, and the APIService
  component (the HPA-only install without cert-manager). After the token Secret and the
  front-proxy ConfigMap (docs/install.md, "Before you start" and step 1), :data:`APPLY`
  ``-k install`` is the whole install.
- ``keda``: the Secret ``prewarm-grpc-client``, a client certificate of the same CA for
  KEDA's gRPC scaler (what deploy/overlays/keda has cert-manager issue), and the KEDA
  component (no APIService: KEDA owns it). After the token Secret (docs/install.md, "Before
  you start"), :data:`APPLY` ``-k install`` is the whole install.

The private keys stay in ``--out`` (mode 0600): keep that folder out of version control.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from prewarm.exit_codes import ExitCode, epilog, fail
from prewarm.options import OutputFolder, user_errors
from prewarm.services import (
    CLIENT_SECRET,
    NAMESPACE,
    SERVICE,
    TOKEN_SECRET,
    fleet_services,
    host,
    service_names,
)
from prewarm.services import SERVING_SECRET as SECRET
from serving.shards import MAX_SHARDS

CLIENT_NAME = "keda"  # the common name of KEDA's gRPC client certificate
APISERVICE = "v1beta1.external.metrics.k8s.io"
FRONT_PROXY_CONFIGMAP = "prewarm-front-proxy"  # deploy/components/apiservice mounts it
# The install replaces the cluster's one APIService of the group, whoever serves it (KEDA,
# prometheus-adapter, Datadog): this shows who does (docs/install.md, "HPA only").
APISERVICE_CHECK = f"kubectl get apiservice {APISERVICE} -o jsonpath='{{.spec.service}}'"
# Written by this command, read by kubectl; the names the kustomization lists.
SECRET_FILE = "serving-tls.yaml"
PATCH_FILE = "apiservice-cabundle.yaml"
CLIENT_FILE = "grpc-client-tls.yaml"
KUSTOMIZATION = "kustomization.yaml"
# Certificates start an hour early: a node whose clock lags still accepts them.
CLOCK_SKEW = dt.timedelta(hours=1)
# A DNS name as a certificate holds it (RFC 1123): labels of letters, digits and '-' (not
# first nor last), 1 to 63 characters each; a wildcard only as the whole first label.
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    certificate: Any  # cryptography.x509.Certificate
    key: Any  # cryptography EC private key

    def certificate_pem(self) -> bytes:
        """The certificate, PEM."""
        from cryptography.hazmat.primitives import serialization

        pem: bytes = self.certificate.public_bytes(serialization.Encoding.PEM)
        return pem

    def key_pem(self) -> bytes:
        """The private key, unencrypted PKCS#8 PEM."""
        from cryptography.hazmat.primitives import serialization

        pem: bytes = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return pem


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _signed(builder: Any, key: Any) -> Any:
    from cryptography.hazmat.primitives import hashes

    return builder.sign(key, hashes.SHA256())


def _builder(subject: str, issuer: Any, public_key: Any, now: dt.datetime, days: int) -> Any:
    from cryptography import x509

    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
    )


def new_ca(common_name: str, now: dt.datetime, days: int = 3650) -> Issued:
    """A self-signed CA (EC P-256) valid ``days`` days from ``now``."""
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    builder = (
        _builder(common_name, _name(common_name), key.public_key(), now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **usage),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    return Issued(_signed(builder, key), key)


def issue(
    ca: Issued,
    common_name: str,
    now: dt.datetime,
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    client: bool = False,
    days: int = 365,
) -> Issued:
    """A leaf certificate signed by ``ca``: for a TLS server (``dns_names`` and
    ``ip_addresses`` as its names) or, with ``client``, for a TLS client."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _builder(common_name, ca.certificate.subject, key.public_key(), now, days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(_signed(builder, ca.key), key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def secret_manifest(ca: Issued, pair: Issued, namespace: str, name: str = SECRET) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret ``name`` of ``pair`` (with the CA, as cert-manager
    writes it): by default the one the serving pods mount."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": _b64(pair.certificate_pem()),
            "tls.key": _b64(pair.key_pem()),
            "ca.crt": _b64(ca.certificate_pem()),
        },
    }


def cabundle_patch(ca: Issued) -> dict[str, Any]:
    """The APIService's ``caBundle``: the CA the aggregator verifies prewarm with."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": APISERVICE},
        "spec": {"caBundle": _b64(ca.certificate_pem())},
    }


def client_secret_manifest(ca: Issued, now: dt.datetime, days: int) -> dict[str, Any]:
    """The Secret :data:`CLIENT_SECRET`: a new client certificate signed by ``ca`` for KEDA's
    gRPC scaler, valid ``days`` days, with ``ca`` as its ``ca.crt``."""
    client = issue(ca, CLIENT_NAME, now, client=True, days=days)
    return secret_manifest(ca, client, NAMESPACE, CLIENT_SECRET)


@dataclass(frozen=True)
class Kind:
    """What one ``--kind`` of install adds to the serving Secret: a file of its own and the
    deploy/ component that uses it."""

    component: str  # under deploy/components
    file: str  # written beside the Secret
    document: Callable[[Issued, dt.datetime, int], dict[str, Any]]  # (CA, now, days) -> it
    patch: bool  # the file patches an object of the component, not a resource of its own
    # What to do before `kubectl apply -k` (and after it, ``then``), as printed.
    first: str
    then: str = ""


APPLY = "kubectl apply --server-side --force-conflicts"
"""How the folder is applied. Server-side: a client-side apply keeps what it applied, private
keys included, in each object's ``kubectl.kubernetes.io/last-applied-configuration``
annotation, which ``kubectl describe`` prints. ``--force-conflicts`` takes the fields over
from an earlier client-side apply of the folder."""


KINDS: dict[str, Kind] = {
    "hpa": Kind(
        component="apiservice",
        file=PATCH_FILE,
        document=lambda ca, _now, _days: cabundle_patch(ca),
        patch=True,
        first=(
            f"The install replaces the cluster's APIService {APISERVICE}. First check that no\n"
            "other server (KEDA, prometheus-adapter, Datadog) answers it: this must print\n"
            'NotFound or the Service prewarm-serve (else see docs/install.md, "HPA only"):\n'
            f"  {APISERVICE_CHECK}\n"
            f"Make the Secret {TOKEN_SECRET} and the ConfigMap {FRONT_PROXY_CONFIGMAP} in\n"
            f'{NAMESPACE} first (docs/install.md, "Before you start" and "HPA only", step 1):\n'
            "without them the serving pods cannot start, and the APIService would be\n"
            "registered with nothing behind it."
        ),
    ),
    "keda": Kind(
        component="keda",
        file=CLIENT_FILE,
        document=client_secret_manifest,
        patch=False,
        first=(
            f'Make the Secret {TOKEN_SECRET} in {NAMESPACE} first (docs/install.md, "Before\n'
            'you start"): without it the serving pods cannot start. KEDA keeps the APIService.'
        ),
        then=(
            'Then copy the Secrets into each workload namespace as docs/install.md ("With\n'
            f'KEDA") says ({TOKEN_SECRET} with ca.crt of {SECRET}, and {CLIENT_SECRET}).\n'
            "Copy them again after each run of this command: each run makes a new CA."
        ),
    ),
}


def kustomization(deploy: Path, out: Path, namespace: str, kind: str = "hpa") -> dict[str, Any]:
    """An install of ``deploy``'s base and the component of ``kind`` (:data:`KINDS`) with
    these certificates."""
    base = Path(os.path.relpath(deploy.resolve(), out.resolve()))
    install = KINDS[kind]
    document: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": [str(base / "base"), SECRET_FILE],
        "components": [str(base / "components" / install.component)],
    }
    if install.patch:
        document["patches"] = [{"path": install.file}]
    else:
        document["resources"].append(install.file)
    return document


def dns_name(name: str) -> str:
    """``name`` as a certificate's DNS name (lower case: names compare without case).

    Raises
    ------
    ConfigError
        ``name`` is no RFC 1123 host name, optionally after ``*.``; that includes a dotted
        IP address (RFC 1123 2.1: the last label of a host name is never all digits), which a
        DNS name in a certificate does not cover.
    """
    from forecaster.exceptions import ConfigError, shown

    lower = name.lower()
    if len(lower) > 253 or not _DNS_NAME.match(lower) or lower.rsplit(".", 1)[-1].isdigit():
        raise ConfigError(
            "`--dns` must be a DNS name (RFC 1123: labels of letters, digits and '-', 1 to 63 "
            f"characters each and 253 in all, '*.' before a wildcard), got {shown(name)}"
        )
    return lower


def certificate_names(shards: int = 1, extra: Sequence[str] = ()) -> list[str]:
    """The serving certificate's DNS names: every name of each Service of a fleet of
    ``shards`` shards (:func:`prewarm.services.fleet_services`), then ``extra``, once each.

    Raises
    ------
    ConfigError
        ``shards`` is not 1 to :data:`serving.shards.MAX_SHARDS`, or a name of ``extra`` is
        no DNS name (:func:`dns_name`).
    """
    from forecaster.exceptions import check_whole

    check_whole("--shards", shards, 1, MAX_SHARDS)
    names = [name for service in fleet_services(shards) for name in service_names(service)]
    return list(dict.fromkeys([*names, *(dns_name(name) for name in extra)]))


def write_install(
    out: Path,
    deploy: Path,
    now: dt.datetime,
    days: int = 365,
    *,
    shards: int = 1,
    extra_names: Sequence[str] = (),
    kind: str = "hpa",
) -> list[str]:
    """Write the serving Secret, the file of ``kind`` (:data:`KINDS`: the caBundle patch, or
    the gRPC client's Secret) and the kustomization into ``out``; return the serving
    certificate's DNS names (:func:`certificate_names` of ``shards`` and ``extra_names``).

    Raises
    ------
    ConfigError
        If ``deploy`` is not prewarm's deploy/ folder, or as :func:`certificate_names`
        (before anything is written).
    OSError
        If ``out`` cannot be written.
    """
    import yaml

    from forecaster.exceptions import ConfigError

    names = certificate_names(shards, extra_names)
    if not (deploy / "base" / KUSTOMIZATION).is_file():
        raise ConfigError(
            f"`--deploy` {str(deploy)[:100]!r} has no base/{KUSTOMIZATION}: "
            "give the deploy/ folder of prewarm's repository"
        )
    ca = new_ca(f"{SERVICE}.{NAMESPACE} CA", now)
    server = issue(ca, host(SERVICE), now, dns_names=names, days=days)
    install = KINDS[kind]
    documents = {
        SECRET_FILE: secret_manifest(ca, server, NAMESPACE),
        install.file: install.document(ca, now, days),
        KUSTOMIZATION: kustomization(deploy, out, NAMESPACE, kind),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, document in documents.items():
        path = out / name
        # The Secrets hold private keys: readable by its owner only from the first byte
        # on (and the mode is reset should the file exist already).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            yaml.safe_dump(document, file, sort_keys=False)
        path.chmod(0o600)
    return names


@click.command(
    epilog=epilog(
        OK="files written",
        FAILURE="a file could not be written",
        CONFIG="--deploy is not prewarm's deploy/ folder, or a bad option",
    )
)
@click.option(
    "--out",
    type=OutputFolder(),
    required=True,
    help="Folder for the Secrets (or the Secret and the caBundle patch) and their "
    "kustomization.yaml.",
)
@click.option(
    "--kind",
    type=click.Choice(list(KINDS)),
    default="hpa",
    show_default=True,
    help="hpa: prewarm registers the external metrics APIService (its caBundle patched in). "
    "keda: KEDA owns it and calls prewarm; adds the Secret prewarm-grpc-client, a client "
    "certificate of the same CA for KEDA's gRPC scaler.",
)
@click.option(
    "--deploy",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("deploy"),
    show_default=True,
    help="prewarm's deploy/ folder (the kustomization installs its base and the component "
    "of --kind).",
)
@click.option(
    "--days",
    type=click.IntRange(1, 3650),
    default=365,
    show_default=True,
    help="Validity of the serving (and client) certificate (the CA's: 10 years). Run again "
    "to renew.",
)
@click.option(
    "--shards",
    type=int,
    default=1,
    show_default=True,
    help=f"Serving shards, 1 to {MAX_SHARDS}, as given to `prewarm manifests --shards`: the "
    "certificate names each shard's Service prewarm-serve-K too (its triggers' hosts).",
)
@click.option(
    "--dns",
    "extra_names",
    multiple=True,
    metavar="NAME",
    help="Another DNS name for the certificate, e.g. a gateway's host ('*.' before a "
    "wildcard); repeat for more.",
)
def certs(
    out: Path, kind: str, deploy: Path, days: int, shards: int, extra_names: tuple[str, ...]
) -> None:
    """Write a self-signed CA and serving certificate as a Secret, with the APIService
    caBundle patch (--kind hpa) or KEDA's gRPC client certificate as a Secret (--kind keda),
    and a kustomization installing deploy/ with them (no cert-manager needed)."""
    with user_errors():
        try:
            names = write_install(
                out,
                deploy,
                dt.datetime.now(dt.UTC),
                days=days,
                shards=shards,
                extra_names=extra_names,
                kind=kind,
            )
        except OSError as exc:
            fail(f"`--out` {str(out)[:100]!r}: {exc.strerror or exc}", ExitCode.FAILURE)
    install = KINDS[kind]
    click.echo(f"Wrote {out / SECRET_FILE}, {out / install.file}, {out / KUSTOMIZATION}")
    services = fleet_services(shards)
    fleet = SERVICE if shards == 1 else f"{SERVICE} and {services[1]} to {services[-1]}"
    extra = len(names) - len(services) * len(service_names(SERVICE))
    click.echo(
        f"The certificate names the Service {fleet} (each as <service>, .{NAMESPACE}, "
        f".{NAMESPACE}.svc and .{NAMESPACE}.svc.cluster.local)"
        + (f" and {extra} name(s) of --dns" if extra else "")
    )
    click.echo(install.first)
    click.echo(f"Install: {APPLY} -k {out}")
    if install.then:
        click.echo(install.then)
