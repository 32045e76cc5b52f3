"""The parts of one middleware process, built in order.

:class:`Runtime` builds the access parts (identity, rate limits, the ESS's
read policy, write claims, stream counts: :mod:`vehicle_middleware.server.auth`), the V-Store
(with the VSS catalogs' keys), the journal, the ESS (with how its filters read numbers,
and their timer) and the listeners between
them, the stream registry, the health and slow-app watches, the cluster node
with peers, and the write path, each from the parts it uses and its own
settings section. It is the composition root's half that needs no gRPC: the
server (:mod:`vehicle_middleware.server.server`) hands each servicer the few parts it uses,
never the runtime itself, and tests read the parts' state through it.
Everything runs on one asyncio loop.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.ess import EventSubSystem
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.auth.read_policy import StreamReadPolicy
from vehicle_middleware.server.auth.stream_counts import StreamCounts
from vehicle_middleware.server.cluster.node import ClusterNode, PeerCredentials
from vehicle_middleware.server.config import Settings, event_reserve
from vehicle_middleware.server.demand import DemandPublisher
from vehicle_middleware.server.filter_numbers import ValueNumbers
from vehicle_middleware.server.filter_timer import FilterTimer
from vehicle_middleware.server.health import HealthWatch
from vehicle_middleware.server.journal.build import build_journal
from vehicle_middleware.server.journal.feed import Feed
from vehicle_middleware.server.journal.taps import DropJournal, PublishTap
from vehicle_middleware.server.journal.writer import Journal
from vehicle_middleware.server.metrics.collectors import Collectors
from vehicle_middleware.server.session import Streams
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.server.slow_apps import SlowAppWatch
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import VStore

__all__ = ["Runtime"]

log = logging.getLogger(__name__)


class Runtime:
    """The parts of one middleware process (see the module)."""

    def __init__(
        self,
        settings: Settings,
        signals: Signals | None = None,
        peers: PeerCredentials | None = None,
    ) -> None:
        """Build the parts, in order: the store with the catalogs' keys
        (``signals``: configuration every node has, never replicated), the
        journal, the ESS and its listeners, then, with ``settings.cluster.peers``, the
        cluster node (``peers``: the credentials its links present)."""
        self.settings = settings
        self.boot_id = uuid.uuid4().hex
        access = settings.access
        self.rate_limits = RateLimits.of(access)
        self.authenticator = Authenticator.of(access, self.rate_limits)
        """Who is calling (the servicers' identity interceptor)."""
        self.read_policy = StreamReadPolicy(open_mode=self.authenticator.open_mode)
        """What an app may read through the ESS."""
        self.store = VStore(
            max_value_size=settings.store.max_value_size, max_keys=settings.store.max_keys
        )
        self.journal: Journal | None = None
        self.journal_feed: Feed | None = None
        """What the journal's consumers read (JournalService); with the journal."""
        drops: DropJournal | None = None
        if settings.journal.dir:
            self.journal, self.journal_feed = build_journal(
                settings.journal,
                self.boot_id,
                vehicle_id=settings.process.vehicle_id,
                max_message_bytes=settings.limits.max_message_bytes,
            )
            drops = DropJournal(self.journal, self.store)
        full = self.journal is not None and self.journal.full
        streams = settings.streams
        if streams.max_apps * streams.event_budget_per_app > settings.ess.event_budget:
            log.warning(
                "event_budget %d holds fewer than max_apps (%d) shares of event_budget_per_app "
                "(%d): an app within its share may be refused once %d apps hold theirs",
                settings.ess.event_budget,
                streams.max_apps,
                streams.event_budget_per_app,
                settings.ess.event_budget // streams.event_budget_per_app,
            )
        self.ess = EventSubSystem(
            self.store,
            event_budget=settings.ess.event_budget,
            reserve=event_reserve(settings),
            lifecycle_capacity=settings.ess.lifecycle_capacity,
            read_policy=self.read_policy,
            observer=drops if self.journal is not None and self.journal.drops else None,
            numbers=ValueNumbers(signals),
        )
        self.filter_timer = FilterTimer(self.ess)
        """Sends what subscriptions' filters hold when their interval ends."""
        self.publish_tap: PublishTap | None = None
        if full and self.journal is not None:
            self.publish_tap = PublishTap(self.journal, self.store, self.ess)
            self.store.set_listener(self.publish_tap)
        else:
            self.store.set_listener(self.ess)
        self.demand = DemandPublisher(
            self.ess.demand, interval_s=settings.signals.demand_interval_s
        )
        """Tells providers their keys' demand (WatchDemand, KUKSA provider filters)."""
        self.slow_apps = SlowAppWatch(self.ess, every=settings.ess.slow_app_report_s)
        """Reports apps whose queues drop events (driven by the server)."""
        self.health = HealthWatch(self.ess, self.store, self.record, settings.signals.expect)
        """Stale keys and lost providers (ticked by the server; catalogs added there)."""
        self.claims = WriteClaims(
            grace_s=access.claim_grace_s, on_claims=self.health.claims_changed
        )
        """Who may write which keys: scopes and the providers' write claims."""
        self.stream_counts = StreamCounts(
            max_publish_streams_per_app=access.max_publish_streams_per_app, presence=self.claims
        )
        """Every app's open streams: a claim holds while its app has one."""
        self.collectors = Collectors()
        """More figures for the metrics and GetStats, registered by the parts that
        keep them (e.g. the journal's consumers, peer links)."""
        self.collectors.register("demand", self.demand.figures)
        self.streams = Streams(
            settings.streams,
            self.ess,
            self.read_policy,
            self.stream_counts,
            self.record,
            self.journal,
            self.slow_apps,
        )
        """Every app's open stream (own event streams and KUKSA subscriptions)."""
        self.cluster: ClusterNode | None = None
        """The replication with peers (with ``settings.cluster.peers``)."""
        if signals is not None:
            signals.install(self.store)
            self.health.expect_catalog(signals)
        if settings.cluster.peers:
            # After the catalogs: their keys are every node's own configuration, not writes.
            listener = self.store.listener
            assert listener is not None
            self.cluster = ClusterNode(
                settings.cluster,
                self.boot_id,
                self.store,
                listener,
                self.publish_tap,
                self.record,
                peers or PeerCredentials(),
                max_message_bytes=settings.limits.max_message_bytes,
            )
            self.store.set_listener(self.cluster.tap)
        self.writes = WritePath(
            self.boot_id, self.store, self.claims, self.publish_tap, self.cluster
        )
        """One request is one write; the head; the key-id assignment."""

    def head(self) -> str:
        """The head a ``Set`` with ``if_head`` names (:meth:`WritePath.head`)."""
        return self.writes.head()

    def record(self, kind: Kind, **fields: Any) -> None:
        """Journal a record, if there is a journal."""
        if self.journal is not None:
            self.journal.record(kind, **fields)

    def begin_shutdown(self) -> None:
        """End every subscriber stream now, with no grace timers (the process is stopping)."""
        self.claims.on_claims = None  # providers stopping with us are not news
        self.streams.begin_shutdown()

    def shutdown(self) -> None:
        """Forget every app (the process is stopping)."""
        self.demand.close()
        self.filter_timer.close()
        self.streams.shutdown()
        self.claims.shutdown()
