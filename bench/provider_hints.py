"""Benchmark of the demand hint: what the simulated car publishes with it and without it.

Run: ``make bench-provider-hints`` (or ``python -m bench.provider_hints``), about
``3 x --seconds`` (10) plus start-up.

One middleware on 127.0.0.1, and per row two simulated cars side by side for
the same ``--seconds``: one following the demand (``providers sim``), one
ignoring it (``providers sim --ignore-demand``), both on the 270-signal
catalog at ``--rate-scale`` times its rates. An app in this process watches
some of the keys (none, the first ``--watch`` of the catalog, all of them)
before the cars start. Each car reports the updates it published per second
over its run (its status file); the ratio is what the hint saves.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from vehicle_middleware.providers.catalog import default_catalog
from vehicle_middleware.providers.simulation import Simulation
from vehicle_middleware.sdk import AppClient, Sub
from vehicle_middleware.sdk.status_file import read_status

from bench.loads import middleware, stop


def car(
    address: str, app_id: str, status: Path, seconds: float, scale: float, *flags: str
) -> subprocess.Popen[bytes]:
    """A simulated car process that runs ``seconds`` and leaves its counts in ``status``."""
    return subprocess.Popen(
        [
            sys.executable, "-m", "vehicle_middleware.providers", "sim",
            "--target", address, "--app-id", app_id, "--status", str(status),
            "--duration", f"{seconds:g}", "--rate-scale", f"{scale:g}", *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def published_per_s(status: Path) -> float:
    extra = (read_status(status) or {}).get("extra") or {}
    return float(extra.get("published_per_s", 0.0))


async def row(
    address: str, watched: list[str], seconds: float, scale: float, tmp: Path
) -> tuple[float, float]:
    """(published/s following the demand, published/s ignoring it) while an app
    watches ``watched``."""
    async with AppClient(address, "bench-watcher") as app:
        if watched:
            results = await app.subscribe([Sub(name) for name in watched])
            assert all(r.ok for r in results), [r for r in results if not r.ok][:3]
        following, ignoring = tmp / "following.json", tmp / "ignoring.json"
        procs = [
            car(address, "car-following", following, seconds, scale),
            car(address, "car-ignoring", ignoring, seconds, scale, "--ignore-demand"),
        ]
        for proc in procs:
            code = await asyncio.to_thread(proc.wait, seconds + 60)
            if code:
                raise RuntimeError(f"a simulated car exited with status {code}")
        if watched:
            await app.unsubscribe(watched)
    return published_per_s(following), published_per_s(ignoring)


async def bench(args: argparse.Namespace) -> None:
    names = Simulation(default_catalog()).names
    proc, address = middleware("--demand-interval-s", "0.1")
    load = os.getloadavg()
    print(
        f"simulated car: {len(names)} signals at {args.rate_scale:g}x their rates, "
        f"{args.seconds:g} s per car, both cars of a row at once; {os.cpu_count()} CPUs, "
        f"load average before the run {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    print(f"{'apps watch':<24} {'with hint/s':>12} {'without/s':>10} {'saved':>7}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, watched in (
                ("no key", []),
                (f"{args.watch} keys", names[: args.watch]),
                (f"all {len(names)} keys", names),
            ):
                with_hint, without = await row(
                    address, watched, args.seconds, args.rate_scale, Path(tmp)
                )
                saved = round(1 - with_hint / without, 2) if without else 0.0
                print(
                    f"{label:<24} {with_hint:>12,.0f} {without:>10,.0f} {saved + 0.0:>7.0%}",
                    flush=True,
                )
    finally:
        stop(proc)
    load = os.getloadavg()
    print(f"load average after the run {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.provider_hints", description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="each car's run")
    parser.add_argument("--watch", type=int, default=10, help="keys the middle row watches")
    parser.add_argument("--rate-scale", type=float, default=1.0, help="every rate times this")
    asyncio.run(bench(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
