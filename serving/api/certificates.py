"""The serving certificate: the current certificate pair, reloaded when its files change.

``prewarm serve`` presents ``tls_cert`` / ``tls_key`` and, with ``client_ca``, verifies client
certificates against that CA, on HTTP and gRPC alike. cert-manager renews the certificate
(and ``prewarm certs`` run again replaces it) by rewriting the mounted Secret's files, so a
server that read them once would present the old certificate until it expired.
:class:`ServingCertificate` follows the files instead:

- Each new connection asks for :meth:`ServingCertificate.current`. At most once per
  ``check_interval`` seconds that reads the files again (through symlinks: a Kubernetes
  Secret or ConfigMap volume swaps its ``..data`` symlink to a new folder; at most 1 MiB
  each) and compares their bytes with the set it last looked at. Bytes, not stamps: a file
  rewritten twice in place within one tick of the filesystem's clock, at the same size,
  shows the same modification time, change time, size and inode.
- A new set is checked before it is taken: the certificate parses, the key is the
  certificate's, the CA parses, and OpenSSL takes all three into a context. A set that fails
  (a file half-written, a key of another certificate) is not served: the previous pair
  stays, one WARNING names the file and the reason (never the key), and
  :attr:`ServingCertificate.failures` counts it (``prewarm_tls_reloads_total{result="failed"}``).
  The set is tried again when its files' bytes change again. A new pair is logged at INFO with its
  ``notAfter``.
- Connections already open keep the certificate they were opened with.

Each loaded pair is immutable: its bytes (what the gRPC server's certificate fetcher hands
gRPC) and its own :class:`ssl.SSLContext` (what HTTP handshakes are handed to, see
:meth:`ServingCertificate.follow`). Nothing is changed in place, so the gRPC threads and the
event loop share it without locks beyond the one that orders the checks.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from forecaster.exceptions import ConfigError, shown
from serving.settings import TLS_CHECK_INTERVAL, ServingSettings, how_to_set
from training.sources.files import read_small

__all__ = ["CertificatePair", "ServingCertificate"]

logger = logging.getLogger(__name__)

EXPIRY_WARNING = timedelta(days=14)
"""How close to its ``notAfter`` a certificate is warned about at start (the alert's margin)."""


class CertificateFileError(Exception):
    """One of the TLS files cannot be served; ``setting`` names it, the message says why."""

    def __init__(self, setting: str, path: Path, reason: str) -> None:
        super().__init__(reason)
        self.setting = setting
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class CertificatePair:
    """One loaded, checked version of the TLS files.

    Parameters
    ----------
    certificate : bytes
        ``tls_cert`` as read: the PEM certificate chain, server certificate first.
    key : bytes
        ``tls_key`` as read: its PEM private key.
    client_ca : bytes or None
        ``client_ca`` as read (PEM), None when client certificates are not verified.
    not_after : datetime
        The server certificate's ``notAfter`` (UTC).
    context : ssl.SSLContext
        A TLS server context holding the pair (and the CA, verifying a client certificate
        when one is presented); never changed once built.
    """

    certificate: bytes = field(repr=False)
    key: bytes = field(repr=False)
    client_ca: bytes | None = field(repr=False)
    not_after: datetime
    context: ssl.SSLContext = field(repr=False, compare=False)


@dataclass(frozen=True)
class _Files:
    cert: Path
    key: Path
    client_ca: Path | None

    def named(self) -> list[tuple[str, Path]]:
        """(setting, path) of each file, in the order they are read."""
        files = [("tls_cert", self.cert), ("tls_key", self.key)]
        return files if self.client_ca is None else [*files, ("client_ca", self.client_ca)]


class ServingCertificate:
    """The current certificate pair of ``prewarm serve``, reloaded when its files change.

    Parameters
    ----------
    cert, key : Path
        PEM certificate chain and its private key (``tls_cert``, ``tls_key``).
    client_ca : Path or None, default None
        PEM CA that client certificates must chain to (``client_ca``).
    check_interval : float, default TLS_CHECK_INTERVAL
        Seconds between two reads of the files; 0 reads them at every call of
        :meth:`current`, that is at every new connection.
    clock : callable, default time.monotonic
        Seconds, for the interval.

    Raises
    ------
    ConfigError
        When the files cannot be served when the server starts: the message names the
        setting, its flag and variable, and the file.
    """

    def __init__(
        self,
        cert: Path,
        key: Path,
        client_ca: Path | None = None,
        *,
        check_interval: float = TLS_CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._files = _Files(cert, key, client_ca)
        self.check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        try:
            contents = _read_all(self._files)
            self._pair = _load(self._files, contents)
        except CertificateFileError as exc:
            raise ConfigError(
                f"`{exc.setting}` ({how_to_set(exc.setting)}) {shown(str(exc.path))} {exc}"
            ) from None
        self._seen: _Contents | tuple[str, str] = contents
        """The files' bytes last looked at, or the setting and reason they could not be read."""
        self._checked_at = clock()
        self.reloads = 0
        """New pairs taken since the start."""
        self.failures = 0
        """Changed sets of files refused since the start (each once, until they change)."""

    @classmethod
    def of(
        cls, settings: ServingSettings, now: datetime | None = None
    ) -> ServingCertificate | None:
        """The serving certificate ``settings`` configure, its validity logged as of ``now``
        (default: the wall clock); None when TLS is off."""
        if settings.tls_cert is None or settings.tls_key is None:
            return None
        certificate = cls(
            settings.tls_cert,
            settings.tls_key,
            settings.client_ca,
            check_interval=settings.tls_check_interval,
        )
        certificate._log_validity(now or datetime.now(UTC))
        return certificate

    def _log_validity(self, now: datetime) -> None:
        """At start: INFO with the certificate's ``notAfter``; WARNING within
        :data:`EXPIRY_WARNING` of it or past it (the server starts all the same: a renewal
        on its way is taken up without a restart)."""
        left = self._pair.not_after - now
        extra = {
            "file": str(self._files.cert),
            "not_after": self._pair.not_after.isoformat(),
            "days_left": round(left.total_seconds() / 86400, 1),
        }
        if left <= timedelta(0):
            logger.warning(
                "the serving certificate has expired: the API server and KEDA refuse it "
                "until it is renewed",
                extra=extra,
            )
        elif left < EXPIRY_WARNING:
            logger.warning(
                "the serving certificate expires within %d days: renew it (cert-manager, or "
                "prewarm certs applied again)",
                EXPIRY_WARNING.days,
                extra=extra,
            )
        else:
            logger.info("serving certificate loaded", extra=extra)

    @property
    def verifies_clients(self) -> bool:
        """True when client certificates are verified against ``client_ca``."""
        return self._files.client_ca is not None

    def current(self) -> CertificatePair:
        """The pair to present to a new connection, after a look at the files if
        ``check_interval`` has passed since the last one."""
        if self._clock() - self._checked_at < self.check_interval:
            return self._pair
        with self._lock:
            now = self._clock()
            if now - self._checked_at >= self.check_interval:
                self._checked_at = now
                self._reload_if_changed()
            return self._pair

    def follow(self, listener: ssl.SSLContext) -> ssl.SSLContext:
        """Make ``listener`` hand every TLS handshake to the current pair's context.

        The listener is the context the HTTP server listens with; its server-name callback,
        which OpenSSL calls early in every handshake (with or without SNI), switches the
        connection to :meth:`current`'s context, as :attr:`ssl.SSLContext.sni_callback`
        describes. The connection then presents that pair's certificate and verifies a client
        certificate against that pair's CA.
        """
        listener.sni_callback = self._hand_over
        if self.verifies_clients:
            # A resumed session skips the handshake's certificate checks and brings back the
            # client certificate it was made with: tickets issued before a client CA change
            # (the way a leaked client key is revoked) would let that client in for the
            # tickets' lifetime (2 h by OpenSSL's default). Without tickets, what resumes is
            # a TLS 1.2 session ID, which the HTTP protocol closes (auth.py). gRPC makes a
            # context, and ticket keys, per configuration.
            listener.options |= ssl.OP_NO_TICKET
            listener.num_tickets = 0
        return listener

    def _hand_over(
        self, connection: ssl.SSLObject, server_name: str | None, listener: ssl.SSLContext
    ) -> None:
        connection.context = self.current().context

    def _reload_if_changed(self) -> None:
        try:
            contents = _read_all(self._files)
        except CertificateFileError as exc:
            # A file missing or unreadable is warned about once, until that changes.
            if self._seen != (exc.setting, exc.reason):
                self._seen = (exc.setting, exc.reason)
                self._refused(exc.setting, exc.path, exc.reason)
            return
        served = (self._pair.certificate, self._pair.key, self._pair.client_ca)
        if contents in (self._seen, served):  # refused already, or back to the served set
            self._seen = contents
            return
        self._seen = contents
        try:
            pair = _load(self._files, contents)
        except CertificateFileError as exc:
            self._refused(exc.setting, exc.path, exc.reason)
        except Exception as exc:  # a handshake must never fail over a reload
            self._refused("tls_cert", self._files.cert, f"failed: {type(exc).__name__}")
        else:
            self._pair = pair
            self.reloads += 1
            logger.info(
                "TLS certificate reloaded: new connections are served the new certificate",
                extra={"file": str(self._files.cert), "not_after": pair.not_after.isoformat()},
            )

    def _refused(self, setting: str, path: Path, reason: str) -> None:
        self.failures += 1
        logger.warning(
            "TLS files changed but were not reloaded: new connections are still served the "
            "previous certificate; tried again when the files change",
            extra={
                "setting": setting,
                "file": str(path),
                "reason": reason,
                "not_after": self._pair.not_after.isoformat(),
            },
        )


_Contents = tuple[bytes, bytes, bytes | None]
"""The bytes of ``tls_cert``, ``tls_key`` and ``client_ca`` (None when unset), as read."""


def _read(setting: str, path: Path) -> bytes:
    try:
        return read_small(path)
    except OSError as exc:
        raise CertificateFileError(setting, path, f"cannot be read: {exc.strerror}") from None


def _read_all(files: _Files) -> _Contents:
    certificate = _read("tls_cert", files.cert)
    key = _read("tls_key", files.key)
    client_ca = None if files.client_ca is None else _read("client_ca", files.client_ca)
    return certificate, key, client_ca


def _load(files: _Files, contents: _Contents) -> CertificatePair:
    """Check the files' ``contents``; raise :class:`CertificateFileError` naming the first
    fault."""
    certificate, key, client_ca = contents
    chain = _certificates("tls_cert", files.cert, certificate)
    _check_key("tls_key", files, key, chain[0])
    if files.client_ca is not None and client_ca is not None:
        _certificates("client_ca", files.client_ca, client_ca)
    context = _context(files, certificate, key, client_ca)
    return CertificatePair(certificate, key, client_ca, chain[0].not_valid_after_utc, context)


def _certificates(setting: str, path: Path, pem: bytes) -> list[x509.Certificate]:
    try:
        return list(x509.load_pem_x509_certificates(pem))
    except ValueError:
        raise CertificateFileError(setting, path, "holds no readable PEM certificate") from None


def _check_key(setting: str, files: _Files, pem: bytes, certificate: x509.Certificate) -> None:
    # The parser's own message is not echoed: it says nothing the reason does not, and the
    # text it parsed is a private key.
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise CertificateFileError(
            setting, files.key, "holds no readable unencrypted PEM private key"
        ) from None
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != certificate.public_key().public_bytes(*spki):
        raise CertificateFileError(
            setting, files.key, f"is not the key of the certificate in {shown(str(files.cert))}"
        )


def _context(
    files: _Files, certificate: bytes, key: bytes, client_ca: bytes | None
) -> ssl.SSLContext:
    """A TLS server context of the checked bytes, as OpenSSL reads them.

    It takes the settings :func:`serving.api.app.uvicorn_config` gives the listener: a client
    certificate is verified against the CA when one is presented, and not required (the
    kubelet's probes and Prometheus present none); OpenSSL's default protocols and ciphers,
    no ALPN (uvicorn sets none for the ``httptools`` protocol).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        _load_cert_chain(context, files, certificate, key)
    except (ssl.SSLError, OSError) as exc:
        raise CertificateFileError("tls_cert", files.cert, _openssl_refusal(exc)) from None
    if files.client_ca is not None and client_ca is not None:
        context.verify_mode = ssl.CERT_OPTIONAL
        try:
            context.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
        except (ssl.SSLError, OSError) as exc:
            raise CertificateFileError(
                "client_ca", files.client_ca, _openssl_refusal(exc)
            ) from None
    return context


def _load_cert_chain(
    context: ssl.SSLContext, files: _Files, certificate: bytes, key: bytes
) -> None:
    """Load the pair into ``context`` from the bytes that were checked.

    OpenSSL takes a pair from paths only. Read from ``files`` a second time, a copy written
    over them between the two reads would leave the HTTP context on another pair than the
    bytes gRPC is handed. On Linux the checked bytes go to anonymous in-memory files instead
    (``memfd_create``: never on a disk, gone when closed); elsewhere the files are read again.
    """
    if not hasattr(os, "memfd_create"):
        context.load_cert_chain(files.cert, files.key)
        return
    descriptors: list[int] = []
    try:
        for name, data in (("tls.crt", certificate), ("tls.key", key)):
            descriptors.append(os.memfd_create(f"prewarm-{name}", os.MFD_CLOEXEC))
            with os.fdopen(descriptors[-1], "wb", closefd=False) as out:
                out.write(data)
        cert_path, key_path = (f"/proc/self/fd/{fd}" for fd in descriptors)
        context.load_cert_chain(cert_path, key_path)
    finally:
        for fd in descriptors:
            os.close(fd)


def _openssl_refusal(exc: ssl.SSLError | OSError) -> str:
    reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
    return f"is refused by OpenSSL: {shown(reason)}"
