"""Replay is exact: a recording replayed through the middleware reaches a logger
app with the same values in the same order for each key."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from vehicle_middleware.apps.harness import AppOptions, run_app
from vehicle_middleware.apps.logger import EventLogger
from vehicle_middleware.providers.recording import read_recording
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually


def recording(path: Path, n: int = 400, seed: int = 3) -> dict[str, list[object]]:
    """A CSV recording over ~1.5 s: floats, ints, booleans, strings, repeated
    values (written again unchanged) and several keys at the same instant."""
    rng = random.Random(seed)
    keys = {
        "Vehicle.Speed": lambda i: round(rng.uniform(0, 130), 3),
        "Vehicle.Body.Windows.Row2.Right.Level": lambda i: rng.choice([0, 10, 10, 20]),
        "Vehicle.Cabin.Door.Row1.DriverSide.IsOpen": lambda i: rng.choice([True, False]),
        "Vehicle.Powertrain.Transmission.Mode": lambda i: rng.choice(["ECO", "SPORT", "ECO"]),
        "Vehicle.Exterior.AirTemperature": lambda i: 8.5,  # a heartbeat: never changes
    }
    expected: dict[str, list[object]] = defaultdict(list)
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["time", "key", "value"])
    for i in range(n):
        t = 100.0 + (i // 4) * 0.015  # four samples share each instant
        key = rng.choice(list(keys))
        value = keys[key](i)
        text_value = json.dumps(value) if isinstance(value, bool) else str(value)
        w.writerow([f"{t:.3f}", key, text_value])
        expected[key].append(value)
    path.write_text(text.getvalue())
    return dict(expected)


async def test_replaying_a_recording_reproduces_each_keys_values_in_order(
    server: RunningServer, tmp_path: Path
) -> None:
    rec = tmp_path / "drive.csv"
    expected = recording(rec)
    assert {k: [s.value for s in read_recording(rec) if s.key == k] for k in expected} == expected
    # The keys exist before the logger subscribes, so it misses none of the replay.
    async with ProviderClient(server.address, "setup") as setup:
        await setup.add_keys(expected)
    out = io.StringIO()
    logger = EventLogger(out)
    stop = asyncio.Event()
    subscribed: list[bool] = []
    app = asyncio.create_task(
        run_app(
            AppOptions(server.address, "logger", queue_length=(10, 200), want_current=True),
            logger,
            on_current=logger.seed,
            stop=stop,
            ready=lambda client: subscribed.append(True),
        )
    )
    await eventually(lambda: bool(subscribed) or app.done(), timeout=10, what="the logger")
    replay = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vehicle_middleware.providers", "replay", str(rec),
        "--target", server.address, "--speed", "1",
        stderr=subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(replay.communicate(), 60)
    assert replay.returncode == 0, err.decode()
    total = sum(len(v) for v in expected.values())
    await eventually(lambda: logger.lines >= total, timeout=10, what="every replayed event")
    stop.set()
    stats = await asyncio.wait_for(app, 30)
    assert stats.missed == 0
    got: dict[str, list[object]] = defaultdict(list)
    for line in out.getvalue().splitlines():
        event = json.loads(line)
        got[event["key"]].append(event["value"])
    assert dict(got) == expected
    # And the logger's file is itself a recording the replay provider reads.
    again = tmp_path / "again.jsonl"
    again.write_text(out.getvalue())
    assert [(s.key, s.value) for s in read_recording(again)] == [
        (json.loads(x)["key"], json.loads(x)["value"]) for x in out.getvalue().splitlines()
    ]
