"""Channel set-up and retry policy shared by the SDK clients."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Final

import grpc

from middleware.client.wire import APP_ID_HEADER, AUTH_HEADER

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

_OPTIONS: Final = [
    # Find a dead middleware within seconds, even on an idle stream.
    ("grpc.keepalive_time_ms", 5_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
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


def open_channel(target: str, extra: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """An insecure channel to the middleware, with the SDK's options and ``extra`` ones."""
    return grpc.aio.insecure_channel(target, options=[*_OPTIONS, *extra])


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
