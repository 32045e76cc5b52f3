"""The ESS rules, one test per rule, on a real V-Store."""

from __future__ import annotations

import itertools

import pytest
from vehicle_middleware.ess import (
    BudgetExceededError,
    DataRow,
    DataUpdated,
    DropCounts,
    DropReason,
    EventSubSystem,
    InvalidQueueConfigError,
    KeyAdded,
    KeyRemoved,
    NotReadingEventsError,
    QueueConfig,
    ResyncRequired,
    Status,
    SubscriptionRequest,
    Trigger,
    data_rows,
)
from vehicle_middleware.ess.budget import EventBudget
from vehicle_middleware.ess.events import as_data_updated
from vehicle_middleware.ess.queues import EventQueue
from vehicle_middleware.vstore import VStore

SPEED = "Vehicle.Speed"
TEMP = "Vehicle.Cabin.HVAC.AmbientAirTemperature"
WINDOW = "Vehicle.Body.Windows.Row2.Right.Level"


class CountingSource:
    """The real V-Store as the ESS's key source, counting how often the ESS reads a
    value (a wrapper, not a subclass: the compiled V-Store cannot be subclassed)."""

    def __init__(self, store: VStore) -> None:
        self.store = store
        self.peeks = 0

    def id_of(self, name: str) -> int | None:
        return self.store.id_of(name)

    def peek(self, key_id: int) -> tuple[bytes | None, int]:
        self.peeks += 1
        return self.store.peek(key_id)

    def version_of(self, key_id: int) -> int:
        return self.store.version_of(key_id)

    def id_bound(self) -> int:
        return self.store.id_bound()


