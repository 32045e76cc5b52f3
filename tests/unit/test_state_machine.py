"""Hypothesis drives the real V-Store + ESS and the plain model side by side.

After every step both agree on everything observable (results, drained
batches, drops, budget, watched keys) and every structure's check() passes.
Subscriptions may have filters, on a fake clock: every write the trigger
selects is in an event delivered, dropped or queued, or held by its filter.
"""

from __future__ import annotations

import itertools
from collections import Counter

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from vehicle_middleware.ess import (
    DataUpdated,
    DropReason,
    Event,
    EventSubSystem,
    Filter,
    NotReadingEventsError,
    QueueConfig,
    Status,
    SubscriptionRequest,
    Trigger,
    effective_queue_configs,
)
from vehicle_middleware.vstore import VStore

from tests.unit.model import Model, number

NAMES = [f"Vehicle.Sig{c}" for c in "ABCD"]
NUMERIC = frozenset(NAMES[:2])
"""Keys numeric by their datatype; the others only while their value is a number."""
APPS = ["app1", "app2", "app3"]
VALUES = [b"", b"x", b"y", b"1", b"2", b"7", b"20"]
BUDGET = 14
LIFECYCLE = 3
WEIGHTS = (3, 2, 1)

names = st.sampled_from(NAMES)
rooms = st.sampled_from([1, 2, 3, 4, 6])
apps = st.sampled_from(APPS)
_small_cfg = st.tuples(st.integers(0, 2), st.integers(1, 4)).map(
    lambda t: (min(t), max(t))  # (min_length, max_length) with min <= max
)
queue_cfgs = st.one_of(
    # All three queues small, so the budget of 14 fits a few apps and overflows.
    st.lists(_small_cfg, min_size=3, max_size=3).map(
        lambda lens: [QueueConfig(q, lo, hi) for q, (lo, hi) in enumerate(lens)]
    ),
    # Sometimes defaults (min 10 each): the budget refuses these.
    st.lists(
        st.builds(QueueConfig, queue=st.integers(0, 2), min_length=st.just(0)),
        max_size=2,
        unique_by=lambda c: c.queue,
    ),
)


filters = st.one_of(
    st.none(),
    st.builds(
        Filter,
        min_interval_ns=st.sampled_from([0, 1_000_000, 5_000_000]),
        threshold=st.none() | st.sampled_from([1.0, 5.0]),
        range=st.none() | st.just((2.0, 10.0)),
    ),
)


class Numbers:
    """The test's numbers (ASCII decimals); NUMERIC keys are numeric by datatype."""

    def number(self, data: bytes) -> float | None:
        return number(data)

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        if name in NUMERIC or number(current) is not None:
            return None
        return "its value is not a number"


