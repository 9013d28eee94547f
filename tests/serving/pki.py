"""Real X.509 certificates for the TLS tests, made with ``cryptography``.

A CA, a server certificate for ``127.0.0.1`` / ``localhost`` signed by it, a client certificate
signed by it, and a client certificate of another CA (a stranger).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Certificates valid from long before to long after any test run: no dependence on the date.
_NOT_BEFORE = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_NOT_AFTER = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Pki:
    """PEM files of one test PKI."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    server: bool = False,
) -> x509.Certificate:
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOT_BEFORE)
        .not_valid_after(_NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(
    folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def make_pki(folder: Path) -> Pki:
    """Write a CA, server, client and stranger certificate under ``folder``."""
    ca_key, other_ca_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = _certificate("prewarm test CA", ca_key, None)
    ca_path, _ = _write(folder, "ca", ca, ca_key)
    issued = {}
    for stem, issuer_key, issuer_name, server in (
        ("server", ca_key, ca.subject, True),
        ("client", ca_key, ca.subject, False),
        ("stranger", other_ca_key, _name("another CA"), False),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(stem, key, (issuer_name, issuer_key), server=server)
        issued[stem] = _write(folder, stem, cert, key)
    return Pki(
        ca=ca_path,
        server_cert=issued["server"][0],
        server_key=issued["server"][1],
        client_cert=issued["client"][0],
        client_key=issued["client"][1],
        stranger_cert=issued["stranger"][0],
        stranger_key=issued["stranger"][1],
    )