class Drops:
    """An observer that records every drop it is told of."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, int, DropReason]] = []

    def event_dropped(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        self.seen.append((app, key, queue, seq, reason))


class System:
    def __init__(self, **ess_kw: object) -> None:
        ticks = itertools.count(100)
        self.store = VStore(clock=lambda: next(ticks))
        self.source = CountingSource(self.store)
        self.drops = Drops()
        self.ess = EventSubSystem(self.source, observer=self.drops, **ess_kw)  # type: ignore[arg-type]
        self.store.set_listener(self.ess)
        self.speed = self.store.add_key(SPEED)
        self.temp = self.store.add_key(TEMP)
        self.window = self.store.add_key(WINDOW)

    def app(
        self,
        name: str,
        *subs: SubscriptionRequest,
        queues: tuple[QueueConfig, ...] = (),
    ) -> None:
        self.ess.open_stream(name, queues)
        if subs:
            assert all(r.status is Status.OK for r in self.ess.register(name, list(subs)))
        self.ess.drain(name, 10_000)  # forget the KeyAdded of the set-up
        self.check()

    def data(self, app: str, n: int = 1000) -> list[DataUpdated]:
        events = self.ess.drain(app, n)
        self.check()
        return [e for e in events if isinstance(e, DataUpdated)]

    def check(self) -> None:
        self.store.check()
        self.ess.check()


def sub(
    key: str, queue: int = 0, trigger: Trigger = Trigger.ON_CHANGE, want: bool = False
) -> SubscriptionRequest:
    return SubscriptionRequest(key, queue, trigger, want)


# -- watched bitmap -------------------------------------------------------------


def test_an_update_of_an_unwatched_key_queues_nothing_and_a_watched_one_its_value() -> None:
    s = System()
    s.app("dash", sub(SPEED))
    s.source.peeks = 0
    s.store.set(TEMP, b"21")
    assert not s.ess.is_watched(s.temp)
    assert s.ess.pending("dash") == 0
    value = b"50"
    s.store.set(SPEED, value, time_ns=7)
    [event] = s.data("dash")
    assert (event.key, event.time_ns) == (s.speed, 7)
    assert event.data is value  # the stored bytes, handed on with the update: no copy
    assert s.source.peeks == 0  # and no second look-up in the store


def test_bitmap_bit_is_set_iff_some_subscription_exists() -> None:
    s = System()
    s.app("a", sub(SPEED))
    s.app("b", sub(SPEED), sub(TEMP))
    assert s.ess.watched_keys() == [s.speed, s.temp]
    s.ess.deregister("b", [SPEED])
    assert s.ess.watched_keys() == [s.speed, s.temp]
    s.ess.deregister("a", [SPEED])
    assert s.ess.watched_keys() == [s.temp]
    s.ess.remove_app("b")
    assert s.ess.watched_keys() == []
    s.check()


def test_bitmap_grows_with_the_id_space() -> None:
    s = System()
    s.app("a")
    names = [f"Vehicle.Extra{i}" for i in range(500)]
    ids = s.store.add_keys(names)
    s.ess.register("a", [sub(names[-1])])
    assert s.ess.is_watched(ids[-1])
    s.store.set(names[-1], b"x")
    assert [e.key for e in s.data("a")] == [ids[-1]]


# -- subscriptions ---------------------------------------------------------------


def test_register_before_opening_the_stream_is_refused() -> None:
    s = System()
    with pytest.raises(NotReadingEventsError, match="open it with GetEvents"):
        s.ess.register("late", [sub(SPEED)])
    assert s.ess.watched_keys() == []


def test_register_reports_per_key_results_in_request_order() -> None:
    s = System()
    s.app("a")
    s.store.set(SPEED, b"88")
    results = s.ess.register(
        "a",
        [
            sub(SPEED, want=True),
            sub("Vehicle.Missing"),
            sub("not a key"),
            sub(TEMP, queue=3),
            sub(TEMP, want=True),
        ],
    )
    assert [(r.key, r.status) for r in results] == [
        (SPEED, Status.OK),
        ("Vehicle.Missing", Status.NOT_FOUND),
        ("not a key", Status.INVALID_ARGUMENT),
        (TEMP, Status.INVALID_ARGUMENT),
        (TEMP, Status.OK),
    ]
    assert results[0].current == b"88"
    assert results[0].key_id == s.speed
    assert results[4].current is None  # never written
    assert "does not exist" in results[1].detail
    assert "queues are 0, 1 and 2" in results[3].detail
    assert [i.key for i in s.ess.subscriptions("a")] == [SPEED, TEMP]


def test_registering_again_replaces_the_subscription_and_keeps_its_seq() -> None:
    s = System()
    s.app("a", sub(SPEED, queue=0, trigger=Trigger.ON_CHANGE))
    s.store.set(SPEED, b"1")
    s.ess.register("a", [sub(SPEED, queue=0, trigger=Trigger.ON_UPDATE)])
    s.store.set(SPEED, b"1")
    events = s.data("a")
    assert [(e.seq, e.queue, e.data) for e in events] == [(1, 0, b"1"), (2, 0, None)]
    [info] = s.ess.subscriptions("a")
    assert (info.queue, info.trigger) == (0, Trigger.ON_UPDATE)


def test_moving_a_subscription_to_another_queue_discards_its_queued_events_and_owes_the_value() -> (
    None
):
    s = System()
    s.app("a", sub(SPEED, queue=0, trigger=Trigger.ON_UPDATE))
    s.store.set(SPEED, b"A")
    s.store.set(SPEED, b"B")
    s.ess.register("a", [sub(SPEED, queue=2, trigger=Trigger.ON_UPDATE)])
    assert s.ess.pending("a") == 0
    assert [d[3:] for d in s.drops.seen] == [(1, DropReason.DISCARDED), (2, DropReason.DISCARDED)]
    s.store.set(SPEED, b"B")  # unchanged, but the app never received B
    [event] = s.data("a")
    assert (event.seq, event.queue, event.data) == (3, 2, b"B")


def test_deregistering_twice_is_a_no_op() -> None:
    s = System()
    s.app("a", sub(SPEED))
    first = s.ess.deregister("a", [SPEED])
    second = s.ess.deregister("a", [SPEED])
    assert [r.status for r in first + second] == [Status.OK, Status.OK]
    assert s.ess.subscriptions("a") == []
    assert [r.status for r in s.ess.deregister("a", ["Vehicle.Missing", "bad key"])] == [
        Status.NOT_FOUND,
        Status.INVALID_ARGUMENT,
    ]
    s.check()


def test_deregister_discards_the_undelivered_events_of_that_key() -> None:
    s = System()
    s.app("a", sub(SPEED), sub(TEMP))
    s.store.set(SPEED, b"1")
    s.store.set(TEMP, b"20")
    s.ess.deregister("a", [SPEED])
    assert [e.key for e in s.data("a")] == [s.temp]
    assert s.drops.seen == [("a", s.speed, 0, 1, DropReason.DISCARDED)]


def test_a_read_policy_denies_per_key_and_filters_lifecycle_events() -> None:
    class CabinOnly:
        def may_read(self, app: str, key: str) -> bool:
            return key.startswith("Vehicle.Cabin.")

    s = System(read_policy=CabinOnly())
    s.app("a")
    results = s.ess.register("a", [sub(SPEED), sub(TEMP)])
    assert [r.status for r in results] == [Status.PERMISSION_DENIED, Status.OK]
    assert "may not read" in results[0].detail
    s.store.add_key("Vehicle.Cabin.Light")
    s.store.add_key("Vehicle.Chassis.Axle")
    assert [e for e in s.ess.drain("a", 10) if isinstance(e, KeyAdded)] == [
        KeyAdded(s.store.id_of("Vehicle.Cabin.Light") or 0, "Vehicle.Cabin.Light")
    ]


# -- triggers, data and seq ------------------------------------------------------


def test_on_change_fires_only_when_the_bytes_change() -> None:
    s = System()
    s.app("a", sub(TEMP, trigger=Trigger.ON_CHANGE))
    for v in [b"20", b"20", b"21", b"21"]:
        s.store.set(TEMP, v)
    assert [(e.seq, e.data) for e in s.data("a")] == [(1, b"20"), (2, b"21")]


def test_on_update_fires_on_every_write_with_data_only_when_changed() -> None:
    s = System()
    s.app("a", sub(TEMP, trigger=Trigger.ON_UPDATE))
    for v in [b"20", b"20", b"21", b"21"]:
        s.store.set(TEMP, v)
    assert [(e.seq, e.data) for e in s.data("a")] == [
        (1, b"20"),
        (2, None),
        (3, b"21"),
        (4, None),
    ]


def test_with_value_an_on_update_event_of_an_unchanged_write_carries_the_stored_value() -> None:
    """A consumer that sends a value with every update (a KUKSA subscription) asks
    for it: the stored object itself, no copy; ON_CHANGE stays silent on an
    unchanged write; registering again without it drops it."""
    s = System()
    s.app(
        "a",
        SubscriptionRequest(TEMP, 0, Trigger.ON_UPDATE, with_value=True),
        SubscriptionRequest(SPEED, 0, Trigger.ON_CHANGE, with_value=True),
    )
    for v in [b"20", b"20", b"21"]:
        s.store.set(TEMP, v)
        s.store.set(SPEED, v)
    stored = s.store.get(TEMP).data
    events = s.data("a")
    assert [(e.key, e.seq, e.data) for e in events] == [
        (s.temp, 1, b"20"),
        (s.speed, 1, b"20"),
        (s.temp, 2, b"20"),  # unchanged: the value all the same
        (s.temp, 3, b"21"),
        (s.speed, 2, b"21"),
    ]
    assert events[3].data is stored
    s.ess.register("a", [SubscriptionRequest(TEMP, 0, Trigger.ON_UPDATE)])
    s.store.set(TEMP, b"21")
    assert [(e.seq, e.data) for e in s.data("a")] == [(4, None)]
    s.ess.register("a", [SubscriptionRequest(TEMP, 0, Trigger.ON_UPDATE, with_value=True)])
    s.store.set(TEMP, b"21")
    assert [(e.seq, e.data) for e in s.data("a")] == [(5, b"21")]


def test_event_time_is_the_write_time_in_the_store() -> None:
    s = System()
    s.app("a", sub(SPEED))
    s.store.set(SPEED, b"1", time_ns=123_456)
    s.store.set(SPEED, b"2")
    e1, e2 = s.data("a")
    assert e1.time_ns == 123_456
    assert e2.time_ns == s.store.get(SPEED).time_ns


def test_subscribers_share_the_value_object_and_get_their_own_seq() -> None:
    s = System()
    s.app("a", sub(SPEED))
    s.store.set(SPEED, b"1")
    s.app("b", sub(SPEED))
    value = b"2" * 10
    s.store.set(SPEED, value)
    [*_, last_a] = s.data("a")
    [only_b] = s.data("b")
    assert (last_a.seq, only_b.seq) == (2, 1)
    assert last_a.data is value
    assert only_b.data is value


def test_seq_wraps_from_the_uint32_maximum_to_one() -> None:
    s = System()
    s.app("a", sub(SPEED))
    s.ess._table.get("a", s.speed).seq = 2**32 - 2  # type: ignore[union-attr]
    for v in [b"1", b"2", b"3"]:
        s.store.set(SPEED, v)
    assert [e.seq for e in s.data("a")] == [2**32 - 1, 1, 2]


# -- queues and the drop rule ----------------------------------------------------


def small(queue: int = 0, lo: int = 0, hi: int = 3) -> QueueConfig:
    return QueueConfig(queue, lo, hi)


def test_full_queue_drops_oldest_event_of_same_key() -> None:
    s = System()
    s.app("slow", sub(SPEED), sub(TEMP), queues=(small(hi=3),))
    s.store.set(SPEED, b"1")
    s.store.set(TEMP, b"20")
    s.store.set(SPEED, b"2")
    s.store.set(SPEED, b"3")  # full: evicts SPEED seq 1
    events = s.data("slow")
    assert [(e.key, e.seq, e.data) for e in events] == [
        (s.temp, 1, b"20"),
        (s.speed, 2, b"2"),
        (s.speed, 3, b"3"),
    ]
    assert s.drops.seen == [("slow", s.speed, 0, 1, DropReason.EVICTED)]
    assert s.ess.drop_counts("slow")[(s.speed, 0)].evicted == 1


def test_the_drop_rule_holds_when_pressure_comes_after_events_were_queued_without_it() -> None:
    """A queue its app keeps up with keeps no per-key index; the first full push
    builds it from what is queued, and draining the queue empty drops it again."""
    drops: list[tuple[int, int, DropReason]] = []
    q = EventQueue(
        0,
        min_length=0,
        max_length=4,
        budget=EventBudget(100),
        on_drop=lambda key, seq, _, why, _w: drops.append((key, seq, why)),
    )

    def drain(count: int) -> list[tuple[int, int, bytes | None]]:
        out: list[DataRow] = []
        q.pop_into(out, count)
        q.check()
        return [(key, seq, data) for key, seq, _, data, _ in out]

    for round_ in range(2):  # the second time round, after the queue emptied
        for key, seq in ((1, 1), (2, 1), (1, 2), (3, 1)):
            assert q.push(key, seq, 0, bytes([seq]))
        assert q.tracked_keys() == set()  # not full yet: no index
        assert drain(1) == [(1, 1, b"\x01")]
        assert q.push(2, 2, 0, b"\x02")  # fills the queue: 2, 1, 3, 2
        assert q.push(1, 3, 0, b"\x03")  # full: evicts key 1's seq 2
        assert not q.push(4, 1, 0, b"\x04")  # full, no event of key 4: lost
        assert q.push(2, 3, 0, None)  # evicts key 2's seq 1 (seq 2 carries a value)
        assert q.tracked_keys() == {1, 2, 3}
        q.check()
        assert drain(4) == [(3, 1, b"\x01"), (2, 2, b"\x02"), (1, 3, b"\x03"), (2, 3, None)]
        assert q.tracked_keys() == set()  # empty: the index went with the pressure
        assert drops[3 * round_ :] == [
            (1, 2, DropReason.EVICTED),
            (4, 1, DropReason.LOST),
            (2, 1, DropReason.EVICTED),
        ]


def test_purge_takes_a_keys_events_from_a_calm_queue_and_from_a_pressed_one() -> None:
    budget = EventBudget(100)
    q = EventQueue(0, min_length=0, max_length=3, budget=budget, on_drop=lambda *_: None)
    for key, seq in ((1, 1), (2, 1), (1, 2)):
        q.push(key, seq, 0, b"v")
    assert [(e.key, e.seq) for e in q.purge(1)] == [(1, 1), (1, 2)]  # calm
    assert (len(q), q.discarded, q.oldest_time_ns()) == (1, 2, 0)
    q.check()
    for key, seq in ((3, 1), (2, 2), (3, 2)):  # the last meets a full queue: evicts 3/1
        q.push(key, seq, seq, b"v")
    assert q.tracked_keys() == {2, 3}  # pressed
    assert [(e.key, e.seq) for e in q.purge(2)] == [(2, 1), (2, 2)]
    assert [(e.key, e.seq) for e in q.purge(3)] == [(3, 2)]
    assert (len(q), q.tracked_keys(), budget.free) == (0, set(), 100)  # calm again
    q.check()
    q.push(4, 1, 0, b"v")
    out: list[DataRow] = []
    q.pop_into(out, 1)
    assert out == [(4, 1, 0, b"v", 0)]


def test_full_queue_without_an_event_of_the_key_loses_the_new_event() -> None:
    s = System()
    s.app("slow", sub(SPEED), sub(TEMP), queues=(small(hi=2),))
    s.store.set(SPEED, b"1")
    s.store.set(SPEED, b"2")
    s.store.set(TEMP, b"20")  # lost: no TEMP event to replace
    s.store.set(TEMP, b"21")  # lost too, but seq moves on
    assert [(e.key, e.seq) for e in s.data("slow")] == [(s.speed, 1), (s.speed, 2)]
    assert [d[3:] for d in s.drops.seen] == [(1, DropReason.LOST), (2, DropReason.LOST)]
    s.store.set(TEMP, b"22")
    [event] = s.data("slow")
    assert (event.seq, event.data) == (3, b"22")  # the gap 1..2 shows the loss


def test_data_of_an_evicted_event_moves_into_the_surviving_event() -> None:
    s = System()
    s.app("slow", sub(SPEED), sub(TEMP, trigger=Trigger.ON_UPDATE), queues=(small(hi=2),))
    s.store.set(TEMP, b"20")  # seq 1, data
    s.store.set(SPEED, b"1")
    s.store.set(TEMP, b"20")  # seq 2, unchanged: evicts seq 1, inherits its data
    events = s.data("slow")
    assert [(e.key, e.seq, e.data) for e in events] == [(s.speed, 1, b"1"), (s.temp, 2, b"20")]


def test_evicted_data_moves_into_the_next_event_of_the_key_when_that_has_none() -> None:
    s = System()
    s.app("slow", sub(TEMP, trigger=Trigger.ON_UPDATE), queues=(small(hi=2),))
    s.store.set(TEMP, b"20")  # seq 1, data
    s.store.set(TEMP, b"20")  # seq 2, no data
    s.store.set(TEMP, b"21")  # seq 3: evicts seq 1; seq 2 now carries b"20"
    assert [(e.seq, e.data) for e in s.data("slow")] == [(2, b"20"), (3, b"21")]


def test_after_a_lost_value_the_next_event_of_the_key_carries_the_value() -> None:
    s = System()
    s.app("slow", sub(SPEED), sub(TEMP, trigger=Trigger.ON_UPDATE), queues=(small(hi=1),))
    s.store.set(SPEED, b"1")  # fills the queue
    s.store.set(TEMP, b"20")  # lost, with data
    s.data("slow")
    s.store.set(TEMP, b"20")  # unchanged, but the app never saw b"20"
    [event] = s.data("slow")
    assert (event.seq, event.data) == (2, b"20")
    s.store.set(TEMP, b"20")
    [event] = s.data("slow")
    assert (event.seq, event.data) == (3, None)


def test_queue_lengths_are_capped_and_validated() -> None:
    s = System()
    q0, q1, q2 = s.ess.open_stream("a", [QueueConfig(1, 5, 1000), QueueConfig(2, 300, 400)])
    assert (q0.min_length, q0.max_length) == (10, 100)  # defaults
    assert (q1.min_length, q1.max_length) == (5, 200)
    assert (q2.min_length, q2.max_length) == (200, 200)
    for bad, field in [
        ([QueueConfig(3, 1, 2)], "queues[0].queue"),
        ([QueueConfig(0, 5, 4)], "queues[0].min_length"),
        ([QueueConfig(0, 0, 0)], "queues[0].max_length"),
        ([QueueConfig(1), QueueConfig(1)], "queues[1].queue"),
        ([QueueConfig(0, 1.5, 3)], "queues[0].min_length"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidQueueConfigError) as err:
            s.ess.open_stream("b", bad)
        assert err.value.field == field
        assert not s.ess.has_stream("b")
    s.check()


def test_min_lengths_are_reserved_against_the_global_budget() -> None:
    s = System(event_budget=50)
    s.ess.open_stream("a", [small(0, 10, 20), small(1, 10, 20), small(2, 10, 20)])
    assert s.ess.budget_free == 20
    with pytest.raises(BudgetExceededError, match="20 of the global event budget of 50"):
        s.ess.open_stream("b", [small(0, 21, 30)])
    assert not s.ess.has_stream("b")
    assert s.ess.budget_free == 20
    s.ess.remove_app("a")
    assert s.ess.budget_free == 50


def test_above_min_length_a_queue_grows_only_while_the_shared_budget_has_room() -> None:
    s = System(event_budget=4)
    s.app("a", sub(SPEED), sub(TEMP), queues=(small(0, 1, 10), small(1, 0, 1), small(2, 0, 1)))
    s.app("b", sub(TEMP), queues=(small(0, 0, 10), small(1, 0, 1), small(2, 0, 1)))
    assert s.ess.budget_free == 3
    for v in [b"1", b"2", b"3"]:
        s.store.set(SPEED, v)  # a: one reserved + two shared
    assert s.ess.budget_free == 1
    s.store.set(TEMP, b"20")  # a: shared unit 3; b: budget exhausted -> lost
    assert s.ess.budget_free == 0
    assert s.ess.drop_counts("b")[(s.temp, 0)].lost == 1
    assert len(s.data("a")) == 4
    assert s.ess.budget_free == 3


def test_queues_growing_above_their_minimums_never_take_the_reserve_held_for_others() -> None:
    """The middleware's fair shares: 4 units held back for minimums (two apps' shares of
    2), 2 shared. App a fills the shared part and more; b still reserves its share, and
    a stream that replaces a's takes its reservation from the reserve again."""
    s = System(event_budget=6, reserve=4)
    queues = (small(0, 2, 10), small(1, 0, 1), small(2, 0, 1))
    s.app("a", sub(SPEED), queues=queues)
    assert (s.ess.budget_free, s.ess.budget_used) == (4, 2)
    for v in [b"1", b"2", b"3", b"4", b"5"]:
        s.store.set(SPEED, v)  # a: two reserved + two shared, then full: the drop rule
    assert (s.ess.budget_free, s.ess.budget_used) == (2, 4)
    assert s.ess.drop_counts("a")[(s.speed, 0)].evicted == 1
    s.app("b", sub(TEMP), queues=queues)  # the reserve's other share: admitted
    assert (s.ess.budget_free, s.ess.budget_used) == (0, 6)
    with pytest.raises(BudgetExceededError, match="0 of the global event budget of 6"):
        s.ess.open_stream("c", queues)
    s.ess.open_stream("a", queues)  # replaces a's: its events discarded, its share again
    assert (s.ess.budget_free, s.ess.budget_used) == (2, 4)
    s.check()
    s.ess.remove_app("a")
    s.ess.remove_app("b")
    assert (s.ess.budget_free, s.ess.budget_used) == (6, 0)
    s.check()


