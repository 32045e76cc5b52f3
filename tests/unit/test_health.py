"""Signal health in the ESS core: stale and fresh keys, keys whose provider went away.

A real V-Store with a clock the test sets; the ESS's health tick is given the
same time. No gRPC, no event loop.
"""

from __future__ import annotations

import pytest
from vehicle_middleware.contract.values import Failure, FailureCode, decode, encode, is_failure
from vehicle_middleware.ess import (
    DataUpdated,
    EventSubSystem,
    ExpectedPeriods,
    KeyAdded,
    KeyFresh,
    KeyRemoved,
    KeyStale,
    ProviderBack,
    ProviderGone,
    QueueConfig,
    ResyncRequired,
    StaleTracker,
    Status,
    SubscriptionRequest,
    Trigger,
    parse_expect_rule,
)
from vehicle_middleware.ess.events import Event
from vehicle_middleware.vstore import VStore

S = 1_000_000_000
T0 = 1_700_000_000 * S
ZONE = "Vehicle.Cabin.HVAC.Zone.Row1.Left.Temperature"
SPEED = "Vehicle.Speed"
OTHER = "Vehicle.Body.Lights.IsOn"


class Car:
    """A store, an ESS listening to it, and a clock both read."""

    def __init__(self, periods: ExpectedPeriods | None = None, **ess_kw: int) -> None:
        self.now = T0
        self.store = VStore(clock=lambda: self.now)
        self.ess = EventSubSystem(self.store, **ess_kw)  # type: ignore[arg-type]
        self.store.set_listener(self.ess)
        self.ess.expect((periods or ExpectedPeriods([("Vehicle.Cabin", 2.0)])).period_ns)
        self.zone = self.store.add_key(ZONE)
        self.speed = self.store.add_key(SPEED)
        self.other = self.store.add_key(OTHER)

    def app(self, name: str, *keys: str, queues: tuple[QueueConfig, ...] = ()) -> None:
        self.ess.open_stream(name, queues)
        if keys:
            results = self.ess.register(
                name, [SubscriptionRequest(k, trigger=Trigger.ON_UPDATE) for k in keys]
            )
            assert all(r.status is Status.OK for r in results)
        self.ess.drain(name, 10_000)
        self.ess.check()

    def write(self, key: int, time_ns: int | None = None) -> None:
        self.store.set(key, b"x", time_ns=time_ns)

    def tick(self, at_s: float) -> None:
        self.now = T0 + round(at_s * S)
        self.ess.health_tick(self.now)
        self.ess.check()

    def health(self, app: str) -> list[Event]:
        """The app's events other than data, drained."""
        events = self.ess.drain(app, 10_000)
        self.ess.check()
        return [e for e in events if not isinstance(e, DataUpdated)]


def at(seconds: float) -> int:
    return T0 + round(seconds * S)


# -- the rules --------------------------------------------------------------------


def test_expect_rule_parses_prefix_and_seconds() -> None:
    assert parse_expect_rule("Vehicle.Cabin=2.5") == ("Vehicle.Cabin", 2.5)
    assert parse_expect_rule(" Vehicle = 0 ") == ("Vehicle", 0.0)


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("Vehicle.Cabin", "use PREFIX=SECONDS"),
        ("=5", "use PREFIX=SECONDS"),
        ("Vehicle..Cabin=5", "the prefix is not a key name"),
        ("Vehicle=soon", "'soon' is not a number of seconds"),
        ("Vehicle=-1", "seconds must be 0 (none) to 86400"),
        ("Vehicle=nan", "seconds must be 0 (none) to 86400"),
    ],
)
def test_a_bad_expect_rule_is_refused_naming_it(rule: str, says: str) -> None:
    with pytest.raises(ValueError, match="expect rule") as e:
        parse_expect_rule(rule)
    assert says in str(e.value)
    assert repr(rule) in str(e.value)


def test_longest_prefix_wins_and_rules_win_over_the_catalog() -> None:
    periods = ExpectedPeriods(
        [("Vehicle", 10.0), ("Vehicle.Cabin", 2.0), ("Vehicle.Cabin.Seat", 0.0)],
        catalog={"Vehicle.Cabin.Seat.Heating": 7.0, "Truck.Speed": 0.5},
    )
    assert periods.period_ns("Vehicle.Speed") == 10 * S
    assert periods.period_ns("Vehicle.Cabin") == 2 * S
    assert periods.period_ns(ZONE) == 2 * S
    assert periods.period_ns("Vehicle.CabinX.Temp") == 10 * S  # segments, not characters
    assert periods.period_ns("Vehicle.Cabin.Seat.Heating") is None  # a 0 rule turns it off
    assert periods.period_ns("Truck.Speed") == S // 2
    assert periods.period_ns("Truck.Gear") is None
    assert not ExpectedPeriods()
    assert not ExpectedPeriods([("Vehicle", 0.0)])


# -- stale and fresh --------------------------------------------------------------


