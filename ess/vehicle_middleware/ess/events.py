"""What the ESS delivers to an app, and the small enums of its vocabulary.

``DataUpdated`` is a ``NamedTuple`` rather than a frozen dataclass: it is
several times cheaper to build, and just as immutable. The server's streams do
not make even that: the queues hold a data event as a plain tuple of the same
fields (``DataRow``), and the streams read it as it is (``drain_raw``), since
a typed object per event is a sizeable share of an event's whole way from a
provider's publish to an app's bytes.
The rare lifecycle events are frozen slotted dataclasses, and so are the health
events (``KeyStale``/``KeyFresh``, ``ProviderGone``/``ProviderBack``), which
travel like lifecycle events: never dropped by the drop rule.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, cast

__all__ = [
    "ONE_WRITE_MAX",
    "DataRow",
    "DataUpdated",
    "DropReason",
    "Event",
    "HealthEvent",
    "KeyAdded",
    "KeyFresh",
    "KeyRemoved",
    "KeyStale",
    "LifecycleEvent",
    "ProviderBack",
    "ProviderGone",
    "RawEvent",
    "ResyncRequired",
    "Status",
    "Trigger",
    "as_data_updated",
    "as_row",
    "data_rows",
    "pack_queue",
    "unpack_queue",
]


class Trigger(enum.Enum):
    """When a subscription produces an event."""

    ON_CHANGE = 0
    """Only when a write changes the bytes of the value."""
    ON_UPDATE = 1
    """On every write, even one that stores equal bytes (a heartbeat)."""


class Status(enum.Enum):
    """Per-key outcome of register / deregister."""

    OK = 0
    NOT_FOUND = 1
    PERMISSION_DENIED = 2
    INVALID_ARGUMENT = 3


class DropReason(enum.Enum):
    """Why a generated ``data_updated`` event never reached its app."""

    EVICTED = "evicted"
    """The queue was full: a newer event of the same key replaced it."""
    LOST = "lost"
    """The queue was full and held no event of the key: the new event was never queued."""
    DISCARDED = "discarded"
    """Queued, then thrown away: the subscription, key or app went away, the
    app reopened its stream, or re-registered the key onto another queue."""


class DataUpdated(NamedTuple):
    """A key's value was written.

    Attributes:
        key: the key id.
        seq: per (app, key) sequence number, from 1, +1 for every event
            generated for the subscription (delivered or not): a jump is a loss.
        time_ns: time of the write in the V-Store (the source time if the
            provider gave one), not the time of queueing.
        data: the value if it changed with this write (or was carried over
            from a dropped event, see the drop rule); None if unchanged.
        queue: the queue (0, 1, 2) that carried the event.
        writes: how many writes the event stands for: 1, or more for an event of
            a filtered subscription (:mod:`vehicle_middleware.ess.filters`): itself
            and the writes its filter held back since the subscription's previous
            event.
    """

    key: int
    seq: int
    time_ns: int
    data: bytes | None
    queue: int
    writes: int = 1


@dataclass(frozen=True, slots=True)
class KeyAdded:
    """A key was created in the V-Store."""

    key: int
    name: str


@dataclass(frozen=True, slots=True)
class KeyRemoved:
    """A key was removed; its id may be reused by a later ``KeyAdded``.

    Subscriptions on it are gone and its undelivered events were discarded.
    """

    key: int
    name: str


@dataclass(frozen=True, slots=True)
class ResyncRequired:
    """Lifecycle events were lost: the app's view of the key set is stale.

    Always the first event of a batch. The app must list the keys again and
    fetch its subscriptions (some may have ended with removed keys); the
    ``KeyAdded``/``KeyRemoved`` events after this one are again complete.

    Attributes:
        lost: how many lifecycle events were not delivered.
    """

    lost: int


@dataclass(frozen=True, slots=True)
class KeyStale:
    """A watched key with an expected period was not written for longer than it.

    Attributes:
        key: the key id.
        last_write_ns: when it was last written (ns since the epoch; 0: never
            written since it has been watched).
        period_ns: its expected period: the longest it may go unwritten.
    """

    key: int
    last_write_ns: int
    period_ns: int


@dataclass(frozen=True, slots=True)
class KeyFresh:
    """A key that was stale is written again (sent to the apps told it was stale).

    Attributes:
        key: the key id.
        write_ns: when the write that ended the silence happened.
    """

    key: int
    write_ns: int


@dataclass(frozen=True, slots=True)
class ProviderGone:
    """The provider that claimed these keys went away; nobody claims them now.

    Attributes:
        provider: the app id of the provider.
        keys: the ids of those keys the receiving app subscribes to, ascending.
    """

    provider: str
    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ProviderBack:
    """Keys whose provider had gone are claimed again.

    Attributes:
        provider: the app id of the provider that claims them now (the one that
            went away, back, or another).
        keys: the ids of those keys the receiving app subscribes to, ascending.
    """

    provider: str
    keys: tuple[int, ...]


HealthEvent = KeyStale | KeyFresh | ProviderGone | ProviderBack
"""Events about the health of a signal: is it written, has it a provider."""
LifecycleEvent = KeyAdded | KeyRemoved | HealthEvent
"""What the per-app lifecycle buffer carries: never dropped by the drop rule."""
Event = DataUpdated | KeyAdded | KeyRemoved | ResyncRequired | HealthEvent
"""What :meth:`vehicle_middleware.ess.EventSubSystem.drain` hands out."""

DataRow = tuple[Any, int, int, bytes | None, int]
"""A ``DataUpdated``'s fields as a plain tuple (key, seq, time_ns, data, packed):
how the queues hold a data event. The last field packs ``queue`` and ``writes``
(:func:`pack_queue`): for an event standing for one write (every event of an
unfiltered subscription) it is the queue itself, so an ordinary row is the
``DataUpdated``'s first five fields, and the encoders' common branch (a value,
queue 0: the field is 0) never takes an event standing for more writes. The
key id is an ``int``, annotated ``Any`` so that the compiled encoders look it
up as the object it is (docs/compiled-build.md, "Ints on the hot path")."""
RawEvent = DataRow | KeyAdded | KeyRemoved | ResyncRequired | HealthEvent
"""What :meth:`vehicle_middleware.ess.EventSubSystem.drain_raw` hands out: an ``Event`` whose
data events are still the queues' plain tuples (``type(e) is tuple``)."""


