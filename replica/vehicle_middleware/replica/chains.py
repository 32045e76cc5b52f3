"""Chains: the events of one node's process start, in order, and what is kept of them. Pure.

A node holds a chain's events contiguously from 1 (or from a *horizon*, see
below) up to ``held``; ``applied`` marks how far their fate is settled
(applied to the V-Store, or handed to a verdict). The events themselves are
*retained* only while the bounds allow (:class:`Retention`: a count, bytes
and an age, oldest first, settled ones only): what is gone is summarized by
the key states, and a peer that needs it gets those states and a horizon
(``first - 1`` and its hash: "the chain goes on from here") instead.

Retained events are many (up to the model's ``max_events``, 100,000 by
default) and live long, and Python's garbage collector scans every object it
tracks on each full collection: kept as ``Event`` objects they stall a node
at every full collection under a steady load of writes. So only a chain's newest
:data:`RECENT` events stay objects (the ones peers are being sent); older ones
are packed into a tuple of bytes and numbers, which the collector stops
tracking, and unpacked when asked for (a peer catching up).
"""

from __future__ import annotations

import marshal
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.replica.events import ChainId, Event, Kind, Write

__all__ = ["RECENT", "Chain", "HeldEvent", "Retained", "Retention"]

RECENT: Final = 1024
"""Events per chain kept as objects; older retained ones are packed."""


@dataclass(frozen=True, slots=True)
class HeldEvent:
    """A retained event and when this node got it (monotonic seconds)."""

    event: Event
    at: float


_Packed = tuple[bytes, float, int, int, bytes]
"""A packed retained event: (its fields, marshalled; at; stamp; size; hash).
Only bytes and numbers: the garbage collector untracks such a tuple."""


def _pack(held: HeldEvent) -> _Packed:
    e = held.event
    writes = tuple((w.key, w.data, w.version, w.time_ns) for w in e.writes)
    fields = (e.origin, e.boot, e.seq, e.prev, e.seen, e.stamp, int(e.kind), e.ref, e.won, writes)
    return (marshal.dumps(fields), held.at, e.stamp, e.size, e.hash)


def _unpack(packed: _Packed) -> HeldEvent:
    origin, boot, seq, prev, seen, stamp, kind, ref, won, writes = marshal.loads(packed[0])
    event = Event(
        origin,
        boot,
        seq,
        prev,
        seen,
        stamp,
        Kind(kind),
        ref,
        won,
        tuple(Write(*w) for w in writes),
        packed[4],
    )
    return HeldEvent(event, packed[1])


class Retained(Mapping[int, HeldEvent]):
    """A chain's retained events by seq: the newest :data:`RECENT` as objects,
    older ones packed. Seqs are added in increasing order and removed from the
    oldest (or all at once); reading a packed one unpacks a copy."""

    __slots__ = ("_packed", "_recent")

    def __init__(self) -> None:
        self._recent: dict[int, HeldEvent] = {}
        self._packed: dict[int, _Packed] = {}

    def add(self, seq: int, held: HeldEvent) -> None:
        """Retain ``held`` as ``seq`` (the next seq). O(1)."""
        recent = self._recent
        recent[seq] = held
        if len(recent) > RECENT:
            oldest = next(iter(recent))
            self._packed[oldest] = _pack(recent.pop(oldest))

    def __getitem__(self, seq: int) -> HeldEvent:
        held = self._recent.get(seq)
        if held is not None:
            return held
        return _unpack(self._packed[seq])

    def __contains__(self, seq: object) -> bool:
        return seq in self._recent or seq in self._packed

    def __iter__(self) -> Iterator[int]:
        yield from self._packed  # older seqs first
        yield from self._recent

    def __len__(self) -> int:
        return len(self._recent) + len(self._packed)

    def meta(self, seq: int) -> tuple[bytes, int, int]:
        """``(hash, stamp, size)`` of event ``seq`` without unpacking it.

        Raises:
            KeyError: ``seq`` is not retained.
        """
        held = self._recent.get(seq)
        if held is not None:
            return held.event.hash, held.event.stamp, held.event.size
        packed = self._packed[seq]
        return packed[4], packed[2], packed[3]

    def hash_of(self, seq: int) -> bytes | None:
        """The hash of event ``seq``, or None if it is not retained."""
        held = self._recent.get(seq)
        if held is not None:
            return held.event.hash
        packed = self._packed.get(seq)
        return None if packed is None else packed[4]

    def remove(self, seq: int) -> None:
        """Forget event ``seq``.

        Raises:
            KeyError: ``seq`` is not retained.
        """
        if self._recent.pop(seq, None) is None:
            del self._packed[seq]

    def sizes(self) -> Iterator[int]:
        """Each retained event's size, without unpacking."""
        for packed in self._packed.values():
            yield packed[3]
        for held in self._recent.values():
            yield held.event.size

    def clear(self) -> None:
        self._recent.clear()
        self._packed.clear()


