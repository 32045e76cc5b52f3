"""One app id is one app: a second client of a running app's id takes over, and
starts anew.

Two real clients (the SDK's ``AppClient``, and the sample logger as a real
process) with one id against a real server in open mode: the replaced one is
told once, in one line, and the new one sees only its own subscriptions, with
seq counted from its own start.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from vehicle_middleware.contract.values import encode
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, StreamReplacedError, Sub
from vehicle_middleware.sdk.status_file import read_status
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually

SPEED = "Vehicle.Speed"
RPM = "Vehicle.Powertrain.Engine.Speed"


async def _next_data(events: object, timeout: float = 5.0) -> DataEvent:
    while True:
        event = await asyncio.wait_for(events.__anext__(), timeout)  # type: ignore[attr-defined]
        if isinstance(event, DataEvent):
            return event


async def test_a_second_client_of_an_app_id_starts_anew_and_the_first_is_told_it_was_replaced(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, RPM])
        first = AppClient(server.address, "dash")
        second = AppClient(server.address, "dash")
        try:
            await first.connect()
            await first.subscribe([Sub(SPEED), Sub(RPM)])
            old_events = first.events()
            for value in (1.0, 2.0, 3.0):  # the first client's seq goes on to 3
                await provider.publish({SPEED: encode(value), RPM: encode(value)})
                await provider.flush()
            seen = [await _next_data(old_events) for _ in range(6)]
            assert max(e.seq for e in seen) == 3

            await second.connect()  # takes over the app
            with pytest.raises(StreamReplacedError, match="another client of app 'dash'"):
                await _next_data(old_events)
            # Its own subscriptions only: nothing of the first client's is left.
            assert await second.subscriptions() == []
            await second.subscribe([Sub(SPEED)])
            assert [s.key for s in await second.subscriptions()] == [SPEED]

            new_events = second.events()
            await provider.publish({SPEED: encode(4.0), RPM: encode(4.0)})
            await provider.flush()
            await provider.publish({SPEED: encode(5.0), RPM: encode(5.0)})
            await provider.flush()
            got = [await _next_data(new_events), await _next_data(new_events)]
            assert [(e.name, e.seq, e.missed) for e in got] == [(SPEED, 1, 0), (SPEED, 2, 0)]
            assert second.missed_total == 0
            server.runtime.ess.check()
        finally:
            await first.close()
            await second.close()


async def test_a_replaced_sample_app_says_so_in_one_line_and_exits(
    server: RunningServer, tmp_path: Path
) -> None:
    status = tmp_path / "logger.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vehicle_middleware.apps", "logger", "--target", server.address,
        "--app-id", "dash", "--out", str(tmp_path / "x.jsonl"), "--status", str(status),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    try:
        await eventually(
            lambda: (read_status(status) or {}).get("state") == "reading",
            timeout=30,
            what="the logger's stream open",
        )
        async with AppClient(server.address, "dash") as second:
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert "dash" in server.runtime.streams  # the second client holds the app
            assert second.boot_id
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = err.decode()
    assert proc.returncode == 1, text
    assert "Traceback" not in text, text
    [said] = [line for line in text.splitlines() if line.startswith("python -m ")]
    assert said == (
        "python -m vehicle_middleware.apps logger: app 'dash': another client of app 'dash' "
        "opened an event stream and replaced this one; not reconnecting, so that the two "
        "do not replace each other forever"
    ), text
