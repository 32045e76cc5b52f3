"""The middleware's state in one place: the V-Store, the ESS, and the open streams.

The servicers share one :class:`Runtime`. It owns the rule that ties a gRPC
stream to an app's state in the ESS: one stream per app, a newer one replaces
the older, and when the current stream ends the app is removed (after the
grace period, if one is configured). Everything runs on one asyncio loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from vmw.ess import EventSubSystem, QueueConfig
from vmw.server.access import Access
from vmw.server.auth.scopes import ALL, Grants
from vmw.server.config import Settings
from vmw.server.delivery import AppStream, EndReason
from vmw.server.errors import LimitExceededError
from vmw.server.health import HealthWatch
from vmw.server.journal.build import build_journal
from vmw.server.journal.feed import Feed
from vmw.server.journal.taps import DropJournal, PublishTap
from vmw.server.journal.writer import Journal
from vmw.server.metrics.collectors import Collectors
from vmw.server.slow_apps import SlowAppWatch
from vmw.vstore import VStore

if TYPE_CHECKING:
    from vmw.server.cluster import ClusterNode

__all__ = ["AppStream", "Runtime"]

log = logging.getLogger(__name__)


class Runtime:
    """The V-Store, the ESS and the app streams of one middleware process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.boot_id = uuid.uuid4().hex
        self.access = Access(settings)
        self.store = VStore(max_value_size=settings.max_value_size, max_keys=settings.max_keys)
        self.journal: Journal | None = None
        self.journal_feed: Feed | None = None
        """What the journal's consumers read (JournalService); with the journal."""
        drops: DropJournal | None = None
        if settings.journal_dir:
            self.journal, self.journal_feed = build_journal(settings, self.boot_id)
            drops = DropJournal(self.journal, self.store)
        full = self.journal is not None and self.journal.full
        self.ess = EventSubSystem(
            self.store,
            event_budget=settings.event_budget,
            lifecycle_capacity=settings.lifecycle_capacity,
            read_policy=self.access,
            observer=drops if self.journal is not None and self.journal.drops else None,
        )
        self.publish_tap: PublishTap | None = None
        if full and self.journal is not None:
            self.publish_tap = PublishTap(self.journal, self.store, self.ess)
            self.store.set_listener(self.publish_tap)
        else:
            self.store.set_listener(self.ess)
        self.slow_apps = SlowAppWatch(self.ess, every=settings.slow_app_report_s)
        """Reports apps whose queues drop events (driven by the server)."""
        self.health = HealthWatch(self.ess, self.store, self.record, settings.expect)
        """Stale keys and lost providers (ticked by the server; catalogs added there)."""
        self.access.on_claims = self.health.claims_changed
        self.collectors = Collectors()
        """More figures for the metrics and GetStats, registered by the parts that
        keep them (e.g. the journal's consumers, peer links)."""
        self._streams: dict[str, AppStream] = {}
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        self._removals = 0
        self._closing = False
        self.keys_version = f"{self.boot_id}.0"
        """Names the current key-id assignment: changes with the boot and every removal."""
        self.cluster: ClusterNode | None = None
        """The replication with peers (set by the server when it has peers)."""
        self._writes = 0
        self._head: tuple[int, str] = (0, "")

    def remove_keys(self, names: Sequence[str]) -> tuple[list[tuple[str, int]], list[str]]:
        """Remove keys; returns ``(removed (name, old id), not found)``.

        Bumps :attr:`keys_version`: a removed id may be handed to the next new key.
        """
        removed: list[tuple[str, int]] = []
        not_found: list[str] = []
        for name in names:
            if name in self.store:
                removed.append((name, self.store.remove_key(name)))
                self.access.forget_key(name)
            else:
                not_found.append(name)
        if removed:
            self._removals += 1
            self.keys_version = f"{self.boot_id}.{self._removals}"
        return removed, not_found

    def record(self, kind: str, **fields: Any) -> None:
        """Journal a record, if there is a journal."""
        if self.journal is not None:
            self.journal.record(kind, **fields)

    @contextmanager
    def writing(self, app: str) -> Iterator[None]:
        """Writes inside are one request: journaled (at the full level) with
        ``app`` as the writer, one replicated event on a node with peers, one
        step of the head on a node without."""
        tap = self.publish_tap
        cluster = self.cluster
        if tap is None and cluster is None:
            yield
            self._writes += 1
            return
        if tap is not None:
            tap.begin(app)
        if cluster is not None:
            cluster.tap.begin()
        try:
            yield
        finally:
            if cluster is not None:
                cluster.tap.end()
            if tap is not None:
                tap.end()
        self._writes += 1

    def head(self) -> str:
        """The head (hex): what a ``Set`` with ``if_head`` names.

        With peers, the hash of the newest event this node applied
        (:mod:`replica`). Without, a hash of the boot and the count of write
        requests (computed when asked: nothing on the write path); empty
        before the first write either way.
        """
        if self.cluster is not None:
            return self.cluster.head
        count, head = self._head
        if count != self._writes:
            count = self._writes
            head = hashlib.sha256(f"{self.boot_id}:{count}".encode()).hexdigest()
            self._head = (count, head)
        return head

    def has_stream(self, app: str) -> bool:
        """Whether the app has an open event stream now."""
        return app in self._streams

    def stream_of(self, app: str) -> AppStream | None:
        """The app's open event stream, if it has one."""
        return self._streams.get(app)

    def open_stream(
        self,
        app: str,
        queues: Sequence[QueueConfig],
        grants: Grants = ALL,
        *,
        window: int | None = None,
    ) -> AppStream:
        """Open the app's stream, replacing an older one; configure its queues.

        ``window``: events sent and not acknowledged, at most (None: no window).

        Raises:
            InvalidQueueConfigError, BudgetExceededError: nothing changes.
            LimitExceededError: a new app beyond the apps-with-streams limit.
        """
        limit = self.settings.max_apps
        if app not in self._streams and len(self._streams) >= limit:
            raise LimitExceededError(
                "apps with open streams", limit, f"{len(self._streams)} apps have one open"
            )
        stream = AppStream(app, window)
        stream.effective = self.ess.open_stream(app, queues, wake=stream.doorbell.set)
        # What the app may read is what this stream's token allows; subscriptions
        # kept from an earlier stream (another token) must pass it too.
        self.access.stream_grants(app, grants)
        denied = [
            s.key for s in self.ess.subscriptions(app) if not self.access.may_read(app, s.key)
        ]
        if denied:
            self.ess.deregister(app, denied, check_policy=False)
            log.info(
                "app %s: %d subscriptions ended: its new token may not read them", app, len(denied)
            )
        timer = self._expiry.pop(app, None)
        if timer is not None:
            timer.cancel()
        old = self._streams.get(app)
        self._streams[app] = stream
        self.record(
            "connect",
            app=app,
            stream="events",
            details={
                "queues": [[c.queue, c.min_length, c.max_length] for c in stream.effective],
                "replaces": old is not None,
            },
        )
        if old is not None:
            old.replace()
            log.info("app %s: new event stream replaces the previous one", app)
        else:
            log.info("app %s: event stream opened", app)
        return stream

    def close_stream(self, stream: AppStream) -> None:
        """The stream ended. If it was the app's current one, the app goes (now or after grace)."""
        self.record(
            "disconnect",
            app=stream.app,
            stream="events",
            details={
                "replaced": stream.end_reason is EndReason.REPLACED,
                "token_expired": stream.end_reason is EndReason.EXPIRED,
                "shutdown": stream.end_reason is EndReason.SHUTDOWN,
            },
        )
        if self._streams.get(stream.app) is not stream:
            return  # replaced: the newer stream owns the app's state
        del self._streams[stream.app]
        grace = self.settings.grace_period_s
        if grace > 0 and not self._closing:
            loop = asyncio.get_running_loop()
            self._expiry[stream.app] = loop.call_later(grace, self._expire, stream.app)
            log.info("app %s: event stream ended; state kept for %.1f s", stream.app, grace)
        else:
            self._remove(stream.app)

    def _expire(self, app: str) -> None:
        self._expiry.pop(app, None)
        if app not in self._streams:
            self._remove(app)

    def _remove(self, app: str) -> None:
        subs = len(self.ess.subscriptions(app))
        self.ess.remove_app(app)
        self.access.stream_grants(app, None)
        log.info("app %s: event stream ended; removed it and its %d subscriptions", app, subs)

    def begin_shutdown(self) -> None:
        """End every event stream now, with no grace timers (the process is stopping)."""
        self._closing = True
        self.access.on_claims = None  # providers stopping with us are not news
        for stream in list(self._streams.values()):
            stream.end()

    def shutdown(self) -> None:
        """Forget every app (the process is stopping)."""
        self._closing = True
        for timer in self._expiry.values():
            timer.cancel()
        self._expiry.clear()
        for app in self.ess.apps():
            self.ess.remove_app(app)
        self.access.shutdown()
