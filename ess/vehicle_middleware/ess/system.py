"""The Event Sub-System: subscriptions in, ``data_updated`` events out.

:class:`EventSubSystem` is the V-Store's listener. It keeps, per app with an
open event stream, three bounded queues and a lifecycle buffer, and per key
the subscriptions on it, with a watched-key bitmap so that an update of a key
nobody watches costs one bit test. The transport (the gRPC middleware) calls
``open_stream`` / ``register`` / ``deregister`` / ``subscriptions`` /
``drain`` / ``remove_app`` on behalf of apps; this module never does I/O.

Delivery guarantees (what an app can rely on):

* Every ``data_updated`` generated for a subscription gets the next ``seq``
  of that (app, key) pair, queued or not, so every loss shows as a gap.
* Per (app, key, queue), events arrive in write order.
* The latest value is never lost silently: if a dropped event carried data,
  the next event the app receives for that key carries the value.
* ``KeyAdded``/``KeyRemoved`` are never dropped by back-pressure; if their
  buffer overflows, the app gets ``ResyncRequired`` first in its next batch.
* Health events travel the same way: ``KeyStale``/``KeyFresh`` (from
  :meth:`EventSubSystem.health_tick`, a periodic tick over the watched keys
  with an expected period, :mod:`vehicle_middleware.ess.health`: the write path does nothing for
  them) and ``ProviderGone``/``ProviderBack`` (:meth:`provider_gone`,
  :meth:`provider_back`, :mod:`vehicle_middleware.ess.presence`), each to the subscribers of
  the keys concerned.
* Every eviction, loss and discard is counted per (app, key, queue) and
  reported to the observer.
* A subscription with a filter (:mod:`vehicle_middleware.ess.filters`) gets fewer
  events: its gate (:mod:`vehicle_middleware.ess.gates`) sends, holds or counts each
  write its trigger selects; seq counts the events sent, each event tells how
  many writes it stands for, and held events go out at :meth:`EventSubSystem.flush_due`
  (the transport calls it at :meth:`EventSubSystem.next_due`).

Not thread-safe: one event loop drives it, and the V-Store with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from vehicle_middleware.ess.budget import EventBudget
from vehicle_middleware.ess.config import QUEUE_COUNT, QueueConfig, effective_queue_configs
from vehicle_middleware.ess.demand import DemandTracker
from vehicle_middleware.ess.errors import BudgetExceededError, NotReadingEventsError
from vehicle_middleware.ess.events import (
    DataRow,
    DataUpdated,
    DropReason,
    Event,
    KeyAdded,
    KeyRemoved,
    LifecycleEvent,
    ProviderBack,
    ProviderGone,
    RawEvent,
    Status,
    as_data_updated,
)
from vehicle_middleware.ess.filters import Filter
from vehicle_middleware.ess.gates import NO_NUMBERS, DueTimes, FilterGate, Numbers
from vehicle_middleware.ess.health import StaleNotice, StaleTracker
from vehicle_middleware.ess.lifecycle import LifecycleBuffer
from vehicle_middleware.ess.policy import ALLOW_ALL, ReadPolicy
from vehicle_middleware.ess.presence import ProviderPresence
from vehicle_middleware.ess.queues import EventQueue
from vehicle_middleware.ess.scheduler import DEFAULT_WEIGHTS, CreditScheduler
from vehicle_middleware.ess.stats import AppStats
from vehicle_middleware.ess.subscriptions import (
    MAX_SEQ,
    RegisterResult,
    Subscription,
    SubscriptionInfo,
    SubscriptionRequest,
    SubscriptionTable,
)
from vehicle_middleware.ess.watch import WatchedKeys
from vehicle_middleware.vstore.errors import InvalidKeyNameError
from vehicle_middleware.vstore.keys import check_key_name

__all__ = [
    "DEFAULT_EVENT_BUDGET",
    "DEFAULT_LIFECYCLE_CAPACITY",
    "DropCounts",
    "EssObserver",
    "EventSubSystem",
    "KeySource",
]

DEFAULT_EVENT_BUDGET: Final = 20_000
DEFAULT_LIFECYCLE_CAPACITY: Final = 1_000


class KeySource(Protocol):
    """What the ESS needs of the V-Store (which satisfies it as it is)."""

    def id_of(self, name: str) -> int | None: ...

    def peek(self, key_id: int) -> tuple[bytes | None, int]: ...

    def version_of(self, key_id: int) -> int: ...

    def id_bound(self) -> int: ...


class EssObserver(Protocol):
    """Told of every event that will never reach its app (e.g. the telemetry journal)."""

    def event_dropped(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        """``writes``: how many writes the event stood for (more than 1 only for an
        event of a filtered subscription)."""
        ...


@dataclass(slots=True)
class DropCounts:
    """Events of one (app, key, queue) that never reached the app, by reason."""

    evicted: int = 0
    lost: int = 0
    discarded: int = 0


@dataclass(slots=True)
class _App:
    """Everything the ESS holds for one app with an open stream."""

    name: str
    queues: tuple[EventQueue, EventQueue, EventQueue]
    lifecycle: LifecycleBuffer
    scheduler: CreditScheduler
    reserved: int
    wake: Callable[[], None] | None
    drops: dict[tuple[int, int], DropCounts] = field(default_factory=dict)
    dropped: int = 0
    overflowed: int = 0
    """Of ``dropped``, the evicted and lost: the drop rule's doing, not a deregistration's."""


class EventSubSystem:
    """The ESS core, and the V-Store's listener (key_added, key_removed, data_updated)."""

    def __init__(
        self,
        source: KeySource,
        *,
        event_budget: int = DEFAULT_EVENT_BUDGET,
        reserve: int = 0,
        lifecycle_capacity: int = DEFAULT_LIFECYCLE_CAPACITY,
        read_policy: ReadPolicy = ALLOW_ALL,
        observer: EssObserver | None = None,
        queue_weights: tuple[int, int, int] = DEFAULT_WEIGHTS,
        numbers: Numbers = NO_NUMBERS,
        clock: Callable[[], int] = time.monotonic_ns,
        on_due: Callable[[int], None] | None = None,
    ) -> None:
        """Create an ESS reading values from ``source``.

        Args:
            source: the V-Store (ids, values, write times).
            event_budget: most ``data_updated`` events queued for all apps together.
            reserve: units of the budget held back for the streams' minimums: queues
                growing above their ``min_length`` never take them
                (:mod:`vehicle_middleware.ess.budget`).
            lifecycle_capacity: per-app bound of buffered key_added/key_removed events.
            read_policy: the authorization hook (default: everything allowed).
            observer: told of every evicted, lost or discarded event.
            queue_weights: drain credits of queues 0, 1, 2
                (see :mod:`vehicle_middleware.ess.scheduler`).
            numbers: how values read as numbers, for filters' value rules (default:
                none does, and threshold and range filters are refused).
            clock: the filters' clock (ns, monotonic): when an interval ends.
            on_due: told the due time (on ``clock``) of a held event when it is the
                earliest now: the transport arms its timer for :meth:`flush_due`.
        """
        CreditScheduler(queue_weights)  # validate once, early
        self._source = source
        self._budget = EventBudget(event_budget, reserve=reserve)
        self._lifecycle_capacity = lifecycle_capacity
        LifecycleBuffer(lifecycle_capacity)  # validate
        self._policy = read_policy
        self._observer = observer
        self._weights = queue_weights
        self._watch = WatchedKeys(source.id_bound())
        self._watched = self._watch.bits  # hot path: one C-level bit test
        self._table = SubscriptionTable(self._watch)
        self._subs_by_key = self._table.by_key
        self._apps: dict[str, _App] = {}
        self._expected: Callable[[str], int | None] | None = None
        self._stale = StaleTracker()
        self._presence = ProviderPresence()
        self._table.on_watch = self._watch_changed
        self._demand = DemandTracker(self._table.by_key)
        self._table.on_change = self._demand.changed
        self._numbers = numbers
        self._clock = clock
        self._due = DueTimes(on_due)

    # -- V-Store listener ---------------------------------------------------

    def data_updated(self, key_id: Any, changed: bool, value: bytes, time_ns: Any) -> None:
        """Fan an update out to the key's subscribers. The hot path.

        An unwatched key costs one bit test. For a watched key the stored value
        is queued as it is (no copy) and every subscriber gets its own seq.

        ``key_id`` and ``time_ns`` are ints, annotated ``Any`` so that the compiled
        build queues the caller's objects as they are, as the interpreter does
        (docs/compiled-build.md, "Ints on the hot path": an ``int`` there would be
        a new object for each subscriber's event).
        """
        try:
            if not self._watched[key_id]:
                return
        except IndexError:  # a key added before this ESS listened: nobody watches it
            return
        max_seq = MAX_SEQ
        data: bytes | None
        for sub in self._subs_by_key[key_id].values():
            if changed:
                data = value
            elif sub.every_write:  # an unchanged write: its value only where owed or wanted
                data = value if sub.owes_data or sub.with_value else None
            else:
                continue
            seq = sub.seq
            sub.seq = seq = seq + 1 if seq != max_seq else 1
            if sub.push(key_id, seq, time_ns, data):
                if sub.owes_data:
                    sub.owes_data = False
            elif data is not None:
                sub.owes_data = True

    def key_added(self, key_id: int, name: str) -> None:
        """Grow the bitmap and tell every app that may read the key."""
        self._watch.ensure(key_id)
        self._broadcast(KeyAdded(key_id, name), name)

    def key_removed(self, key_id: int, name: str) -> None:
        """End the key's subscriptions, discard its queued events, tell the apps.

        The id may be reused at once, so nothing about the old key may stay.
        """
        for sub in self._table.remove_key(key_id):
            sub.set_gate(None)
            self._purge(self._apps[sub.app], key_id)
        for state in self._apps.values():
            for q in range(QUEUE_COUNT):
                state.drops.pop((key_id, q), None)
        self._presence.forget(key_id)
        self._broadcast(KeyRemoved(key_id, name), name)

    def _broadcast(self, event: KeyAdded | KeyRemoved, name: str) -> None:
        may_read = self._policy.may_read
        for app in self._apps.values():
            if may_read(app.name, name):
                self._tell(app, event)

    def _tell(self, app: _App, event: LifecycleEvent) -> None:
        """Put a lifecycle or health event in the app's lifecycle buffer (never dropped
        by the drop rule; an overflow owes the app a resync)."""
        was_idle = not self._pending(app)
        app.lifecycle.push(event)
        if was_idle and app.wake is not None:
            app.wake()

    @property
    def demand(self) -> DemandTracker:
        """Each key's demand, for its provider (:mod:`vehicle_middleware.ess.demand`)."""
        return self._demand

    # -- signal health ------------------------------------------------------

    def expect(self, period_ns: Callable[[str], int | None] | None) -> None:
        """Set how long each key may go unwritten (by name, in ns; None: no expectation).

        Watched keys with an expectation are followed by :meth:`health_tick`;
        others cost nothing. O(watched keys).
        """
        self._expected = period_ns
        for key, subs in self._subs_by_key.items():
            self._watch_changed(key, next(iter(subs.values())).name)

    def _watch_changed(self, key: int, name: str | None) -> None:
        """The subscription table's hook: ``key`` got its first subscriber (``name``)
        or lost its last (None)."""
        period = self._expected(name) if name is not None and self._expected else None
        if period:
            self._stale.follow(key, period)
        else:
            self._stale.unfollow(key)

    def health_tick(self, now_ns: int) -> list[StaleNotice]:
        """Tell subscribers which keys went stale or fresh since the last tick.

        ``now_ns``: now, on the V-Store's clock. Call it periodically (a
        ``KeyFresh`` is up to one period of these calls late). Returns what was
        told to whom (for the journal). O(watched keys with an expectation).
        """
        notices = self._stale.tick(now_ns, self._source, self._subscribers_of)
        apps = self._apps
        for notice in notices:
            for app in notice.apps:
                self._tell(apps[app], notice.event)
        return notices

    def _subscribers_of(self, key: int) -> dict[str, Subscription]:
        return self._subs_by_key.get(key) or {}

    def followed_keys(self) -> list[int]:
        """Ids of the keys the health tick follows (watched, with an expected period)."""
        return sorted(self._stale.followed())

    def stale_keys(self) -> list[int]:
        """Ids of the watched keys that are stale now, ascending."""
        return sorted(self._stale.stale())

    def provider_gone(self, provider: str, keys: Iterable[int]) -> dict[str, tuple[int, ...]]:
        """``provider``'s claims on ``keys`` ended as it went away: each subscriber of
        some of them is told ``ProviderGone`` with those; until they are claimed
        again they have no provider. Returns the keys told, by app. O(keys + subscribers).
        """
        gone = self._presence.gone(provider, keys)
        return self._tell_subscribers(gone, lambda ks: ProviderGone(provider, ks))

    def provider_back(
        self, provider: str, keys: Iterable[int]
    ) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]]]:
        """``provider`` claims ``keys``: those whose provider had gone are back, and
        each subscriber of some of them is told ``ProviderBack`` with those.
        Returns the keys back, and the keys told by app."""
        back = self._presence.back(keys)
        return back, self._tell_subscribers(back, lambda ks: ProviderBack(provider, ks))

    def _tell_subscribers(
        self, keys: Sequence[int], make: Callable[[tuple[int, ...]], LifecycleEvent]
    ) -> dict[str, tuple[int, ...]]:
        per_app: dict[str, list[int]] = {}
        for key in keys:  # ascending, so each app's list is too
            for app in self._subscribers_of(key):
                per_app.setdefault(app, []).append(key)
        told = {app: tuple(ks) for app, ks in per_app.items()}
        for app, ks in told.items():
            self._tell(self._apps[app], make(ks))
        return told

    def no_provider(self, key_id: int) -> bool:
        """Whether the key's provider went away and nobody claims it since. O(1)."""
        return key_id in self._presence

    # -- app side -----------------------------------------------------------

    def open_stream(
        self,
        app: str,
        queues: Iterable[QueueConfig] = (),
        *,
        wake: Callable[[], None] | None = None,
        fresh: bool = False,
    ) -> tuple[QueueConfig, QueueConfig, QueueConfig]:
        """Open (or reopen) the app's event stream and configure its queues.

        Reserves the sum of the ``min_length`` values in the global event
        budget. Reopening keeps the app's subscriptions and seq counters but
        discards its undelivered events (reported as discarded; the app sees
        the gap in seq, the next event of a key whose data was discarded
        carries the value, and a resync comes if lifecycle events were pending).
        With ``fresh`` the app starts anew instead: what it had is removed
        first, as :meth:`remove_app` does, so it holds no subscription and
        every seq starts again (a new client of the app, which never made the
        old one's subscriptions and never saw their events).

        Args:
            app: the app id.
            queues: requested configurations; unmentioned queues get defaults.
            wake: the transport's doorbell, called when events arrive for an
                app that had none pending (it may be called more often than
                strictly needed, so it must be idempotent and cheap).
            fresh: start the app anew (above).
        Returns:
            The effective configuration of queues 0, 1, 2 (after capping).
        Raises:
            InvalidQueueConfigError: bad configuration (nothing changes).
            BudgetExceededError: the minimums cannot be reserved (nothing changes).
        """
        configs = effective_queue_configs(queues)
        need = sum(c.min_length for c in configs)
        old = self._apps.get(app)
        # What the old stream would give back if replaced.
        returned = old.reserved + sum(q.over_min() for q in old.queues) if old else 0
        if old is not None:
            # The old reservation first: what the reserve holds back depends on it.
            room = self._budget.room(releasing=old.reserved) + returned - old.reserved
        else:
            room = self._budget.room()
        if need > room:
            raise BudgetExceededError(app, need, room, self._budget.total)
        if old is not None and fresh:
            self.remove_app(app)
            old = None
        if old is not None:
            for q in old.queues:
                self._discard(old, q.clear())
                q.reconfigure(
                    min_length=configs[q.number].min_length, max_length=configs[q.number].max_length
                )
            old.lifecycle.discard()
            old.scheduler.reset()
            self._budget.release(old.reserved)
            old.reserved = need
            old.wake = wake
            for q in old.queues:
                q.wake = wake
        else:
            state = _App(
                name=app,
                queues=(
                    self._new_queue(app, configs[0]),
                    self._new_queue(app, configs[1]),
                    self._new_queue(app, configs[2]),
                ),
                lifecycle=LifecycleBuffer(self._lifecycle_capacity),
                scheduler=CreditScheduler(self._weights),
                reserved=need,
                wake=wake,
            )
            self._apps[app] = state
            for q in state.queues:
                q.wake = wake
        reserved = self._budget.reserve(need)
        assert reserved
        if old is not None and wake is not None and self._pending(old):
            wake()
        return configs

    def _new_queue(self, app: str, cfg: QueueConfig) -> EventQueue:
        def on_drop(key: int, seq: int, queue: int, reason: DropReason, writes: int) -> None:
            self._count_drop(app, key, queue, seq, reason, writes)

        return EventQueue(
            cfg.queue,
            min_length=cfg.min_length,
            max_length=cfg.max_length,
            budget=self._budget,
            on_drop=on_drop,
        )

    def register(self, app: str, requests: Sequence[SubscriptionRequest]) -> list[RegisterResult]:
        """Add or replace subscriptions; one result per request, in order.

        A key that does not exist is NOT_FOUND, one the policy denies is
        PERMISSION_DENIED, a bad name or queue is INVALID_ARGUMENT; the
        other keys of the request still succeed. A threshold or range filter on a
        key that is not numeric (``numbers``) is INVALID_ARGUMENT. Registering an
        existing (app, key) subscription replaces its queue, trigger,
        ``with_value`` and filter and keeps its seq; a changed filter first sends
        what the old one held, as an event. If the queue changes, the key's events
        still queued in the old queue are discarded (reported; seq shows the gap)
        and the next event carries the value.

        Raises:
            NotReadingEventsError: the app has no open event stream.
        Complexity: O(len(requests)).
        """
        state = self._apps.get(app)
        if state is None:
            raise NotReadingEventsError(app)
        results: list[RegisterResult] = []
        for req in requests:
            resolved = self._resolve(app, req.key)
            if isinstance(resolved, RegisterResult):
                results.append(resolved)
                continue
            key_id = resolved
            if not 0 <= req.queue < QUEUE_COUNT:
                results.append(
                    RegisterResult(
                        req.key,
                        key_id,
                        Status.INVALID_ARGUMENT,
                        detail=f"queue {req.queue} does not exist; queues are 0, 1 and 2",
                    )
                )
                continue
            if req.filter_error is not None:
                results.append(
                    RegisterResult(
                        req.key, key_id, Status.INVALID_ARGUMENT, detail=str(req.filter_error)
                    )
                )
                continue
            flt = req.filter if req.filter is not None and not req.filter.empty else None
            if flt is not None and flt.numeric:
                why = self._numbers.not_numeric(req.key, self._source.peek(key_id)[0])
                if why is not None:
                    field = "filter.threshold" if flt.threshold is not None else "filter.range"
                    results.append(
                        RegisterResult(
                            req.key,
                            key_id,
                            Status.INVALID_ARGUMENT,
                            detail=f"{field}: key {req.key!r} is not numeric: {why}; "
                            "threshold and range need a numeric key",
                        )
                    )
                    continue
            target = state.queues[req.queue]
            sub = self._table.get(app, key_id)
            if sub is None:
                sub = Subscription(
                    app,
                    key_id,
                    req.key,
                    req.trigger,
                    target,
                    with_value=req.with_value,
                    filter=flt,
                )
                if flt is not None:
                    sub.set_gate(self._gate(sub, flt))
                self._table.add(sub)  # with its filter: the key's demand counts it
            else:
                if sub.target is not target:
                    # A key's queued events must stay in one queue, in write order
                    # (the drop and carry rules rely on it): drop the old queue's.
                    self._purge(state, key_id, keep=target)
                sub.retarget(req.trigger, target, with_value=req.with_value)
                if flt != sub.filter:
                    if sub.gate is not None:  # what it holds goes out now, then the new filter
                        sub.gate.flush(self._clock())
                    sub.filter = flt
                    sub.set_gate(self._gate(sub, flt) if flt is not None else None)
                    self._table.refiltered(sub)  # its key's demand may change
            current = self._source.peek(key_id)[0] if req.want_current else None
            results.append(
                RegisterResult(
                    req.key,
                    key_id,
                    Status.OK,
                    current,
                    seq=sub.seq,
                    no_provider=key_id in self._presence,
                )
            )
        return results

    def deregister(
        self, app: str, keys: Sequence[str], *, check_policy: bool = True
    ) -> list[RegisterResult]:
        """Remove subscriptions by key name; one result per key, in order.

        Deregistering a key the app does not subscribe to is OK (a no-op), so
        deregistering twice is harmless; an app without a stream has nothing
        to deregister. The subscription's undelivered events are discarded. A
        key the app may not read is PERMISSION_DENIED (its existence is not
        told) unless ``check_policy`` is False (the middleware ending
        subscriptions a new policy forbids).
        """
        results: list[RegisterResult] = []
        state = self._apps.get(app)
        for name in keys:
            resolved = self._resolve(app, name, check_policy=check_policy)
            if isinstance(resolved, RegisterResult):
                results.append(resolved)
                continue
            if state is not None:
                sub = self._table.remove(app, resolved)
                if sub is not None:
                    sub.set_gate(None)
                    self._purge(state, resolved)
            results.append(RegisterResult(name, resolved, Status.OK))
        return results

    def subscriptions(self, app: str) -> list[SubscriptionInfo]:
        """The app's subscriptions, in registration order (empty if it has none)."""
        return [sub.info() for sub in self._table.of_app(app)]

    def subscriptions_of(self, app: str) -> int:
        """How many subscriptions the app holds (0 if none). O(1): a limit check
        asks it for every stream of a caller on every subscription."""
        return self._table.count_of(app)

    def drain(self, app: str, max_events: int) -> list[Event]:
        """Take up to ``max_events`` events for the app, to send as one batch.

        Order: a ``ResyncRequired`` if owed, then lifecycle events, then data
        events by the credit rule of :mod:`vehicle_middleware.ess.scheduler` (queue 0's events
        before queue 1's before queue 2's).

        Raises:
            NotReadingEventsError: the app has no open stream.
            ValueError: ``max_events`` < 1.
        Complexity: O(returned events).
        """
        return [
            as_data_updated(e) if isinstance(e, tuple) else e
            for e in self.drain_raw(app, max_events)
        ]

    def drain_raw(self, app: str, max_events: int) -> list[RawEvent]:
        """:meth:`drain`, with each data event the plain tuple it was queued as
        (``DataRow``: the same fields in the same order), for the streams that
        encode it at once. Same order, same errors."""
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        state = self._apps.get(app)
        if state is None:
            raise NotReadingEventsError(app)
        out: list[RawEvent] = []
        if state.lifecycle.lost:  # a resync: stale keys are told again after it
            self._stale.forget_app(app)
        state.lifecycle.drain_into(out, max_events)
        room = max_events - len(out)
        if room:
            queues = state.queues
            counts = state.scheduler.allocate(room, [len(q) for q in queues])
            data_out: list[DataRow] = []
            for q, count in zip(queues, counts, strict=True):
                if count:
                    q.pop_into(data_out, count)
            out += data_out
        return out

    def pending(self, app: str) -> int:
        """How many events a drain could return now (0 for an unknown app)."""
        state = self._apps.get(app)
        return self._pending(state) if state is not None else 0

    @staticmethod
    def _pending(state: _App) -> int:
        return len(state.lifecycle) + sum(map(len, state.queues))

    def remove_app(self, app: str) -> bool:
        """Forget everything of the app: queues, subscriptions, seq counters,
        watched bits, budget. Undelivered events are reported as discarded.

        Idempotent; returns whether the app was known.
        """
        state = self._apps.pop(app, None)
        for sub in self._table.remove_app(app):
            sub.set_gate(None)
        self._stale.forget_app(app)
        if state is None:
            return False
        for q in state.queues:
            self._discard(state, q.clear())
        self._budget.release(state.reserved)
        return True

    # -- filters ------------------------------------------------------------

    def _gate(self, sub: Subscription, flt: Filter) -> FilterGate:
        return FilterGate(
            sub,
            flt,
            current=self._source.peek(sub.key)[0],
            clock=self._clock,
            numbers=self._numbers,
            due_times=self._due,
        )

    def on_due(self, hook: Callable[[int], None] | None) -> None:
        """Set the hook told the due time of a held event when it becomes the earliest
        (the constructor's ``on_due``)."""
        self._due.on_earliest = hook

    def next_due(self) -> int | None:
        """When the earliest held event goes out (on the filters' clock); None if
        no filter holds one: no timer needed. O(1) amortized."""
        return self._due.next_due()

    def flush_due(self, now_ns: int) -> int:
        """Send every held event whose interval ended at ``now_ns`` (the filters'
        clock); returns how many. O(k log n) for k sent."""
        gates = self._due.pop_due(now_ns)
        for gate in gates:
            gate.flush(now_ns)
        return len(gates)

    def multi_write_pushes(self, app: str) -> int:
        """Events standing for several writes pushed to the app's queues so far (0 for
        an unknown app): while 0, none of its drained rows packs writes. O(1)."""
        state = self._apps.get(app)
        if state is None:
            return 0
        q0, q1, q2 = state.queues
        return q0.multi_pushed + q1.multi_pushed + q2.multi_pushed

    def held_writes(self, app: str, key_id: int) -> int:
        """Writes of the app's subscription on ``key_id`` that no event stands for yet
        (held by its filter; 0 without a filter). O(1)."""
        sub = self._table.get(app, key_id)
        gate = sub.gate if sub is not None else None
        return gate.held_count() if gate is not None else 0

    # -- introspection ------------------------------------------------------

    def has_stream(self, app: str) -> bool:
        """Whether the app has an open event stream."""
        return app in self._apps

    def apps(self) -> list[str]:
        """Apps with an open stream."""
        return list(self._apps)

    def is_watched(self, key_id: int) -> bool:
        """Whether some app subscribes to ``key_id``."""
        return key_id in self._watch

    def watched_keys(self) -> list[int]:
        """Ids of every watched key, ascending."""
        return self._watch.watched()

    @property
    def budget_total(self) -> int:
        """The global event budget."""
        return self._budget.total

    @property
    def budget_free(self) -> int:
        """Units of the event budget neither reserved nor in use."""
        return self._budget.room()

    def reservation(self, app: str) -> int:
        """Units of the event budget the app's stream reserves (the sum of its
        queues' ``min_length`` values; 0 without a stream). O(1)."""
        state = self._apps.get(app)
        return state.reserved if state is not None else 0

    def drop_counts(self, app: str) -> dict[tuple[int, int], DropCounts]:
        """Drops of the app so far, by (key id, queue). Empty for an unknown app."""
        state = self._apps.get(app)
        return (
            {k: DropCounts(v.evicted, v.lost, v.discarded) for k, v in state.drops.items()}
            if state
            else {}
        )

    def dropped(self, app: str) -> int:
        """Total events of the app evicted, lost or discarded so far (0 if unknown). O(1)."""
        state = self._apps.get(app)
        return state.dropped if state is not None else 0

    def app_stats(self, app: str, now_ns: int) -> AppStats | None:
        """The figures of the app's queues now (None if it has no stream).

        ``now_ns`` is the clock of the store's write times (ns since the
        epoch), for the age of the oldest queued events. O(1).
        """
        state = self._apps.get(app)
        if state is None:
            return None
        q0, q1, q2 = state.queues
        return AppStats(
            app=app,
            queues=(q0.stats(now_ns), q1.stats(now_ns), q2.stats(now_ns)),
            subscriptions=self._table.count_of(app),
            lifecycle_pending=len(state.lifecycle),
            reserved=state.reserved,
        )

    def subscriber_counts(self) -> dict[int, int]:
        """Subscribers per watched key id. O(watched keys)."""
        return {key: len(subs) for key, subs in self._subs_by_key.items()}

    def subscriber_count(self, key_id: int) -> int:
        """How many apps subscribe to ``key_id``. O(1)."""
        subs = self._subs_by_key.get(key_id)
        return len(subs) if subs is not None else 0

    def subscription_count(self) -> int:
        """Subscriptions of every app together. O(apps)."""
        return len(self._table)

    @property
    def budget_used(self) -> int:
        """Units of the event budget reserved or holding events."""
        return self._budget.used

    def overflowed(self, app: str) -> int:
        """Events of the app evicted or lost so far: the drops of a reader that does
        not keep up (discards, e.g. by deregistering, are not counted). O(1); 0 if unknown."""
        state = self._apps.get(app)
        return state.overflowed if state is not None else 0

    # -- internals ----------------------------------------------------------

    def _resolve(self, app: str, name: str, *, check_policy: bool = True) -> int | RegisterResult:
        """A key name's id, or the per-key failure result."""
        try:
            check_key_name(name)
        except InvalidKeyNameError as e:
            return RegisterResult(e.name, 0, Status.INVALID_ARGUMENT, detail=str(e))
        # The policy first, by name: whether a key the app may not read exists
        # is none of its business.
        if check_policy and not self._policy.may_read(app, name):
            return RegisterResult(
                name, 0, Status.PERMISSION_DENIED, detail=f"app {app!r} may not read key {name!r}"
            )
        key_id = self._source.id_of(name)
        if key_id is None:
            return RegisterResult(name, 0, Status.NOT_FOUND, detail=f"key {name!r} does not exist")
        return key_id

    def _purge(self, state: _App, key_id: int, *, keep: EventQueue | None = None) -> None:
        for q in state.queues:
            if q is not keep:
                self._discard(state, q.purge(key_id))

    def _discard(self, state: _App, events: list[DataUpdated]) -> None:
        """Report events thrown away; a subscription that lost data is owed the value."""
        for ev in events:
            self._count_drop(state.name, ev.key, ev.queue, ev.seq, DropReason.DISCARDED, ev.writes)
            if ev.data is not None:
                sub = self._table.get(state.name, ev.key)
                if sub is not None:
                    sub.owes_data = True

    def _count_drop(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        state = self._apps.get(app)
        if state is not None:
            counts = state.drops.get((key, queue))
            if counts is None:
                state.drops[(key, queue)] = counts = DropCounts()
            state.dropped += 1
            if reason is DropReason.EVICTED:
                counts.evicted += 1
                state.overflowed += 1
            elif reason is DropReason.LOST:
                counts.lost += 1
                state.overflowed += 1
            else:
                counts.discarded += 1
        if self._observer is not None:
            if writes == 1:
                self._observer.event_dropped(app, key, queue, seq, reason)
            else:
                self._observer.event_dropped(app, key, queue, seq, reason, writes)

    def check(self) -> None:
        """Assert every invariant of the ESS and its parts (for tests)."""
        self._table.check()
        assert len(self._watch) >= self._source.id_bound(), "bitmap shorter than the id space"
        in_use = 0
        for name, state in self._apps.items():
            assert state.name == name
            assert state.reserved == sum(q.min_length for q in state.queues)
            state.lifecycle.check()
            subscribed = {s.key for s in self._table.of_app(name)}
            for number, q in enumerate(state.queues):
                assert q.number == number
                q.check()
                assert q.tracked_keys() <= subscribed, "queue indexes a key the app left"
                in_use += q.over_min()
            in_use += state.reserved
            # Running totals (per-key counts go with a removed key): only bounded here.
            assert 0 <= state.overflowed <= state.dropped
            for sub in self._table.of_app(name):
                assert sub.target in state.queues
        for sub_app in {s.app for subs in self._subs_by_key.values() for s in subs.values()}:
            assert sub_app in self._apps, f"subscription of app {sub_app!r} without a stream"
        budget = self._budget
        assert budget.reserved == sum(a.reserved for a in self._apps.values())
        assert budget.free + budget.held == budget.total - in_use, "event budget accounting broken"
        assert budget.free >= 0
        self._stale.check()
        self._presence.check()
        self._demand.check()
        followed = set(self._stale.followed())
        for key, subs in self._subs_by_key.items():
            name = next(iter(subs.values())).name
            period = self._expected(name) if self._expected is not None else None
            assert (key in followed) == bool(period), f"key {key} followed iff expected"
            followed.discard(key)
        assert not followed, f"unwatched keys followed: {sorted(followed)}"
        for stale in self._stale.stale():
            assert stale in self._subs_by_key
        for subs in self._subs_by_key.values():
            for sub in subs.values():
                gate = sub.gate
                assert sub.push == (sub.target.push if gate is None else gate.push)
