"""The middleware restarts: apps and providers reconnect and re-register by themselves."""

from __future__ import annotations

import asyncio

from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, ReconnectedEvent, Sub
from vehicle_middleware.sdk.events import ClientEvent
from vehicle_middleware.server.config import replace_settings
from vehicle_middleware.server.server import start_server

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
        settings = replace_settings(TEST_SETTINGS, listen=f"127.0.0.1:{port}")
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


async def test_after_flush_and_restart_a_provider_never_writes_into_another_key() -> None:
    first = await start_server(TEST_SETTINGS)
    second = None
    p = ProviderClient(first.address, "speed-provider")
    q = None
    try:
        await p.add_keys([SPEED])
        await p.publish({SPEED: b"50"})
        await p.flush()  # no stream open when the middleware goes away
        await first.stop(0)
        second = await start_server(
            replace_settings(TEST_SETTINGS, listen=f"127.0.0.1:{first.port}")
        )
        q = ProviderClient(second.address, "door-provider")
        await q.add_keys(["Vehicle.Door"])  # takes the id Speed had
        await q.publish({"Vehicle.Door": b"closed"})
        await q.flush()
        await p.publish({SPEED: b"51"})
        await p.flush()
        store = second.runtime.store
        assert store.get("Vehicle.Door").data == b"closed"
        assert store.get(SPEED).data == b"51"
        assert p.ids[SPEED] == store.id_of(SPEED)
    finally:
        await p.close()
        if q is not None:
            await q.close()
        await first.stop(0)
        if second is not None:
            await second.stop(0)


async def test_a_provider_never_writes_a_removed_keys_id_reused_by_a_new_key() -> None:
    server = await start_server(TEST_SETTINGS)
    p = ProviderClient(server.address, "old-provider")
    admin = ProviderClient(server.address, "admin")
    try:
        await p.add_keys(["Vehicle.Old"])
        await p.publish({"Vehicle.Old": b"1"})
        await admin.remove_keys(["Vehicle.Old"])
        brake = await admin.add_keys(["Vehicle.Brake"])  # reuses the freed id
        await admin.publish({"Vehicle.Brake": b"off"})
        await admin.flush()
        await p.publish({"Vehicle.Old": b"2"})  # refused as stale, re-added, re-sent
        await p.flush()
        store = server.runtime.store
        assert store.get("Vehicle.Brake").data == b"off"
        assert store.get("Vehicle.Old").data == b"2"
        assert p.ids["Vehicle.Old"] != brake["Vehicle.Brake"]
    finally:
        await p.close()
        await admin.close()
        await server.stop(0)


async def test_an_app_holding_a_batch_when_the_middleware_restarts_reconnects() -> None:
    """The app is working on a batch when the middleware stops; when it asks for
    the next, its acknowledgement meets the ended call (grpc answers with an
    INTERNAL of its own): the app reconnects, as at any other moment, instead of
    dying of it."""
    first = await start_server(TEST_SETTINGS)
    second = None
    app = AppClient(first.address, "dash", window=2)  # acknowledges every batch
    try:
        async with ProviderClient(first.address, "sim") as provider:
            await provider.add_keys([SPEED])
            await app.connect()
            await app.subscribe([Sub(SPEED, on_update=True)])
            await provider.publish({SPEED: b"1"})
            await provider.flush()
        batches = app.batches()
        (held,) = await asyncio.wait_for(anext(batches), 5)
        assert isinstance(held, DataEvent)
        await first.stop(0)
        settings = replace_settings(TEST_SETTINGS, listen=f"127.0.0.1:{first.port}")
        second = await start_server(settings)
        (back,) = await asyncio.wait_for(anext(batches), 10)
        assert isinstance(back, ReconnectedEvent)
        assert back.middleware_restarted
    finally:
        await app.close()
        await first.stop(0)
        if second is not None:
            await second.stop(0)
