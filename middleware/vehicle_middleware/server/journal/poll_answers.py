"""What the journal answers a consumer that holds a position: the logged-event-offsets
contract (docs/design.md, "The journal's consumers"), over every boot the journal
holds. Pure: no I/O, no clock.

A consumer says which record it holds last, ``(boot_id, offset)`` (``offset`` 0
and no boot when it holds none). Given a :class:`View` of what is held (per
boot, the oldest and newest offsets, memory and disk together), :func:`answer`
picks one of the three answers:

1. :class:`Read`: the records after ``offset`` (``s(offset)`` on) are held:
   read them;
2. :class:`Nothing`: ``offset`` is the newest record: nothing new;
3. :class:`Recover`: ``offset`` is not held: the consumer must recover from
   ``n0..n1`` of the boot named (poll with ``p(n0)`` to read ``n0`` on).
   The middleware restarted, the consumer is new, or it fell behind further
   than the history holds.

Without a boot (``boot_id`` empty) the offset is taken in the current boot,
exactly as that contract says (a restart shows as a recovery naming another boot),
except offset 0: ``(no boot, 0)`` means "holding nothing", so it is always a
recovery naming all the current boot holds, even when the boot's offsets have
wrapped through 0 (taking it as a position would skip every record before it).
With a boot the journal also serves the boots before the current one from
disk: after the last record of a boot that ended, the recovery names the next
boot (the middleware restarted) and its range. An offset its boot never
wrote is an error, not a recovery (:class:`OffsetOutOfRangeError`).

Offsets wrap at 2^32: every comparison is a distance from a boot's oldest
held offset (:func:`~vehicle_middleware.contract.journal.chain.distance`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, distance, pred, succ
from vehicle_middleware.contract.journal.records import KINDS
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    OffsetOutOfRangeError,
    UnavailableError,
)
from vehicle_middleware.server.journal.archive import BootSpan
from vehicle_middleware.server.journal.consumers import Lost

__all__ = [
    "MAX_RECORDS",
    "MAX_WINDOW",
    "Nothing",
    "Read",
    "Reason",
    "Recover",
    "View",
    "answer",
    "check_limits",
    "check_want",
    "later",
    "lost_after",
    "lost_beyond",
    "position_key",
]

MAX_RECORDS: Final = 1000
"""Most records in one answer or group: the largest ``max`` a Poll or Follow may ask
(journal.proto)."""
MAX_WINDOW: Final = 256
"""Most groups a follower may leave unacknowledged."""
_HALF: Final = OFFSET_MOD // 2


class Reason(enum.Enum):
    """Why a consumer must recover."""

    NOT_IN_HISTORY = "not in history"
    """The offset is not held: a new consumer, or it fell behind what the history holds."""
    BOOT_ENDED = "boot ended"
    """The consumer holds the last record of a boot that ended: the middleware restarted."""
    BOOT_NOT_HELD = "boot not held"
    """The consumer's boot is no longer held (retention removed all of it), or is not this
    journal's."""
    CUT_LOOSE = "cut loose"
    """Retention removed records the consumer had not acknowledged (beyond its bound)."""


@dataclass(frozen=True, slots=True)
class View:
    """What the journal holds now: its boots in time order, the current one last."""

    boots: tuple[BootSpan, ...]
    current: str
    """The running boot's id."""
    current_start: int
    """The running boot's first offset (it is known even after retention removed it)."""

    def index(self, boot_id: str) -> int | None:
        for i, span in enumerate(self.boots):
            if span.boot_id == boot_id:
                return i
        return None

    def span(self, boot_id: str) -> BootSpan | None:
        i = self.index(boot_id)
        return None if i is None else self.boots[i]


@dataclass(frozen=True, slots=True)
class Read:
    """Answer 1: read the records of ``boot_id`` after ``offset``."""

    boot_id: str
    offset: int
    base: int
    """The boot's oldest offset held (what offsets of this boot are compared from)."""


@dataclass(frozen=True, slots=True)
class Nothing:
    """Answer 2: ``offset`` is the newest record: nothing new."""

    boot_id: str
    offset: int


@dataclass(frozen=True, slots=True)
class Recover:
    """Answer 3: recover from ``n0..n1`` of ``boot_id`` (poll with ``p(n0)`` to read ``n0`` on)."""

    boot_id: str
    n0: int
    n1: int
    reason: Reason
    message: str
    lost: tuple[Lost, ...] = ()
    """What the consumer is known to have lost (retention cut it loose), when registered."""
    current_boot_id: str = ""
    """The running boot (``boot_id`` may name an earlier one, still held)."""


def _held(span: BootSpan, offset: int) -> bool:
    """Whether ``offset`` is a position in what is held of the boot (``p(first)`` included)."""
    return offset == pred(span.first) or distance(span.first, offset) <= distance(
        span.first, span.last
    )


def _recover(view: View, span: BootSpan, reason: Reason, message: str) -> Recover:
    return Recover(
        span.boot_id, span.first, span.last, reason, message, current_boot_id=view.current
    )