class DroppedWrites:
    """The ESS observer: the writes of every dropped event, by (app, key)."""

    def __init__(self) -> None:
        self.writes: Counter[tuple[str, int]] = Counter()

    def event_dropped(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        self.writes[(app, key)] += writes


def _normalise(events: list[Event]) -> list[object]:
    """Drained events with write times masked (the model does not keep time)."""
    return [e._replace(time_ns=-1) if isinstance(e, DataUpdated) else e for e in events]


class CoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        ticks = itertools.count(1)
        self.store = VStore(max_value_size=8, clock=lambda: next(ticks))
        self.now = 0  # the filters' clock
        self.dropped = DroppedWrites()
        self.ess = EventSubSystem(
            self.store,
            event_budget=BUDGET,
            lifecycle_capacity=LIFECYCLE,
            queue_weights=WEIGHTS,
            observer=self.dropped,
            numbers=Numbers(),
            clock=lambda: self.now,
        )
        self.store.set_listener(self.ess)
        self.model = Model(budget=BUDGET, lifecycle_capacity=LIFECYCLE, weights=WEIGHTS)
        # What each app has learned from its events: (app, key id) -> latest data
        # seen, and the last seq delivered. Checked against the store below.
        self.view: dict[tuple[str, int], bytes] = {}
        self.delivered: dict[tuple[str, int], int] = {}
        # The writes of each (app, key) subscription: selected by its trigger,
        # in events delivered, and writes a changed filter's value rules had skipped
        # (a changed filter sends what it held at once).
        self.selected: Counter[tuple[str, int]] = Counter()
        self.delivered_writes: Counter[tuple[str, int]] = Counter()
        self.vanished: Counter[tuple[str, int]] = Counter()
        # Subscriptions that had a threshold or range filter: their apps may not know
        # the latest value, by those rules.
        self.value_filtered: set[tuple[str, int]] = set()

    def _forget(self, *, app: str | None = None, key: int | None = None) -> None:
        for table in (
            self.view,
            self.delivered,
            self.selected,
            self.delivered_writes,
            self.vanished,
            self.dropped.writes,
        ):
            for a, k in list(table):
                if (app is None or a == app) and (key is None or k == key):
                    del table[(a, k)]

    def add_key(self, name: str) -> None:
        assert self.store.add_key(name) == self.model.add_key(name)

    @rule(name=names)
    def toggle_key(self, name: str) -> None:
        """Remove the key if it exists, else add it (ids get recycled)."""
        if name in self.model.keys:
            key_id = self.model.keys[name].id
            self.model.remove_key(name)
            self.store.remove_key(name)
            self._forget(key=key_id)  # after: the removal reports its discards
        else:
            self.add_key(name)

    @initialize(
        cfgs=st.lists(queue_cfgs, min_size=len(APPS), max_size=len(APPS)),
        subs=st.lists(
            st.tuples(apps, names, st.sampled_from([0, 1, 2]), st.sampled_from(Trigger)), max_size=8
        ),
    )
    def start(
        self, cfgs: list[list[QueueConfig]], subs: list[tuple[str, str, int, Trigger]]
    ) -> None:
        # Most interesting states need keys, streams and subscriptions: start with them.
        for name in NAMES[:3]:
            self.add_key(name)
        for app, app_cfgs in zip(APPS, cfgs, strict=True):
            self.open_stream(app, app_cfgs)
        for app, name, queue, trigger in subs:
            self.register(app, name, queue, trigger, want=False)

    @rule(
        writes=st.lists(st.tuples(names, st.sampled_from(VALUES)), min_size=1, max_size=20),
        then_drain=st.none() | st.tuples(apps, rooms),
    )
    def traffic(self, writes: list[tuple[str, bytes]], then_drain: tuple[str, int] | None) -> None:
        """Providers write; then, often, one app reads a batch."""
        for name, data in writes:
            if name in self.model.keys:
                key = self.model.keys[name]
                changed = key.value != data
                for app, sub in self.model.subs.get(key.id, {}).items():
                    if changed or sub.trigger is Trigger.ON_UPDATE:
                        self.selected[(app, key.id)] += 1
                assert self.store.set(name, data) == self.model.set(name, data)
        if then_drain is not None:
            self.drain_and_compare(*then_drain)

    @rule(app=apps, cfgs=queue_cfgs)
    def open_missing_stream(self, app: str, cfgs: list[QueueConfig]) -> None:
        """An app without a stream opens one."""
        if app not in self.model.apps:
            self.open_stream(app, cfgs)

    @rule(app=apps, cfgs=queue_cfgs)
    def reopen_stream(self, app: str, cfgs: list[QueueConfig]) -> None:
        """An app with a stream opens a second one, which replaces the first."""
        if app in self.model.apps:
            self.open_stream(app, cfgs)

    def open_stream(self, app: str, cfgs: list[QueueConfig]) -> None:
        effective = effective_queue_configs(cfgs)
        if self.model.open_stream(app, effective):
            assert self.ess.open_stream(app, cfgs) == effective
        else:
            try:
                self.ess.open_stream(app, cfgs)
            except MemoryError:
                pass
            else:
                raise AssertionError("budget should have refused the stream")

    @rule(ns=st.sampled_from([100_000, 1_000_000, 3_000_000, 10_000_000]), timer=st.booleans())
    def time_passes(self, ns: int, timer: bool) -> None:
        """The filters' clock moves on; the transport's timer sends what is due (or is
        late: a write may come first)."""
        self.now += ns
        if timer:
            due = self.ess.next_due()
            sent = self.ess.flush_due(self.now)
            assert (due is not None and due <= self.now) == (sent > 0)
            if sent:
                event("held events went out")
            self.model.advance(ns)
        else:
            self.model.now += ns

    @rule(
        app=apps,
        name=names,
        queue=st.sampled_from([0, 1, 2, 3]),
        trigger=st.sampled_from(Trigger),
        want=st.booleans(),
        flt=filters,
    )
    def register(
        self,
        app: str,
        name: str,
        queue: int,
        trigger: Trigger,
        want: bool,
        flt: Filter | None = None,
    ) -> None:
        req = SubscriptionRequest(name, queue, trigger, want, filter=flt)
        if app not in self.model.apps:
            try:
                self.ess.register(app, [req])
            except NotReadingEventsError:
                return
            raise AssertionError("register without a stream must fail")
        key = self.model.keys.get(name)
        before = self.model.subs.get(key.id, {}).get(app) if key is not None else None
        # Writes the old filter's value rules skipped since its last event: a changed
        # filter sends what it held, but these stay filtered.
        old_filter, skipped = (
            (before.filter, before.since if before.filter is not None else 0)
            if before and key is not None
            else (None, 0)
        )
        [result] = self.ess.register(app, [req])
        status, key_id, current = self.model.register(app, name, queue, trigger, want, flt, NUMERIC)
        assert (result.status, result.key_id, result.current) == (status, key_id, current)
        after = self.model.subs.get(key_id, {}).get(app)
        if before is not None and after is not None and after.filter != old_filter:
            self.vanished[(app, key_id)] += skipped
        if result.status is Status.OK and flt is not None and flt.numeric:
            self.value_filtered.add((app, key_id))
        if current is not None:
            self.view[(app, key_id)] = current

    @rule(app=apps, name=names)
    def deregister(self, app: str, name: str) -> None:
        [result] = self.ess.deregister(app, [name])
        assert (result.status, result.key_id) == self.model.deregister(app, name)
        self._forget(app=app, key=result.key_id)

    @rule(app=apps, room=rooms)
    def drain(self, app: str, room: int) -> None:
        got = self.drain_and_compare(app, room)
        event(f"drained {min(len(got), 2)}+ events")
        if len({e.queue for e in got if isinstance(e, DataUpdated)}) > 1:
            event("drained from several queues")
        if any(c.evicted for c in self.ess.drop_counts(app).values()):
            event("app had evictions")
        if any(e.writes > 1 for e in got if isinstance(e, DataUpdated)):
            event("an event stood for several writes")
        if any(w > 1 for (a, _), w in self.dropped.writes.items() if a == app):
            event("a dropped event stood for several writes")

    def drain_and_compare(self, app: str, room: int) -> list[Event]:
        if app not in self.model.apps:
            return []
        got = self.ess.drain(app, room)
        assert _normalise(got) == self.model.drain(app, room)
        for e in got:
            if isinstance(e, DataUpdated):
                self.delivered[(app, e.key)] = e.seq
                self.delivered_writes[(app, e.key)] += e.writes
                if e.data is not None:
                    self.view[(app, e.key)] = e.data
        return got

    @rule(app=apps)
    def remove_app(self, app: str) -> None:
        """The app's stream ends (a crash): everything of it goes."""
        self.model.remove_app(app)
        self.ess.remove_app(app)
        self._forget(app=app)

    @invariant()
    def agree(self) -> None:
        self.store.check()
        self.ess.check()
        assert self.ess.budget_free == self.model.free()
        assert sorted(self.ess.apps()) == sorted(self.model.apps)
        assert self.ess.watched_keys() == sorted(self.model.subs)
        for app in APPS:
            assert self.ess.pending(app) == self.model.pending(app)
            real = {
                k: (c.evicted, c.lost, c.discarded) for k, c in self.ess.drop_counts(app).items()
            }
            assert real == self.model.drop_counts(app)
            stats = self.ess.app_stats(app, 0)
            assert (
                None
                if stats is None
                else [
                    (q.depth, q.high_water, q.delivered, q.evicted, q.lost, q.discarded)
                    for q in stats.queues
                ]
            ) == self.model.queue_stats(app)
            real_subs = sorted(
                (s.key, s.queue, s.trigger.value, s.filter) for s in self.ess.subscriptions(app)
            )
            model_subs = sorted(
                (sub.name, sub.queue, sub.trigger.value, sub.filter)
                for subs in self.model.subs.values()
                for a, sub in subs.items()
                if a == app
            )
            assert real_subs == model_subs
        for name, key in self.model.keys.items():
            entry = self.store.get(name)
            assert (entry.key_id, entry.data, entry.version) == (key.id, key.value, key.version)
        assert self.ess.budget_free >= 0

    @invariant()
    def every_selected_write_is_in_an_event_or_held(self) -> None:
        """Independently of the model's rules: writes selected = writes of the events
        delivered, dropped and queued + writes held now."""
        for key_id, subs in self.model.subs.items():
            for app, sub in subs.items():
                pair = (app, key_id)
                queued = sum(
                    e[5]  # type: ignore[misc]
                    for q in self.model.apps[app].queues
                    for e in q
                    if e[0] == key_id
                )
                held = self.ess.held_writes(app, key_id)
                assert held == self.model.held_writes(app, key_id)
                accounted = (
                    self.delivered_writes[pair]
                    + self.dropped.writes[pair]
                    + queued
                    + held
                    + self.vanished[pair]
                )
                assert self.selected[pair] == accounted, (pair, sub.filter)
                if sub.filter is None:
                    assert held == 0

    @invariant()
    def an_app_that_got_the_last_event_knows_the_latest_value(self) -> None:
        """Follows from the rules, independently of how the model implements them."""
        values = {k.id: k.value for k in self.model.keys.values()}
        for key_id, subs in self.model.subs.items():
            for app, sub in subs.items():
                if (app, key_id) in self.value_filtered or (
                    sub.filter is not None and self.model.held_writes(app, key_id)
                ):
                    continue  # a filter keeps back values by its rules (held or too close)
                seen = self.view.get((app, key_id))
                if self.delivered.get((app, key_id)) == sub.seq and seen is not None:
                    assert seen == values[key_id], (app, key_id)


CoreMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_core_agrees_with_reference_model = CoreMachine.TestCase
