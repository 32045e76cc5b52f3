"""The Admin servicer: GetStats, the metrics figures for tools without Prometheus.

Thin: identity and the ``admin`` scope, the request's limits, one reading of
:class:`~vehicle_middleware.server.metrics.StatsReader`, and its conversion to the message.
"""

from __future__ import annotations

from typing import Any

import grpc
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.permissions import require_admin
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.errors import InvalidRequestError
from vehicle_middleware.server.metrics import MAX_TOP_KEYS, Stats, StatsReader
from vehicle_middleware.server.rpc.identity import caller
from vehicle_middleware.server.rpc.status import maps_errors

__all__ = ["AdminService", "stats_message"]

_NS = 1e-9


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(
        self, authenticator: Authenticator, limits: RequestLimits, reader: StatsReader
    ) -> None:
        self._authenticator = authenticator
        self._limits = limits
        self._reader = reader

    @maps_errors("keys")
    async def GetStats(
        self, request: admin_pb2.GetStatsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admin_pb2.Stats:
        who = caller(context, self._authenticator)
        require_admin(who)
        if request.top_keys > MAX_TOP_KEYS:
            raise InvalidRequestError("top_keys", f"at most {MAX_TOP_KEYS}, got {request.top_keys}")
        limit = self._limits.max_keys_per_request
        if len(request.keys) > limit:
            raise InvalidRequestError(
                "keys", f"at most {limit} per request, got {len(request.keys)}"
            )
        stats = self._reader.read(top_keys=request.top_keys or None, keys=list(request.keys))
        return stats_message(stats)


def stats_message(s: Stats) -> admin_pb2.Stats:
    """The wire form of one reading."""
    p = s.process
    return admin_pb2.Stats(
        boot_id=s.boot_id,
        time_ns=s.time_ns,
        process=admin_pb2.Process(
            apps=p.apps,
            publish_streams=p.publish_streams,
            keys=p.keys,
            watched_keys=p.watched_keys,
            subscriptions=p.subscriptions,
            event_budget_total=p.event_budget_total,
            event_budget_used=p.event_budget_used,
            queued_events=p.queued_events,
            journal=p.journal,
            journal_records_written=p.journal_records_written,
            journal_records_dropped=p.journal_records_dropped,
            cpu_seconds=p.cpu_seconds,
            rss_bytes=p.rss_bytes,
            uptime_s=p.uptime_s,
        ),
        apps=[
            admin_pb2.AppStats(
                app=a.app,
                queues=[
                    admin_pb2.QueueStats(
                        queue=q.queue,
                        depth=q.depth,
                        high_water=q.high_water,
                        min_length=q.min_length,
                        max_length=q.max_length,
                        delivered=q.delivered,
                        evicted=q.evicted,
                        lost=q.lost,
                        discarded=q.discarded,
                        oldest_age_s=q.oldest_age_ns * _NS,
                    )
                    for q in a.queues.queues
                ],
                bytes_sent=a.bytes_sent,
                subscriptions=a.queues.subscriptions,
                lifecycle_pending=a.queues.lifecycle_pending,
                dropping=a.dropping,
            )
            for a in s.apps
        ],
        keys=[
            admin_pb2.KeyStats(
                name=k.name,
                key_id=k.key_id,
                writes_per_s=k.writes_per_s,
                writes=k.writes,
                subscribers=k.subscribers,
            )
            for k in s.keys
        ],
        rate_window_s=s.rate_window_s,
        extra=[
            admin_pb2.Figure(
                name=f.name, help=f.help, kind=f.kind, labels=dict(f.labels), value=f.value
            )
            for f in s.extra
        ],
    )
