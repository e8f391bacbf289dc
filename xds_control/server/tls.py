"""The xDS port's certificates, re-read when they change on disk.

Certificates are short-lived where they are issued automatically (cert-manager renews a
90-day certificate at two thirds of its life, SPIFFE issuers hourly), and a control plane
that read them once would serve an expired one until restarted. gRPC asks before each TLS
handshake whether the certificates changed (``dynamic_ssl_server_credentials``): we answer
from the files' stamps (a ``stat`` each, so every new connection pays ~10 us), and re-read
them only when a stamp moved. New connections get the new certificates; streams already open
keep the connection, and the keys, they were opened with.

A new set is checked before it is served (the key matches the certificate, the CA bundle
holds a certificate, with Python's own TLS library): a renewal caught halfway (the new
certificate, the old key), or a bad file, is logged as an error and the last good set keeps
being served; the next handshake after another change tries again.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path

import grpc
import structlog

from xds_control.config.serving import TlsConfig
from xds_control.errors import ServeError

__all__ = ["CertificateFiles"]

log = structlog.get_logger(__name__)

_Stamp = tuple[int, int, int] | None


class CertificateFiles:
    """The server credentials of ``tls``, following its files."""

    def __init__(self, tls: TlsConfig) -> None:
        self._tls = tls
        self._paths: Sequence[Path] = [
            p for p in (tls.cert_file, tls.key_file, tls.client_ca_file) if p is not None
        ]
        self._lock = threading.Lock()
        self._stamps = self._stat()
        self.error: str | None = None
        """Why the files on disk are not served (the last good ones are); ``None``: in use."""
        try:
            self._first = self._load()
        except ValueError as exc:
            raise ServeError(f"tls: {exc}") from exc

    def credentials(self) -> grpc.ServerCredentials:
        """Credentials that ask ``changed`` before every handshake."""
        return grpc.dynamic_ssl_server_credentials(
            self._first,
            # grpc-stubs says the fetcher returns a configuration; gRPC documents None too.
            self.changed,  # type: ignore[arg-type]
            require_client_authentication=self._tls.client_ca_file is not None,
        )

    def changed(self) -> grpc.ServerCertificateConfiguration | None:
        """The new certificates when the files changed and hold a good set, else ``None``
        (gRPC keeps the current ones). Called by gRPC on its own threads; never raises."""
        with self._lock:
            stamps = self._stat()
            if stamps == self._stamps:
                return None
            self._stamps = stamps
            try:
                loaded = self._load()
            except ValueError as exc:
                if str(exc) != self.error:
                    log.error(
                        "tls certificates on disk rejected; serving the last good ones",
                        error=str(exc),
                    )
                self.error = str(exc)
                return None
            self.error = None
            log.info("tls certificates reloaded", files=[str(p) for p in self._paths])
            return loaded

    def _stat(self) -> list[_Stamp]:
        return [_stamp(path) for path in self._paths]

    def _load(self) -> grpc.ServerCertificateConfiguration:
        """Read and check the files; ``ValueError`` naming the file when they are no good."""
        tls = self._tls
        cert, key = _read(tls.cert_file), _read(tls.key_file)
        ca = _read(tls.client_ca_file) if tls.client_ca_file is not None else None
        _check(tls)
        if (_read(tls.cert_file), _read(tls.key_file)) != (cert, key) or (
            tls.client_ca_file is not None and _read(tls.client_ca_file) != ca
        ):
            raise ValueError("the files changed while being read (a renewal under way)")
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)


def _stamp(path: Path) -> _Stamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from exc


def _no_password() -> bytes:
    return b""  # gRPC takes no encrypted key: such a key fails here, and never prompts


def _check(tls: TlsConfig) -> None:
    """The key is the certificate's and the CA bundle holds certificates (``ValueError``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile=tls.cert_file, keyfile=tls.key_file, password=_no_password)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"{tls.cert_file} with {tls.key_file}: not a certificate and its key ({exc})"
        ) from exc
    if tls.client_ca_file is None:
        return
    try:
        context.load_verify_locations(cafile=tls.client_ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"{tls.client_ca_file}: not a CA bundle ({exc})") from exc