def test_a_reserve_beyond_the_budget_is_refused() -> None:
    with pytest.raises(ValueError, match=r"the reserve must be in 0\.\.10"):
        System(event_budget=10, reserve=11)


def test_reopening_the_stream_keeps_subscriptions_and_discards_undelivered_events() -> None:
    s = System()
    s.app("a", sub(SPEED, trigger=Trigger.ON_UPDATE))
    s.store.set(SPEED, b"1")
    s.ess.open_stream("a", [QueueConfig(0, 1, 5)])
    assert s.ess.pending("a") == 0
    assert s.drops.seen == [("a", s.speed, 0, 1, DropReason.DISCARDED)]
    s.store.set(SPEED, b"1")  # unchanged: still carries the value the app never got
    [event] = s.data("a")
    assert (event.seq, event.data) == (2, b"1")
    s.check()


def test_opening_the_stream_fresh_starts_the_app_anew_without_subscriptions_or_seq() -> None:
    s = System(event_budget=50)
    s.app("a", sub(SPEED, trigger=Trigger.ON_UPDATE), queues=(small(0, 10, 20),))
    s.store.set(SPEED, b"1")
    s.store.set(SPEED, b"2")
    s.ess.open_stream("a", [QueueConfig(0, 5, 10)], fresh=True)
    s.check()
    assert s.ess.subscriptions("a") == []
    assert not s.ess.is_watched(s.speed)
    assert s.ess.pending("a") == 0
    assert s.ess.budget_free == 50 - 5 - 2 * 10  # queues 1 and 2 keep their default minimum
    assert [d[-1] for d in s.drops.seen] == [DropReason.DISCARDED] * 2  # its two queued
    s.ess.register("a", [sub(SPEED, trigger=Trigger.ON_UPDATE)])
    s.store.set(SPEED, b"3")
    [event] = s.data("a")
    assert (event.seq, event.data) == (1, b"3")  # counted from the new start
    s.check()


