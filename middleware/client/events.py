"""What the app SDK yields: typed events, with names resolved and gaps counted."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ClientEvent",
    "DataEvent",
    "KeyAddedEvent",
    "KeyRemovedEvent",
    "ReconnectedEvent",
    "ResyncEvent",
    "SubscriptionResult",
]


@dataclass(frozen=True, slots=True)
class SubscriptionResult:
    """Outcome of one subscription of a register or deregister call."""

    key: str
    key_id: int
    ok: bool
    status: str
    """``OK``, ``NOT_FOUND``, ``PERMISSION_DENIED`` or ``INVALID_ARGUMENT``."""
    current: bytes | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DataEvent:
    """A subscribed key was written.

    ``missed`` is how many events of this key the app did not receive just
    before this one (the gap in ``seq``); ``data`` is None when the value did
    not change.
    """

    key: int
    name: str | None
    seq: int
    time_ns: int
    data: bytes | None
    queue: int
    missed: int = 0


@dataclass(frozen=True, slots=True)
class KeyAddedEvent:
    key: int
    name: str


@dataclass(frozen=True, slots=True)
class KeyRemovedEvent:
    key: int
    name: str


@dataclass(frozen=True, slots=True)
class ResyncEvent:
    """Lifecycle events were lost; the SDK has already refreshed its id->name map."""

    lost: int


@dataclass(frozen=True, slots=True)
class ReconnectedEvent:
    """The event stream was re-opened and every subscription registered again.

    ``middleware_restarted``: the middleware is a new process (new boot id):
    key ids may have changed and every value must be considered unknown;
    ``results`` carry the current values where the subscriptions asked for them.
    """

    boot_id: str
    middleware_restarted: bool
    results: tuple[SubscriptionResult, ...]


ClientEvent = DataEvent | KeyAddedEvent | KeyRemovedEvent | ResyncEvent | ReconnectedEvent
