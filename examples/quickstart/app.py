"""An app: subscribes to Vehicle.Speed and prints what it receives.

    .venv/bin/python examples/quickstart/app.py [ADDRESS]

ADDRESS is the middleware's (default 127.0.0.1:50051). It exits after five
values, or after 30 s. Start it before the provider: if the key does not exist
yet, it subscribes when the middleware says the key was added.
"""

from __future__ import annotations

import asyncio
import sys

from vehicle_middleware.contract.values import decode
from vehicle_middleware.sdk import AppClient, DataEvent, KeyAddedEvent, Sub

KEY = "Vehicle.Speed"
COUNT = 5
TIMEOUT_S = 30.0


async def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    async with AppClient(address, "quickstart-app") as app:
        [result] = await app.subscribe([Sub(KEY)])
        if result.ok:
            print(f"subscribed to {KEY}", flush=True)
        else:
            print(f"waiting for {KEY} to be added ({result.status})", flush=True)
        try:
            async with asyncio.timeout(TIMEOUT_S):
                await receive(app)
        except TimeoutError:
            print(f"no {COUNT} values of {KEY} within {TIMEOUT_S:.0f} s", flush=True)
            sys.exit(1)


async def receive(app: AppClient) -> None:
    """Print the values of KEY as they come, until COUNT of them."""
    received = 0
    async for event in app.events():
        if isinstance(event, KeyAddedEvent) and event.name == KEY:
            await app.subscribe([Sub(KEY)])
            print(f"{KEY} was added; subscribed", flush=True)
        elif isinstance(event, DataEvent) and event.data is not None:
            # seq counts this app's events of the key; missed: the gap before this one.
            line = f"{event.name} = {decode(event.data)} (seq {event.seq}, missed {event.missed})"
            print(line, flush=True)
            received += 1
            if received == COUNT:
                return


if __name__ == "__main__":
    asyncio.run(main())
