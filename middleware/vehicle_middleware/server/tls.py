"""TLS on the middleware's TCP listener, and the app a client certificate names.

``serve --tls-cert FILE --tls-key FILE`` turns TLS on for the TCP listener;
``--tls-client-ca FILE`` makes it mutual: every TCP client must show a
certificate that CA signed (unexpired), or the handshake fails before any
call. The Unix socket stays plaintext (its file mode guards it).

With mutual TLS the certificate is the caller's identity (see
:meth:`vehicle_middleware.server.auth.authentication.Authenticator.authenticate`): its names
are its subject's common name (CN) and its subject alternative names (SANs)
that are valid app ids; :func:`certificate_names` reads them from the verified peer.

The files are read and checked once, at start (a certificate that does not
match its key, has expired or does not parse stops the middleware with a
message naming the setting); grpc-core does the handshakes.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = ["ServerTls", "TlsConfigError", "certificate_names", "load_server_tls"]


class TlsConfigError(ValueError):
    """A TLS file is missing, unreadable, malformed, expired or does not match its key."""


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The PEM bytes of the server's TLS set-up, checked."""

    cert_chain: bytes
    key: bytes
    client_ca: bytes | None
    """Mutual TLS when set."""
    subject: str
    """The server certificate's subject, for the log."""
    expires: datetime.datetime

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _read(setting: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{setting} {path}: cannot read it ({e.strerror})") from None


def _certificates(setting: str, path: str, pem: bytes) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise TlsConfigError(f"{setting} {path}: not a PEM certificate ({e})") from None
    if not certs:
        raise TlsConfigError(f"{setting} {path}: holds no certificate")
    return certs


def load_server_tls(cert: str, key: str, client_ca: str = "") -> ServerTls:
    """Read and check the server's certificate, key and (optional) client CA.

    Raises:
        TlsConfigError: naming the setting and the file.
    """
    cert_pem = _read("tls_cert", cert)
    key_pem = _read("tls_key", key)
    leaf = _certificates("tls_cert", cert, cert_pem)[0]
    try:
        private = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise TlsConfigError(
            f"tls_key {key}: the key is encrypted; give an unencrypted PEM key "
            "(protect the file by its permissions)"
        ) from None
    except ValueError as e:
        raise TlsConfigError(f"tls_key {key}: not a PEM private key ({e})") from None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if private.public_key().public_bytes(der, spki) != leaf.public_key().public_bytes(der, spki):
        raise TlsConfigError(f"tls_key {key} is not the key of the certificate in {cert}")
    now = datetime.datetime.now(datetime.UTC)
    if leaf.not_valid_after_utc <= now:
        expired = leaf.not_valid_after_utc
        raise TlsConfigError(
            f"tls_cert {cert}: the certificate expired on {expired:%Y-%m-%d %H:%M} UTC"
        )
    ca_pem = None
    if client_ca:
        ca_pem = _read("tls_client_ca", client_ca)
        _certificates("tls_client_ca", client_ca, ca_pem)
    return ServerTls(
        cert_pem, key_pem, ca_pem, leaf.subject.rfc4514_string(), leaf.not_valid_after_utc
    )


def certificate_names(auth_context: Mapping[str, Iterable[bytes]]) -> tuple[str, ...] | None:
    """The names of the client certificate of a call: its subject CN, then its SANs.

    ``auth_context`` is the call's (``ServicerContext.auth_context()``); grpc-core
    has verified the certificate against the client CA before any call. None
    when the call showed no certificate (plaintext, the Unix socket, or TLS
    without a client CA); a certificate with no names gives ``()``.
    """
    if not auth_context.get("x509_pem_cert"):
        return None
    names: list[str] = []
    for prop in ("x509_common_name", "x509_subject_alternative_name"):
        for raw in auth_context.get(prop, ()):
            name = raw.decode("utf-8", "replace")
            if name not in names:
                names.append(name)
    return tuple(names)