def test_drop_counts_of_a_removed_key_do_not_follow_its_recycled_id() -> None:
    s = System()
    s.app("a", sub(WINDOW), queues=(small(hi=1),))
    s.store.set(WINDOW, b"1")
    s.store.set(WINDOW, b"2")  # evicts seq 1
    assert s.ess.drop_counts("a") == {(s.window, 0): DropCounts(evicted=1)}
    s.store.remove_key(WINDOW)
    assert s.store.add_key("Vehicle.Other") == s.window
    assert s.ess.drop_counts("a") == {}
    assert s.ess.dropped("a") == 2  # the running total still counts them


def test_overflowed_counts_evictions_and_losses_not_discards() -> None:
    s = System()
    s.app("a", sub(WINDOW), queues=(small(hi=1),))
    s.store.set(WINDOW, b"1")
    s.store.set(WINDOW, b"2")  # evicts seq 1: the reader did not keep up
    assert s.ess.overflowed("a") == 1
    s.ess.deregister("a", [WINDOW])  # discards seq 2: the app's own doing
    s.ess.check()
    assert s.ess.dropped("a") == 2
    assert s.ess.overflowed("a") == 1
    assert s.ess.overflowed("nobody") == 0


def test_an_ess_attached_after_keys_exist_treats_them_as_unwatched() -> None:
    store = VStore()
    ess = EventSubSystem(store)
    late = store.add_key("Vehicle.Late")  # before the ESS listens
    store.set_listener(ess)
    store.set(late, b"x")  # must not fail
    ess.open_stream("a")
    assert ess.register("a", [sub("Vehicle.Late")])[0].status is Status.OK
    store.set(late, b"y")
    assert [e.data for e in ess.drain("a", 10) if isinstance(e, DataUpdated)] == [b"y"]
    ess.check()


