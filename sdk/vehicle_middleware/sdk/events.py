"""What the app SDK yields: typed events, with names resolved and gaps counted."""

from __future__ import annotations

from dataclasses import dataclass

from vehicle_middleware.contract.values import Failure, decode, is_failure

__all__ = [
    "ClientEvent",
    "DataEvent",
    "HealthEvent",
    "KeyAddedEvent",
    "KeyFreshEvent",
    "KeyRemovedEvent",
    "KeyStaleEvent",
    "ProviderBackEvent",
    "ProviderGoneEvent",
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
    no_provider: bool = False
    """The key's provider went away and nobody claims it since (see :class:`ProviderGoneEvent`)."""


@dataclass(frozen=True, slots=True)
class DataEvent:
    """A subscribed key was written.

    ``missed`` is how many events of this key the app did not receive just
    before this one (the gap in ``seq``); ``data`` is None when the value did
    not change. ``writes`` is how many writes the event stands for: 1, or more
    for a subscription with a filter (itself and the writes the filter held
    back since the previous event).
    """

    key: int
    name: str | None
    seq: int
    time_ns: int
    data: bytes | None
    queue: int
    missed: int = 0
    writes: int = 1

    @property
    def failure(self) -> Failure | None:
        """The :class:`~vehicle_middleware.contract.values.Failure` its provider wrote
        in place of a value (None: a value, or ``data`` is None). ``decode(data)``
        returns it too."""
        if not is_failure(self.data):
            return None
        assert self.data is not None  # is_failure says so
        found = decode(self.data)
        return found if isinstance(found, Failure) else None


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


@dataclass(frozen=True, slots=True)
class KeyStaleEvent:
    """A subscribed key was not written for longer than its expected period.

    ``last_write_ns``: its last write (ns since the epoch; 0: never written);
    ``period_ns``: how long it may go unwritten (the middleware's ``--expect``
    rules or its catalog). Comes at most one health tick (0.2 s) after the
    period ended.
    """

    key: int
    name: str | None
    last_write_ns: int
    period_ns: int


@dataclass(frozen=True, slots=True)
class KeyFreshEvent:
    """A key this app was told is stale is written again (``write_ns``: when).

    Up to one health tick (0.2 s) after the write: the middleware looks for
    writes on a tick, not on the write path.
    """

    key: int
    name: str | None
    write_ns: int


@dataclass(frozen=True, slots=True)
class ProviderGoneEvent:
    """The provider that claimed these subscribed keys went away; nobody claims them now."""

    provider: str
    keys: tuple[int, ...]
    names: tuple[str | None, ...]
    """The keys' names, as far as the SDK knows them (in the order of ``keys``)."""


@dataclass(frozen=True, slots=True)
class ProviderBackEvent:
    """Subscribed keys whose provider had gone are claimed again (by ``provider``)."""

    provider: str
    keys: tuple[int, ...]
    names: tuple[str | None, ...]


HealthEvent = KeyStaleEvent | KeyFreshEvent | ProviderGoneEvent | ProviderBackEvent
"""Whether subscribed keys are written and have a provider (never dropped by the drop rule)."""

ClientEvent = (
    DataEvent
    | KeyAddedEvent
    | KeyRemovedEvent
    | ResyncEvent
    | ReconnectedEvent
    | KeyStaleEvent
    | KeyFreshEvent
    | ProviderGoneEvent
    | ProviderBackEvent
)