def answer(
    view: View, boot_id: str, offset: int, *, home: tuple[str, int] | None = None
) -> Read | Nothing | Recover:
    """The answer to a consumer holding ``offset`` of ``boot_id`` (empty: the current boot).

    ``home`` is a registered consumer's acknowledged position: when its own
    boot is no longer held, its recovery names the boot of ``home`` (or the
    oldest held), so it loses nothing else; a live consumer (no ``home``)
    recovers in the current boot.

    Raises:
        OffsetOutOfRangeError: ``boot_id`` is held and never wrote ``offset``.
        UnavailableError: the current boot has written no record yet.
    """
    b = boot_id or view.current
    span = view.span(b)
    current = view.span(view.current)
    if not boot_id and offset == 0 and span is not None:
        # (no boot, 0) is how a consumer says it holds nothing, never "I hold offset 0":
        # a boot whose offsets wrapped through 0 would otherwise serve it from 1 on and
        # skip everything before.
        return _recover(
            view,
            span,
            Reason.NOT_IN_HISTORY,
            f"the consumer holds nothing (no boot_id, offset 0); the current boot {b!r} "
            f"holds {span.first}..{span.last}",
        )
    if span is None:
        if b == view.current or current is None:
            raise UnavailableError("the journal has written no record yet; poll again")
        target = view.span(home[0]) if home is not None else None
        if target is None:
            target = view.boots[0] if home is not None else current
        return _recover(
            view,
            target,
            Reason.BOOT_NOT_HELD,
            f"boot {b!r} is not held by this journal (retention removed it, or it is "
            f"another journal's); recover from boot {target.boot_id!r}",
        )
    if offset == span.last:
        if b == view.current:
            return Nothing(b, offset)
        following = view.boots[(view.index(b) or 0) + 1 :]
        if not following:
            raise UnavailableError("the journal has written no record yet; poll again")
        after = following[0]
        return _recover(
            view,
            after,
            Reason.BOOT_ENDED,
            f"boot {b!r} ended with offset {offset} (the middleware restarted); "
            f"boot {after.boot_id!r} follows",
        )
    if _held(span, offset):
        return Read(b, offset, span.first)
    if not boot_id:  # the contract as written: anything not held is a recovery
        return _recover(
            view,
            span,
            Reason.NOT_IN_HISTORY,
            f"offset {offset} is not held in the current boot {b!r}",
        )
    start = view.current_start if b == view.current else (span.first if span.starts else None)
    if start is not None:
        written = offset == pred(start) or distance(start, offset) <= distance(start, span.last)
    else:  # the boot's start was removed: an offset behind what is held was written
        written = 0 < distance(offset, span.first) < _HALF
    if not written:
        began = f"{start}" if start is not None else "before the oldest held"
        raise OffsetOutOfRangeError(
            f"offset: {offset} is not an offset of boot {b!r}, which wrote offsets "
            f"{began}..{span.last} (of another boot? send the boot_id it came with, "
            "or an empty boot_id to start over)"
        )
    return _recover(
        view,
        span,
        Reason.NOT_IN_HISTORY,
        f"offsets up to {pred(span.first)} of boot {b!r} are no longer held "
        f"(the consumer fell behind what the history holds); {span.first}..{span.last} are",
    )


def position_key(view: View, boot_id: str, offset: int) -> tuple[int, int]:
    """A sort key of positions: by boot in time order, then by offset in the boot.

    A boot not held sorts before every held one; an offset behind what is held
    of its boot, before every held one of that boot.
    """
    i = view.index(boot_id)
    if i is None:
        return (-1, 0)
    span = view.boots[i]
    if offset == pred(span.first) or not _held(span, offset):
        return (i, -1)
    return (i, distance(span.first, offset))


def later(view: View, old: tuple[str, int], new: tuple[str, int]) -> bool:
    """Whether position ``new`` is after ``old`` (an acknowledgement moves a consumer on)."""
    return position_key(view, *new) > position_key(view, *old)


def lost_after(view: View, lost: Lost, boot_id: str, offset: int) -> bool:
    """Whether a lost range holds offsets after the position ``(boot_id, offset)``:
    news to a consumer at that position."""
    if lost.boot_id == boot_id:
        return 0 < distance(offset, lost.to_offset) < _HALF
    lost_at, at = view.index(lost.boot_id), view.index(boot_id)
    if lost_at is not None and at is not None:
        return lost_at > at
    # A boot not held is older than every held one; two not held cannot be ordered: say it.
    return at is None


def lost_beyond(view: View, lost: Lost, boot_id: str, offset: int) -> Lost | None:
    """The part of a lost range after the position ``(boot_id, offset)`` (None: the
    position is at or past its end): what a consumer there has really lost."""
    if not lost_after(view, lost, boot_id, offset):
        return None
    if lost.boot_id != boot_id:
        return lost
    if distance(lost.from_offset, offset) < distance(lost.from_offset, lost.to_offset):
        start = succ(offset)  # it holds the start of the range
        return Lost(
            lost.boot_id, start, lost.to_offset, distance(start, lost.to_offset) + 1, lost.reason
        )
    return lost


def check_limits(max_records: int, *, field: str = "max") -> None:
    """Refuse a number of records per answer outside 1..MAX_RECORDS."""
    if not 1 <= max_records <= MAX_RECORDS:
        raise InvalidRequestError(field, f"must be in 1..{MAX_RECORDS}, got {max_records}")


def check_want(want: Iterable[str], *, field: str = "want") -> frozenset[str] | None:
    """The kinds wanted (None: every kind); refuses a kind the journal does not write.

    Raises:
        InvalidRequestError: naming the index and the known kinds.
    """
    kinds = list(want)
    for i, kind in enumerate(kinds):
        if kind not in KINDS:
            raise InvalidRequestError(
                f"{field}[{i}]", f"unknown record kind {kind!r}; kinds are {', '.join(KINDS)}"
            )
    return frozenset(kinds) or None