def test_a_watched_key_silent_beyond_its_period_is_stale_once_then_fresh_when_written() -> None:
    car = Car()
    car.app("a", ZONE)
    car.now = at(0.1)
    car.write(car.zone)
    car.tick(0.2)
    car.tick(2.0)  # 1.9 s of silence: within the 2 s
    assert car.health("a") == []
    car.tick(2.2)  # 2.1 s: stale, told at the first tick past the period
    assert car.health("a") == [KeyStale(car.zone, at(0.1), 2 * S)]
    assert car.ess.stale_keys() == [car.zone]
    car.tick(2.4)
    car.tick(5.0)
    assert car.health("a") == []  # told once
    car.now = at(5.1)
    car.write(car.zone)
    assert car.health("a") == []  # the write path tells nothing...
    car.tick(5.2)  # ...the next tick does: up to one tick late
    assert car.health("a") == [KeyFresh(car.zone, at(5.1))]
    assert car.ess.stale_keys() == []


def test_a_key_its_provider_keeps_failing_is_not_stale_and_a_stale_key_is_not_failed() -> None:
    """A failure is the provider's word, a write like a value; staleness is the
    middleware's word that nobody wrote. Neither stands for the other."""
    car = Car()
    car.app("a", ZONE)
    failed = encode(Failure(FailureCode.SENSOR_FAULT, "open circuit"))
    for t in (0.1, 1.5, 2.9, 4.3):  # failed again and again, within the 2 s each time
        car.now = at(t)
        car.store.set(car.zone, failed)
        car.tick(t + 0.1)
    events = car.ess.drain("a", 10_000)
    assert [e.seq for e in events if isinstance(e, DataUpdated)] == [1, 2, 3, 4]
    assert [e.data for e in events if isinstance(e, DataUpdated)] == [failed, None, None, None]
    assert [e for e in events if not isinstance(e, DataUpdated)] == []
    assert car.ess.stale_keys() == []
    car.now = at(4.5)
    car.store.set(car.zone, encode(21.5))  # a value again, then silence
    car.tick(6.6)
    assert car.health("a") == [KeyStale(car.zone, at(4.5), 2 * S)]
    data = car.store.get(ZONE).data
    assert data is not None
    assert not is_failure(data)
    assert decode(data) == 21.5


def test_keys_nobody_watches_and_keys_without_an_expectation_cost_nothing() -> None:
    car = Car()
    car.app("a", SPEED)  # watched, no expectation
    car.app("b")  # subscribes to nothing: the zone has an expectation but no watcher
    assert car.ess.followed_keys() == []
    car.tick(100.0)
    assert car.health("a") == []
    assert car.health("b") == []


def test_only_subscribers_of_the_key_hear_of_it() -> None:
    car = Car()
    car.app("a", ZONE)
    car.app("b", SPEED, OTHER)
    car.write(car.zone)
    car.tick(0.0)
    car.tick(3.0)
    assert car.health("a") == [KeyStale(car.zone, T0, 2 * S)]
    assert car.health("b") == []


def test_a_key_never_written_is_stale_a_period_after_it_is_first_ticked() -> None:
    car = Car()
    car.app("a", ZONE)
    car.tick(1.0)  # starts counting here
    car.tick(2.9)
    assert car.health("a") == []
    car.tick(3.1)
    assert car.health("a") == [KeyStale(car.zone, 0, 2 * S)]


def test_an_app_that_subscribes_to_a_stale_key_is_told_at_the_next_tick() -> None:
    car = Car()
    car.app("a", ZONE)
    car.write(car.zone)
    car.tick(0.0)
    car.tick(3.0)
    assert car.health("a") == [KeyStale(car.zone, T0, 2 * S)]
    car.app("late", ZONE)
    car.ess.health_tick(at(3.2))
    notices = car.ess.health_tick(at(3.4))
    assert notices == []
    assert car.health("late") == [KeyStale(car.zone, T0, 2 * S)]
    assert car.health("a") == []
    car.now = at(4.0)
    car.write(car.zone)
    car.tick(4.2)
    assert car.health("a") == [KeyFresh(car.zone, at(4.0))]
    assert car.health("late") == [KeyFresh(car.zone, at(4.0))]


def test_the_tick_says_which_notices_are_transitions() -> None:
    car = Car()
    car.app("a", ZONE)
    car.write(car.zone)
    car.ess.health_tick(T0)
    [notice] = car.ess.health_tick(at(3.0))
    assert notice.transition
    assert notice.apps == ("a",)
    car.app("b", ZONE)
    [late] = car.ess.health_tick(at(3.2))
    assert not late.transition
    assert late.apps == ("b",)


def test_a_source_time_from_the_past_is_held_within_the_tick_it_was_written_in() -> None:
    car = Car()
    car.app("a", ZONE)
    car.write(car.zone)
    car.tick(0.0)
    car.tick(3.0)
    assert car.health("a") == [KeyStale(car.zone, T0, 2 * S)]
    car.now = at(3.1)
    car.write(car.zone, time_ns=at(-3600))  # a replay with its recorded times
    car.tick(3.2)
    # Written after the 3.0 tick: fresh, not an hour old.
    assert car.health("a") == [KeyFresh(car.zone, at(3.0))]
    car.tick(4.9)
    assert car.health("a") == []


