"""``python -m vehicle_middleware.telemetry_export collect`` against real middleware processes,
killed.

- the middleware is killed (SIGKILL) while the collector follows it, and
  restarted on the same journal: the collector records exactly one restart,
  lands no record twice, and lands every record the journal holds on disk;
- the collector is killed (SIGKILL) while it lands, and started again (with
  Poll this time): no duplicate, no gap, the chain whole across its files.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from vehicle_middleware.contract.journal.chain import succ, verify_line
from vehicle_middleware.contract.journal.segments import lines, segment_files
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.config import replace_settings
from vehicle_middleware.server.server import start_server
from vehicle_middleware.telemetry_export.collector import Collector, Options
from vehicle_middleware.telemetry_export.landing_area import Landing

from tests.conftest import eventually, wait_until
from tests.integration.conftest import TEST_SETTINGS
from tests.integration.test_journal_faults import SPEED, kill9, publish, serve
from tests.integration.test_process import stop


@contextlib.contextmanager
def collector(
    address: str, landing: Path, *extra: str, log: Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A collector process, always ended (SIGTERM, then SIGKILL); its stderr in ``log``
    when given (to read while it runs), else a pipe."""
    err = log.open("w") if log is not None else None
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.telemetry_export",
            "collect",
            "--from",
            address,
            "--to",
            str(landing),
            "--flush-s",
            "0.05",
            "--progress-s",
            "60",
            "--log-level",
            "INFO",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=err if err is not None else subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=15)
        if err is not None:
            err.close()


