"""``vehicle-middleware health``: a running middleware's health and services, by the
command an operator has with the server's own install (docs/operators.md)."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from vehicle_middleware.server.server import RunningServer

from tests.integration.conftest import Keys, NewServer, token_mode
from tests.integration.pki import Authority
from tests.integration.test_quickstart import finish

SERVICES = (
    "  grpc.health.v1.Health\n"
    "  grpc.reflection.v1alpha.ServerReflection\n"
    "  kuksa.val.v1.VAL\n"
    "  kuksa.val.v2.VAL\n"
    "  vehicle.actuation.v1.Actuation\n"
    "  vehicle.admin.v1.Admin\n"
    "  vehicle.cluster.v1.Peer\n"
    "  vehicle.ess.v1.EventService\n"
    "  vehicle.journal.v1.JournalService\n"
    "  vehicle.vstore.v1.VStore\n"
)


async def health(*options: str) -> tuple[int, str, str]:
    """``python -m vehicle_middleware.server health OPTIONS``: exit status, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vehicle_middleware.server",
        "health",
        "--timeout",
        "10",
        *options,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return await finish(proc)


async def test_health_says_serving_and_lists_the_services_of_a_token_mode_middleware(
    new_server: NewServer, keys: Keys, tmp_path: Path
) -> None:
    # Health and reflection need no identity: no token, no app id.
    running = await new_server(**token_mode(keys, tmp_path))
    code, out, err = await health("--target", running.address)
    assert (code, err) == (0, "")
    assert out == f"{running.address}: SERVING\n{SERVICES}"


async def test_health_of_an_address_nobody_serves_exits_1_saying_so() -> None:
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{bound.getsockname()[1]}"
        code, out, err = await health("--target", address)
    assert (code, out) == (1, "")
    assert err.startswith(f"{address}: no answer (UNAVAILABLE: "), err
    assert err.endswith("is a middleware running there? (one serving TLS needs --tls-ca)\n"), err


async def test_health_dials_a_middleware_serving_tls_with_its_ca(
    new_server: NewServer, tmp_path: Path
) -> None:
    car = Authority(tmp_path, "car")
    issued = car.server()
    running: RunningServer = await new_server(tls_cert=str(issued.cert), tls_key=str(issued.key))
    code, out, err = await health("--target", running.address, "--tls-ca", str(car.cert))
    assert (code, err) == (0, "")
    assert out == f"{running.address}: SERVING\n{SERVICES}"
    # Plaintext against TLS: no answer, and the hint names the option.
    code, out, err = await health("--target", running.address)
    assert (code, out) == (1, "")
    assert "needs --tls-ca" in err
