"""Actuation: a provider that drives the media player's volume and source, and an
app that asks it for new ones.

    .venv-sdk/bin/python examples/actuation/media.py [ADDRESS]

with the SDK's own environment (README.md, "A provider and an app"), against a
middleware serving the shipped catalog, where both keys are actuators with a
datatype, bounds and allowed values:

    .venv-server/bin/vehicle-middleware serve \\
        --vss providers/vehicle_middleware/providers/catalogs/vehicle.json

ADDRESS is the middleware's (default 127.0.0.1:50051). The provider claims the
two actuators and answers each request: it refuses while the player is muted,
else sets the player and publishes the new values (a request does not change
the stored value; the provider's publish does). The app watches both keys,
asks for new settings and prints each answer. In a car they are two processes;
here they are two clients of one program, so that one command shows both sides.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from dataclasses import dataclass

import grpc
from vehicle_middleware.contract.values import Data, decode_value, encode
from vehicle_middleware.sdk import (
    ActuationRefusedError,
    ActuationRequest,
    AppClient,
    DataEvent,
    ProviderClient,
    Sub,
)

VOLUME = "Vehicle.Cabin.Infotainment.Media.Volume"  # uint8, percent, 0..100
SOURCE = "Vehicle.Cabin.Infotainment.Media.Played.Source"  # string, FM, AM, DAB, ...
TIMEOUT_S = 30.0


@dataclass
class Player:
    """The hardware the provider drives: here, what it is set to."""

    volume: int = 30
    source: str = "FM"
    muted: bool = False


async def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    async with asyncio.timeout(TIMEOUT_S):
        await run(address)


async def run(address: str) -> None:
    player = Player()
    async with (
        ProviderClient(address, "media-player") as provider,
        AppClient(address, "media-app") as app,
    ):
        # The catalog made the keys; add_keys gives this client their ids, which
        # publish needs (idempotent).
        await provider.add_keys([VOLUME, SOURCE])
        await provider.publish(
            {VOLUME: encode(player.volume, datatype="uint8"), SOURCE: encode(player.source)}
        )

        async def set_media(request: ActuationRequest) -> None:  # sync or async
            if player.muted:
                raise ActuationRefusedError("muted by the driver")  # the app's INVALID_ARGUMENT
            for name, data in request.targets.items():
                value = decode_value(data)  # checked by the middleware against the catalog
                print(f"provider: {name} to {value!r}", flush=True)
                if name == VOLUME and isinstance(value, int):
                    player.volume = value
                elif name == SOURCE and isinstance(value, str):
                    player.source = value
            # Return: done. The new values are published once the player has them.
            await provider.publish(
                {VOLUME: encode(player.volume, datatype="uint8"), SOURCE: encode(player.source)}
            )

        await provider.provide_actuators([VOLUME, SOURCE], set_media)

        # Events come on change; want_current: the values now, in the results.
        seen: dict[str, Data] = {}
        subs = [Sub(VOLUME, want_current=True), Sub(SOURCE, want_current=True)]
        for result in await app.subscribe(subs):
            if result.current is not None:
                seen[result.key] = decode_value(result.current)
        changed = asyncio.Condition()
        watcher = asyncio.create_task(watch(app, seen, changed))
        try:
            await app.actuate(VOLUME, encode(40, datatype="uint8"))
            await sees(seen, changed, {VOLUME: 40})
            await app.actuate_many(
                {VOLUME: encode(55, datatype="uint8"), SOURCE: encode("BLUETOOTH")}
            )
            await sees(seen, changed, {VOLUME: 55, SOURCE: "BLUETOOTH"})
            # Refused by the middleware, from the catalog, before the provider hears of it.
            await refused(app.actuate(SOURCE, encode("TAPE")))
            await refused(app.actuate(VOLUME, encode(101, datatype="uint8")))
            # Refused by the provider.
            player.muted = True
            await refused(app.actuate(VOLUME, encode(10, datatype="uint8")))
        finally:
            watcher.cancel()


async def watch(app: AppClient, seen: dict[str, Data], changed: asyncio.Condition) -> None:
    """Keep the latest value of each key the app is subscribed to in ``seen``."""
    async for event in app.events():
        if isinstance(event, DataEvent) and event.name is not None and event.data is not None:
            async with changed:
                seen[event.name] = decode_value(event.data)
                changed.notify_all()


async def sees(seen: dict[str, Data], changed: asyncio.Condition, wanted: dict[str, Data]) -> None:
    """Wait until the app has seen each of ``wanted``'s values, and say so."""
    async with changed:
        await changed.wait_for(lambda: all(seen.get(k) == v for k, v in wanted.items()))
    for name, value in wanted.items():
        print(f"app sees {name} = {value!r}", flush=True)


async def refused(call: Awaitable[None]) -> None:
    """Await an actuation that must be refused, and print the middleware's answer."""
    try:
        await call
    except grpc.aio.AioRpcError as e:
        print(f"app refused: {e.code().name}: {e.details()}", flush=True)
    else:
        raise RuntimeError("the actuation was not refused")


if __name__ == "__main__":
    asyncio.run(main())