def end(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """SIGTERM: the collector lands what it holds, stores its position, exits."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    return proc.returncode, out, err


def on_disk(journal: Path) -> list[bytes]:
    """Every whole line of the journal's segments."""
    return [line for path in segment_files(journal) for line in lines(path) if line.endswith(b"\n")]


def landed(landing: Path) -> tuple[list[bytes], list[dict[str, Any]]]:
    """The journal lines and the collector records of the landing area (data only:
    what Spark would read, not the collector's ``_``-prefixed bookkeeping)."""
    data: list[bytes] = []
    notes: list[dict[str, Any]] = []
    for path in sorted(landing.rglob("*.jsonl")):
        if any(part.startswith(("_", ".")) for part in path.relative_to(landing).parts):
            continue
        if path.name.startswith("part-"):
            data += path.read_bytes().splitlines(keepends=True)
        else:
            notes += [json.loads(x) for x in path.read_text().splitlines()]
    return data, notes


def wait_landed(
    journal: Path, landing: Path, proc: subprocess.Popen[str], *, boots: int | None = None
) -> list[bytes]:
    """Wait until every line on disk is landed (the middleware is idle); the disk's lines.

    ``boots``: first wait for the disk to hold that many boots' records. The journal
    reaches the disk a moment after a publish: without it, lines of the last boot not
    yet on disk would pass for landed.
    """
    disk: list[bytes] = []
    missing: set[bytes] = set()

    def all_landed() -> bool:
        disk[:] = on_disk(journal)
        data, _ = landed(landing)
        missing.clear()
        missing.update(set(disk) - set(data))
        if not missing and (boots is None or len({key(x)[0] for x in disk}) >= boots):
            return True
        assert proc.poll() is None, proc.communicate(timeout=5)
        return False

    def said() -> str:
        on = len({key(x)[0] for x in disk})
        return f"{len(missing)} lines not landed, {on} boots on disk (waiting for {boots or on})"

    wait_until(all_landed, timeout=30, poll=0.05, what=said)
    return disk


def key(line: bytes) -> tuple[str, int]:
    rec = json.loads(line)
    return rec["boot_id"], rec["offset"]


async def test_a_middleware_killed_and_restarted_is_followed_into_its_new_boot(
    tmp_path: Path,
) -> None:
    journal, landing = tmp_path / "journal", tmp_path / "landing"
    mw, address = serve(journal, "--journal-level", "full")  # on the port it chose
    again = ("--listen", address, "--journal-level", "full")
    try:
        with collector(address, landing) as coll:
            await publish(address, 300)
            kill9(mw)  # mid-run: the collector is following
            mw, _ = serve(journal, *again)
            await publish(address, 300)
            disk = wait_landed(journal, landing, coll, boots=2)
            code, out, err = end(coll)
            assert code == 0, err
    finally:
        stop(mw)
    data, notes = landed(landing)
    boots = list(dict.fromkeys(key(x)[0] for x in disk))
    assert len(boots) == 2
    # Exactly one restart, from the killed boot to the new one; nothing it could not get.
    restarts = [n for n in notes if n["kind"] == "collect_restart"]
    assert [(n["old_boot_id"], n["new_boot_id"]) for n in restarts] == [tuple(boots)]
    assert [n for n in notes if n["kind"] == "collect_gap"] == []
    # No record twice; every record on disk, byte for byte.
    assert len(data) == len(set(data)) == len({key(x) for x in data})
    assert set(disk) <= set(data)
    summary = json.loads(out)
    assert summary["vehicles"]["car-f"]["restarts"] == 1
    assert summary["vehicles"]["car-f"]["broken_links"] == 0


async def test_a_middleware_stopped_cleanly_hands_its_followers_the_stop_record(
    tmp_path: Path,
) -> None:
    """The journal's last record (``stop``) is written after every other call ended;
    the journal's followers still get it before their streams end: a collector that
    follows a car to its clean shutdown lands the whole boot, with nothing left over for
    the next boot. A provider still connected does not hold the stop up past its grace."""
    journal, landing = tmp_path / "journal", tmp_path / "landing"
    mw, address = serve(journal, "--journal-level", "full")
    try:
        with collector(address, landing) as coll:
            await publish(address, 200)
            wait_landed(journal, landing, coll)
            still = ProviderClient(address, "still-connected")
            try:
                await still.add_keys([SPEED])
                await still.publish({SPEED: b"x"})
                # The stream is open on the middleware's side (its connect is journaled)
                # before the stop: publish() returns once the request is sent, not read.
                await eventually(
                    lambda: any(
                        (r["kind"], r.get("app"), r.get("stream"))
                        == ("connect", "still-connected", "publish")
                        for r in map(json.loads, on_disk(journal))
                    ),
                    timeout=30,
                    what="the provider's Publish stream open",
                )
                began = time.monotonic()
                code, err = stop(mw)
                took = time.monotonic() - began
            finally:
                with contextlib.suppress(grpc.aio.AioRpcError):  # its stream was ended
                    await still.close()
            assert code == 0, err
            assert took < 6.0, f"the middleware took {took:.1f} s to stop"
            disk = on_disk(journal)
            records = [json.loads(x) for x in disk]
            assert records[-1]["kind"] == "stop"
            # The provider's stream was ended before the stop, and journaled as such.
            assert any(
                (r["kind"], r.get("app"), r.get("stream"))
                == ("disconnect", "still-connected", "publish")
                for r in records
            )
            await eventually(
                lambda: set(disk) <= set(landed(landing)[0]),
                timeout=10,
                what="every line on disk, the stop record too, landed",
            )
            code, _, err = end(coll)
            assert code == 0, err
    finally:
        stop(mw)
    data, notes = landed(landing)
    assert notes == []
    assert len(data) == len(set(data))
    assert set(data) == set(disk)


async def test_a_collector_killed_and_restarted_lands_no_duplicate_and_no_gap(
    tmp_path: Path,
) -> None:
    journal, landing = tmp_path / "journal", tmp_path / "landing"
    mw, address = serve(journal, "--journal-level", "full")
    try:
        with collector(address, landing) as first:
            for _ in range(10):
                await publish(address, 30)
                if len(landed(landing)[0]) > 100:
                    break
            kill9(first)  # while it lands files every 50 ms
        await publish(address, 200)  # while no collector runs
        with collector(address, landing, "--poll") as second:
            await publish(address, 100)
            disk = wait_landed(journal, landing, second)
            code, _, err = end(second)
            assert code == 0, err
    finally:
        stop(mw)
    data, notes = landed(landing)
    assert notes == []  # no restart, no gap
    assert len(data) == len(set(data))  # no duplicate
    assert set(disk) <= set(data)  # no gap
    records = [verify_line(x) for x in data]
    base = min(r["offset"] for r in records if r["kind"] == "start")
    records.sort(key=lambda r: (r["offset"] - base) % 2**32)
    assert records[0]["kind"] == "start"
    for a, b in itertools.pairwise(records):
        assert b["prev_hash"] == a["hash"]  # one chain across the files of both runs
        assert b["offset"] == succ(a["offset"])


async def test_a_middleware_that_goes_silent_is_noticed_and_followed_on_when_it_is_back(
    tmp_path: Path,
) -> None:
    """The car loses power: no FIN, no RST, just silence (SIGSTOP). The collector's
    idle Follow notices within the keepalive time (5 s ping, 5 s to answer) and
    reconnects; once the middleware answers again (SIGCONT) it goes on: no gap, no
    duplicate, no restart."""
    journal, landing, log = tmp_path / "journal", tmp_path / "landing", tmp_path / "coll.log"
    mw, address = serve(journal, "--journal-level", "full")
    try:
        with collector(address, landing, log=log) as coll:
            await publish(address, 100)
            wait_landed(journal, landing, coll)
            mw.send_signal(signal.SIGSTOP)
            try:
                await eventually(
                    lambda: "retrying in" in log.read_text(),
                    timeout=15,
                    poll=0.05,
                    what=lambda: (
                        "the collector to notice the silent middleware:\n" + log.read_text()
                    ),
                )
            finally:
                mw.send_signal(signal.SIGCONT)
            await publish(address, 100)
            disk = wait_landed(journal, landing, coll)
            code, out, _ = end(coll)
            assert code == 0, log.read_text()
    finally:
        stop(mw)
    data, notes = landed(landing)
    assert notes == []  # no restart, no gap
    assert len(data) == len(set(data)) == len({key(x) for x in data})  # no duplicate
    assert set(disk) <= set(data)
    assert json.loads(out)["vehicles"]["car-f"]["duplicates"] == 0


async def test_polling_releases_only_what_is_landed(tmp_path: Path) -> None:
    """A polling collector reads ahead of what it has landed (it lands a flush interval
    at a time); the middleware must keep those records until they are landed: each Poll
    acknowledges the landed position (its ``ack``), not the position it reads from."""
    s = replace_settings(TEST_SETTINGS, journal_dir=str(tmp_path / "journal"), journal_level="full")
    server = await start_server(s)
    try:
        await publish(server.address, 100)
        feed = server.runtime.journal_feed
        assert feed is not None
        options = Options(poll=True, max_records=5, flush_s=3600, progress_s=3600)
        collector = Collector([server.address], Landing(str(tmp_path / "landing")), options)
        run = asyncio.create_task(collector.run())
        try:
            read_ahead = 0

            def caught_up() -> bool:
                """It landed; meanwhile, nothing read ahead is released before it lands."""
                nonlocal read_ahead
                assert not run.done(), run.result()
                v = next(iter(collector.vehicles.values()), None)
                if v is not None and v.counts.records:
                    return True
                c = feed.consumers.get("collector", "collector")
                if v is not None and c is not None and v.at.offset != v.landed.offset:
                    read_ahead += 1
                    assert (c.boot_id, c.offset) == (v.landed.boot_id, v.landed.offset), (
                        "records released before they were landed"
                    )
                return False

            await eventually(caught_up, timeout=20, poll=0.001, what="the collector to land")
            v = next(iter(collector.vehicles.values()))
            assert read_ahead > 0  # it did read ahead of what it landed
            # Once landed, the next Poll releases them.
            await eventually(
                lambda: (
                    (c := feed.consumers.get("collector", "collector")) is not None
                    and (c.boot_id, c.offset) == (v.landed.boot_id, v.landed.offset)
                ),
                what="the landed records released",
            )
        finally:
            collector.stop()
            assert await asyncio.wait_for(run, 10) == 0
    finally:
        await server.stop(0)


async def test_a_collector_acknowledging_as_its_middleware_dies_follows_it_back(
    tmp_path: Path,
) -> None:
    """With a window of one group the collector acknowledges after every group, so a
    SIGKILL often lands while an ack is being written: the write then fails with
    grpc's InvalidStateError ("RPC already finished"), which the collector must take
    as the end of the stream, like any other, and follow the middleware back."""
    journal, landing = tmp_path / "journal", tmp_path / "landing"
    mw, address = serve(journal, "--journal-level", "full")  # on the port it chose
    again = ("--listen", address, "--journal-level", "full")
    log = tmp_path / "collector.log"
    try:
        with collector(address, landing, "--window", "1", log=log) as coll:
            killed: set[str] = set()  # the boots of the middlewares killed so far
            for _ in range(6):
                await publish(address, 3_000)  # many groups for the collector to take
                # Killed while the collector still takes them, one ack per group: once
                # it lands the live boot's records (a killed boot's may land late, read
                # before its kill: counting them, a kill could come before the
                # collector followed the middleware back, and a restart go unseen).

                def taking(killed: frozenset[str] = frozenset(killed)) -> bool:
                    assert coll.poll() is None, f"the collector died: {log.read_text()[-3000:]}"
                    live = [x for x in landed(landing)[0] if key(x)[0] not in killed]
                    return len(live) > 50

                await eventually(taking, timeout=60, what="the live boot's groups landing")
                killed |= {key(x)[0] for x in landed(landing)[0]}
                kill9(mw)
                assert coll.poll() is None, f"the collector died: {log.read_text()[-3000:]}"
                mw, _ = serve(journal, *again)
            await publish(address, 100)
            wait_landed(journal, landing, coll, boots=7)  # the first, and one per kill
            code, _, _ = end(coll)
            assert code == 0, log.read_text()[-3000:]
    finally:
        stop(mw)
    assert "InvalidStateError" not in log.read_text()
    data, notes = landed(landing)
    assert len(data) == len(set(data))
    restarts = [
        (n["old_boot_id"], n["new_boot_id"]) for n in notes if n["kind"] == "collect_restart"
    ]
    assert len(restarts) == 6, restarts
