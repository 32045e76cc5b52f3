"""A provider: adds the key Vehicle.Speed, publishes ten speeds at 5 Hz, exits.

    .venv-sdk/bin/python examples/quickstart/provider.py [ADDRESS]

with the SDK's own environment (README.md, "A provider and an app"). ADDRESS
is the middleware's (default 127.0.0.1:50051). Values are written in the
project's value encoding (``vehicle_middleware.contract.values``), which every
sample app and the KUKSA API read.
"""

from __future__ import annotations

import asyncio
import sys

from vehicle_middleware.contract.values import encode
from vehicle_middleware.sdk import ProviderClient

KEY = "Vehicle.Speed"


async def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    async with ProviderClient(address, "quickstart-provider") as provider:
        await provider.add_keys([KEY])  # idempotent; the key stays when the provider leaves
        for i in range(10):
            speed = 10.0 * i
            await provider.publish({KEY: encode(speed)})  # over one Publish stream
            print(f"published {KEY} = {speed}", flush=True)
            await asyncio.sleep(0.2)  # a sensor's pace, not a synchronisation
        summary = await provider.flush()  # waits until the middleware has applied them
        print(f"the middleware applied {summary.updates} updates", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
