"""How the ESS applies a subscription's filter: one gate per filtered subscription.

A filtered subscription's ``push`` (the method the fan-out loop calls for every
write its trigger selects, :meth:`vehicle_middleware.ess.EventSubSystem.data_updated`)
is its :class:`FilterGate`'s :meth:`FilterGate.push`, with the signature of
:meth:`vehicle_middleware.ess.queues.EventQueue.push`: so the loop tests nothing per
subscriber, and an unfiltered subscription pays nothing for filters.

The rules (:class:`vehicle_middleware.ess.filters.Filter`):

* The value rules (threshold, range) decide whether a write is an event. A
  value that is not a number passes and becomes the reference; the first
  value passes. With both rules, a write passes if either does.
* The interval decides when an event goes out: at once if the interval since
  the subscription's last event has passed, else it is held (replacing a held
  one: the latest wins) until the interval ends, when :meth:`FilterGate.flush`
  sends it (the ESS's :meth:`~vehicle_middleware.ess.EventSubSystem.flush_due`, on a
  timer the transport arms at :meth:`~vehicle_middleware.ess.EventSubSystem.next_due`).
* A write that is not sent now gives back the seq the loop gave it, so seq
  counts the events queued for the subscription and a gap is still exactly a
  drop. Every event carries ``writes``: itself and the writes held back since
  the previous event (its row packs it, :func:`vehicle_middleware.ess.events.pack_queue`).

Accounting (:meth:`FilterGate.check`): the writes the trigger selected =
the writes of the events sent + the writes held now.

How a value reads as a number is the transport's business (the value encoding
is a contract the core does not import): it comes as a :class:`Numbers`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any, Final, Protocol

from vehicle_middleware.contract.wire import SEQ_CYCLE
from vehicle_middleware.ess.filters import Filter

__all__ = ["NO_NUMBERS", "DueTimes", "FilterGate", "Numbers"]


class Numbers(Protocol):
    """How values read as numbers, for the value rules (threshold, range)."""

    def number(self, data: bytes) -> float | None:
        """The value in ``data`` as a number; None: not a number (e.g. a string,
        a failure state, bytes of another encoding)."""
        ...

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        """Why key ``name`` (its value now: ``current``, None if never written) takes
        no value rule, e.g. ``"its VSS datatype is string"``; None: it is numeric."""
        ...


class _NoNumbers:
    """No value is a number: every value rule is refused (an ESS given no reader)."""

    def number(self, data: bytes) -> float | None:
        return None

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        return "no value is read as a number here"


NO_NUMBERS: Final = _NoNumbers()


class FilterGate:
    """The filter of one subscription, between the fan-out loop and its queue.

    ``sub`` is the :class:`vehicle_middleware.ess.subscriptions.Subscription` (its
    seq, target queue and owed data), typed loosely to keep the import one-way.
    """

    __slots__ = (
        "_clock",
        "_due_times",
        "_numbers",
        "current",
        "due",
        "emitted",
        "filter",
        "held",
        "held_data",
        "held_time",
        "held_writes",
        "inside",
        "interval",
        "last_seq",
        "live",
        "ref",
        "selected",
        "sent_ns",
        "since",
        "since_data",
        "sub",
        "value_rules",
    )

    def __init__(
        self,
        sub: Any,
        filter: Filter,
        *,
        current: bytes | None,
        clock: Callable[[], int],
        numbers: Numbers,
        due_times: DueTimes,
    ) -> None:
        self.sub = sub
        self.filter = filter
        self.interval = filter.min_interval_ns
        self.value_rules = filter.numeric
        self._clock = clock
        self._numbers = numbers
        self._due_times = due_times
        self.current = current
        """The key's value as last seen (the value of a write with unchanged bytes)."""
        self.ref: float | None = None
        """The number of the last event, for the threshold (None: none yet, or not a number)."""
        self.inside: bool | None = None
        """Whether the last event's value was in the range (None: none yet, or not a number)."""
        self.last_seq: int = sub.seq
        """The seq of the subscription's last event: what a held write gives back."""
        self.sent_ns: int | None = None
        """When the last event went out (the gate's clock); None: none yet."""
        self.held = False
        self.held_time = 0
        self.held_data: bytes | None = None
        self.held_writes = 0
        """Writes the held event stands for (0: none held)."""
        self.since = 0
        """Writes selected since the last event (sent or held) that are in none."""
        self.since_data = False
        """Some of those carried data (a changed value, or one owed or wanted)."""
        self.due = 0
        """When the held event goes out (the gate's clock)."""
        self.selected = 0
        """Writes the trigger selected, for the accounting check."""
        self.emitted = 0
        """Writes the events sent stood for."""
        self.live = True
        """False once the subscription ended or changed its filter: nothing more goes out."""

    def push(self, key: Any, seq: int, time_ns: Any, data: bytes | None) -> bool:
        """A write the trigger selected, with the seq the loop gave it: send, hold or
        count it. Returns what the loop reads of a push: False only when the queue
        lost the event sent (held and counted writes return True: there is no loss).
        """
        self.selected += 1
        self.since += 1
        if data is not None:
            self.current = data
            self.since_data = True
        sub = self.sub
        if self.value_rules and not self._passes():
            sub.seq = self.last_seq
            return True
        interval = self.interval
        if interval:
            now = self._clock()
            sent = self.sent_ns
            if sent is not None and now - sent < interval:
                self._hold(time_ns)
                sub.seq = self.last_seq
                return True
            self.sent_ns = now
        writes = self.held_writes + self.since
        out = self.current if self.since_data or self.held_data is not None else None
        self._clear()
        self.last_seq = seq
        return self._send(key, seq, time_ns, out, writes)

    def flush(self, now_ns: int) -> None:
        """Send the held event (its interval ended at ``now_ns``), with the next seq."""
        if not self.held or not self.live:
            return
        sub = self.sub
        seq = sub.seq
        sub.seq = seq = seq + 1 if seq != SEQ_CYCLE else 1
        self.last_seq = seq
        self.sent_ns = now_ns
        writes, data, time_ns = self.held_writes, self.held_data, self.held_time
        self.held = False
        self.held_writes = 0
        self.held_data = None
        self._send(sub.key, seq, time_ns, data, writes)

    def close(self) -> None:
        """The subscription ended, or took another filter (the ESS flushed this one
        first): a value still held is discarded (it was never an event: no seq, no
        drop)."""
        self.live = False
        self.held = False

    def held_count(self) -> int:
        """Writes selected that no event sent stands for yet."""
        return self.held_writes + self.since

    def _send(self, key: Any, seq: int, time_ns: Any, data: bytes | None, writes: int) -> bool:
        sub = self.sub
        if data is None and sub.owes_data:
            data = self.current
        self.emitted += writes
        target = sub.target
        ok: bool = (
            target.push(key, seq, time_ns, data)
            if writes == 1
            else target.push_writes(key, seq, time_ns, data, writes)
        )
        if ok:
            sub.owes_data = False
        elif data is not None:
            sub.owes_data = True
        return ok

    def _hold(self, time_ns: int) -> None:
        if self.since_data or self.held_data is not None:
            self.held_data = self.current
        self.held_time = time_ns
        self.held_writes += self.since
        self.since = 0
        self.since_data = False
        if not self.held:
            self.held = True
            sent = self.sent_ns
            assert sent is not None
            self.due = sent + self.interval
            self._due_times.add(self.due, self)

    def _clear(self) -> None:
        self.held = False
        self.held_writes = 0
        self.held_data = None
        self.since = 0
        self.since_data = False

    def _passes(self) -> bool:
        """Whether the current value passes the value rules; a pass makes it the
        reference (the value of the last event)."""
        current = self.current
        number = self._numbers.number(current) if current is not None else None
        if number is None or number != number:  # not a number (NaN neither)
            self.ref = None
            self.inside = None
            return True
        f = self.filter
        passed = False
        if f.threshold is not None:
            ref = self.ref
            passed = ref is None or abs(number - ref) >= f.threshold
        inside: bool | None = None
        if f.range is not None:
            lo, hi = f.range
            inside = lo <= number <= hi
            passed = passed or self.inside is None or inside != self.inside
        if passed:
            self.ref = number
            self.inside = inside
        return passed

    def check(self) -> None:
        """Assert the gate's invariants: every selected write is in an event sent or
        held now."""
        assert self.selected == self.emitted + self.held_writes + self.since, (
            "filter accounting: selected writes != writes sent + held"
        )
        assert self.held == (self.held_writes > 0), "held flag and held writes disagree"
        assert self.since >= 0
        if self.held:
            assert self.live
            assert self._due_times.holds(self.due, self), "held event without a due time"


