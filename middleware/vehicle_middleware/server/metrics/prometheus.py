"""The figures as Prometheus series: the one list of them, and the collector.

:data:`SERIES` names every series the middleware exports, with its type,
labels and meaning (the README's table is this list); :class:`StatsCollector`
renders one :class:`~vehicle_middleware.server.metrics.stats.Stats` reading per scrape as
those series, plus the figures of registered collectors under their own names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from vehicle_middleware.server.metrics.stats import Stats, StatsReader

__all__ = ["SERIES", "Series", "StatsCollector", "registry_for"]

_NS: Final = 1e-9


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    """As exposed (a counter's ends in ``_total``)."""
    kind: Literal["gauge", "counter"]
    labels: tuple[str, ...]
    help: str


_APP: Final = ("app",)
_QUEUE: Final = ("app", "queue")
_KEY: Final = ("key",)

SERIES: Final = (
    Series(
        "vmw_info",
        "gauge",
        ("boot_id", "vehicle_id"),
        "Always 1; the labels name the boot and the vehicle.",
    ),
    Series("vmw_apps", "gauge", (), "Apps with an open event stream."),
    Series(
        "vmw_publish_streams", "gauge", (), "Open Publish streams (providers), all apps together."
    ),
    Series("vmw_keys", "gauge", (), "Keys in the store."),
    Series("vmw_watched_keys", "gauge", (), "Keys at least one app subscribes to."),
    Series("vmw_subscriptions", "gauge", (), "Subscriptions of all apps together."),
    Series("vmw_event_budget", "gauge", (), "The global event budget (event_budget), in events."),
    Series(
        "vmw_event_budget_used",
        "gauge",
        (),
        "Budget units reserved by the apps' min_length values or holding events beyond them.",
    ),
    Series("vmw_queued_events", "gauge", (), "Data events queued for all apps now."),
    Series(
        "vmw_journal_records_written_total",
        "counter",
        (),
        "Journal records written to disk in this boot (0 without a journal).",
    ),
    Series(
        "vmw_journal_records_dropped_total",
        "counter",
        (),
        "Journal records lost in this boot: the buffer was full, a write failed, or the "
        "directory was removed.",
    ),
    Series("vmw_app_queue_depth", "gauge", _QUEUE, "Events in the app's queue now."),
    Series(
        "vmw_app_queue_high_water",
        "gauge",
        _QUEUE,
        "Most events in the queue at once since the app's stream opened.",
    ),
    Series(
        "vmw_app_queue_max_length",
        "gauge",
        _QUEUE,
        "The queue's max_length: depth at this means the drop rule acts.",
    ),
    Series(
        "vmw_app_queue_oldest_age_seconds",
        "gauge",
        _QUEUE,
        "Since the write of the oldest event in the queue (0 when empty).",
    ),
    Series(
        "vmw_app_events_delivered_total",
        "counter",
        _QUEUE,
        "Events taken from the queue for the app's stream.",
    ),
    Series(
        "vmw_app_events_evicted_total",
        "counter",
        _QUEUE,
        "Events the drop rule removed for a newer event of the same key.",
    ),
    Series(
        "vmw_app_events_lost_total",
        "counter",
        _QUEUE,
        "Events that met a full queue holding no event of their key.",
    ),
    Series(
        "vmw_app_events_discarded_total",
        "counter",
        _QUEUE,
        "Queued events thrown away: deregistered, key removed, stream reopened.",
    ),
    Series(
        "vmw_app_bytes_sent_total",
        "counter",
        _APP,
        "Bytes of event batches written to the app's current stream.",
    ),
    Series("vmw_app_subscriptions", "gauge", _APP, "The app's subscriptions."),
    Series(
        "vmw_app_lifecycle_pending", "gauge", _APP, "Key added/removed events waiting for the app."
    ),
    Series(
        "vmw_app_dropping",
        "gauge",
        _APP,
        "1 while the app is in an episode of drops (it does not keep up), else 0.",
    ),
    Series(
        "vmw_key_writes_per_second",
        "gauge",
        _KEY,
        "Writes per second of the busiest keys (metrics_top_keys of them).",
    ),
    Series(
        "vmw_key_writes_total",
        "counter",
        _KEY,
        "Writes of the key since it was added (the busiest keys only).",
    ),
    Series(
        "vmw_key_subscribers", "gauge", _KEY, "Apps subscribed to the key (the busiest keys only)."
    ),
    Series(
        "vmw_key_rate_window_seconds",
        "gauge",
        (),
        "The window of the writes per second: since the previous reading.",
    ),
    Series("process_cpu_seconds_total", "counter", (), "CPU time of the process, user and system."),
    Series("process_resident_memory_bytes", "gauge", (), "Resident memory of the process."),
    Series(
        "process_start_time_seconds",
        "gauge",
        (),
        "When the middleware started, seconds since the epoch.",
    ),
)
"""Every series the middleware itself exports; registered collectors add theirs."""


def _family(series: Series) -> GaugeMetricFamily | CounterMetricFamily:
    if series.kind == "counter":
        return CounterMetricFamily(
            series.name.removesuffix("_total"), series.help, labels=series.labels
        )
    return GaugeMetricFamily(series.name, series.help, labels=series.labels)


_Sample = Callable[[Stats], Iterator[tuple[tuple[str, ...], float]]]


def _one(value: Callable[[Stats], float]) -> _Sample:
    def samples(s: Stats) -> Iterator[tuple[tuple[str, ...], float]]:
        yield (), value(s)

    return samples


def _per_queue(value: Callable[..., float]) -> _Sample:
    def samples(s: Stats) -> Iterator[tuple[tuple[str, ...], float]]:
        for a in s.apps:
            for q in a.queues.queues:
                yield (a.app, str(q.queue)), value(q)

    return samples


def _per_app(value: Callable[..., float]) -> _Sample:
    def samples(s: Stats) -> Iterator[tuple[tuple[str, ...], float]]:
        for a in s.apps:
            yield (a.app,), value(a)

    return samples


def _per_key(value: Callable[..., float]) -> _Sample:
    def samples(s: Stats) -> Iterator[tuple[tuple[str, ...], float]]:
        for k in s.keys:
            yield (k.name,), value(k)

    return samples


_SAMPLES: Final[dict[str, _Sample]] = {
    "vmw_info": lambda s: iter([((s.boot_id, s.vehicle_id), 1.0)]),
    "vmw_apps": _one(lambda s: s.process.apps),
    "vmw_publish_streams": _one(lambda s: s.process.publish_streams),
    "vmw_keys": _one(lambda s: s.process.keys),
    "vmw_watched_keys": _one(lambda s: s.process.watched_keys),
    "vmw_subscriptions": _one(lambda s: s.process.subscriptions),
    "vmw_event_budget": _one(lambda s: s.process.event_budget_total),
    "vmw_event_budget_used": _one(lambda s: s.process.event_budget_used),
    "vmw_queued_events": _one(lambda s: s.process.queued_events),
    "vmw_journal_records_written_total": _one(lambda s: s.process.journal_records_written),
    "vmw_journal_records_dropped_total": _one(lambda s: s.process.journal_records_dropped),
    "vmw_app_queue_depth": _per_queue(lambda q: q.depth),
    "vmw_app_queue_high_water": _per_queue(lambda q: q.high_water),
    "vmw_app_queue_max_length": _per_queue(lambda q: q.max_length),
    "vmw_app_queue_oldest_age_seconds": _per_queue(lambda q: q.oldest_age_ns * _NS),
    "vmw_app_events_delivered_total": _per_queue(lambda q: q.delivered),
    "vmw_app_events_evicted_total": _per_queue(lambda q: q.evicted),
    "vmw_app_events_lost_total": _per_queue(lambda q: q.lost),
    "vmw_app_events_discarded_total": _per_queue(lambda q: q.discarded),
    "vmw_app_bytes_sent_total": _per_app(lambda a: a.bytes_sent),
    "vmw_app_subscriptions": _per_app(lambda a: a.queues.subscriptions),
    "vmw_app_lifecycle_pending": _per_app(lambda a: a.queues.lifecycle_pending),
    "vmw_app_dropping": _per_app(lambda a: 1.0 if a.dropping else 0.0),
    "vmw_key_writes_per_second": _per_key(lambda k: k.writes_per_s),
    "vmw_key_writes_total": _per_key(lambda k: k.writes),
    "vmw_key_subscribers": _per_key(lambda k: k.subscribers),
    "vmw_key_rate_window_seconds": _one(lambda s: s.rate_window_s),
    "process_cpu_seconds_total": _one(lambda s: s.process.cpu_seconds),
    "process_resident_memory_bytes": _one(lambda s: s.process.rss_bytes),
    "process_start_time_seconds": _one(lambda s: s.process.start_time_s),
}
assert set(_SAMPLES) == {s.name for s in SERIES}, "every series has its samples"


class StatsCollector:
    """A Prometheus collector reading the middleware's figures at each scrape.

    Scrapes run on the event loop (see :mod:`vehicle_middleware.server.metrics.http`), so a
    reading never sees the cores half-way through a change.
    """

    def __init__(self, reader: StatsReader) -> None:
        self._reader = reader

    def collect(self) -> Iterator[Metric]:
        stats = self._reader.read()
        for series in SERIES:
            family = _family(series)
            for labels, value in _SAMPLES[series.name](stats):
                family.add_metric(list(labels), float(value))
            yield family
        extra: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for f in stats.extra:
            if f.name in _SAMPLES:
                continue  # a collector may not shadow the middleware's own series
            other = extra.get(f.name)
            if other is None:
                names = [k for k, _ in f.labels]
                extra[f.name] = other = (
                    CounterMetricFamily(f.name.removesuffix("_total"), f.help, labels=names)
                    if f.kind == "counter"
                    else GaugeMetricFamily(f.name, f.help, labels=names)
                )
            other.add_metric([v for _, v in f.labels], f.value)
        yield from extra.values()


def registry_for(reader: StatsReader) -> CollectorRegistry:
    """A registry holding the middleware's collector only (no default process
    collector: ``process_*`` come from the same reading)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsCollector(reader))
    return registry
