"""Episodes of drops per app: reported when they start, periodically while they
last, and when they end, on a fake clock."""

from __future__ import annotations

import logging

import pytest
from vehicle_middleware.ess import EventSubSystem, QueueConfig, SubscriptionRequest, Trigger
from vehicle_middleware.server.slow_apps import DropEpisodes, Episode, SlowAppWatch
from vehicle_middleware.vstore import VStore


def test_a_stuck_app_is_reported_when_it_starts_dropping_and_every_period_while_it_drops() -> None:
    ep = DropEpisodes(every=10.0)
    assert ep.observe("a", 0, 5, now=0.0) is None
    started = ep.observe("a", 7, 20, now=1.0)
    assert started is not None
    assert (started.state, started.dropped, started.pending) == (Episode.STARTED, 7, 20)
    # Still dropping, but the period has not passed: nothing to say.
    assert ep.observe("a", 50, 20, now=5.0) is None
    ongoing = ep.observe("a", 90, 20, now=11.0)
    assert ongoing is not None
    assert (ongoing.state, ongoing.dropped, ongoing.recent) == (Episode.ONGOING, 90, 83)
    assert ongoing.seconds == pytest.approx(10.0)
    assert ongoing.interval == pytest.approx(10.0)
    again = ep.observe("a", 100, 20, now=21.0)
    assert again is not None
    assert (again.dropped, again.recent) == (100, 10)
    ep.check()


def test_an_app_that_stopped_reading_while_its_provider_went_quiet_stays_in_its_episode() -> None:
    ep = DropEpisodes(every=10.0)
    ep.observe("a", 0, 0, now=0.0)
    ep.observe("a", 3, 20, now=1.0)
    # No new drops (nothing arrives), but its queues stay full: not caught up, and silent.
    for t in range(2, 60):
        assert ep.observe("a", 3, 20, now=float(t)) is None
    assert ep.in_episode("a")


def test_the_episode_ends_after_a_quiet_period_once_the_app_read_what_was_queued() -> None:
    ep = DropEpisodes(every=10.0)
    ep.observe("a", 0, 0, now=0.0)
    ep.observe("a", 4, 20, now=1.0)
    ep.observe("a", 9, 20, now=2.0)  # the last drop
    ep.drained("a", now=3.0)  # a delivery emptied its queues
    # A period after the start: the drops since the first report, and not ended yet.
    ongoing = ep.observe("a", 9, 3, now=11.0)
    assert ongoing is not None
    assert (ongoing.state, ongoing.recent) == (Episode.ONGOING, 5)
    assert ep.observe("a", 9, 3, now=11.9) is None  # quiet for less than the period
    ended = ep.observe("a", 9, 3, now=12.0)
    assert ended is not None
    assert (ended.state, ended.dropped, ended.seconds) == (Episode.ENDED, 9, 11.0)
    assert not ep.in_episode("a")
    # A new drop is a new episode, counted from there.
    again = ep.observe("a", 12, 20, now=13.0)
    assert again is not None
    assert (again.state, again.dropped) == (Episode.STARTED, 3)
    ep.check()


def test_queues_seen_empty_at_a_check_also_count_as_caught_up() -> None:
    ep = DropEpisodes(every=2.0)
    ep.observe("a", 1, 20, now=0.0)
    assert ep.observe("a", 1, 0, now=1.0) is None
    ended = ep.observe("a", 1, 0, now=2.0)
    assert ended is not None
    assert ended.state is Episode.ENDED


def test_a_slow_reader_dropping_every_second_is_one_episode_not_one_per_read() -> None:
    ep = DropEpisodes(every=10.0)
    states = []
    for t in range(32):
        ep.drained("a", now=t + 0.5)  # it reads a batch each second, emptying its queues
        r = ep.observe("a", 10 * t, 0 if t % 2 else 20, now=float(t))
        if r is not None:
            states.append(r.state)
    assert states == [Episode.STARTED, Episode.ONGOING, Episode.ONGOING, Episode.ONGOING]


def test_an_app_that_goes_away_during_an_episode_ends_it_and_a_returning_app_counts_afresh() -> (
    None
):
    ep = DropEpisodes(every=10.0)
    ep.observe("a", 5, 20, now=0.0)
    gone = ep.forget("a", now=4.0)
    assert gone is not None
    assert (gone.state, gone.dropped, gone.seconds) == (Episode.GONE, 5, 4.0)
    assert ep.forget("a", now=5.0) is None
    assert ep.observe("a", 0, 0, now=6.0) is None  # a new stream: its count starts at 0
    ep.observe("b", 9, 20, now=0.0)
    # b was removed and came back unnoticed between two checks: its count restarted.
    back = ep.observe("b", 2, 20, now=1.0)
    assert back is not None
    assert (back.state, back.dropped) == (Episode.STARTED, 2)
    ep.check()


def test_the_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every must be above 0"):
        DropEpisodes(every=0)


def test_the_watch_logs_one_warning_when_the_drop_rule_acts_and_ignores_discards(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = VStore()
    ess = EventSubSystem(store)
    store.set_listener(ess)
    key = store.add_key("Vehicle.Speed")
    ess.open_stream("a", [QueueConfig(0, min_length=1, max_length=1)])
    ess.register("a", [SubscriptionRequest("Vehicle.Speed", queue=0, trigger=Trigger.ON_UPDATE)])
    now = [0.0]
    watch = SlowAppWatch(ess, every=10.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="vehicle_middleware.server.slow_apps")
    store.set(key, b"1")
    assert watch.check() == []
    store.set(key, b"2")  # evicts the first
    [started] = watch.check()
    assert started.state is Episode.STARTED
    assert "app a is not keeping up: its queues are dropping events (1 dropped, 1 queued)" in (
        caplog.text
    )
    ess.drain("a", 10)
    watch.drained("a")
    now[0] = 10.0
    [ended] = watch.check()
    assert ended.state is Episode.ENDED
    assert "app a caught up; 1 events dropped in this episode of 10 s" in caplog.text
    store.set(key, b"3")
    ess.deregister("a", ["Vehicle.Speed"])  # discards it: not a reader falling behind
    assert watch.check() == []
    ess.remove_app("a")
    assert watch.check() == []
