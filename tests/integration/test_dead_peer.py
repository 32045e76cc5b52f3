"""A peer that stops answering (frozen, not closed) is found by keepalive and removed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap

from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually

FROZEN_APP = textwrap.dedent("""
    import asyncio, sys
    from vehicle_middleware.sdk import AppClient, Sub

    async def main():
        app = AppClient(sys.argv[1], "frozen")
        await app.connect()
        await app.subscribe([Sub("Vehicle.Speed")])
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_a_frozen_app_is_detected_by_keepalive_and_removed(server: RunningServer) -> None:
    ess = server.runtime.ess
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.Speed"])
        # Started asynchronously: the server runs on this test's event loop.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", FROZEN_APP, server.address, stdout=asyncio.subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.strip() == b"ready"
            assert ess.has_stream("frozen")
            os.kill(proc.pid, signal.SIGSTOP)  # alive, connected, silent
            # Server keepalive in these tests: ping after 1 s, give up 1 s later.
            await eventually(
                lambda: not ess.has_stream("frozen"),
                timeout=20,
                what="keepalive to remove the frozen app",
            )
            assert ess.watched_keys() == []
            ess.check()
        finally:
            proc.kill()
            await proc.wait()
