"""The quickstart's two programs (examples/quickstart/) work as the README says:
against a real middleware, the app prints the values the provider publishes."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from vehicle_middleware.server.server import RunningServer

ROOT = Path(__file__).parents[2]
APP = "examples/quickstart/app.py"
PROVIDER = "examples/quickstart/provider.py"
VALUE = re.compile(r"Vehicle\.Speed = (\S+) \(seq (\d+), missed (\d+)\)")


async def start(program: str, address: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        program,
        address,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_quickstart_app_prints_what_the_quickstart_provider_publishes(
    server: RunningServer,
) -> None:
    app = await start(APP, server.address)
    assert app.stdout is not None
    # The app says it waits for the key before the provider adds it.
    first = await asyncio.wait_for(app.stdout.readline(), timeout=30)
    assert first.decode() == "waiting for Vehicle.Speed to be added (NOT_FOUND)\n"
    provider = await start(PROVIDER, server.address)
    code, published_out, err = await finish(provider)
    assert code == 0, err
    published = re.findall(r"^published Vehicle\.Speed = (\S+)$", published_out, re.M)
    assert published == [str(10.0 * i) for i in range(10)]
    assert published_out.endswith("the middleware applied 10 updates\n")

    code, received_out, err = await finish(app)
    assert code == 0, err
    assert received_out.startswith("Vehicle.Speed was added; subscribed\n")
    received = VALUE.findall(received_out)
    assert len(received) == 5, received_out
    values = [v for v, _, _ in received]
    # Each printed value is one the provider published, in the order published
    # (the first ones may be written before the app's subscription is in, on a
    # slow machine), with seqs counting from 1 and no gap.
    assert values == published[published.index(values[0]) :][:5]
    assert [(int(s), int(m)) for _, s, m in received] == [(n, 0) for n in range(1, 6)]