_QUEUE_BITS: Final = 2
"""Bits of a row's packed field that hold the queue (0, 1, 2); the rest hold writes - 1."""
_QUEUE_MASK: Final = (1 << _QUEUE_BITS) - 1
ONE_WRITE_MAX: Final = _QUEUE_MASK
"""The largest packed field of a row standing for one write: one above it stands
for more (a test of a whole batch at once: ``max(fields) > ONE_WRITE_MAX``)."""


def pack_queue(queue: int, writes: int) -> int:
    """A ``DataRow``'s last field for an event of ``queue`` standing for ``writes``
    writes (>= 1): ``queue`` itself when ``writes`` is 1."""
    return queue + ((writes - 1) << _QUEUE_BITS)


def unpack_queue(packed: int) -> tuple[int, int]:
    """The (queue, writes) of a ``DataRow``'s last field (:func:`pack_queue`'s inverse)."""
    return packed & _QUEUE_MASK, (packed >> _QUEUE_BITS) + 1


def as_data_updated(row: DataRow) -> DataUpdated:
    """The ``DataUpdated`` of a queued row (without the ``NamedTuple``'s
    Python-level ``__new__`` for a row of one write)."""
    key, seq, time_ns, data, packed = row
    if packed <= _QUEUE_MASK:
        return tuple.__new__(DataUpdated, (key, seq, time_ns, data, packed, 1))
    queue, writes = unpack_queue(packed)
    return DataUpdated(key, seq, time_ns, data, queue, writes)


def as_row(event: DataUpdated) -> DataRow:
    """The ``DataRow`` of a ``DataUpdated`` (:func:`as_data_updated`'s inverse)."""
    return (event.key, event.seq, event.time_ns, event.data, pack_queue(event.queue, event.writes))


def data_rows(events: Sequence[Event | RawEvent]) -> Sequence[DataRow]:
    """The data events of a drained batch (``DataUpdated``s or their plain tuples),
    in order, as ``DataRow``s. A drain hands out its lifecycle events before its data
    events (:meth:`vehicle_middleware.ess.EventSubSystem.drain_raw`): a batch that begins
    with a plain tuple is all data rows and comes back as it is, with no copy (nearly
    every batch)."""
    if not events or type(events[0]) is tuple:
        return cast("Sequence[DataRow]", events)
    return [as_row(e) if isinstance(e, DataUpdated) else e for e in events if isinstance(e, tuple)]
