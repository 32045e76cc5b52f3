"""Benchmark of the providers' own cost: how much load one provider process can make.

Run: ``make bench-providers`` (or ``python -m bench.providers``).

Prints, beside floors measured in the same run:

* the simulated car: ns per update for ``Simulation.step`` plus the value
  encoding, over the 270-signal catalog at 100x its rates, against the floor of
  encoding the same number of floats in a bare loop;
* the replay reader: rows/s for ``read_recording`` of a JSON-lines file against
  the floor of ``json.loads`` on each of its lines.

Each figure is the best of several repeats (slower repeats measure the machine).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from vehicle_middleware.contract.values import encode
from vehicle_middleware.providers.catalog import default_catalog
from vehicle_middleware.providers.recording import read_recording
from vehicle_middleware.providers.simulation import Simulation


def sim_ns(seconds: float, repeats: int) -> tuple[float, float, int]:
    """(ns per update for step + encode, ns per update for bare encodes, updates)."""
    best_sim, best_floor, n = float("inf"), float("inf"), 0
    for _ in range(repeats):
        sim = Simulation(default_catalog(), rate_scale=100.0)
        t, n = 0.0, 0
        t0 = time.perf_counter()
        while t < seconds:
            updates = sim.step(t)
            data = [encode(v) for _, v in updates]
            n += len(data)
            t += 0.01
        best_sim = min(best_sim, (time.perf_counter() - t0) / n * 1e9)
        values = [float(i) for i in range(n)]
        t0 = time.perf_counter()
        data = [encode(v) for v in values]
        best_floor = min(best_floor, (time.perf_counter() - t0) / n * 1e9)
    return best_sim, best_floor, n


def replay_rows_per_s(rows: int, repeats: int) -> tuple[float, float]:
    """(rows/s of read_recording, rows/s of bare json.loads per line)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "drive.jsonl"
        with path.open("w") as f:
            for i in range(rows):
                f.write(
                    json.dumps(
                        {
                            "time_ns": i * 1000,
                            "key": f"Vehicle.K{i % 300}",
                            "value": i * 0.5,
                            "seq": i,
                        }
                    )
                    + "\n"
                )
        best, floor = 0.0, 0.0
        for _ in range(repeats):
            t0 = time.perf_counter()
            assert len(read_recording(path)) == rows
            best = max(best, rows / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            with path.open() as f:
                parsed = [json.loads(line) for line in f]
            assert len(parsed) == rows
            floor = max(floor, rows / (time.perf_counter() - t0))
    return best, floor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated seconds per repeat")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    per_update, floor, n = sim_ns(args.seconds, args.repeats)
    print(
        f"simulated car ({n:,} updates, 100x rates): {per_update:,.0f} ns/update "
        f"= {1e9 / per_update:,.0f} updates/s on one core; "
        f"floor (bare encode) {floor:,.0f} ns: {per_update / floor:.1f}x"
    )
    rate, floor_rate = replay_rows_per_s(args.rows, args.repeats)
    print(
        f"replay reader ({args.rows:,} JSON lines): {rate:,.0f} rows/s; "
        f"floor (bare json.loads) {floor_rate:,.0f} rows/s: {floor_rate / rate:.1f}x slower"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
