"""Channel set-up and retry policy shared by the SDK clients.

TLS: :class:`Tls` (files) or :func:`channel_credentials` (PEM bytes or files)
for a middleware serving TLS (``serve --tls-cert``); with a client certificate
and key, mutual TLS (``serve --tls-client-ca``), where the certificate names
the app. A ``unix:`` target is always plaintext (the middleware's Unix socket
is). Other parts that dial a middleware (the collector, peer links) use
:func:`channel_credentials` too.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
from vehicle_middleware.contract.wire import APP_ID_HEADER, AUTH_HEADER

RETRYABLE: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
    }
)
"""Codes after which a client reconnects rather than giving up (the middleware
went away, or the call was cut)."""

RECEIVE_LIMIT: Final = 16 * 1024 * 1024
"""The most bytes of one message a channel receives (gRPC's default is 4 MiB)."""

_OPTIONS: Final = [
    # Find a dead middleware within seconds, even on an idle stream.
    ("grpc.keepalive_time_ms", 5_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", RECEIVE_LIMIT),
    # Reconnect quickly after a middleware restart.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


def metadata(app_id: str, token: str | None) -> tuple[tuple[str, str], ...]:
    """The identity metadata of every call: app id, and the token in token mode."""
    md: tuple[tuple[str, str], ...] = ((APP_ID_HEADER, app_id),)
    if token is not None:
        md += ((AUTH_HEADER, f"Bearer {token}"),)
    return md


PemSource = bytes | str | os.PathLike[str]
"""PEM text as bytes, or the path of a PEM file."""


def _pem(source: PemSource | None, what: str) -> bytes | None:
    if source is None or isinstance(source, bytes):
        return source
    try:
        return Path(source).read_bytes()
    except OSError as e:
        raise ValueError(f"TLS {what} {os.fspath(source)}: cannot read it ({e.strerror})") from None


def channel_credentials(
    ca: PemSource | None = None, cert: PemSource | None = None, key: PemSource | None = None
) -> grpc.ChannelCredentials:
    """Credentials to dial a middleware that serves TLS.

    Args:
        ca: the CA certificate(s) that signed the middleware's certificate
            (None: the system's trusted roots).
        cert, key: this client's certificate and private key, for mutual TLS
            (both or neither).
    Raises:
        ValueError: only one of ``cert`` and ``key``; a file cannot be read.
    """
    if (cert is None) != (key is None):
        raise ValueError("TLS: a client certificate and its key go together: give both or neither")
    return grpc.ssl_channel_credentials(
        root_certificates=_pem(ca, "CA"),
        private_key=_pem(key, "key"),
        certificate_chain=_pem(cert, "certificate"),
    )


@dataclass(frozen=True, slots=True)
class Tls:
    """How a client dials a middleware serving TLS: files of PEM (or PEM bytes).

    ``server_name``: the name to check the middleware's certificate against,
    when it is not the target's host (e.g. dialling an address the
    certificate does not name).
    """

    ca: PemSource | None = None
    cert: PemSource | None = None
    key: PemSource | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return channel_credentials(self.ca, self.cert, self.key)


def open_channel(
    target: str, extra: Sequence[tuple[str, Any]] = (), *, tls: Tls | None = None
) -> grpc.aio.Channel:
    """A channel to the middleware, with the SDK's options and ``extra`` ones:
    TLS with ``tls`` (except to a ``unix:`` target), else plaintext."""
    options = [*_OPTIONS, *extra]
    if tls is None or target.startswith("unix:"):
        return grpc.aio.insecure_channel(target, options=options)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.aio.secure_channel(target, tls.credentials(), options=options)


class Backoff:
    """Exponential backoff with jitter, reset after a success."""

    def __init__(self, first: float = 0.05, cap: float = 2.0) -> None:
        self._first = first
        self._cap = cap
        self._next = first

    def reset(self) -> None:
        self._next = self._first

    def delay(self) -> float:
        d = self._next
        self._next = min(self._cap, self._next * 2)
        return d * random.uniform(0.5, 1.0)


UNARY_ATTEMPTS: Final = 5
"""Tries of one unary call that the middleware could not admit (with :class:`Backoff`
between them: about 0.05, 0.1, 0.2, 0.4 s, each less a random part of up to half)."""

_T = TypeVar("_T")

_NOT_ADMITTED: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})
"""What a call the middleware did not take up ends with: UNAVAILABLE (refused, not
connected, shutting down) or CANCELLED (shed by gRPC beyond ``max_pending_calls``; a
call this client cancels raises ``asyncio.CancelledError`` instead)."""


def refused_unprocessed(error: grpc.aio.AioRpcError) -> bool:
    """Whether the middleware's transport refused the call before any of it ran.

    HTTP/2 ``REFUSED_STREAM`` (a call beyond the middleware's
    ``max_concurrent_streams`` on one connection) guarantees the server did not
    process the stream: safe to retry any call, a write too. gRPC reports it as
    UNAVAILABLE with the stream's reset error code, 7, in its text.
    """
    return error.code() is grpc.StatusCode.UNAVAILABLE and "error code 7" in (error.details() or "")


async def retry_unary(
    call: Callable[[], Awaitable[_T]],
    *,
    idempotent: bool,
    attempts: int = UNARY_ATTEMPTS,
    backoff: Backoff | None = None,
) -> _T:
    """``await call()``, again after an UNAVAILABLE that the middleware could not admit,
    with exponential backoff and jitter, at most ``attempts`` times.

    ``idempotent``: a call that may run twice with the same effect (a read, a
    registration, adding keys) is retried after any UNAVAILABLE or CANCELLED
    (refused, not yet connected, shutting down, shed); any other (a write, an
    actuation) only after a refusal that proves nothing ran
    (:func:`refused_unprocessed`), since an UNAVAILABLE after the middleware took
    it (an actuation whose provider did not answer) may have acted.

    Raises:
        grpc.aio.AioRpcError: the last error, or the first one not retried.
    """
    delays = backoff or Backoff()
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except grpc.aio.AioRpcError as e:
            again = refused_unprocessed(e) or (idempotent and e.code() in _NOT_ADMITTED)
            if not again or attempt == attempts:
                raise
        await asyncio.sleep(delays.delay())
    raise AssertionError("unreachable: the last attempt returns or raises")
