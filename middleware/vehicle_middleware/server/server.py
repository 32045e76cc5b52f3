"""Build, start and stop the middleware's gRPC server (grpc.aio).

Serves ``vehicle.ess.v1.EventService``, ``vehicle.vstore.v1.VStore``,
``vehicle.actuation.v1.Actuation``, ``vehicle.cluster.v1.Peer`` (several
nodes, :mod:`vehicle_middleware.server.cluster`), ``vehicle.admin.v1.Admin`` (the metrics
figures, :mod:`vehicle_middleware.server.metrics`; also as Prometheus text with
``MetricsSettings.listen``), the KUKSA.val services ``kuksa.val.v1.VAL``
and ``kuksa.val.v2.VAL``
(:mod:`vehicle_middleware.server.kuksa`; actuation shares one core with the project's own,
:mod:`vehicle_middleware.server.actuation`), the standard ``grpc.health.v1.Health`` and server
reflection. The VSS catalogs of ``SignalSettings.vss`` are loaded first: their
signals are keys from the start, typed (:mod:`vehicle_middleware.server.signals`). Keepalive is on,
so
a peer that vanished is found and its app removed. With ``NetworkSettings.tls_cert``
the TCP listener speaks TLS (mutual with ``tls_client_ca``, :mod:`vehicle_middleware.server.tls`);
the Unix socket stays plaintext, its file mode set to ``unix_socket_mode``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection
from vehicle_middleware.contract.channel import Tls
from vehicle_middleware.proto.vehicle.actuation.v1 import actuation_pb2, actuation_pb2_grpc
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2, cluster_pb2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2, journal_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.server import codecs
from vehicle_middleware.server.actuation import Actuation
from vehicle_middleware.server.cluster.node import PeerCredentials
from vehicle_middleware.server.config import ClusterSettings, Settings, flat_settings
from vehicle_middleware.server.kuksa import KUKSA_SERVICES, KuksaV1, KuksaV2, add_kuksa_services
from vehicle_middleware.server.kuksa.common import authenticate_kuksa
from vehicle_middleware.server.kuksa.subscriptions import KuksaSubscriptions
from vehicle_middleware.server.memory_trim import MemoryTrim, malloc_trim
from vehicle_middleware.server.metrics import (
    Figure,
    MetricsEndpoint,
    MetricsListenError,
    StatsReader,
    registry_for,
)
from vehicle_middleware.server.rpc.actuation_service import ActuationService
from vehicle_middleware.server.rpc.admin_service import AdminService
from vehicle_middleware.server.rpc.call_tracker import CallTracker
from vehicle_middleware.server.rpc.decoding import DecodeGuard
from vehicle_middleware.server.rpc.event_service import PRE_ENCODED as EVENTS_PRE_ENCODED
from vehicle_middleware.server.rpc.event_service import EventService
from vehicle_middleware.server.rpc.identity import Identify
from vehicle_middleware.server.rpc.journal_service import JournalService
from vehicle_middleware.server.rpc.peer_service import PeerService
from vehicle_middleware.server.rpc.pre_encoded import PreEncodedServer
from vehicle_middleware.server.rpc.vstore_service import VStoreService
from vehicle_middleware.server.runtime import Runtime
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.server.tls import ServerTls, load_server_tls

__all__ = ["AddressInUseError", "RunningServer", "start_server"]

log = logging.getLogger(__name__)

SERVICES = (
    ess_pb2.DESCRIPTOR.services_by_name["EventService"].full_name,
    vstore_pb2.DESCRIPTOR.services_by_name["VStore"].full_name,
    actuation_pb2.DESCRIPTOR.services_by_name["Actuation"].full_name,
    journal_pb2.DESCRIPTOR.services_by_name["JournalService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
    cluster_pb2.DESCRIPTOR.services_by_name["Peer"].full_name,
    *KUKSA_SERVICES,
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
    """A target a client can dial, e.g. ``127.0.0.1:50051`` or
    ``unix:/run/vehicle_middleware.sock``."""
    addresses: tuple[str, ...] = ()
    """Every address served: the TCP one (as :attr:`address`), then the Unix socket."""
    watch: asyncio.Task[None] | None = None
    """Reports apps that do not keep up (see :mod:`vehicle_middleware.server.slow_apps`)."""
    signals: Signals | None = None
    """The VSS metadata of the typed keys (``SignalSettings.vss``)."""
    metrics: MetricsEndpoint | None = None
    """The Prometheus endpoint (``MetricsSettings.listen``); its ``address`` has the port."""
    health_watch: asyncio.Task[None] | None = None
    """Tells apps about stale keys (see :mod:`vehicle_middleware.server.health`)."""
    calls: CallTracker | None = None
    """The calls in progress that can still write a journal record."""
    memory: MemoryTrim | None = None
    """Hands the memory of a surge of calls back when it ends
    (:mod:`vehicle_middleware.server.memory_trim`)."""
    journal_service: JournalService | None = None
    actuation: Actuation | None = None
    """The actuators' providers, shared by the project's API and KUKSA's."""

    async def stop(self, grace: float = 2.0) -> None:
        """Refuse new calls, end streams after ``grace`` seconds, forget every app, write
        the journal's ``stop`` record and give its followers up to ``grace`` more seconds
        to take it (a collector following the journal lands the whole boot)."""
        if self.metrics is not None:
            await self.metrics.stop()
        for task in (self.watch, self.health_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.runtime.cluster is not None:
            await self.runtime.cluster.stop()
        await self.health.enter_graceful_shutdown()
        self.runtime.begin_shutdown()
        # New calls are refused from here. The calls that can still write a record
        # end first (within grace), then the journal's last records are written,
        # then its followers get them (within grace more).
        stopping = asyncio.ensure_future(self.server.stop(2 * grace))
        if self.calls is not None:
            await self.calls.end(grace)
        self.runtime.shutdown()
        self.runtime.slow_apps.check()  # the last line of every open drop episode
        if self.runtime.journal is not None:
            self.runtime.journal.close("shutdown")
            if self.journal_service is not None:
                await self.journal_service.finish(grace)
        await stopping
        log.info("middleware stopped (boot %s)", self.runtime.boot_id)


def _options(s: Settings) -> list[tuple[str, int]]:
    network = s.network
    options = [
        ("grpc.max_receive_message_length", s.limits.max_message_bytes),
        ("grpc.max_send_message_length", s.limits.max_message_bytes),
        ("grpc.keepalive_time_ms", int(network.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(network.keepalive_timeout_s * 1000)),
        # Recent grpc-core times out every ping with this (default 60 s), keepalive's too.
        ("grpc.http2.ping_timeout_ms", int(network.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # Let clients ping every few seconds to find a dead middleware quickly.
        ("grpc.http2.min_ping_interval_without_data_ms", 1000),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
        # gRPC sets SO_REUSEPORT by default: a second middleware on the same port
        # would start without complaint and split the clients between two stores.
        ("grpc.so_reuseport", 0),
        # Calls that arrived and wait for the middleware to take them up: beyond
        # grpc-core's limits on them (1,000 and 3,000 by default) it cancels them
        # before the middleware sees them, with a bare CANCELLED that a client cannot
        # tell from its own cancellation.
        ("grpc.server.max_pending_requests", network.max_pending_calls),
        ("grpc.server.max_pending_requests_hard_limit", 2 * network.max_pending_calls),
    ]
    if network.max_concurrent_streams:
        # Beyond it the client queues its calls. A stream counts until the client sees
        # it end, as the client counts it: with grpc-core's overload protection it
        # would count until freed on the server, and a client within the bound would
        # be refused.
        options.append(("grpc.max_concurrent_streams", network.max_concurrent_streams))
        options.append(("grpc.http.overload_protection", 0))
    return options


class AddressInUseError(RuntimeError):
    """Another process serves (or holds) the address this server was told to use."""


def _journal_health(health: health_aio.HealthServicer) -> Callable[[str], None]:
    """What the journal's writer thread calls when its directory is lost or written
    again: the JournalService's health turns NOT_SERVING while the journal writes
    nothing (the rest of the middleware still serves)."""
    loop = asyncio.get_running_loop()
    name = journal_pb2.DESCRIPTOR.services_by_name["JournalService"].full_name

    def told(lost: str) -> None:
        status = (
            health_pb2.HealthCheckResponse.NOT_SERVING
            if lost
            else health_pb2.HealthCheckResponse.SERVING
        )
        with contextlib.suppress(RuntimeError):  # the loop has closed: stopping
            loop.call_soon_threadsafe(lambda: loop.create_task(health.set(name, status)))

    return told


def _unix_socket_in_use(path: str) -> bool:
    """Whether a live process accepts connections on the Unix socket ``path``.

    A socket file left by a process that died (kill -9) refuses the connection:
    it is stale, and gRPC replaces it when binding.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(mode):
        return False  # gRPC's bind fails on it, with its own message
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except TimeoutError:
            return True  # a live listener whose backlog is full
        except OSError:
            # ECONNREFUSED: nobody listens, the file is stale. Anything else
            # (e.g. EACCES): cannot tell; the bind decides.
            return False
        return True


def _taken(address: str) -> str | None:
    """One of the addresses a TCP ``host:port`` resolves to that another process holds.

    gRPC binds every address a host name resolves to (``localhost``: 127.0.0.1
    and ::1) and counts the bind a success when any one of them works: with
    127.0.0.1 taken, a second middleware would serve on ::1 alone and split the
    clients. Port 0 and Unix sockets are never taken.
    """
    if address.startswith("unix:"):
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return None
    try:
        infos = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM)
    except OSError:
        return None  # gRPC's bind decides, with its own message
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            # As gRPC binds: a port in TIME_WAIT after a restart is free, a listener's is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(sockaddr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return str(sockaddr[0])
    return None


def _bind(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """``add_insecure_port`` (``add_secure_port`` with ``credentials``) that raises
    :class:`AddressInUseError` naming the address."""
    held = _taken(address)
    if held is not None:
        raise AddressInUseError(
            f"cannot listen on {address}: {held} is in use there (another middleware?)"
        )
    try:
        if credentials is not None:
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise AddressInUseError(
            f"cannot listen on {address}: the address is in use (another middleware?) "
            "or not available on this machine"
        )
    return port


def _bind_unix(server: grpc.aio.Server, address: str, mode: int) -> None:
    """Bind the Unix socket (always plaintext) with file mode ``mode``.

    The umask keeps the socket from being more open than ``mode`` even for the
    moment between its creation and the chmod.
    """
    path = address.removeprefix("unix:")
    old = os.umask(0o777 & ~mode)
    try:
        _bind(server, address)
    finally:
        os.umask(old)
    os.chmod(path, mode)


def peer_credentials(settings: ClusterSettings) -> PeerCredentials:
    """What this node's links present to its peers: the token file's token, TLS files."""
    token = Path(settings.peer_token_file).read_text().strip() if settings.peer_token_file else None
    tls = None
    if settings.peer_tls_ca:
        tls = Tls(
            ca=settings.peer_tls_ca,
            cert=settings.peer_tls_cert or None,
            key=settings.peer_tls_key or None,
        )
    return PeerCredentials(token, tls)


async def start_server(settings: Settings) -> RunningServer:
    """Start serving; returns once the server listens.

    Raises:
        AddressInUseError: an address cannot be bound (e.g. another middleware
            listens on the TCP port), or a live server answers on the Unix socket.
        CatalogError: a VSS catalog of ``settings.signals.vss`` cannot be read.
        JournalInUseError: another live middleware writes ``settings.journal.dir``.
        TlsConfigError: a TLS file cannot be read, does not parse, has expired,
            or the key is not the certificate's.
        MetricsListenError: ``settings.metrics.listen`` cannot be listened on.
    """
    tls: ServerTls | None = None
    network = settings.network
    if network.tls_cert:
        tls = load_server_tls(network.tls_cert, network.tls_key, settings.access.tls_client_ca)
    signals = Signals.load(settings.signals.vss)
    cluster = settings.cluster
    runtime = Runtime(settings, signals, peer_credentials(cluster) if cluster.peers else None)
    identify = Identify(
        runtime.authenticator,
        {
            **dict.fromkeys(KUKSA_SERVICES, authenticate_kuksa),
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name: None,
            reflection.SERVICE_NAME: None,
            "grpc.reflection.v1.ServerReflection": None,
        },
    )
    memory = MemoryTrim(malloc_trim())
    # Spared: calls that write no record, ended by server.stop after the journal's stop.
    calls = CallTracker(
        (
            journal_pb2.DESCRIPTOR.services_by_name["JournalService"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
            "grpc.reflection.v1.ServerReflection",
        ),
        on_count=memory.calls,
    )
    server = grpc.aio.server(
        options=_options(settings), interceptors=[calls, DecodeGuard(), identify]
    )
    limits = settings.limits
    authenticator = runtime.authenticator
    ess_pb2_grpc.add_EventServiceServicer_to_server(
        EventService(
            authenticator=authenticator,
            read_policy=runtime.read_policy,
            streams=runtime.streams,
            ess=runtime.ess,
            store=runtime.store,
            writes=runtime.writes,
            boot_id=runtime.boot_id,
            limits=limits,
            record=runtime.record,
        ),
        PreEncodedServer(server, EVENTS_PRE_ENCODED),
    )
    vstore_pb2_grpc.add_VStoreServicer_to_server(
        VStoreService(
            authenticator=authenticator,
            claims=runtime.claims,
            rate_limits=runtime.rate_limits,
            stream_counts=runtime.stream_counts,
            store=runtime.store,
            ess=runtime.ess,
            writes=runtime.writes,
            cluster=runtime.cluster,
            limits=limits,
            record=runtime.record,
            demand=runtime.demand,
        ),
        server,
    )
    actuation = Actuation(
        runtime.store, signals, runtime.claims, settings.signals.actuation_timeout_s
    )
    actuation_pb2_grpc.add_ActuationServicer_to_server(
        ActuationService(authenticator, limits, actuation), server
    )
    journal_service = JournalService(
        authenticator, runtime.journal_feed, settings.process.vehicle_id
    )
    if runtime.journal_feed is not None:
        runtime.collectors.register("journal_consumers", runtime.journal_feed.figures)
    if runtime.journal is not None:
        runtime.collectors.register("journal_directory", runtime.journal.figures)
    runtime.collectors.register("codecs", _codecs_figures)
    journal_pb2_grpc.add_JournalServiceServicer_to_server(journal_service, server)
    subscriptions = KuksaSubscriptions(
        store=runtime.store,
        ess=runtime.ess,
        streams=runtime.streams,
        read_policy=runtime.read_policy,
        limits=limits,
        record=runtime.record,
    )
    kuksa_v1 = KuksaV1(
        authenticator=authenticator,
        store=runtime.store,
        writes=runtime.writes,
        claims=runtime.claims,
        subscriptions=subscriptions,
        limits=limits,
        signals=signals,
        actuation=actuation,
    )
    kuksa_v2 = KuksaV2(
        authenticator=authenticator,
        store=runtime.store,
        writes=runtime.writes,
        claims=runtime.claims,
        rate_limits=runtime.rate_limits,
        subscriptions=subscriptions,
        limits=limits,
        signals=signals,
        actuation=actuation,
        demand=runtime.demand,
    )
    add_kuksa_services(server, kuksa_v1, kuksa_v2)
    stats = StatsReader(
        store=runtime.store,
        ess=runtime.ess,
        streams=runtime.streams,
        slow_apps=runtime.slow_apps,
        stream_counts=runtime.stream_counts,
        journal=runtime.journal,
        collectors=runtime.collectors,
        boot_id=runtime.boot_id,
        vehicle_id=settings.process.vehicle_id,
        top_keys=settings.metrics.top_keys,
    )
    admin_pb2_grpc.add_AdminServicer_to_server(AdminService(authenticator, limits, stats), server)
    cluster_pb2_grpc.add_PeerServicer_to_server(
        PeerService(
            authenticator,
            runtime.cluster,
            lambda: cluster_pb2.StatusResponse(
                node_id=cluster.node_id, head=runtime.head(), keys=len(runtime.store)
            ),
        ),
        server,
    )
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
    if runtime.journal is not None:
        runtime.journal.lock()  # before binding: a second middleware fails with nothing taken
    addresses: list[str] = []
    port = 0
    metrics: MetricsEndpoint | None = None
    try:
        if network.listen:
            port = _bind(server, network.listen, tls.credentials() if tls else None)
            host = network.listen.rsplit(":", 1)[0]
            addresses.append(f"{host}:{port}")
        if network.unix_socket:
            unix = f"unix:{network.unix_socket}"
            # gRPC unlinks an existing socket file before binding: without this
            # check a second middleware would silently take the path over.
            if _unix_socket_in_use(network.unix_socket):
                raise AddressInUseError(
                    f"cannot listen on {unix}: another server is listening on that socket"
                )
            _bind_unix(server, unix, network.unix_socket_file_mode)
            addresses.append(unix)
        if settings.metrics.listen:
            metrics = MetricsEndpoint(registry_for(stats))
            await metrics.start(settings.metrics.listen)
    except (AddressInUseError, MetricsListenError):
        await server.stop(None)  # releases what was bound already
        if runtime.journal is not None:
            runtime.journal.unlock()
        raise
    address = addresses[0]
    await server.start()
    if runtime.cluster is not None:
        await runtime.cluster.start()
    if runtime.journal is not None:
        runtime.journal.start(
            address=address,
            level=runtime.journal.level.name.lower(),
            settings={
                k: v for k, v in flat_settings(settings).items() if not k.startswith("token")
            },
        )
    for name in ("", *SERVICES):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    if runtime.journal is not None:
        runtime.journal.on_directory = _journal_health(health)
    log.info("middleware listening on %s (boot %s)", " and ".join(addresses), runtime.boot_id)
    watch = asyncio.create_task(runtime.slow_apps.run(), name="slow-app-watch")
    health_watch = asyncio.create_task(runtime.health.run(), name="health-watch")
    if tls is not None:
        log.info(
            "TLS on %s: certificate %s (expires %s)%s",
            addresses[0],
            tls.subject,
            f"{tls.expires:%Y-%m-%d}",
            "; mutual: client certificates name the apps" if tls.client_ca else "",
        )
    if metrics is not None:
        log.info("metrics on http://%s/metrics", metrics.address)
    return RunningServer(
        server,
        runtime,
        health,
        port,
        address,
        tuple(addresses),
        watch,
        signals,
        metrics,
        health_watch=health_watch,
        calls=calls,
        memory=memory,
        journal_service=journal_service,
        actuation=actuation,
    )


def _codecs_figures() -> list[Figure]:
    """Which implementation of the hot encoders and readers a stream opened now runs
    (:mod:`vehicle_middleware.server.codecs`): a figure for the metrics and ``vehicle_middleware
    top``."""
    return [
        Figure(
            "vmw_codecs_info",
            "Always 1; the label names the implementation of the hot encoders and readers "
            "(fast or reference, VMW_REFERENCE_CODECS).",
            "gauge",
            (("codecs", codecs.selected().value),),
            1.0,
        )
    ]
