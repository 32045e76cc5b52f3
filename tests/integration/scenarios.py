"""Scenarios shared by several tests."""

from __future__ import annotations

from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub

SPEED = "Vehicle.Speed"


async def slow_app(address: str, n: int) -> list[DataEvent]:
    """A provider writes ``n`` values of 4 KiB while an app with a 5-event queue
    does not read; then the app reads everything left. Returns what it got."""
    received: list[DataEvent] = []
    async with ProviderClient(address, "sim") as provider:
        await provider.add_keys([SPEED])
        async with AppClient(address, "slow", queues=[QueueSpec(0, 0, 5)]) as slow:
            await slow.subscribe([Sub(SPEED)])
            for i in range(n):
                await provider.publish({SPEED: i.to_bytes(4, "big") + bytes(4096)})
            await provider.flush()
            async for e in slow.events():
                if isinstance(e, DataEvent):
                    received.append(e)
                    if e.seq == n:
                        break
    return received
