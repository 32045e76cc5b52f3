"""The middleware restarts: apps and providers reconnect and re-register by themselves."""

from __future__ import annotations

import asyncio
import dataclasses

from middleware.client import AppClient, DataEvent, ProviderClient, ReconnectedEvent, Sub
from middleware.client.events import ClientEvent
from middleware.server import start_server
from tests.conftest import eventually
from tests.integration.conftest import TEST_SETTINGS

SPEED = "Vehicle.Speed"


async def next_of(
    queue: asyncio.Queue[ClientEvent], kind: type, timeout: float = 10.0
) -> ClientEvent:
    async def find() -> ClientEvent:
        while True:
            event = await queue.get()
            if isinstance(event, kind):
                return event

    return await asyncio.wait_for(find(), timeout)


async def test_after_a_middleware_restart_clients_reconnect_and_resubscribe() -> None:
    first = await start_server(TEST_SETTINGS)
    second = None
    port = first.port
    provider = ProviderClient(first.address, "sim")
    told: list[ReconnectedEvent] = []
    app = AppClient(first.address, "dash", on_reconnect=told.append)
    events: asyncio.Queue[ClientEvent] = asyncio.Queue()

    async def consume() -> None:
        async for event in app.events():
            events.put_nowait(event)

    consumer: asyncio.Task[None] | None = None
    try:
        await provider.add_keys(["Vehicle.Padding", SPEED])  # ids differ after the restart
        await app.connect()
        await app.subscribe([Sub(SPEED, want_current=True)])
        consumer = asyncio.create_task(consume())
        await provider.publish({SPEED: b"1"})
        got = await next_of(events, DataEvent)
        assert got.data == b"1"  # type: ignore[union-attr]
        old_boot = app.boot_id

        await first.stop(0)
        settings = dataclasses.replace(TEST_SETTINGS, listen=f"127.0.0.1:{port}")
        second = await start_server(settings)
        assert second.runtime.boot_id != old_boot

        await provider.publish({SPEED: b"2"})  # reconnects, adds its keys again, re-sends
        assert provider.reconnects == 1
        assert provider.ids[SPEED] == second.runtime.store.id_of(SPEED)
        back = await next_of(events, ReconnectedEvent)
        assert isinstance(back, ReconnectedEvent)
        assert back.middleware_restarted
        assert back.boot_id == second.runtime.boot_id
        assert told == [back]
        ess = second.runtime.ess
        await eventually(
            lambda: [s.key for s in ess.subscriptions("dash")] == [SPEED],
            what="automatic re-registration",
        )
        await provider.publish({SPEED: b"3"})
        while True:
            got = await next_of(events, DataEvent)
            assert isinstance(got, DataEvent)
            if got.data == b"3":
                break
        assert got.name == SPEED
        assert got.key == second.runtime.store.id_of(SPEED)
    finally:
        if consumer is not None:
            consumer.cancel()
        await app.close()
        await provider.close()
        await first.stop(0)
        if second is not None:
            await second.stop(0)
