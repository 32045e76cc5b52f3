"""What the command-line clients (sample apps, providers, ``top``) share: which
app id a token or certificate is for, the TLS options, and a one-line reason
when the middleware refuses them.

Not part of the SDK: an app that imports :mod:`vehicle_middleware.sdk` handles its
errors itself; these are for the ``python -m ...`` entry points only.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from pathlib import Path
from typing import Final

import grpc
from vehicle_middleware.sdk import PublishRefusedError, StreamReplacedError, Tls

__all__ = [
    "REFUSED_EXIT",
    "TlsOptionsError",
    "TokenFormatError",
    "add_tls_arguments",
    "app_id_for",
    "certificate_subject",
    "refusal",
    "tls_from_args",
    "token_subject",
    "unreachable",
]

REFUSED_EXIT: Final = 1
"""Exit status of a client the middleware refused (a bad token, a missing scope...)."""

_FINAL: Final = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Codes that end a client for good: said in one line, not a traceback."""


class TokenFormatError(ValueError):
    """The ``--token`` given is not a JWT whose subject can be read."""


def token_subject(token: str) -> str:
    """The ``sub`` claim of a JWT, read without verifying it (the middleware does).

    Raises:
        TokenFormatError: not three base64url parts, or no string ``sub``.
    """
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise TokenFormatError("not a JWT (three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError) as e:
        raise TokenFormatError(f"not a JWT: its claims do not decode ({e})") from None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(sub, str) or not sub:
        raise TokenFormatError("the token has no subject ('sub'): it names no app")
    return sub


def app_id_for(
    app_id: str | None, token: str | None, default: str, *, certificate: str | None = None
) -> str:
    """The app id to use: the one given, else the token's subject, else the
    client certificate's subject CN, else ``default``.

    The middleware requires the ``app-id`` header to match the token's subject
    (and, with mutual TLS, to be named by the certificate), so with a token or
    a certificate and no ``--app-id`` they decide.

    Raises:
        TokenFormatError: a token whose subject cannot be read, and no app id given.
        TlsOptionsError: a certificate whose subject cannot be read, and neither given.
    """
    if app_id is not None:
        return app_id
    if token is not None:
        return token_subject(token)
    if certificate is not None:
        return certificate_subject(certificate)
    return default


class TlsOptionsError(ValueError):
    """The ``--tls-*`` options do not go together, or a file cannot be read."""


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--tls-server-name``."""
    group = parser.add_argument_group("TLS, for a middleware serving --tls-cert")
    group.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=None,
        help="PEM CA certificate(s) that signed the middleware's certificate; turns TLS on",
    )
    group.add_argument(
        "--tls-cert",
        metavar="FILE",
        default=None,
        help="PEM client certificate, for mutual TLS (it names the app); turns TLS on",
    )
    group.add_argument(
        "--tls-key", metavar="FILE", default=None, help="PEM private key of --tls-cert"
    )
    group.add_argument(
        "--tls-server-name",
        metavar="NAME",
        default=None,
        help="check the middleware's certificate for this name, not the target's host",
    )


def tls_from_args(args: argparse.Namespace) -> Tls | None:
    """The :class:`Tls` the ``--tls-*`` options ask for (None: plaintext).

    Raises:
        TlsOptionsError: a certificate without its key (or the reverse), or
            ``--tls-server-name`` alone.
    """
    ca, cert, key = args.tls_ca, args.tls_cert, args.tls_key
    if (cert is None) != (key is None):
        raise TlsOptionsError("--tls-cert and --tls-key go together: give both or neither")
    if ca is None and cert is None:
        if args.tls_server_name is not None:
            raise TlsOptionsError("--tls-server-name needs TLS: give --tls-ca or --tls-cert")
        return None
    for option, path in (("--tls-ca", ca), ("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            raise TlsOptionsError(f"{option} {path}: no such file")
    return Tls(ca=ca, cert=cert, key=key, server_name=args.tls_server_name)


def certificate_subject(path: str) -> str:
    """The subject CN of the PEM certificate at ``path`` (the first of the file).

    Raises:
        TlsOptionsError: unreadable, not a certificate, or no CN.
    """
    from cryptography import x509  # only the command-line clients need it

    try:
        cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError) as e:
        raise TlsOptionsError(f"--tls-cert {path}: not a readable PEM certificate ({e})") from None
    names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    if not names:
        raise TlsOptionsError(
            f"--tls-cert {path}: the certificate has no subject CN; give --app-id"
        )
    return str(names[0].value)


def unreachable(details: str, *, tls: bool) -> str:
    """What an UNAVAILABLE call's ``details`` mean for a person, with what to do.

    A plaintext client dialing a listener that speaks TLS sees only grpc's
    "Socket closed" (the server hangs up on the handshake it cannot read).
    """
    if not tls and ("Socket closed" in details or "handshake" in details.lower()):
        return (
            f"{details} (the middleware there may serve TLS: give --tls-ca with the CA "
            "that signed its certificate)"
        )
    return details


def refusal(error: BaseException) -> str | None:
    """One line saying why the middleware refused the client for good, or None
    if ``error`` is not such a refusal (then it is a bug: let it raise).

    Another client of the same app id taking over the event stream
    (:class:`StreamReplacedError`) ends a client for good too: it says so.
    """
    if isinstance(error, StreamReplacedError):
        return str(error)
    if isinstance(error, TimeoutError):
        return str(error) or "no middleware answered at the target in time: is it running there?"
    if isinstance(error, PublishRefusedError):
        code, details = error.code, error.details
    elif isinstance(error, grpc.aio.AioRpcError):
        code, details = error.code(), error.details() or ""
    else:
        return None
    if code not in _FINAL:
        return None
    return f"the middleware refused it ({code.name}): {details}"
