"""Each key's demand (watched, shortest interval), derived by the ESS, against a plain model.

A Hypothesis state machine registers, re-registers with other filters,
deregisters, removes apps and keys, and takes changes at random; after every
step the ESS's demand equals the model's, and a take returns exactly the keys
whose demand differs from the last take's.
"""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from vehicle_middleware.ess import (
    UNWATCHED,
    EventSubSystem,
    Filter,
    KeyDemand,
    Status,
    SubscriptionRequest,
)
from vehicle_middleware.vstore import VStore

NAMES = ["Vehicle.A", "Vehicle.B", "Vehicle.C"]
APPS = ["app1", "app2", "app3"]
MS = 1_000_000

filters = st.sampled_from(
    [None, Filter(), Filter(min_interval_ns=10 * MS), Filter(min_interval_ns=50 * MS),
     Filter(min_interval_ns=50 * MS, threshold=1.0), Filter(threshold=2.0)]
)  # fmt: skip


def _interval(f: Filter | None) -> int:
    return f.min_interval_ns if f is not None else 0


class DemandModel:
    """(app, key name) -> filter, and the demand that follows from it, by brute force."""

    def __init__(self) -> None:
        self.subs: dict[tuple[str, str], Filter | None] = {}

    def demand(self, name: str) -> KeyDemand:
        intervals = [_interval(f) for (_, k), f in self.subs.items() if k == name]
        if not intervals:
            return UNWATCHED
        asked = [i for i in intervals if i]
        return KeyDemand(True, 0 if 0 in intervals else min(intervals), min(asked, default=0))


def _system() -> tuple[VStore, EventSubSystem]:
    ticks = itertools.count(1)
    store = VStore(clock=lambda: next(ticks))
    ess = EventSubSystem(store, numbers=_EveryKeyNumeric())
    store.set_listener(ess)
    return store, ess


class _EveryKeyNumeric:
    """Every key takes threshold and range filters (what a key's values are does
    not change its demand)."""

    def number(self, data: bytes) -> float | None:
        return None

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        return None


class DemandMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store, self.ess = _system()
        for name in NAMES:
            self.store.add_key(name)
        self.model = DemandModel()
        self.published: dict[int, KeyDemand] = {}
        """Key id -> demand as of the last take, watched keys only."""

    def _id(self, name: str) -> int:
        key = self.store.id_of(name)
        assert key is not None
        return key

    @rule(app=st.sampled_from(APPS), name=st.sampled_from(NAMES), f=filters)
    def register(self, app: str, name: str, f: Filter | None) -> None:
        if not self.ess.has_stream(app):
            self.ess.open_stream(app)
        [result] = self.ess.register(app, [SubscriptionRequest(name, filter=f)])
        assert result.status is Status.OK
        self.model.subs[(app, name)] = f

    @rule(app=st.sampled_from(APPS), name=st.sampled_from(NAMES))
    def deregister(self, app: str, name: str) -> None:
        self.ess.deregister(app, [name])
        self.model.subs.pop((app, name), None)

    @rule(app=st.sampled_from(APPS))
    def remove_app(self, app: str) -> None:
        self.ess.remove_app(app)
        for pair in [p for p in self.model.subs if p[0] == app]:
            del self.model.subs[pair]

    @rule(name=st.sampled_from(NAMES))
    def remove_and_add_key_again(self, name: str) -> None:
        self.store.remove_key(name)
        self.store.add_key(name)
        for pair in [p for p in self.model.subs if p[1] == name]:
            del self.model.subs[pair]

    @rule()
    def take_changes(self) -> None:
        changes = self.ess.demand.take_changes()
        now = {self._id(name): self.model.demand(name) for name in NAMES}
        expected = {
            key: now.get(key, UNWATCHED)
            for key in sorted(set(now) | set(self.published))
            if now.get(key, UNWATCHED) != self.published.get(key, UNWATCHED)
        }
        assert changes == expected
        self.published = {key: d for key, d in now.items() if d.watched}
        assert not self.ess.demand.take_changes(), "a second take returns nothing"

    @invariant()
    def demand_matches_the_model(self) -> None:
        for name in NAMES:
            assert self.ess.demand.demand(self._id(name)) == self.model.demand(name)
        self.ess.check()


DemandMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
test_demand_follows_the_subscriptions = DemandMachine.TestCase


def test_a_flip_that_returns_within_one_batch_yields_nothing() -> None:
    store, ess = _system()
    key = store.add_key("Vehicle.A")
    ess.open_stream("app")
    ess.register("app", [SubscriptionRequest("Vehicle.A")])
    assert ess.demand.take_changes() == {key: KeyDemand(True, 0)}
    ess.deregister("app", ["Vehicle.A"])
    ess.register("app", [SubscriptionRequest("Vehicle.A")])
    assert ess.demand.pending
    assert ess.demand.take_changes() == {}
    ess.check()


def test_the_shortest_interval_wins_and_no_interval_means_every_write() -> None:
    store, ess = _system()
    key = store.add_key("Vehicle.A")
    for app in ("slow", "fast", "all"):
        ess.open_stream(app)
    ess.register(
        "slow", [SubscriptionRequest("Vehicle.A", filter=Filter(min_interval_ns=100 * MS))]
    )
    ess.register("fast", [SubscriptionRequest("Vehicle.A", filter=Filter(min_interval_ns=20 * MS))])
    assert ess.demand.demand(key) == KeyDemand(True, 20 * MS, 20 * MS)
    ess.register("all", [SubscriptionRequest("Vehicle.A", filter=Filter(threshold=1.0))])
    assert ess.demand.demand(key) == KeyDemand(True, 0, 20 * MS)
    ess.remove_app("all")
    ess.remove_app("fast")
    assert ess.demand.take_changes() == {key: KeyDemand(True, 100 * MS, 100 * MS)}
    ess.remove_app("slow")
    assert ess.demand.take_changes() == {key: UNWATCHED}
    ess.check()


def test_re_registering_with_the_same_filter_marks_nothing() -> None:
    store, ess = _system()
    store.add_key("Vehicle.A")
    ess.open_stream("app")
    request = SubscriptionRequest("Vehicle.A", filter=Filter(min_interval_ns=10 * MS))
    ess.register("app", [request])
    ess.demand.take_changes()
    ess.register("app", [request])
    assert not ess.demand.pending