class Chain:
    """One chain as this node holds it."""

    __slots__ = (
        "applied",
        "base_hash",
        "events",
        "first",
        "held",
        "id",
        "last_hash",
        "last_stamp",
    )

    def __init__(self, chain_id: ChainId) -> None:
        self.id = chain_id
        self.held = 0
        """Every seq up to this is held (or summarized by a horizon)."""
        self.last_hash = b""
        """The hash of event ``held`` (the chain's leaf)."""
        self.last_stamp = 0
        self.applied = 0
        """Every seq up to this is settled."""
        self.events = Retained()
        """Retained events: seqs ``first`` .. ``held``."""
        self.first = 1
        self.base_hash = b""
        """The hash of event ``first - 1`` (empty when ``first`` is 1)."""

    def hold(self, event: Event, at: float) -> None:
        """Hold the next event (the caller checked seq and prev). O(1)."""
        assert event.seq == self.held + 1
        assert event.prev == self.last_hash
        self.events.add(event.seq, HeldEvent(event, at))
        self.held = event.seq
        self.last_hash = event.hash
        self.last_stamp = event.stamp

    def jump(self, seq: int, digest: bytes, stamp: int) -> bool:
        """A horizon: everything up to ``seq`` (hash ``digest``) is summarized.

        Only forward; returns whether anything changed.
        """
        if seq <= self.held:
            return False
        self.events.clear()
        self.held = self.applied = seq
        self.first = seq + 1
        self.last_hash = self.base_hash = digest
        self.last_stamp = stamp
        return True

    def evict_first(self) -> bool:
        """Forget the oldest retained event (settled ones only); whether it went."""
        if self.first > self.applied:
            return False
        self.base_hash = self.events.meta(self.first)[0]
        self.events.remove(self.first)
        self.first += 1
        return True

    def check(self) -> None:
        """Assert the invariants (for tests)."""
        assert 0 <= self.applied <= self.held
        assert 1 <= self.first <= self.held + 1
        assert set(self.events) == set(range(self.first, self.held + 1))
        prev = self.base_hash
        for seq in range(self.first, self.held + 1):
            event = self.events[seq].event
            assert event.seq == seq
            assert event.prev == prev
            assert event.chain == self.id
            prev = event.hash
        assert prev == self.last_hash


class Retention:
    """The retained events of every chain, oldest first, within bounds."""

    __slots__ = ("_order", "bytes", "max_age_ns", "max_bytes", "max_events")

    def __init__(self, *, max_events: int, max_bytes: int, max_age_ns: int) -> None:
        if max_events < 1 or max_bytes < 1 or max_age_ns < 1:
            raise ValueError("retention bounds must be >= 1")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_age_ns = max_age_ns
        # (chain id, seq): bytes and numbers only, which the collector untracks.
        self._order: deque[tuple[ChainId, int]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._order)

    def add(self, chain: Chain, event: Event) -> None:
        self._order.append((chain.id, event.seq))
        self.bytes += event.size

    def trim(self, now_ns: int, chains: Mapping[ChainId, Chain]) -> int:
        """Forget the oldest events beyond the bounds; returns how many went.

        Stops at an event not yet settled (it stays, even beyond the bounds:
        the model's pending bound limits those), and at the first event young
        enough once the count and bytes fit.
        """
        gone = 0
        order = self._order
        while order:
            cid, seq = order[0]
            chain = chains.get(cid)
            if chain is None or seq < chain.first or seq not in chain.events:
                order.popleft()  # a horizon jumped past it, or its chain is gone
                continue
            _, stamp, size = chain.events.meta(seq)
            over = len(order) > self.max_events or self.bytes > self.max_bytes
            if not over and stamp >= now_ns - self.max_age_ns:
                break
            if chain.first != seq or not chain.evict_first():
                break
            order.popleft()
            self.bytes -= size
            gone += 1
        return gone

    def forget_chain(self, chain: Chain) -> None:
        """A horizon cleared ``chain``'s events: their bytes no longer count."""
        self.bytes -= sum(chain.events.sizes())