# -- lifecycle events ------------------------------------------------------------


def test_key_added_and_removed_go_to_every_app_with_a_stream() -> None:
    s = System()
    s.app("a")
    s.app("b")
    new = s.store.add_key("Vehicle.New")
    s.store.remove_key("Vehicle.New")
    for app in ("a", "b"):
        assert s.ess.drain(app, 10) == [
            KeyAdded(new, "Vehicle.New"),
            KeyRemoved(new, "Vehicle.New"),
        ]


def test_removing_a_key_ends_its_subscriptions_and_its_recycled_id_carries_no_old_events() -> None:
    s = System()
    s.app("a", sub(WINDOW))
    s.store.set(WINDOW, b"\x64")
    s.store.remove_key(WINDOW)
    assert s.ess.subscriptions("a") == []
    reused = s.store.add_key("Vehicle.Other")
    assert reused == s.window
    s.store.set(reused, b"x")
    assert not s.ess.is_watched(reused)
    assert s.ess.drain("a", 10) == [
        KeyRemoved(s.window, WINDOW),
        KeyAdded(reused, "Vehicle.Other"),
    ]
    assert s.drops.seen == [("a", s.window, 0, 1, DropReason.DISCARDED)]


def test_an_apps_subscription_count_follows_registers_deregisters_and_removals() -> None:
    """What the per-app limit counts, without listing the subscriptions."""
    s = System()
    assert s.ess.subscriptions_of("a") == 0
    s.app("a", sub(SPEED), sub(TEMP), sub(WINDOW))
    s.app("b", sub(SPEED))
    s.ess.register("a", [sub(SPEED, queue=1)])  # a re-registration is not a second one
    assert (s.ess.subscriptions_of("a"), s.ess.subscriptions_of("b")) == (3, 1)
    s.ess.deregister("a", [TEMP])
    s.store.remove_key(WINDOW)
    assert s.ess.subscriptions_of("a") == len(s.ess.subscriptions("a")) == 1
    s.ess.remove_app("a")
    assert (s.ess.subscriptions_of("a"), s.ess.subscriptions_of("b")) == (0, 1)