def test_the_last_subscriber_leaving_stops_following_the_key() -> None:
    car = Car()
    car.app("a", ZONE)
    assert car.ess.followed_keys() == [car.zone]
    car.ess.deregister("a", [ZONE])
    car.ess.check()
    assert car.ess.followed_keys() == []
    car.tick(10.0)
    assert car.health("a") == []


def test_a_removed_key_is_forgotten_and_its_reused_id_starts_afresh() -> None:
    car = Car()
    car.app("a", ZONE)
    car.write(car.zone)
    car.tick(0.0)
    car.tick(3.0)
    car.health("a")
    car.store.remove_key(ZONE)
    car.ess.check()
    assert car.ess.stale_keys() == []
    again = car.store.add_key(ZONE)
    assert again == car.zone
    car.ess.register("a", [SubscriptionRequest(ZONE)])
    car.tick(3.2)  # not stale: its silence counts from now
    events = car.health("a")
    assert [type(e) for e in events] == [KeyRemoved, KeyAdded]


def test_health_events_pass_a_full_queue() -> None:
    car = Car()
    car.app("a", ZONE, queues=(QueueConfig(0, 1, 1),))
    for i in range(5):
        car.now = at(0.01 * i)
        car.write(car.zone)
    car.tick(0.1)
    car.tick(2.5)
    events = car.ess.drain("a", 10)
    assert events[0] == KeyStale(car.zone, at(0.04), 2 * S)
    assert [type(e) for e in events] == [KeyStale, DataUpdated]
    assert car.ess.overflowed("a") == 4  # the drop rule acted on the data, not on this


def test_stale_keys_are_told_again_after_a_resync() -> None:
    car = Car(lifecycle_capacity=1)
    car.app("a", ZONE)
    car.write(car.zone)
    car.tick(0.0)
    car.tick(3.0)  # KeyStale buffered
    car.store.add_key("Vehicle.New")  # the buffer overflows: a resync is owed
    assert car.health("a") == [ResyncRequired(2)]
    car.tick(3.2)
    assert car.health("a") == [KeyStale(car.zone, T0, 2 * S)]


def test_the_expectations_can_change_for_watched_keys() -> None:
    car = Car(ExpectedPeriods())
    car.app("a", SPEED)
    car.write(car.speed)
    car.tick(0.0)
    car.tick(10.0)
    assert car.health("a") == []
    car.ess.expect(ExpectedPeriods([("Vehicle.Speed", 1.0)]).period_ns)
    car.ess.check()
    car.tick(10.2)
    car.tick(11.4)
    assert car.health("a") == [KeyStale(car.speed, T0, S)]
    car.ess.expect(None)
    car.ess.check()
    assert car.ess.stale_keys() == []


def test_the_tracker_alone_follows_what_it_is_told() -> None:
    store = VStore(clock=lambda: T0)
    key = store.add_key(ZONE)
    tracker = StaleTracker()
    with pytest.raises(ValueError, match="above 0"):
        tracker.follow(key, 0)
    tracker.follow(key, S)
    subscribers = {key: ["a", "b"]}
    assert tracker.tick(T0, store, lambda k: subscribers[k]) == []
    [notice] = tracker.tick(T0 + 2 * S, store, lambda k: subscribers[k])
    assert notice.apps == ("a", "b")
    tracker.forget_app("a")
    [again] = tracker.tick(T0 + 3 * S, store, lambda k: subscribers[k])
    assert again.apps == ("a",)
    assert not again.transition
    tracker.check()


# -- provider presence ------------------------------------------------------------


def test_subscribers_hear_their_keys_provider_went_away_and_came_back() -> None:
    car = Car()
    car.app("a", ZONE, SPEED)
    car.app("b", SPEED)
    car.app("c", OTHER)
    told = car.ess.provider_gone("sim", [car.speed, car.zone])
    ordered = tuple(sorted((car.zone, car.speed)))
    assert told == {"a": ordered, "b": (car.speed,)}
    assert car.health("a") == [ProviderGone("sim", ordered)]
    assert car.health("b") == [ProviderGone("sim", (car.speed,))]
    assert car.health("c") == []
    assert car.ess.no_provider(car.speed)
    assert not car.ess.no_provider(car.other)
    [result] = car.ess.register("c", [SubscriptionRequest(SPEED)])
    assert result.no_provider
    back, told = car.ess.provider_back("sim", [car.speed, car.other])
    assert back == (car.speed,)
    assert told == {"a": (car.speed,), "b": (car.speed,), "c": (car.speed,)}
    assert car.health("a") == [ProviderBack("sim", (car.speed,))]
    assert not car.ess.no_provider(car.speed)
    assert car.ess.no_provider(car.zone)
    [result] = car.ess.register("c", [SubscriptionRequest(SPEED)])
    assert not result.no_provider
    car.ess.check()


def test_a_removed_key_has_no_provider_state() -> None:
    car = Car()
    car.app("a", ZONE)
    car.ess.provider_gone("sim", [car.zone])
    car.store.remove_key(ZONE)
    assert not car.ess.no_provider(car.zone)
    assert car.ess.provider_back("sim", [car.zone]) == ((), {})
