"""The figures of a running middleware, read on request from what its parts keep.

:class:`StatsReader` reads them: per app, the ESS's queue counters
(:meth:`ess.EventSubSystem.app_stats`), the bytes its stream sent and whether
it is in an episode of drops; per key, writes per second from the V-Store's
versions (:mod:`vehicle_middleware.server.metrics.rates`) and subscribers from the ESS; for
the process, the counts of apps, streams, keys and subscriptions, the event
budget, the journal's counters, CPU and memory; and the figures of registered
collectors (:mod:`vehicle_middleware.server.metrics.collectors`). Nothing here runs on the
delivery path: a reading costs O(apps + watched keys) plus one copy of the
version table, on the event loop, so it never sees a half-made change.

The Prometheus exposition (:mod:`vehicle_middleware.server.metrics.prometheus`) and
``GetStats`` (:mod:`vehicle_middleware.server.rpc.admin_service`) both render a :class:`Stats`.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from vehicle_middleware.ess import AppStats, EventSubSystem
from vehicle_middleware.server.metrics.collectors import Collectors, Figure
from vehicle_middleware.server.metrics.rates import KeyRates
from vehicle_middleware.vstore import UnknownKeyError, VStore

if TYPE_CHECKING:
    from vehicle_middleware.server.auth.stream_counts import StreamCounts
    from vehicle_middleware.server.journal.writer import Journal
    from vehicle_middleware.server.session import Streams
    from vehicle_middleware.server.slow_apps import SlowAppWatch

__all__ = ["MAX_TOP_KEYS", "AppFigures", "KeyFigures", "ProcessFigures", "Stats", "StatsReader"]

MAX_TOP_KEYS: Final = 1000
"""Most busiest keys one reading returns."""


@dataclass(frozen=True, slots=True)
class AppFigures:
    """One app with an open event stream."""

    queues: AppStats
    bytes_sent: int
    """Bytes of event batches written to the app's current stream."""
    dropping: bool
    """In an episode of drops (:mod:`vehicle_middleware.server.slow_apps`)."""

    @property
    def app(self) -> str:
        return self.queues.app


@dataclass(frozen=True, slots=True)
class KeyFigures:
    name: str
    key_id: int
    writes_per_s: float
    writes: int
    """Writes since the key was added (its version)."""
    subscribers: int


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    apps: int
    publish_streams: int
    keys: int
    watched_keys: int
    subscriptions: int
    event_budget_total: int
    event_budget_used: int
    queued_events: int
    journal: bool
    journal_records_written: int
    journal_records_dropped: int
    """Refused by a full buffer or lost to failed writes, in this boot."""
    cpu_seconds: float
    rss_bytes: int
    start_time_s: float
    """When the process started, seconds since the epoch."""
    uptime_s: float


@dataclass(frozen=True, slots=True)
class Stats:
    boot_id: str
    vehicle_id: str
    time_ns: int
    process: ProcessFigures
    apps: tuple[AppFigures, ...]
    """By app name."""
    keys: tuple[KeyFigures, ...]
    """The busiest first, then the keys asked for by name."""
    rate_window_s: float
    extra: tuple[Figure, ...]


_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int:
    """Resident memory now (Linux: /proc), else the peak the kernel reports."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class StatsReader:
    """Reads :class:`Stats` from the parts that keep the figures. One per server,
    shared by every reader."""

    def __init__(
        self,
        *,
        store: VStore,
        ess: EventSubSystem,
        streams: Streams,
        slow_apps: SlowAppWatch,
        stream_counts: StreamCounts,
        journal: Journal | None,
        collectors: Collectors,
        boot_id: str,
        vehicle_id: str,
        top_keys: int = 20,
    ) -> None:
        """``journal``: None without one."""
        if not 0 <= top_keys <= MAX_TOP_KEYS:
            raise ValueError(f"top_keys must be 0 to {MAX_TOP_KEYS}, got {top_keys}")
        self._store = store
        self._ess = ess
        self._streams = streams
        self._slow_apps = slow_apps
        self._stream_counts = stream_counts
        self._journal = journal
        self._collectors = collectors
        self._boot_id = boot_id
        self._vehicle_id = vehicle_id
        self.top_keys = top_keys
        self.rates = KeyRates(store)
        self._started_mono = time.monotonic()
        self._started_wall = time.time()

    def read(self, *, top_keys: int | None = None, keys: Sequence[str] = ()) -> Stats:
        """The figures now: the ``top_keys`` busiest keys (default: the reader's)
        and ``keys`` by name.

        Raises:
            UnknownKeyError: a name of ``keys`` is not a key (``index`` says which).
        """
        store, ess = self._store, self._ess
        now_ns = time.time_ns()
        asked: list[int] = []
        for i, name in enumerate(keys):
            key_id = store.id_of(name)
            if key_id is None:
                error = UnknownKeyError(name)
                error.index = i
                raise error
            asked.append(key_id)
        apps: list[AppFigures] = []
        queued = 0
        for app in sorted(ess.apps()):
            queues = ess.app_stats(app, now_ns)
            if queues is None:
                continue
            queued += queues.depth
            stream = self._streams.get(app)
            apps.append(
                AppFigures(
                    queues,
                    # Kept by the delivery loop on the stream object.
                    int(getattr(stream, "bytes_sent", 0)),
                    self._slow_apps.in_episode(app),
                )
            )
        sample = self.rates.sample()
        wanted = sample.busiest(self.top_keys if top_keys is None else top_keys)
        wanted += [k for k in asked if k not in wanted]
        key_figures = []
        for key_id in wanted:
            key_name = store.name_of(key_id)
            if key_name is None:
                continue  # removed since the sample
            key_figures.append(
                KeyFigures(
                    key_name,
                    key_id,
                    sample.per_second(key_id),
                    max(0, store.version_of(key_id)),
                    ess.subscriber_count(key_id),
                )
            )
        journal = self._journal
        times = os.times()
        process = ProcessFigures(
            apps=len(apps),
            publish_streams=self._stream_counts.publish_stream_count(),
            keys=len(store),
            watched_keys=len(ess.subscriber_counts()),
            subscriptions=ess.subscription_count(),
            event_budget_total=ess.budget_total,
            event_budget_used=ess.budget_used,
            queued_events=queued,
            journal=journal is not None,
            journal_records_written=journal.written if journal is not None else 0,
            journal_records_dropped=(
                journal.dropped_total + journal.failed_total + journal.removed_total
                if journal is not None
                else 0
            ),
            cpu_seconds=times.user + times.system,
            rss_bytes=_rss_bytes(),
            start_time_s=self._started_wall,
            uptime_s=time.monotonic() - self._started_mono,
        )
        return Stats(
            boot_id=self._boot_id,
            vehicle_id=self._vehicle_id,
            time_ns=now_ns,
            process=process,
            apps=tuple(apps),
            keys=tuple(key_figures),
            rate_window_s=sample.window_s,
            extra=tuple(self._collectors.collect()),
        )
