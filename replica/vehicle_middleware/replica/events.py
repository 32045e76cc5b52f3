"""Replicated events: what one node tells the others, their hashes, and their clock.

An :class:`Event` is one write request accepted on a node (a ``Set``, one
``Publish`` message, an ``AddKeys``): the writes it made, in order, each with
the key's *name* (ids are node-local), the version it gave the key and the
write's time. Events of one node form a *chain* per process start (its
``boot``): ``seq`` counts from 1 and ``prev`` is the hash of the chain's
previous event, so a receiver applies a chain in order and notices a gap.
``seen`` is the node's head when it made the event (ordered writes: the newest
event it had applied): what a guarded write names and is judged by.

``stamp`` is a hybrid logical clock (:class:`HybridClock`): the node's wall
clock in ns, but never at or below the stamp of any event the node made or
received before. An event made after another was seen therefore always has
the larger stamp, which is what makes the cluster's order (``Event.order``:
stamp, then origin, then hash) agree with cause and effect.

The hash is SHA-256 over a canonical binary encoding of every other field
(:func:`event_hash`), so changing any byte of an event in transit is seen.

Pure: no I/O; the clock is injected.
"""

from __future__ import annotations

import enum
import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "HASH_BYTES",
    "ChainId",
    "Event",
    "HybridClock",
    "Kind",
    "Order",
    "Write",
    "event_hash",
    "make_event",
]

HASH_BYTES: Final = 32
_MAGIC: Final = b"vmw-replica-event-1\0"
_U64: Final = 2**64

ChainId = tuple[str, int]
"""A chain: (origin node id, origin boot)."""

Order = tuple[int, str, bytes]
"""An event's place in the cluster's order: (stamp, origin, hash)."""


class Kind(enum.IntEnum):
    """What an event is."""

    WRITE = 0
    """Writes (and key additions), applied at once by the node that made them."""
    GUARDED = 1
    """Writes made against a head (``Set`` with ``if_head``): applied once the
    origin's :attr:`VERDICT` says they won."""
    VERDICT = 2
    """The origin's decision on one of its guarded events (``ref`` its hash, ``won``)."""


@dataclass(frozen=True, slots=True)
class Write:
    """One write of an event. ``data`` None: the key was added, no value written."""

    key: str
    data: bytes | None
    version: int
    """The key's version after this write (0 for an addition)."""
    time_ns: int
    """The write's time (the provider's source time if it gave one)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One replicated event. Build with :func:`make_event`; ``hash`` covers the rest."""

    origin: str
    boot: int
    seq: int
    prev: bytes
    seen: bytes
    stamp: int
    kind: Kind
    ref: bytes
    won: bool
    writes: tuple[Write, ...]
    hash: bytes

    @property
    def chain(self) -> ChainId:
        return (self.origin, self.boot)

    @property
    def order(self) -> Order:
        """Where the event stands in the cluster's order (later is larger)."""
        return (self.stamp, self.origin, self.hash)

    @property
    def size(self) -> int:
        """Approximate bytes held for it (for the model's byte bound)."""
        return 160 + sum(48 + len(w.key) + len(w.data or b"") for w in self.writes)

    def intact(self) -> bool:
        """Whether ``hash`` is the hash of the other fields (nothing was changed)."""
        return self.hash == event_hash(
            self.origin,
            self.boot,
            self.seq,
            self.prev,
            self.seen,
            self.stamp,
            self.kind,
            self.ref,
            self.won,
            self.writes,
        )


def _text(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">H", len(raw)) + raw


def _blob(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def event_hash(
    origin: str,
    boot: int,
    seq: int,
    prev: bytes,
    seen: bytes,
    stamp: int,
    kind: int,
    ref: bytes,
    won: bool,
    writes: Sequence[Write],
) -> bytes:
    """SHA-256 of the canonical encoding of an event's fields.

    Every field is length-prefixed or fixed-size, so no two different events
    encode alike. Raises ValueError (via struct) for integers out of uint64.
    """
    parts = [
        _MAGIC,
        _text(origin),
        struct.pack(">QQQB", boot, seq, stamp, int(kind)),
        _blob(prev),
        _blob(seen),
        _blob(ref),
        b"\1" if won else b"\0",
        struct.pack(">I", len(writes)),
    ]
    for w in writes:
        parts.append(_text(w.key))
        parts.append(struct.pack(">QQ", w.version, w.time_ns))
        parts.append(b"\0" if w.data is None else b"\1" + _blob(w.data))
    return hashlib.sha256(b"".join(parts)).digest()


def make_event(
    origin: str,
    boot: int,
    seq: int,
    prev: bytes,
    seen: bytes,
    stamp: int,
    kind: Kind,
    writes: Sequence[Write] = (),
    *,
    ref: bytes = b"",
    won: bool = False,
) -> Event:
    """An event with its hash. Raises ValueError for an integer outside uint64."""
    for name, value in (("boot", boot), ("seq", seq), ("stamp", stamp)):
        if not 0 <= value < _U64:
            raise ValueError(f"{name} must be in 0..2**64-1, got {value}")
    writes = tuple(writes)
    digest = event_hash(origin, boot, seq, prev, seen, stamp, kind, ref, won, writes)
    return Event(origin, boot, seq, prev, seen, stamp, kind, ref, won, writes, digest)


class HybridClock:
    """Stamps that follow the wall clock and never go back or repeat.

    ``now()`` is ``max(wall clock, last stamp + 1)``; :meth:`observe` moves
    the last stamp up to an event's stamp, so what is stamped after an event
    was seen is stamped later than it, whatever the two nodes' clocks say.
    """

    __slots__ = ("_last", "_wall")

    def __init__(self, wall: Callable[[], int]) -> None:
        self._wall = wall
        self._last = 0

    def now(self) -> int:
        stamp = max(self._wall(), self._last + 1)
        self._last = stamp
        return stamp

    def observe(self, stamp: int) -> None:
        if stamp > self._last:
            self._last = stamp

    @property
    def last(self) -> int:
        return self._last
