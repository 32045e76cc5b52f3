"""``vehicle-middleware health``: is a middleware serving, and what does it serve?

Asks a running middleware's standard gRPC health service (``grpc.health.v1``,
the whole server) and lists its services by server reflection: what
``grpcurl list`` shows, with only the server's own install. Both services need
no identity, so the probe works against a middleware in any auth mode; with
``--tls-ca`` (and ``--tls-cert``/``--tls-key`` for mutual TLS) it dials one
serving TLS.

grpc is imported when a probe runs, not with this module: the same command line's
``serve`` must be first to import it (:mod:`vehicle_middleware.server.core_log`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vehicle_middleware.contract.channel import Tls

DEFAULT_TIMEOUT_S = 5.0
"""Seconds the probe waits for the middleware to answer."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What a middleware answered: its health status by name (``SERVING``,
    ``NOT_SERVING`` while it stops) and the services reflection lists, sorted."""

    status: str
    services: tuple[str, ...]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``health`` subcommand's options."""
    parser.add_argument("--target", default="127.0.0.1:50051", help="middleware address")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for an answer (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--tls-ca", metavar="FILE", default=None, help="PEM CA of a middleware serving TLS"
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", default=None, help="PEM client certificate (mutual TLS)"
    )
    parser.add_argument("--tls-key", metavar="FILE", default=None, help="PEM key of --tls-cert")


async def probe(target: str, *, tls: Tls | None = None, timeout: float) -> Probe:
    """Ask ``target``'s health service, then list its services by reflection.

    Raises:
        grpc.aio.AioRpcError: the middleware did not answer (UNAVAILABLE,
            DEADLINE_EXCEEDED) or refused a call.
    """
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    from vehicle_middleware.contract.channel import open_channel

    async with open_channel(target, tls=tls) as channel:
        # The generated stubs of these two packages are typed for sync channels only.
        health: Any = health_pb2_grpc.HealthStub(channel)
        answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
        reflection: Any = reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[arg-type]
        call = reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=timeout
        )
        services: list[str] = []
        async for reply in call:
            services.extend(s.name for s in reply.list_services_response.service)
    return Probe(status, tuple(sorted(services)))


def main(args: argparse.Namespace) -> int:
    """Print the target's status and services: exit 0 when it is SERVING, 1 when it
    answers otherwise or not at all, 2 on bad options."""
    import grpc
    from vehicle_middleware.contract.channel import Tls

    if (args.tls_cert is None) != (args.tls_key is None):
        print("middleware health: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = None
    if args.tls_ca is not None or args.tls_cert is not None:
        tls = Tls(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key)
    try:
        found = asyncio.run(probe(args.target, tls=tls, timeout=args.timeout))
    except ValueError as e:  # a TLS file that cannot be read
        print(f"middleware health: {e}", file=sys.stderr)
        return 2
    except grpc.aio.AioRpcError as e:
        print(
            f"{args.target}: no answer ({e.code().name}: {e.details()}); is a middleware "
            "running there? (one serving TLS needs --tls-ca)",
            file=sys.stderr,
        )
        return 1
    print(f"{args.target}: {found.status}", flush=True)
    print("".join(f"  {name}\n" for name in found.services), end="", flush=True)
    return 0 if found.status == "SERVING" else 1