def test_lifecycle_overflow_flags_the_app_for_a_resync() -> None:
    s = System(lifecycle_capacity=2)
    s.app("a", sub(SPEED))
    s.store.set(SPEED, b"1")
    for i in range(5):
        s.store.add_key(f"Vehicle.New{i}")
    first = s.ess.drain("a", 3)
    assert first[0] == ResyncRequired(lost=5)
    assert isinstance(first[1], DataUpdated)
    s.store.add_key("Vehicle.After")
    assert s.ess.drain("a", 10) == [KeyAdded(s.store.id_of("Vehicle.After") or 0, "Vehicle.After")]


def test_lifecycle_events_are_never_evicted_by_data_back_pressure() -> None:
    s = System()
    s.app("slow", sub(SPEED), queues=(small(hi=1),))
    new = s.store.add_key("Vehicle.New")
    for v in [b"1", b"2", b"3"]:
        s.store.set(SPEED, v)
    events = s.ess.drain("slow", 10)
    assert events[0] == KeyAdded(new, "Vehicle.New")
    assert [e.seq for e in events[1:]] == [3]  # type: ignore[union-attr]


# -- drain order -----------------------------------------------------------------


def test_drain_takes_queue_0_before_1_before_2() -> None:
    s = System()
    s.app("a", sub(WINDOW, queue=2), sub(TEMP, queue=1), sub(SPEED, queue=0))
    s.store.set(WINDOW, b"w")
    s.store.set(TEMP, b"t")
    s.store.set(SPEED, b"s")
    assert [e.queue for e in s.data("a")] == [0, 1, 2]


