"""Retention with consumers: which segments may go, and who is cut loose. Pure.

The on-disk journal is one reliable consumer among others (docs/design.md, "The
journal's consumers"): retention removes the oldest segments while the journal
is bigger than ``max_bytes``, but never one holding a record that a registered
consumer has not acknowledged, unless that consumer's unacknowledged records
take more than ``max_lag_bytes`` on disk. Such a consumer is cut loose: it
loses the records of the segments removed after its position (:class:`Cut`, a
``consumer_cut`` record and its next recovery answer say which), and its
position moves past them. Retention runs when a segment is full and the next is
opened, and leaves at most ``max(max_bytes, max_lag_bytes)`` of segments; so
the disk holds at most that plus the segment being written (a segment ends up
to one record over ``segment_bytes``: the size is checked before each record)
plus the few records (``consumer_cut``, ``journal_trimmed``) retention writes
into the next segment before it removes the old ones, whatever consumers do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, pred, succ
from vehicle_middleware.server.journal.archive import Segment
from vehicle_middleware.server.journal.consumers import Lost

__all__ = ["CUT_REASON", "Cut", "Pin", "Plan", "lag_bytes", "needs", "plan"]

CUT_REASON: Final = "consumer cut loose"
_HALF: Final = OFFSET_MOD // 2


@dataclass(frozen=True, slots=True)
class Pin:
    """A registered consumer's acknowledged position."""

    app: str
    component: str
    boot_id: str
    offset: int


@dataclass(slots=True)
class Cut:
    """A consumer cut loose: what it lost, and its position after."""

    pin: Pin
    lost: list[Lost] = field(default_factory=list)
    boot_id: str = ""
    offset: int = 0
    lag_bytes: int = 0
    """Its unacknowledged bytes on disk when it was cut."""


@dataclass(frozen=True, slots=True)
class Plan:
    remove: tuple[Segment, ...]
    """Segments to remove, oldest first."""
    cuts: tuple[Cut, ...]
    held_by: tuple[Pin, ...] = ()
    """Consumers (within their bound) that kept retention from going further."""


def _bases(segments: Sequence[Segment]) -> tuple[dict[str, int], dict[str, int]]:
    """Per boot: its order (by its oldest segment) and its oldest held offset."""
    order: dict[str, int] = {}
    base: dict[str, int] = {}
    for seg in segments:
        if seg.boot_id not in order:
            order[seg.boot_id] = len(order)
            base[seg.boot_id] = seg.first
    return order, base


def needs(pin: Pin, seg: Segment, order: dict[str, int], base: dict[str, int]) -> bool:
    """Whether the consumer at ``pin`` has not acknowledged some record of ``seg``."""
    at = order.get(pin.boot_id)
    if at is None:
        return False  # its boot is gone: nothing of it to keep
    if order[seg.boot_id] != at:
        return order[seg.boot_id] > at
    if seg.last is None:
        return True  # the boot's growing segment
    first = base[pin.boot_id]
    if pin.offset == pred(first) or 0 < distance(pin.offset, first) < _HALF:
        return True  # it holds nothing of what is held of its boot
    return distance(first, pin.offset) < distance(first, seg.last)


def lag_bytes(pin: Pin, segments: Sequence[Segment]) -> int:
    """The bytes of the segments holding records the consumer has not acknowledged."""
    order, base = _bases(segments)
    return sum(s.size for s in segments if needs(pin, s, order, base))


def plan(
    segments: Sequence[Segment],
    *,
    total_bytes: int,
    max_bytes: int,
    max_lag_bytes: int,
    pins: Sequence[Pin],
    keep: frozenset[str] = frozenset(),
) -> Plan:
    """What retention removes now, and which consumers that cuts loose.

    Args:
        segments: the segments with records, oldest first (``last`` known for
            every one but a boot's growing segment).
        total_bytes: the journal's size (segments without records included).
        keep: names of segments never removed (the one being written).

    Complexity: O(segments^2 * consumers), for a few dozen segments.
    """
    order, base = _bases(segments)
    positions = {(p.app, p.component): p for p in pins}
    cuts: dict[tuple[str, str], Cut] = {}
    remove: list[Segment] = []
    total = total_bytes
    held_by: tuple[Pin, ...] = ()
    for i, seg in enumerate(segments):
        if total <= max_bytes or seg.path.name in keep or seg.last is None:
            break
        rest = segments[i:]
        needers = [p for p in positions.values() if needs(p, seg, order, base)]
        lags = {
            (p.app, p.component): sum(s.size for s in rest if needs(p, s, order, base))
            for p in needers
        }
        within = [p for p in needers if lags[(p.app, p.component)] <= max_lag_bytes]
        if within:
            held_by = tuple(within)
            break
        for p in needers:
            key = (p.app, p.component)
            cut = cuts.setdefault(key, Cut(pin=p, lag_bytes=lags[key]))
            start = seg.first
            if p.boot_id == seg.boot_id:
                first = base[seg.boot_id]
                behind = p.offset == pred(first) or 0 < distance(p.offset, first) < _HALF
                start = seg.first if behind else succ(p.offset)
            lost = cut.lost
            if lost and lost[-1].boot_id == seg.boot_id and succ(lost[-1].to_offset) == start:
                prev = lost.pop()
                start = prev.from_offset
            lost.append(
                Lost(seg.boot_id, start, seg.last, distance(start, seg.last) + 1, CUT_REASON)
            )
            cut.boot_id, cut.offset = seg.boot_id, seg.last
            positions[key] = Pin(p.app, p.component, seg.boot_id, seg.last)
        remove.append(seg)
        total -= seg.size
    return Plan(tuple(remove), tuple(cuts.values()), held_by)
