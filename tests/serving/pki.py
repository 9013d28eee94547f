"""Real X.509 certificates for the TLS tests, made by ``prewarm certs``' own functions.

A CA, a server certificate for ``127.0.0.1`` / ``localhost`` signed by it, a client certificate
signed by it, and a client certificate of another CA (a stranger).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from prewarm.certs import Issued, issue, new_ca

# Certificates valid from long before to long after any test run: no dependence on the date.
VALID_FROM = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
VALID_DAYS = 36_500


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


def write_issued(folder: Path, stem: str, issued: Issued) -> tuple[Path, Path]:
    """``folder/stem.crt`` and ``folder/stem.key`` of ``issued``."""
    cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
    cert_path.write_bytes(issued.certificate_pem())
    key_path.write_bytes(issued.key_pem())
    return cert_path, key_path


def make_pki(folder: Path) -> Pki:
    """Write a CA, server, client and stranger certificate under ``folder``."""
    ca = new_ca("prewarm test CA", VALID_FROM, VALID_DAYS)
    other_ca = new_ca("another CA", VALID_FROM, VALID_DAYS)
    ca_path, _ = write_issued(folder, "ca", ca)
    names = {"dns_names": ["localhost"], "ip_addresses": ["127.0.0.1"]}
    server = issue(ca, "server", VALID_FROM, days=VALID_DAYS, **names)
    client = issue(ca, "client", VALID_FROM, client=True, days=VALID_DAYS)
    stranger = issue(other_ca, "stranger", VALID_FROM, client=True, days=VALID_DAYS)
    return Pki(
        ca_path,
        *write_issued(folder, "server", server),
        *write_issued(folder, "client", client),
        *write_issued(folder, "stranger", stranger),
    )