def test_queue_2_is_not_starved_by_a_busy_queue_0() -> None:
    s = System(queue_weights=(4, 2, 1))
    big = QueueConfig(0, 0, 200)
    s.app(
        "a",
        sub(SPEED, 0),
        sub(TEMP, 1),
        sub(WINDOW, 2),
        queues=(big, small(1, 0, 50), small(2, 0, 50)),
    )
    for i in range(40):
        s.store.set(SPEED, b"%d" % i)
        s.store.set(TEMP, b"%d" % i)
        s.store.set(WINDOW, b"%d" % i)
    served = [0, 0, 0]
    for _ in range(7):  # 7 batches of one event each: a full credit cycle
        [e] = s.data("a", 1)
        served[e.queue] += 1
    assert served == [4, 2, 1]
    batch = s.data("a", 14)
    assert [sum(1 for e in batch if e.queue == q) for q in range(3)] == [8, 4, 2]
    assert [e.queue for e in batch] == sorted(e.queue for e in batch)


def test_an_idle_queue_gives_its_share_to_the_others() -> None:
    s = System()
    s.app("a", sub(TEMP, 2), queues=(small(0), small(1), small(2, 0, 100)))
    for i in range(50):
        s.store.set(TEMP, b"%d" % i)
    assert len(s.data("a", 50)) == 50


