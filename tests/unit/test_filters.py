"""Filters in the ESS core, on a fake clock: each rule, seq, writes, and the drop rule.

The state machine (``test_state_machine.py``) drives filters at random against the
model; these are the rules one by one, as docs/design.md states them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from vehicle_middleware.ess import (
    ALLOW_ALL,
    DataUpdated,
    DropReason,
    EventSubSystem,
    Filter,
    InvalidFilterError,
    QueueConfig,
    Status,
    SubscriptionRequest,
    Trigger,
)
from vehicle_middleware.vstore import VStore

from tests.unit.model import number

MS = 1_000_000
KEY = "Vehicle.Speed"
TEXT = "Vehicle.Name"


class Numbers:
    """ASCII decimals are numbers; Vehicle.Speed is numeric by datatype, Vehicle.Name
    is a string by datatype."""

    def number(self, data: bytes) -> float | None:
        return number(data)

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        if name == KEY:
            return None
        if name == TEXT:
            return "its VSS datatype is string"
        if number(current) is None:
            return "it has no VSS datatype and its value is not a number"
        return None


class NoName:
    """A read policy: every key but Vehicle.Name."""

    def may_read(self, app: str, key: str) -> bool:
        return key != TEXT


class Drops:
    def __init__(self) -> None:
        self.seen: list[tuple[int, DropReason, int]] = []

    def event_dropped(
        self, app: str, key: int, queue: int, seq: int, reason: DropReason, writes: int = 1
    ) -> None:
        self.seen.append((seq, reason, writes))


class Car:
    """A store and an ESS on a fake clock, one app ``a`` with a stream."""

    def __init__(self, *, max_length: int = 100, read_policy: Any = ALLOW_ALL) -> None:
        self.now = 0
        self.store = VStore()
        self.drops = Drops()
        self.due: list[int] = []
        self.ess = EventSubSystem(
            self.store,
            numbers=Numbers(),
            clock=lambda: self.now,
            observer=self.drops,
            on_due=self.due.append,
            read_policy=read_policy,
        )
        self.store.set_listener(self.ess)
        for name in (KEY, TEXT, "Vehicle.Other"):
            self.store.add_key(name)
        self.ess.open_stream("a", [QueueConfig(0, 0, max_length)])

    def subscribe(self, flt: Filter | None, key: str = KEY, **kw: object) -> Status:
        [r] = self.ess.register("a", [SubscriptionRequest(key, filter=flt, **kw)])  # type: ignore[arg-type]
        self.ess.check()
        return r.status

    def write(self, *values: str, key: str = KEY) -> None:
        for v in values:
            self.store.set(key, v.encode())
        self.ess.check()

    def at(self, ms: float) -> int:
        """Move the clock to ``ms`` and send what is due; returns how many went out."""
        self.now = int(ms * MS)
        sent = self.ess.flush_due(self.now)
        self.ess.check()
        return sent

    def events(self) -> list[tuple[int, bytes | None, int]]:
        """(seq, value, writes) of the data events drained now."""
        return [
            (e.seq, e.data, e.writes)
            for e in self.ess.drain("a", 1000)
            if isinstance(e, DataUpdated)
        ]


def test_an_interval_sends_the_first_write_holds_the_rest_and_sends_the_latest_at_its_end() -> None:
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    assert car.ess.next_due() is None
    car.write("1")
    assert car.events() == [(1, b"1", 1)]
    car.at(10)
    car.write("2", "3")
    car.at(50)
    car.write("4")
    assert car.events() == []  # held: no seq taken
    assert car.ess.next_due() == 100 * MS
    assert car.due == [100 * MS]  # the transport was told once, when the hold began
    assert car.ess.held_writes("a", 1) == 3
    assert car.at(99.9) == 0
    assert car.at(100) == 1
    assert car.events() == [(2, b"4", 3)]  # the latest, standing for 3 writes, no seq gap
    assert car.ess.next_due() is None
    car.at(150)
    car.write("5")
    car.at(250)
    assert car.events() == [(3, b"5", 1)]  # held to the end of the interval, alone


def test_an_apps_queues_say_whether_they_took_an_event_of_several_writes() -> None:
    """What the journal's tap asks before it looks into a batch's rows."""
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1")
    car.at(10)
    assert car.ess.multi_write_pushes("a") == 0  # one write each so far
    car.write("2", "3")
    car.at(100)
    assert car.ess.multi_write_pushes("a") == 1
    assert car.ess.multi_write_pushes("nobody") == 0


def test_a_write_after_the_interval_goes_out_at_once_with_the_writes_held_before() -> None:
    """A late timer: the write that finds the interval over replaces the held one."""
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1")
    car.now = 10 * MS
    car.write("2")
    car.now = 150 * MS  # the timer did not run
    car.write("3")
    assert car.events() == [(1, b"1", 1), (2, b"3", 2)]
    assert car.at(200) == 0  # nothing held any more
    assert car.ess.next_due() is None


def test_a_threshold_passes_moves_of_at_least_it_from_the_last_event() -> None:
    car = Car()
    car.subscribe(Filter(threshold=5.0))
    car.write("10", "12", "14.9", "15", "11", "9.9")
    assert car.events() == [(1, b"10", 1), (2, b"15", 3), (3, b"9.9", 2)]
    assert car.ess.held_writes("a", 1) == 0


def test_a_value_that_is_not_a_number_passes_and_becomes_the_reference() -> None:
    car = Car()
    car.write("3", key="Vehicle.Other")  # numeric by its value
    assert car.subscribe(Filter(threshold=5.0), key="Vehicle.Other") is Status.OK
    car.write("4", "failed", "4.5", "5", key="Vehicle.Other")
    # The first value passes, a non-number passes, and the number after it is first again.
    assert car.events() == [(1, b"4", 1), (2, b"failed", 1), (3, b"4.5", 1)]
    assert car.ess.held_writes("a", car.store.id_of("Vehicle.Other") or 0) == 1


def test_a_range_passes_entering_and_leaving_it() -> None:
    car = Car()
    car.subscribe(Filter(range=(10.0, 20.0)))
    car.write("5", "6", "10", "15", "20", "21", "30", "19")
    assert car.events() == [(1, b"5", 1), (2, b"10", 2), (3, b"21", 3), (4, b"19", 2)]


def test_with_threshold_and_range_a_write_passes_if_either_rule_does() -> None:
    car = Car()
    car.subscribe(Filter(threshold=50.0, range=(0.0, 10.0)))
    car.write("5", "9", "11", "12", "70")
    assert car.events() == [(1, b"5", 1), (2, b"11", 2), (3, b"70", 2)]


def test_value_rules_decide_the_event_and_the_interval_when_it_goes_out() -> None:
    """A held event is replaced only by a write that passes the value rules; writes
    failing them after it count in the next event."""
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS, threshold=5.0))
    car.write("0")
    car.at(10)
    car.write("10", "11")  # 10 passes and is held; 11 does not pass
    car.at(100)
    assert car.events() == [(1, b"0", 1), (2, b"10", 1)]
    assert car.ess.held_writes("a", 1) == 1
    car.at(150)
    car.write("12", "16")  # 16 passes (from 10): held with the two before it
    car.at(200)
    assert car.events() == [(3, b"16", 3)]


def test_threshold_and_range_need_a_numeric_key() -> None:
    car = Car()
    [r] = car.ess.register("a", [SubscriptionRequest(TEXT, filter=Filter(threshold=1.0))])
    assert r.status is Status.INVALID_ARGUMENT
    assert r.detail == (
        "filter.threshold: key 'Vehicle.Name' is not numeric: its VSS datatype is string; "
        "threshold and range need a numeric key"
    )
    [r] = car.ess.register("a", [SubscriptionRequest("Vehicle.Other", filter=Filter(range=(0, 1)))])
    assert r.status is Status.INVALID_ARGUMENT
    assert r.detail.startswith("filter.range: key 'Vehicle.Other' is not numeric: it has no VSS")
    assert car.ess.subscriptions("a") == []
    # An interval needs no number; a numeric key by datatype needs no value yet.
    assert car.subscribe(Filter(min_interval_ns=MS), key=TEXT) is Status.OK
    assert car.subscribe(Filter(threshold=1.0)) is Status.OK
    # A refused re-registration changes nothing.
    [r] = car.ess.register("a", [SubscriptionRequest(TEXT, queue=1, filter=Filter(threshold=1.0))])
    assert r.status is Status.INVALID_ARGUMENT
    [info] = [i for i in car.ess.subscriptions("a") if i.key == TEXT]
    assert (info.queue, info.filter) == (0, Filter(min_interval_ns=MS))


def test_a_bad_filter_is_the_keys_invalid_argument_after_its_permission() -> None:
    with pytest.raises(InvalidFilterError) as bad:
        Filter.of_ms(min_interval_ms=0)
    car = Car(read_policy=NoName())
    [missing, denied, ok] = car.ess.register(
        "a",
        [
            SubscriptionRequest("Vehicle.Nope", filter_error=bad.value),
            SubscriptionRequest(TEXT, filter_error=bad.value),
            SubscriptionRequest(KEY, filter_error=bad.value),
        ],
    )
    assert missing.status is Status.NOT_FOUND
    assert denied.status is Status.PERMISSION_DENIED  # as for any key: nothing told
    assert ok.status is Status.INVALID_ARGUMENT
    assert ok.detail == "filter.min_interval_ms: 0 ms is outside the allowed 1 to 3600000 ms"


@pytest.mark.parametrize(
    ("parts", "field", "rule"),
    [
        ({"min_interval_ms": 0}, "filter.min_interval_ms", "0 ms is outside the allowed 1 to"),
        ({"min_interval_ms": 3_600_001}, "filter.min_interval_ms", "3600001 ms is outside"),
        ({"threshold": 0.0}, "filter.threshold", "not a finite number above 0"),
        ({"threshold": -1.0}, "filter.threshold", "not a finite number above 0"),
        ({"threshold": math.nan}, "filter.threshold", "not a finite number above 0"),
        ({"range": (2.0, 1.0)}, "filter.range", "lo 2.0 is above hi 1.0"),
        ({"range": (0.0, math.inf)}, "filter.range", "is not finite"),
    ],
)
def test_a_filter_outside_its_rules_is_refused_naming_the_field(
    parts: dict[str, object], field: str, rule: str
) -> None:
    with pytest.raises(InvalidFilterError) as e:
        Filter.of_ms(**parts)  # type: ignore[arg-type]
    assert e.value.field == field
    assert rule in e.value.reason


def test_a_filter_of_ms_keeps_its_parts() -> None:
    f = Filter.of_ms(min_interval_ms=3_600_000, threshold=0.5, range=(-1.0, 1.0))
    assert (f.min_interval_ns, f.min_interval_ms) == (3_600_000 * MS, 3_600_000)
    assert Filter.of_ms().empty
    assert Filter.of_ms().min_interval_ms is None


@pytest.mark.parametrize("end", ["deregister", "remove_key", "remove_app"])
def test_a_held_value_goes_away_with_its_subscription_counted_nowhere(end: str) -> None:
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1")
    car.write("2", "3")
    assert car.ess.held_writes("a", 1) == 2
    car.events()
    if end == "deregister":
        car.ess.deregister("a", [KEY])
    elif end == "remove_key":
        car.store.remove_key(KEY)
    else:
        car.ess.remove_app("a")
    car.ess.check()
    assert car.ess.held_writes("a", 1) == 0
    assert car.at(1000) == 0
    assert car.drops.seen == []  # never events: no drop


def test_another_filter_sends_what_the_old_one_held_then_starts_afresh() -> None:
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1")
    car.write("2", "3")
    assert car.ess.held_writes("a", 1) == 2
    assert car.events() == [(1, b"1", 1)]
    car.subscribe(Filter(min_interval_ns=50 * MS))
    car.ess.check()
    assert car.ess.held_writes("a", 1) == 0
    assert car.events() == [(2, b"3", 2)]  # the latest value held, at once
    assert car.at(1000) == 0  # nothing left due
    car.write("4")
    assert car.events() == [(3, b"4", 1)]  # seq goes on; the new filter starts afresh
    assert car.drops.seen == []


def test_the_same_filter_registered_again_keeps_what_it_holds() -> None:
    car = Car()
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1", "2")
    car.subscribe(Filter(min_interval_ns=100 * MS), queue=0)
    car.at(100)
    assert car.events() == [(1, b"1", 1), (2, b"2", 1)]


def test_under_back_pressure_the_drop_rule_takes_filtered_events_as_any_with_their_writes() -> None:
    """A full queue evicts the key's oldest event: its writes go with it, told to the
    observer; seq shows the gap as for any drop."""
    car = Car(max_length=1)
    car.subscribe(Filter(min_interval_ns=100 * MS))
    car.write("1")
    car.write("2", "3", "4")
    car.at(100)  # evicts seq 1 (1 write) for seq 2 (3 writes)
    car.write("5", "6")
    car.at(200)  # evicts seq 2 (3 writes) for seq 3 (2 writes)
    assert car.drops.seen == [(1, DropReason.EVICTED, 1), (2, DropReason.EVICTED, 3)]
    assert car.events() == [(3, b"6", 2)]
    assert car.ess.drop_counts("a")[(1, 0)].evicted == 2


def test_a_lost_filtered_event_owes_its_value_to_the_next_event() -> None:
    car = Car(max_length=1)
    car.subscribe(None)
    car.subscribe(Filter(min_interval_ns=100 * MS), key="Vehicle.Other", trigger=Trigger.ON_UPDATE)
    car.write("1")  # fills the queue (max 1) with Vehicle.Speed's event
    car.write("a", key="Vehicle.Other")  # lost: no event of the key to evict
    assert car.drops.seen == [(1, DropReason.LOST, 1)]
    car.events()
    car.write("a", key="Vehicle.Other")  # unchanged bytes, held: the value is owed
    car.at(100)
    assert car.events() == [(2, b"a", 1)]
