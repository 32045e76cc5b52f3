"""Export lag benchmark: how long a journal record takes from being
written on the car to being in the fleet dataset, p50/p99/max.

Run: ``make bench-export-lag`` (or ``python -m bench.export_lag``). All on
127.0.0.1; every process started here is stopped at the end (SIGTERM, then
SIGKILL after a bound):

1. one middleware, journal ``full`` in a temporary directory (bench.e2e's);
2. the collector, ``python -m vehicle_middleware.telemetry_export collect --follow`` into a
   landing area, with its defaults: it lands what it holds every
   ``--flush-s`` (1 s), or sooner once ``--window`` (64) Follow groups are
   unacknowledged (at a few hundred records/s the groups are small and that
   comes first), and the streaming ingest, ``ingest --stream --every S``
   (``--every``, default 1 s here) with its checkpoint, in its own process
   with its own SparkSession;
3. once the ingest has committed its first micro-batch (the middleware's
   start records: the query runs, and its cold first batch, several seconds
   of compiling, is behind it; at its default log level the ingest logs no
   line of its own when the query starts, only Spark warnings), a provider
   (``vehicle_middleware.sdk.ProviderClient``, in this process) writes ``--rate``
   updates/s for ``--seconds``, one update per Publish message, so the
   journal writes about one ``publish_batch`` record per update, its
   ``time_ns`` the time of the write;
4. this process polls both places every 50 ms: the landing area's journal
   data files (the landing contract's ``vehicle=V/boot=B/part-*.jsonl``:
   vehicle_middleware.contract.journal.landing.DATA_GLOB) and
   the dataset's committed batches (a batch is visible once
   ``_commits/<tag>.json`` is written, after its files were moved into the
   tables under names that start with its tag: see vehicle_middleware.telemetry_export.dataset;
   its ``records/**/<tag>-*.parquet`` are read with pyarrow). Per record
   ``(boot_id, offset)`` written during the load: lag = when this process
   first saw it there (``time.time_ns``) minus its ``time_ns``; the polling
   adds up to 50 ms;
5. after the load it waits (bounded) until the landing area holds the
   journal's newest record and the dataset every record landed, and prints
   the lags beside what bounds them: the collector's flush interval, the
   trigger interval and the micro-batches' durations (trigger time to commit,
   from the query's checkpoint: ``offsets/N`` and ``commits/N``). A
   micro-batch longer than the trigger interval starts the next one at once
   (Spark warns "falling behind"): then the batches, not the interval, bound
   the lag.

Figures depend on the machine and what else runs on it; the load average
before and after the run is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from vehicle_middleware.contract.journal.chain import distance
from vehicle_middleware.contract.journal.landing import DATA_GLOB
from vehicle_middleware.contract.journal.segments import lines
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2_grpc as pb_grpc
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.telemetry_export.__main__ import parser as export_parser
from vehicle_middleware.telemetry_export.dataset import COMMITS, RECORDS

from bench.e2e import middleware, pct, stop
from bench.journal_export import newest

KEYS = [f"Vehicle.Bench.ExportLag{i}" for i in range(10)]
POLL_S = 0.05
STOP_S = 30.0
"""How long a process may take to stop after SIGTERM before it is killed."""

Record = tuple[str, int]
"""A journal record: (boot_id, offset)."""


class Seen:
    """When this process first saw each record in the landing area and in the
    dataset (``time.time_ns``), and each landed record's ``time_ns``."""

    def __init__(self, landing: Path, dataset: Path) -> None:
        self.landing = landing
        self.dataset = dataset
        self.written: dict[Record, int] = {}
        self.landed: dict[Record, int] = {}
        self.ingested: dict[Record, int] = {}
        self.batches = 0
        """Committed batches seen."""
        self._files: set[Path] = set()
        self._tags: set[str] = set()

    def poll(self) -> None:
        """Look once at both places (the landing area first: a record is landed
        before it is ingested). Reads only what it has not seen."""
        for path in self.landing.glob(DATA_GLOB):
            if path in self._files:
                continue
            seen = time.time_ns()  # the file was there (whole: it is renamed into place)
            self._files.add(path)
            for line in lines(path):
                rec = json.loads(line)
                key = (rec["boot_id"], rec["offset"])
                self.written[key] = rec["time_ns"]
                self.landed.setdefault(key, seen)
        for marker in sorted((self.dataset / COMMITS).glob("*.json")):
            tag = marker.name.removesuffix(".json")
            if tag in self._tags:
                continue
            seen = time.time_ns()
            self._tags.add(tag)
            self.batches += 1
            for path in (self.dataset / RECORDS).rglob(f"{tag}-*.parquet"):
                rows = pq.read_table(path, columns=["boot_id", "offset"])
                for key in zip(
                    rows.column("boot_id").to_pylist(),
                    rows.column("offset").to_pylist(),
                    strict=True,
                ):
                    self.ingested.setdefault(key, seen)

    def lags(self, place: dict[Record, int], records: Iterable[Record]) -> list[int]:
        """First seen in ``place`` minus ``time_ns`` (ns), of the ``records`` it holds."""
        return [place[r] - self.written[r] for r in records if r in place]


