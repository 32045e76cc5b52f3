"""The figures the ESS and the V-Store give an operator (metrics, GetStats, top)."""

from __future__ import annotations

from vehicle_middleware.ess import EventSubSystem, QueueConfig, SubscriptionRequest, Trigger
from vehicle_middleware.vstore import VStore


def _setup(max_length: int = 3) -> tuple[VStore, EventSubSystem, list[int]]:
    now = [1_000_000_000]
    store = VStore(clock=lambda: now[0])
    ess = EventSubSystem(store, event_budget=100)
    store.set_listener(ess)
    ess.open_stream("slow", [QueueConfig(0, 1, max_length)])
    return store, ess, now


def test_a_reader_that_stops_shows_a_full_queue_with_evictions_and_the_oldest_age() -> None:
    store, ess, now = _setup(max_length=3)
    for name in ("A", "B", "C"):
        store.add_key(name)
    ess.register("slow", [SubscriptionRequest(n, 0, Trigger.ON_UPDATE) for n in ("A", "B", "C")])
    for i in range(5):
        for name in ("A", "B", "C"):
            now[0] += 1_000
            store.set(name, bytes([i]))
    stats = ess.app_stats("slow", now_ns=now[0] + 5_000)
    assert stats is not None
    q0 = stats.queues[0]
    assert (q0.depth, q0.high_water, q0.max_length) == (3, 3, 3)
    assert q0.evicted == 12  # 15 writes, 3 kept
    assert (q0.lost, q0.delivered, q0.discarded) == (0, 0, 0)
    # the oldest kept event is A's last write: the 13th write, 2 writes before the end
    assert q0.oldest_age_ns == 2_000 + 5_000
    assert stats.subscriptions == 3
    assert (stats.evicted, stats.depth) == (12, 3)


def test_delivery_discards_and_the_high_water_mark_are_counted_per_queue() -> None:
    store, ess, _ = _setup(max_length=10)
    store.add_key("A")
    ess.register("slow", [SubscriptionRequest("A", 0, Trigger.ON_UPDATE)])
    for i in range(4):
        store.set("A", bytes([i]))
    assert len(ess.drain("slow", 3)) == 3  # KeyAdded (not counted) and 2 data events
    store.set("A", b"x")
    ess.deregister("slow", ["A"])  # the 3 still queued are discarded
    stats = ess.app_stats("slow", 0)
    assert stats is not None
    q0 = stats.queues[0]
    assert (q0.depth, q0.high_water, q0.delivered, q0.discarded) == (0, 4, 2, 3)
    ess.check()


def test_counts_outlive_a_removed_key_and_the_high_water_mark_restarts_with_the_stream() -> None:
    store, ess, _ = _setup(max_length=2)
    store.add_key("A")
    ess.register("slow", [SubscriptionRequest("A", 0, Trigger.ON_UPDATE)])
    for i in range(5):
        store.set("A", bytes([i]))
    store.remove_key("A")  # per-key drop counts go; the queue's totals stay
    stats = ess.app_stats("slow", 0)
    assert stats is not None
    assert (stats.queues[0].evicted, stats.queues[0].discarded) == (3, 2)
    ess.open_stream("slow", [QueueConfig(0, 1, 2)])
    stats = ess.app_stats("slow", 0)
    assert stats is not None
    assert (stats.queues[0].high_water, stats.queues[0].evicted) == (0, 3)


def test_subscriber_counts_and_key_versions_give_per_key_figures() -> None:
    store, ess, _ = _setup()
    ess.open_stream("other", [])
    a, b = store.add_key("A"), store.add_key("B")
    ess.register("slow", [SubscriptionRequest("A")])
    ess.register("other", [SubscriptionRequest("A"), SubscriptionRequest("B")])
    assert ess.subscriber_counts() == {a: 2, b: 1}
    assert (ess.subscriber_count(a), ess.subscriber_count(999)) == (2, 0)
    assert ess.subscription_count() == 3
    before = store.versions()
    for i in range(7):
        store.set("B", bytes([i]))
    after = store.versions()
    assert (after[b] - before[b], after[a] - before[a]) == (7, 0)
    store.remove_key("A")
    assert store.versions()[a] == -1
    assert ess.app_stats("nobody", 0) is None