def test_drain_raw_hands_out_what_drain_does_with_each_data_event_a_plain_tuple() -> None:
    """The server's streams drain with drain_raw: the same events in the same order
    and the same batches, each data event the tuple of a DataUpdated's fields."""
    systems = System(), System()
    for s in systems:
        s.app("a", sub(WINDOW, 2), sub(TEMP, 1), sub(SPEED, 0, Trigger.ON_UPDATE))
        s.store.set(WINDOW, b"w")
        s.store.add_key("Vehicle.Later")
        s.store.set(TEMP, b"t")
        s.store.set(SPEED, b"s")
        s.store.set(SPEED, b"s")  # unchanged: no value
    typed, raw = systems
    drained: list[object] = []
    for _ in range(3):
        events = typed.ess.drain("a", 2)
        rows = raw.ess.drain_raw("a", 2)
        assert [as_data_updated(r) if type(r) is tuple else r for r in rows] == events
        assert [type(e) for e in events] == [
            DataUpdated if type(r) is tuple else type(r) for r in rows
        ]
        drained += rows
    later = raw.store.id_of("Vehicle.Later")
    assert drained == [
        KeyAdded(later or 0, "Vehicle.Later"),
        (raw.speed, 1, 102, b"s", 0),
        (raw.speed, 2, 103, None, 0),  # unchanged: no value
        (raw.temp, 1, 101, b"t", 1),
        (raw.window, 1, 100, b"w", 2),
    ]
    assert typed.ess.pending("a") == raw.ess.pending("a") == 0
    assert raw.ess.drain_raw("a", 10) == []
    with pytest.raises(NotReadingEventsError):
        raw.ess.drain_raw("ghost", 10)
    with pytest.raises(ValueError, match="max_events"):
        raw.ess.drain_raw("a", 0)


def test_data_rows_are_a_drains_data_events_in_order_and_the_batch_itself_when_all_data() -> None:
    s = System()
    s.app("a", sub(SPEED), sub(TEMP))
    s.store.set(SPEED, b"1")
    s.store.add_key("Vehicle.Later")
    s.store.set(TEMP, b"2")
    events = s.ess.drain_raw("a", 10)
    assert type(events[0]) is KeyAdded  # a drain hands out lifecycle events first
    assert data_rows(events) == [(s.speed, 1, 100, b"1", 0), (s.temp, 1, 101, b"2", 0)]
    s.store.set(SPEED, b"3")
    s.store.set(TEMP, b"4")
    raw = s.ess.drain_raw("a", 10)
    assert data_rows(raw) is raw
    s.store.set(SPEED, b"5")
    typed = s.ess.drain("a", 10)
    assert data_rows(typed) == [(s.speed, 3, 104, b"5", 0)]  # DataUpdated: as rows
    assert data_rows([]) == []
    s.store.remove_key("Vehicle.Later")
    assert data_rows(s.ess.drain_raw("a", 10)) == []


def test_drain_of_an_app_without_a_stream_is_refused() -> None:
    s = System()
    with pytest.raises(NotReadingEventsError):
        s.ess.drain("ghost", 10)
    s.app("a")
    with pytest.raises(ValueError, match="max_events"):
        s.ess.drain("a", 0)


# -- app removal -----------------------------------------------------------------


def test_removing_an_app_frees_everything_it_held() -> None:
    s = System(event_budget=100)
    free_before = s.ess.budget_free
    s.app("a", sub(SPEED), sub(TEMP, 1), queues=(small(0, 2, 10), small(1, 1, 10)))
    for v in [b"1", b"2", b"3", b"4"]:
        s.store.set(SPEED, v)
        s.store.set(TEMP, v)
    assert s.ess.budget_free < free_before
    assert s.ess.remove_app("a") is True
    assert s.ess.remove_app("a") is False
    assert s.ess.budget_free == free_before
    assert s.ess.watched_keys() == []
    assert s.ess.subscriptions("a") == []
    assert s.ess.pending("a") == 0
    assert not s.ess.has_stream("a")
    assert sum(1 for d in s.drops.seen if d[4] is DropReason.DISCARDED) == 8
    s.check()
    # A new stream of the same app starts from scratch: seq from 1.
    s.app("a", sub(SPEED))
    s.store.set(SPEED, b"9")
    assert [e.seq for e in s.data("a")] == [1]


def test_wake_is_called_when_an_app_goes_from_nothing_pending_to_something() -> None:
    s = System()
    calls: list[int] = []
    s.ess.open_stream("a", wake=lambda: calls.append(1))
    s.ess.register("a", [sub(SPEED)])
    s.store.set(SPEED, b"1")
    s.store.set(SPEED, b"2")
    assert len(calls) == 1
    s.ess.drain("a", 10)
    s.store.add_key("Vehicle.New")
    assert len(calls) == 2
