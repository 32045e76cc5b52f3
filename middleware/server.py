"""Build, start and stop the middleware's gRPC server (grpc.aio).

Serves ``vehicle.ess.v1.EventService``, ``vehicle.vstore.v1.VStore``, the
standard ``grpc.health.v1.Health`` and server reflection. Keepalive is on, so
a peer that vanished is found and its app removed.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from middleware.config import Settings
from middleware.rpc.decoding import DecodeGuard
from middleware.rpc.event_service import EventService
from middleware.rpc.vstore_service import VStoreService
from middleware.runtime import Runtime
from vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

__all__ = ["RunningServer", "start_server"]

log = logging.getLogger(__name__)

SERVICES = (
    ess_pb2.DESCRIPTOR.services_by_name["EventService"].full_name,
    vstore_pb2.DESCRIPTOR.services_by_name["VStore"].full_name,
)


@dataclass
class RunningServer:
    """A started server: where it listens, and how to stop it."""

    server: grpc.aio.Server
    runtime: Runtime
    health: health_aio.HealthServicer
    port: int
    """The TCP port bound (0 when listening on a Unix socket only)."""
    address: str
    """A target a client can dial, e.g. ``127.0.0.1:50051`` or ``unix:/run/vmw.sock``."""

    async def stop(self, grace: float = 2.0) -> None:
        """Refuse new calls, end streams after ``grace`` seconds, forget every app."""
        await self.health.enter_graceful_shutdown()
        self.runtime.begin_shutdown()
        await self.server.stop(grace)
        self.runtime.shutdown()
        if self.runtime.journal is not None:
            self.runtime.journal.close("shutdown")
        log.info("middleware stopped (boot %s)", self.runtime.boot_id)


def _options(s: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", s.max_message_bytes),
        ("grpc.max_send_message_length", s.max_message_bytes),
        ("grpc.keepalive_time_ms", int(s.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(s.keepalive_timeout_s * 1000)),
        # Recent grpc-core times out every ping with this (default 60 s), keepalive's too.
        ("grpc.http2.ping_timeout_ms", int(s.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # Let clients ping every few seconds to find a dead middleware quickly.
        ("grpc.http2.min_ping_interval_without_data_ms", 1000),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
    ]


async def start_server(settings: Settings, runtime: Runtime | None = None) -> RunningServer:
    """Start serving; returns once the server listens.

    Raises:
        RuntimeError: the address cannot be bound.
    """
    runtime = runtime or Runtime(settings)
    server = grpc.aio.server(options=_options(settings), interceptors=[DecodeGuard()])
    ess_pb2_grpc.add_EventServiceServicer_to_server(EventService(runtime), server)
    vstore_pb2_grpc.add_VStoreServicer_to_server(VStoreService(runtime), server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        (
            *SERVICES,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    port = 0
    address = ""
    if settings.listen:
        port = server.add_insecure_port(settings.listen)
        if port == 0:
            raise RuntimeError(f"cannot listen on {settings.listen}")
        host = settings.listen.rsplit(":", 1)[0]
        address = f"{host}:{port}"
    if settings.unix_socket:
        server.add_insecure_port(f"unix:{settings.unix_socket}")
        address = address or f"unix:{settings.unix_socket}"
    await server.start()
    if runtime.journal is not None:
        runtime.journal.start(
            address=address,
            level=runtime.journal.level.name.lower(),
            settings={
                k: v for k, v in dataclasses.asdict(settings).items() if not k.startswith("token")
            },
        )
    for name in ("", *SERVICES):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("middleware listening on %s (boot %s)", address, runtime.boot_id)
    return RunningServer(server, runtime, health, port, address)
