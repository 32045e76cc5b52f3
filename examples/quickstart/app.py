"""An app: subscribes to Vehicle.Speed and prints what it receives.

    .venv-sdk/bin/python examples/quickstart/app.py [ADDRESS]

with the SDK's own environment (README.md, "A provider and an app"). ADDRESS
is the middleware's (default 127.0.0.1:50051). It exits after five values, or
after 30 s. Start it before the provider: if the key does not exist yet, it
subscribes when the middleware says the key was added. A subscription
delivers changes, not a value sent again unchanged; ``want_current`` has the
key's value at the time of subscribing in the result, so the app shows it at
once.
"""

from __future__ import annotations

import asyncio
import sys

from vehicle_middleware.contract.values import decode
from vehicle_middleware.sdk import AppClient, DataEvent, KeyAddedEvent, Sub, SubscriptionResult

KEY = "Vehicle.Speed"
COUNT = 5
TIMEOUT_S = 30.0


async def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    async with AppClient(address, "quickstart-app") as app:
        # Events come when the value changes; want_current: its value now, in the result.
        [result] = await app.subscribe([Sub(KEY, want_current=True)])
        if result.ok:
            print(f"subscribed to {KEY}", flush=True)
            show_current(result)
        else:
            print(f"waiting for {KEY} to be added ({result.status})", flush=True)
        try:
            async with asyncio.timeout(TIMEOUT_S):
                await receive(app)
        except TimeoutError:
            print(f"no {COUNT} values of {KEY} within {TIMEOUT_S:.0f} s", flush=True)
            sys.exit(1)


def show_current(result: SubscriptionResult) -> None:
    """Print the key's value when subscribing, if it has one yet."""
    if result.current is not None:
        print(f"{KEY} is {decode(result.current)} now", flush=True)


async def receive(app: AppClient) -> None:
    """Print the values of KEY as they come, until COUNT of them."""
    received = 0
    async for event in app.events():
        if isinstance(event, KeyAddedEvent) and event.name == KEY:
            [result] = await app.subscribe([Sub(KEY, want_current=True)])
            print(f"{KEY} was added; subscribed", flush=True)
            show_current(result)
        elif isinstance(event, DataEvent) and event.data is not None:
            # seq counts this app's events of the key; missed: the gap before this one.
            line = f"{event.name} = {decode(event.data)} (seq {event.seq}, missed {event.missed})"
            print(line, flush=True)
            received += 1
            if received == COUNT:
                return


if __name__ == "__main__":
    asyncio.run(main())