class DueTimes:
    """When held events go out: a heap of (due, gate), earliest first. Entries of a
    gate that sent or discarded its held event are skipped when they surface."""

    __slots__ = ("_heap", "_order", "on_earliest")

    def __init__(self, on_earliest: Callable[[int], None] | None = None) -> None:
        self._heap: list[tuple[int, int, FilterGate]] = []
        self._order = itertools.count()
        self.on_earliest = on_earliest
        """Told a due time when it becomes the earliest (the transport's timer)."""

    def add(self, due: int, gate: FilterGate) -> None:
        """Note ``gate``'s held event due at ``due``, telling ``on_earliest`` if it is
        the earliest now. O(log n)."""
        heapq.heappush(self._heap, (due, next(self._order), gate))
        if self._heap[0][2] is gate and self.on_earliest is not None:
            self.on_earliest(due)

    def next_due(self) -> int | None:
        """The earliest due time of a held event; None if nothing is held."""
        heap = self._heap
        while heap:
            due, _, gate = heap[0]
            if gate.held and gate.due == due:
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, now_ns: int) -> list[FilterGate]:
        """The gates whose held event is due at ``now_ns``, earliest first, removed."""
        heap = self._heap
        out: list[FilterGate] = []
        while heap and heap[0][0] <= now_ns:
            due, _, gate = heapq.heappop(heap)
            if gate.held and gate.due == due:
                out.append(gate)
        return out

    def holds(self, due: int, gate: FilterGate) -> bool:
        """Whether ``gate`` has an entry at ``due`` (for checks). O(n)."""
        return any(d == due and g is gate for d, _, g in self._heap)

    def __len__(self) -> int:
        return len(self._heap)
