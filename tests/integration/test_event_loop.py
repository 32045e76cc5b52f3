"""The middleware process on each event loop it runs on (``event_loop``): uvloop, which
``auto`` picks where it is installed, and asyncio's own.

Most tests run the server in the test's process, on pytest's asyncio loop; the
processes that tests start run on ``auto``'s choice. Here the same delivery on
both, chosen by name, through the write budget, whose sub-millisecond waits
uvloop's whole-millisecond timers round (:mod:`vehicle_middleware.server.loop`).
"""

from __future__ import annotations

import grpc
import pytest

from tests.integration.conftest import Stubs
from tests.integration.test_pacing import WRITES, paced_delivery
from tests.integration.test_process import start, stop


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_the_process_delivers_on_the_loop_it_is_told_within_the_write_budget(
    loop: str,
) -> None:
    proc, address = start(
        "--listen",
        "127.0.0.1:0",
        "--event-loop",
        loop,
        "--stream-writes-per-s",
        "20",
        "--log-level",
        "INFO",
    )
    channels: list[grpc.aio.Channel] = []

    def connect(app: str | None = "test-app") -> Stubs:
        channel = grpc.aio.insecure_channel(address)
        channels.append(channel)
        return Stubs(channel, app)

    try:
        messages = await paced_delivery(connect)  # every event, in order
        # 20 writes a second: the app's turns come far fewer than once a write
        # (see test_pacing), on whole-millisecond timers too.
        assert messages <= WRITES // 2
    finally:
        for channel in channels:
            await channel.close()
        code, err = stop(proc)
    assert code == 0, err  # SIGTERM: a clean stop on either loop
    assert f"event loop: {loop}" in err