def spark_commits(checkpoint: Path) -> int:
    """The micro-batches the streaming query has committed (``commits/N``)."""
    return sum(1 for _ in (checkpoint / "commits").glob("[0-9]*"))


def micro_batches(checkpoint: Path, since_ns: int) -> list[int]:
    """The durations (ns) of the streaming query's micro-batches triggered at or
    after ``since_ns``: from its trigger time (``offsets/N``'s
    ``batchTimestampMs``) to its commit entry (``commits/N``'s mtime)."""
    out = []
    for done in (checkpoint / "commits").glob("[0-9]*"):
        meta = json.loads((checkpoint / "offsets" / done.name).read_text().splitlines()[1])
        start_ns = int(meta["batchTimestampMs"]) * 1_000_000
        if start_ns >= since_ns:
            out.append(done.stat().st_mtime_ns - start_ns)
    return out


def start(args: list[str], log: Path, **env: str) -> subprocess.Popen[str]:
    """``python -m vehicle_middleware.telemetry_export ARGS`` in its own process group (a Spark JVM
    is its child), its output to ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "vehicle_middleware.telemetry_export", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            start_new_session=True,
        )


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM ``proc``; after :data:`STOP_S`, SIGKILL its process group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def alive(proc: subprocess.Popen[str], name: str, log: Path) -> None:
    if proc.poll() is not None:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise RuntimeError(f"{name} exited ({proc.returncode}):\n{tail}")


async def provide(address: str, rate: float, seconds: float) -> int:
    """Write ``rate`` updates/s for ``seconds`` over ProviderClient, one update per
    Publish message (a late wake-up catches up); the updates written."""
    async with ProviderClient(address, "bench-export-lag") as provider:
        await provider.add_keys(KEYS)
        sent = 0
        begin = time.perf_counter()
        while (elapsed := time.perf_counter() - begin) < seconds:
            await asyncio.sleep(max(0.0, sent / rate - elapsed))
            await provider.publish({KEYS[sent % len(KEYS)]: sent.to_bytes(8, "little")})
            sent += 1
        await provider.flush()
    return sent


def row(what: str, lags: list[int], bound: str) -> str:
    figures = " ".join(f"{pct(lags, q) / 1e3:>7.2f} s" for q in (0.5, 0.99, 1.0))
    return f"{what:<22} {len(lags):>8,} {figures}   {bound}"


async def bench(args: argparse.Namespace) -> None:
    began, load_before = time.perf_counter(), os.getloadavg()
    with contextlib.ExitStack() as cleanup:
        work = Path(tempfile.mkdtemp(prefix="vmw-bench-export-lag-"))
        if args.keep:
            print(f"work directory (kept): {work}")
        else:
            cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        landing, dataset, checkpoint = work / "landing", work / "dataset", work / "checkpoint"
        landing.mkdir()
        mw, address = middleware("--journal-dir", str(work / "journal"), "--journal-level", "full")
        cleanup.callback(stop, mw)
        collect_args = ["collect", "--from", address, "--to", str(landing), "--follow"]
        ingest_args = ["ingest", "--input", str(landing), "--output", str(dataset), "--stream"]
        ingest_args += ["--every", f"{args.every:g}", "--checkpoint", str(checkpoint)]
        collector = export_parser().parse_args(collect_args)  # its defaults
        procs = []
        for name, argv, env in (
            ("collector", collect_args, {}),
            ("ingest", ingest_args, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ):
            log = work / f"{name}.log"
            proc = start(argv, log, **env)
            cleanup.callback(stop_group, proc)  # the ingest first, then the collector
            procs.append((proc, name, log))
        seen = Seen(landing, dataset)

        async def watch(until: float, done: Callable[[], bool]) -> bool:
            """Poll every POLL_S until ``done()`` (True) or ``until`` (perf_counter, False)."""
            while time.perf_counter() < until:
                seen.poll()
                if done():
                    return True
                for proc, name, log in procs:
                    alive(proc, name, log)
                await asyncio.sleep(POLL_S)
            return False

        if not await watch(time.perf_counter() + args.start_timeout, lambda: seen.batches > 0):
            raise RuntimeError(f"the ingest committed no micro-batch in {args.start_timeout:g} s")
        ready_s = time.perf_counter() - began

        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.JournalServiceStub(channel)  # type: ignore[no-untyped-call]
            boot, before = await newest(stub)
            load_from = time.time_ns()
            load = asyncio.create_task(provide(address, args.rate, args.seconds))
            try:
                await watch(float("inf"), load.done)
                sent = load.result()
            finally:
                load.cancel()
            load_to = time.time_ns()
            boot, last = await newest(stub)

        def measured() -> list[Record]:
            """The records written during the load (landed so far)."""
            return [r for r, t in seen.written.items() if load_from <= t <= load_to]

        drain_from = time.perf_counter()
        complete = await watch(
            drain_from + args.drain_timeout,
            lambda: (boot, last) in seen.landed and all(r in seen.ingested for r in measured()),
        )
        drain_s = time.perf_counter() - drain_from
        # Spark writes a micro-batch's commit entry just after the batch has committed
        # into the dataset: wait for the entries of the batches seen there.
        await watch(time.perf_counter() + STOP_S, lambda: spark_commits(checkpoint) >= seen.batches)
        batches = micro_batches(checkpoint, load_from)

    records = measured()
    landed, ingested = seen.lags(seen.landed, records), seen.lags(seen.ingested, records)
    between = [seen.ingested[r] - seen.landed[r] for r in records if r in seen.ingested]
    print(
        "export lag: one middleware (journal full) -> collector -> landing area -> "
        f"ingest --stream -> dataset, all on 127.0.0.1, {os.cpu_count()} CPUs"
    )
    print(
        f"provider: {sent:,} updates in {args.seconds:g} s ({args.rate:g}/s, one per Publish "
        f"message); the journal wrote {distance(before, last):,} records meanwhile"
    )
    print(f"load average before: {' / '.join(f'{x:.2f}' for x in load_before)}")
    print(f"\n{'':<22} {'n':>8} {'p50':>9} {'p99':>9} {'max':>9}   floor / bound")
    print(
        row(
            "written -> landing",
            landed,
            f"collector lands every {collector.flush_s:g} s (--flush-s) "
            f"or at {collector.window} Follow groups (--window)",
        )
    )
    print(row("written -> dataset", ingested, f"trigger every {args.every:g} s (--every)"))
    print(row("landing -> dataset", between, "the wait for a trigger + the micro-batch"))
    print(row("micro-batch (Spark)", batches, "trigger -> commit, from the checkpoint"))
    print(
        f"\n{len(records):,} records written during the load were landed; "
        + (
            f"all in the dataset {drain_s:.1f} s after the load ended"
            if complete
            else f"{len(records) - len(ingested):,} of them not in the dataset "
            f"{args.drain_timeout:g} s after the load"
        )
    )
    print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"took {time.perf_counter() - began:.0f} s "
        f"({ready_s:.0f} s until the ingest's first micro-batch was committed)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.export_lag", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the provider writes")
    parser.add_argument("--rate", type=float, default=500.0, help="updates/s the provider writes")
    parser.add_argument(
        "--every", type=float, default=1.0, help="the ingest's trigger interval (s)"
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=300.0,
        help="at most this long (s) for the ingest's first micro-batch",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="at most this long (s) after the load for every record to reach the dataset",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directory (logs, dataset) to look at"
    )
    asyncio.run(bench(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
