"""One bounded event queue of one app, with the drop-oldest-per-key rule of docs/design.md.

The queue holds data events in arrival order, each as a plain tuple of a
``DataUpdated``'s fields (``DataRow``; an event of a filtered subscription that
stands for several writes packs them with its queue: :meth:`EventQueue.push_writes`).
When an event meets a full queue, the oldest queued event *of the same key* is removed and the new
one appended; if the queue holds no event of that key, the new event is lost.
Every removal is reported through the ``on_drop`` callback.

Carrying data: events of one key in one queue are consecutive events of that
key (an older one can only leave by being drained first, evicted, or
discarded). So when an evicted event carried data and the next event of the
key does not (an ``on_update`` event with unchanged bytes), that next event
inherits the data: it is the same bytes, and without it the app would never
see the latest value.

All operations are O(1) per event, amortized, in one of two forms:

- **calm** (the queue has not been full since it was last empty): the events
  in a ``deque``, so a push is an append and a drain a pop from the left;
- **pressed**: an ``OrderedDict`` keyed by an arrival token keeps the order
  (O(1) pop of the oldest and O(1) removal from the middle), and a per-key
  deque of tokens finds a key's oldest event, as the drop rule needs.

The first push that finds the queue full moves it to the pressed form
(O(length), once per stretch of pressure, paid for by the pushes that filled
the queue); draining it empty moves it back. A queue its app keeps up with
stays calm, and pays for no per-key index: the calm form is the cheaper
one, so the index is built only when the drop rule needs it.

Counters for an operator (read by :meth:`EventQueue.stats`, never reset while
the queue lives): events delivered (drained), evicted, lost and discarded, and
the high-water mark. They cost nothing on the push path of a queue that is not
full: a drop adds one integer increment where it is already handled, delivery
one addition per batch, and the high-water mark is noted only when events
leave (between two removals the length never falls, so its peak is the length
just before the next one).

"Full" means: ``max_length`` events, or more than ``min_length`` events while
the shared part of the global event budget is exhausted (see
:mod:`vehicle_middleware.ess.budget`).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable

from vehicle_middleware.ess.budget import EventBudget
from vehicle_middleware.ess.events import (
    DataRow,
    DataUpdated,
    DropReason,
    as_data_updated,
    pack_queue,
    unpack_queue,
)
from vehicle_middleware.ess.stats import QueueStats

__all__ = ["DropCallback", "EventQueue"]

DropCallback = Callable[[int, int, int, DropReason, int], None]
"""``on_drop(key, seq, queue, reason, writes)``: ``writes``, how many writes the
dropped event stood for (1 but for a filtered subscription's event)."""


class EventQueue:
    """A bounded FIFO of data events (``DataRow``) for one app and queue number."""

    __slots__ = (
        "_budget",
        "_calm",
        "_events",
        "_index",
        "_on_drop",
        "_tokens",
        "delivered",
        "discarded",
        "evicted",
        "high_water",
        "lost",
        "max_length",
        "min_length",
        "multi_pushed",
        "number",
        "wake",
    )

    def __init__(
        self,
        number: int,
        *,
        min_length: int,
        max_length: int,
        budget: EventBudget,
        on_drop: DropCallback,
    ) -> None:
        self.number = number
        self.min_length = min_length
        self.max_length = max_length
        self._budget = budget
        self._on_drop = on_drop
        # The events in the calm form; empty while pressed.
        self._calm: deque[DataRow] = deque()
        # The events in the pressed form; empty while calm.
        self._events: OrderedDict[int, DataRow] = OrderedDict()
        # Pressed: key -> tokens of that key's queued events, oldest first; a key's
        # deque stays (possibly empty) until purge(key) or the queue empties, so the
        # push path rarely allocates. None: calm.
        self._index: dict[int, deque[int]] | None = None
        self._tokens = itertools.count(1)
        self.wake: Callable[[], None] | None = None
        """Called when an event enters the empty queue (the transport's doorbell)."""
        self.delivered = 0
        """Events drained (handed to the app's stream) so far."""
        self.evicted = 0
        self.lost = 0
        self.discarded = 0
        """Events removed by ``purge`` and ``clear`` (the ESS reports them as discarded)."""
        self.high_water = 0
        """Most events queued at once since the last ``reconfigure``, as last noted:
        see :meth:`peak` for the figure that includes the present length."""
        self.multi_pushed = 0
        """Events standing for several writes pushed so far (:meth:`push_writes`): while
        0, no row of this queue packs writes, and a reader need not look."""

    def __len__(self) -> int:
        return len(self._calm) + len(self._events)

    def push(self, key: int, seq: int, time_ns: int, data: bytes | None) -> bool:
        """Queue an event; apply the drop rule if the queue is full.

        Returns:
            True if the event was queued (possibly after evicting an older
            event of the key), False if it was lost.
        Complexity: O(1).
        """
        index = self._index
        n = len(self._calm) if index is None else len(self._events)
        if n >= self.min_length:
            budget = self._budget
            if n < self.max_length and budget.free > 0:
                budget.free -= 1
            else:
                return self._push_full(key, seq, time_ns, data, self.number)
        if index is None:
            self._calm.append((key, seq, time_ns, data, self.number))
        else:
            token = next(self._tokens)
            self._events[token] = (key, seq, time_ns, data, self.number)
            try:
                index[key].append(token)
            except KeyError:
                index[key] = deque((token,))
        if not n and self.wake is not None:
            self.wake()
        return True

    def push_writes(
        self, key: int, seq: int, time_ns: int, data: bytes | None, writes: int
    ) -> bool:
        """:meth:`push` for an event standing for ``writes`` (> 1) writes: an event of a
        filtered subscription. The same rules; its row's last field packs the queue and
        ``writes`` (:func:`vehicle_middleware.ess.events.pack_queue`). A twin of
        :meth:`push` rather than an argument of it: the unfiltered push stays as it
        is. O(1)."""
        packed = pack_queue(self.number, writes)
        self.multi_pushed += 1
        index = self._index
        n = len(self._calm) if index is None else len(self._events)
        if n >= self.min_length:
            budget = self._budget
            if n < self.max_length and budget.free > 0:
                budget.free -= 1
            else:
                return self._push_full(key, seq, time_ns, data, packed)
        if index is None:
            self._calm.append((key, seq, time_ns, data, packed))
        else:
            token = next(self._tokens)
            self._events[token] = (key, seq, time_ns, data, packed)
            index.setdefault(key, deque()).append(token)
        if not n and self.wake is not None:
            self.wake()
        return True

    def _push_full(self, key: int, seq: int, time_ns: int, data: bytes | None, packed: int) -> bool:
        index = self._pressed().get(key)
        if not index:
            self.lost += 1
            self._on_drop(key, seq, self.number, DropReason.LOST, unpack_queue(packed)[1])
            return False
        events = self._events
        oldest = events.pop(index.popleft())
        carried = oldest[3]
        if carried is not None:
            if index:
                nxt_token = index[0]
                k, s, t, d, q = events[nxt_token]
                if d is None:
                    events[nxt_token] = (k, s, t, carried, q)  # assignment keeps its place
            elif data is None:
                data = carried
        self.evicted += 1
        self._on_drop(key, oldest[1], self.number, DropReason.EVICTED, unpack_queue(oldest[4])[1])
        token = next(self._tokens)
        events[token] = (key, seq, time_ns, data, packed)
        index.append(token)
        return True

    def pop_into(self, out: list[DataRow], count: int) -> None:
        """Move the ``count`` oldest events to ``out``, as the plain tuples they are
        queued as. O(count).

        Raises:
            IndexError or KeyError: fewer than ``count`` events are queued.
        """
        index = self._index
        n = len(self)
        if n > self.high_water:
            self.high_water = n
        self.delivered += count
        over_before = n - self.min_length
        append = out.append
        if index is None:
            calm = self._calm
            if count == n:  # the whole queue, the common drain: one C-level copy
                out += calm
                calm.clear()
            else:
                popleft = calm.popleft
                for _ in range(count):
                    append(popleft())
        else:
            popitem = self._events.popitem
            for _ in range(count):
                entry = popitem(last=False)[1]
                index[entry[0]].popleft()
                append(entry)
            if count == n:  # empty: no pressure left
                self._index = None
        self._return_over(over_before)

    def _pressed(self) -> dict[int, deque[int]]:
        """The per-key index, after moving a calm queue's events to the pressed form."""
        index = self._index
        if index is None:
            index = self._index = {}
            events = self._events
            tokens = self._tokens
            for entry in self._calm:
                token = next(tokens)
                events[token] = entry
                try:
                    index[entry[0]].append(token)
                except KeyError:
                    index[entry[0]] = deque((token,))
            self._calm.clear()
        return index

    def purge(self, key: int) -> list[DataUpdated]:
        """Remove every queued event of ``key`` and forget the key; return them.

        The caller reports them. O(events of the key) while pressed, else O(length).
        """
        if self._index is None:
            calm = self._calm
            kept: list[DataRow] = []
            removed: list[DataUpdated] = []
            for entry in calm:
                if entry[0] == key:
                    removed.append(as_data_updated(entry))
                else:
                    kept.append(entry)
            if not removed:
                return []
            self._note_peak()
            over_before = len(calm) - self.min_length
            calm.clear()
            calm.extend(kept)
            self.discarded += len(removed)
            self._return_over(over_before)
            return removed
        index = self._index.pop(key, None)
        if not index:
            return []
        self._note_peak()
        over_before = len(self._events) - self.min_length
        removed = [as_data_updated(self._events.pop(token)) for token in index]
        if not self._events:  # empty: no pressure left
            self._index = None
        self.discarded += len(removed)
        self._return_over(over_before)
        return removed

    def clear(self) -> list[DataUpdated]:
        """Remove every event and forget every key; return the events in order."""
        self._note_peak()
        over_before = len(self) - self.min_length
        entries = self._calm if self._index is None else self._events.values()
        removed = [as_data_updated(e) for e in entries]
        self.discarded += len(removed)
        self._calm.clear()
        self._events.clear()
        self._index = None
        self._return_over(over_before)
        return removed

    def reconfigure(self, *, min_length: int, max_length: int) -> None:
        """Change the lengths of an empty queue; its high-water mark starts again."""
        assert not len(self), "reconfigure an empty queue only"
        self.min_length = min_length
        self.max_length = max_length
        self.high_water = 0

    def peak(self) -> int:
        """Most events queued at once since the queue was (re)configured. O(1)."""
        n = len(self)
        return n if n > self.high_water else self.high_water

    def _note_peak(self) -> None:
        n = len(self)
        if n > self.high_water:
            self.high_water = n

    def oldest_time_ns(self) -> int | None:
        """Write time of the oldest queued event (None when empty). O(1)."""
        if self._calm:
            return self._calm[0][2]
        for entry in self._events.values():
            return entry[2]
        return None

    def stats(self, now_ns: int) -> QueueStats:
        """The queue's figures now (``now_ns``: the clock of the events' write times)."""
        oldest = self.oldest_time_ns()
        return QueueStats(
            queue=self.number,
            depth=len(self),
            high_water=self.peak(),
            min_length=self.min_length,
            max_length=self.max_length,
            delivered=self.delivered,
            evicted=self.evicted,
            lost=self.lost,
            discarded=self.discarded,
            oldest_age_ns=max(0, now_ns - oldest) if oldest is not None else 0,
        )

    def over_min(self) -> int:
        """Events above ``min_length``: units taken from the shared budget."""
        return max(0, len(self) - self.min_length)

    def tracked_keys(self) -> set[int]:
        """Keys this queue keeps an index for: while pressed, those queued since it
        was pressed, until purged."""
        return set(self._index) if self._index is not None else set()

    def _return_over(self, over_before: int) -> None:
        released = max(0, over_before) - self.over_min()
        if released:
            self._budget.free += released

    def check(self) -> None:
        """Assert every invariant of the queue (for tests)."""
        events = self._events
        assert 0 <= self.min_length <= self.max_length
        assert len(self) <= self.max_length, "queue above max_length"
        assert self.high_water <= self.max_length, "high-water mark above max_length"
        assert min(self.delivered, self.evicted, self.lost, self.discarded) >= 0
        if self._index is None:
            assert not events, "a calm queue holds events in its pressed form"
        else:
            assert not self._calm, "a pressed queue holds events in its calm form"
            tokens = list(events)
            assert tokens == sorted(tokens), "arrival order broken"
            indexed: list[int] = []
            for key, index in self._index.items():
                assert list(index) == sorted(index), f"index of key {key} out of order"
                for token in index:
                    assert events[token][0] == key, f"index of key {key} points at another key"
                indexed.extend(index)
            assert sorted(indexed) == tokens, "index and queue disagree"
        for entry in (*self._calm, *events.values()):
            assert len(entry) == len(DataUpdated._fields) - 1  # writes packed with queue
            assert unpack_queue(entry[4])[0] == self.number
