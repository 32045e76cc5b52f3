"""The simulated vehicle provider as a real process against a real middleware process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from vehicle_middleware.contract.values import decode
from vehicle_middleware.sdk import AppClient, DataEvent, ReconnectedEvent, Sub
from vehicle_middleware.sdk.status_file import read_status

from tests.conftest import eventually
from tests.integration.test_demand import start_app
from tests.integration.test_process import start, stop

SPEED = "Vehicle.Speed"


def end(provider: subprocess.Popen[str]) -> str:
    """Stop the provider process (SIGTERM, SIGKILL after 15 s); what it wrote to stderr."""
    try:
        provider.terminate()
        _, err = provider.communicate(timeout=15)
    finally:
        if provider.poll() is None:
            provider.kill()
            provider.wait()
    return str(err)


async def speeds(app: AppClient, n: int) -> list[float]:
    """The next ``n`` speed values (reconnections pass by)."""
    out: list[float] = []
    async for e in app.events():
        if isinstance(e, DataEvent) and e.name == SPEED and e.data is not None:
            value = decode(e.data)
            assert isinstance(value, float)
            out.append(value)
            if len(out) == n:
                return out
    return out


async def test_the_simulated_car_survives_a_middleware_restart(tmp_path: Path) -> None:
    status = tmp_path / "sim.json"
    middleware, address = start("--listen", "127.0.0.1:0")  # it says which port it took
    provider = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.providers",
            "sim",
            "--target",
            address,
            "--status",
            str(status),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await eventually(
            lambda: (read_status(status) or {}).get("state") == "publishing",
            timeout=30,
            what="the provider publishing",
        )
        assert (read_status(status) or {})["keys"] == 270
        async with AppClient(address, "watcher") as app:
            [result] = await app.subscribe([Sub(SPEED, want_current=True)])
            assert result.ok
            assert len(await asyncio.wait_for(speeds(app, 5), 10)) == 5

            code, _ = stop(middleware)
            assert code == 0
            middleware, _ = start("--listen", address)  # a new process, the same address

            restarted = False
            async for e in app.events():
                if isinstance(e, ReconnectedEvent):
                    restarted = e.middleware_restarted
                    break
            assert restarted
            # The provider added its keys again (the app's subscription waited for
            # it) and values flow again, from the same provider process.
            assert len(await asyncio.wait_for(speeds(app, 5), 30)) == 5
        assert provider.poll() is None
        await eventually(
            lambda: (read_status(status) or {}).get("reconnects", 0) >= 1,
            timeout=5,
            what="the provider's status to count the reconnection",
        )
    finally:
        try:
            err = end(provider)
        finally:
            stop(middleware)
    assert provider.returncode == 0, err
    final = json.loads(status.read_text())
    assert final["state"] == "stopped"
    assert final["published"] > 0


async def test_the_simulated_car_samples_only_what_apps_watch_a_killed_app_included(
    tmp_path: Path,
) -> None:
    status = tmp_path / "sim.json"
    middleware, address = start("--listen", "127.0.0.1:0", "--demand-interval-s", "0.1")
    provider = subprocess.Popen(
        [
            *(sys.executable, "-m", "vehicle_middleware.providers", "sim"),
            *("--target", address, "--status", str(status)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def demanded() -> float | None:
        rate = ((read_status(status) or {}).get("extra") or {}).get("demanded_rate")
        return float(rate) if rate is not None else None

    try:
        await eventually(lambda: demanded() == 0.0, timeout=30, what="nothing demanded")
        async with AppClient(address, "watcher") as app:
            [result] = await app.subscribe([Sub(SPEED)])
            assert result.ok
            await eventually(lambda: (demanded() or 0) > 0, timeout=10, what="Speed demanded")
            assert len(await asyncio.wait_for(speeds(app, 3), 10)) == 3
        await eventually(lambda: demanded() == 0.0, timeout=10, what="the app closed")
        killed = await start_app(address, "killed-app", SPEED)
        try:
            await eventually(lambda: (demanded() or 0) > 0, timeout=10, what="watched again")
            killed.kill()  # SIGKILL
            await killed.wait()
            await eventually(lambda: demanded() == 0.0, timeout=10, what="the app killed")
        finally:
            if killed.returncode is None:
                killed.kill()
                await killed.wait()
    finally:
        try:
            err = end(provider)
        finally:
            stop(middleware)
    assert provider.returncode == 0, err
