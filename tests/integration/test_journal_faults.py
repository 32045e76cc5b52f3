"""The journal of a real middleware process under faults: retention, kill -9, a full disk.

Each case runs ``python -m vehicle_middleware.server serve`` as a process and checks what
``python -m vehicle_middleware.server journal verify`` then says. The full-disk cases mount a
small tmpfs (root only; skipped where mounting is not allowed: the same
losses are covered by the unit tests' injected write errors).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from vehicle_middleware.contract.journal.segments import segment_boot, segment_files
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2, journal_pb2_grpc
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.__main__ import main as cli_main
from vehicle_middleware.server.journal import JournalReport, read_journal, verify
from vehicle_middleware.server.journal.reserve import LossMarker

from tests.conftest import eventually, eventually_async
from tests.integration.test_process import start, stop

SPEED = "Vehicle.Speed"


def verify_cli(directory: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "vehicle_middleware.server", "journal", "verify", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout


def verify_here(directory: Path) -> tuple[int, str]:
    """``journal verify`` as :func:`verify_cli` runs it, in this process (no interpreter
    start: for tests that verify many directories)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["journal", "verify", str(directory)])
    return code, out.getvalue()


def serve(journal: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    return start(
        "--listen",
        "127.0.0.1:0",
        "--journal-dir",
        str(journal),
        "--vehicle-id",
        "car-f",
        *extra,
    )


async def publish(address: str, n: int, *, size: int = 64) -> None:
    provider = ProviderClient(address, "flood")
    try:
        await provider.add_keys([SPEED])
        for i in range(n):
            await provider.publish({SPEED: i.to_bytes(4, "big") + bytes(size)})
    finally:
        await provider.close()


async def fill(address: str, journal: Path) -> None:
    """Publish until the journal's disk is full (bounded in time)."""

    async def full() -> bool:
        if shutil.disk_usage(journal).free < 8192:
            return True
        await publish(address, 200)
        return False

    await eventually_async(
        full, timeout=60, poll=0, what="the journal did not fill the disk in 60 s"
    )


def kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=15)


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


async def test_retention_trims_the_journal_and_verify_accepts_it(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    proc, address = serve(
        journal,
        "--journal-level",
        "full",
        "--journal-segment-bytes",
        "20000",
        "--journal-max-bytes",
        "60000",
    )
    try:
        await publish(address, 2000)
    finally:
        code, err = stop(proc)
    assert code == 0, err
    records = read_journal([journal])
    assert records[0]["kind"] != "start"  # retention removed the oldest segments
    assert any(r["kind"] == "journal_trimmed" for r in records)
    code, out = verify_cli(journal)
    assert code == 0, out
    assert "chain intact" in out
    assert "retention removed its oldest segments" in out


async def test_a_killed_middleware_shows_as_an_unclean_stop_and_the_next_boot_as_clean(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal"
    proc, address = serve(journal)
    await publish(address, 10)
    kill9(proc)
    code, out = verify_cli(journal)
    assert code == 0, out  # nothing lost that was not reported, nothing tampered
    assert out.count("UNCLEAN STOP") == 1
    proc, address = serve(journal)
    code, err = stop(proc)
    assert code == 0, err
    code, out = verify_cli(journal)
    assert code == 0, out
    assert "2 boots" in out
    assert out.count("UNCLEAN STOP") == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_a_full_disk_ends_with_every_loss_reported_and_a_clean_stop(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "256k") as journal:
        proc, address = serve(journal, "--journal-level", "full")
        try:
            await fill(address, journal)
            await publish(address, 300, size=1000)  # refused by the disk
        finally:
            code, err = stop(proc)
        assert code == 0, err
        assert "journal write failed" in err
        assert "written in the room of the reserve file" in err  # not "writes work again"
        report = JournalReport()
        records = read_journal([journal], report)
        verify(records, report)
        [boot] = report.boots.values()
        dropped = [r for r in records if r["kind"] == "journal_dropped"]
        assert dropped
        assert dropped[-1]["cause"] == "write failed"
        assert records[-1]["kind"] == "stop"
        assert boot.stopped
        assert report.intact
        assert report.complete
        assert boot.reported_dropped >= 300
        code, out = verify_cli(journal)
        assert code == 0, out


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_losses_of_a_middleware_killed_on_a_full_disk_are_reported_by_the_next_boot(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk", "256k") as journal:
        proc, address = serve(journal, "--journal-level", "full")
        try:
            await fill(address, journal)
            await publish(address, 200, size=1000)
            marker = LossMarker(journal)
            await eventually(
                lambda: (m := marker.read()) is not None and m.unreported + m.pending >= 200,
                timeout=10,
                what="the marker to hold the losses",
            )
        finally:
            kill9(proc)
        first_boot = {r["boot_id"] for r in read_journal([journal])}
        # Before any boot follows, verify says what the dead one's marker holds.
        code, out = verify_cli(journal)
        assert code == 1, out
        assert "LOSS NOT REPORTED: its marker says" in out
        subprocess.run(
            ["mount", "-o", "remount,size=4m", str(journal)], check=True, capture_output=True
        )
        proc, address = serve(journal, "--journal-level", "full")
        code, err = stop(proc)
        assert code == 0, err
        records = read_journal([journal])
        [note] = [r for r in records if r.get("lost_boot_id")]
        assert note["lost_boot_id"] in first_boot
        assert note["cause"] == "not written before the process ended"
        assert note["count"] >= 200
        report = verify(records)
        assert report.intact
        assert report.complete
        assert not report.boots[note["lost_boot_id"]].stopped
        code, out = verify_cli(journal)
        assert code == 0, out
        assert out.count("UNCLEAN STOP") == 1


async def test_a_second_middleware_on_the_same_journal_directory_is_refused(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal"
    proc, _ = serve(journal)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "vehicle_middleware.server", "serve", "--listen", "127.0.0.1:0",
             "--journal-dir", str(journal)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1, second.stderr
        assert f"journal directory {journal} is in use by another middleware" in second.stderr
        assert f"pid {proc.pid}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        code, err = stop(proc)
    assert code == 0, err
    code, out = verify_cli(journal)  # the first one's journal is untouched by the second
    assert code == 0, out
    assert "1 boots" in out
    assert "UNCLEAN STOP" not in out


def boot_segments(journal: Path) -> dict[str, list[Path]]:
    """The segments of each boot, oldest boot first."""
    boots: dict[str, list[Path]] = {}
    for path in segment_files(journal):
        boots.setdefault(segment_boot(path) or "", []).append(path)
    return boots


async def two_clean_boots(journal: Path) -> tuple[str, str]:
    """Two boots, each stopped cleanly, the first in several segments."""
    for _ in range(2):
        proc, address = serve(journal, "--journal-level", "full", "--journal-segment-bytes", "8000")
        try:
            await publish(address, 150)
        finally:
            code, err = stop(proc)
        assert code == 0, err
    first, second = boot_segments(journal)
    return first, second


async def test_a_removed_or_cut_tail_or_boot_fails_verify_naming_what_is_missing(
    tmp_path: Path,
) -> None:
    """Each boot's start names where the one before ended, and the marker where the newest
    did: a tail cut in half or deleted, or a whole boot deleted, fails verify naming the
    boot and the offsets; a clean stop whose stop record is gone is not an unclean stop."""
    journal = tmp_path / "journal"
    first, second = await two_clean_boots(journal)
    code, out = verify_cli(journal)
    assert code == 0, out
    assert "UNCLEAN STOP" not in out
    [start] = [
        r for r in read_journal([journal]) if r["kind"] == "start" and r["boot_id"] == second
    ]
    assert start["prev_boot_id"] == first
    assert start["prev_boot_stopped"] is True

    def faulty(name: str, fault: Callable[[dict[str, list[Path]]], None]) -> Path:
        copy = tmp_path / name
        shutil.copytree(journal, copy)
        fault(boot_segments(copy))
        return copy

    def halve(path: Path) -> None:
        os.truncate(path, path.stat().st_size // 2)

    cases = {
        "first-cut": (lambda b: halve(b[first][-1]), first, "TAIL MISSING: offsets"),
        "first-tail-deleted": (lambda b: b[first][-1].unlink(), first, "TAIL MISSING: offsets"),
        "first-deleted": (
            lambda b: [p.unlink() for p in b[first]],
            first,
            f"boot {first}: BOOT MISSING",
        ),
        "newest-cut": (lambda b: halve(b[second][-1]), second, "TAIL MISSING: offsets"),
        "newest-deleted": (
            lambda b: [p.unlink() for p in b[second]],
            second,
            f"boot {second}: BOOT MISSING",
        ),
    }
    for name, (fault, boot, says) in cases.items():
        code, out = verify_here(faulty(name, fault))
        assert code == 1, (name, out)
        assert says in out, (name, out)
        section = out.split(f"boot {boot}:")[1].split("  boot ")[0]
        assert "with its stop record" in section, (name, out)
        assert "UNCLEAN STOP" not in section, (name, out)  # a clean stop, cut: not a crash

    # Cut while no middleware runs: the next boot logs it, and its start names the end.
    last = boot_segments(journal)[second][-1]
    os.truncate(last, last.stat().st_size // 2)
    proc, _ = serve(journal)
    code, err = stop(proc)
    assert code == 0, err
    assert f"the previous boot {second} wrote up to offset" in err
    code, out = verify_here(journal)
    assert code == 1, out
    section = out.split(f"boot {second}:")[1].split("  boot ")[0]
    assert "TAIL MISSING: offsets" in section
    assert "the start of boot" in section


JOURNAL_SERVICE = "vehicle.journal.v1.JournalService"


async def stats_of(address: str) -> tuple[Any, dict[str, float]]:
    """GetStats of a middleware: its process figures and its extra figures by name."""
    async with grpc.aio.insecure_channel(address) as channel:
        stats = await admin_pb2_grpc.AdminStub(channel).GetStats(
            admin_pb2.GetStatsRequest(), metadata=(("app-id", "ops"),), timeout=10
        )
    return stats.process, {f.name: f.value for f in stats.extra}


async def journal_health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=JOURNAL_SERVICE), timeout=10
        )
    return int(answer.status)


def removed_notes(journal: Path) -> list[dict[str, Any]]:
    with contextlib.suppress(FileNotFoundError):
        return [
            r
            for r in read_journal([journal])
            if r["kind"] == "journal_dropped" and r["cause"] == "directory removed"
        ]
    return []


async def test_a_journal_directory_removed_while_it_runs_is_told_and_never_shared(
    tmp_path: Path,
) -> None:
    """rm -rf of the directory: the running middleware finds it at once, makes it again
    and takes its lock (so a second middleware is refused), and the first record there
    counts what went; GetStats and the metrics count it; verify of what is left fails,
    naming where it starts."""
    journal = tmp_path / "journal"
    proc, address = serve(journal, "--journal-level", "full")
    try:
        await publish(address, 50)
        await eventually(lambda: len(read_journal([journal])) > 50, timeout=10, what="writes")
        shutil.rmtree(journal)
        await eventually(
            lambda: bool(removed_notes(journal)), timeout=10, what="the removal to be told"
        )
        [note] = removed_notes(journal)
        assert note["count"] > 50
        process, extra = await stats_of(address)
        assert process.journal_records_dropped >= note["count"]
        assert extra["vmw_journal_directory_removals_total"] == 1
        assert extra["vmw_journal_directory_lost"] == 0  # it writes again
        assert await journal_health(address) == health_pb2.HealthCheckResponse.SERVING
        second = subprocess.run(
            [sys.executable, "-m", "vehicle_middleware.server", "serve", "--listen", "127.0.0.1:0",
             "--journal-dir", str(journal)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1, second.stderr
        assert f"pid {proc.pid}" in second.stderr
        await publish(address, 10)
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert f"the journal directory {journal} (or its .journal-lock) was removed" in err
    assert "records of this boot went with it" in err
    code, out = verify_here(journal)
    assert code == 1, out
    assert "CHAIN BROKEN at offset" in out
    assert "the chain's start is missing" in out
    assert f"DIRECTORY REMOVED while it ran: {note['count']} of its records" in out


async def test_a_removed_directory_another_middleware_took_is_not_written_by_the_first(
    tmp_path: Path,
) -> None:
    """The first middleware is stopped (SIGSTOP) while its directory is removed and a
    second one starts there: woken, the first finds its lock gone and the path held,
    and writes nothing more: health NOT_SERVING for the journal, the loss counted."""
    journal = tmp_path / "journal"
    proc, address = serve(journal, "--journal-level", "full")
    other = None
    try:
        await publish(address, 20)
        await eventually(lambda: len(read_journal([journal])) > 20, timeout=10, what="writes")
        proc.send_signal(signal.SIGSTOP)
        try:
            shutil.rmtree(journal)
            other, _ = serve(journal)
        finally:
            proc.send_signal(signal.SIGCONT)
        await eventually_async(
            lambda: journal_health(address),
            health_pb2.HealthCheckResponse.NOT_SERVING,
            what="the journal's health to say it writes nothing",
        )
        _, extra = await stats_of(address)
        assert extra["vmw_journal_directory_lost"] == 1
        before, _ = await stats_of(address)
        await publish(address, 30)

        async def lost() -> bool:
            now, _ = await stats_of(address)
            return bool(now.journal_records_dropped >= before.journal_records_dropped + 30)

        await eventually_async(lost, what="the refused records to be counted")
    finally:
        code, err = stop(proc)
        if other is not None:
            other_code, other_err = stop(other)
            assert other_code == 0, other_err
    assert code == 0, err
    assert "this boot writes no journal any more" in err
    assert f"is in use by another middleware (pid {other.pid})" in err
    code, out = verify_here(journal)  # only the second one's boot is there, whole
    assert code == 0, out
    assert "1 boots" in out
    assert "UNCLEAN STOP" not in out


def fill_with_a_file(journal: Path) -> Path:
    """Take every byte the disk has left, as another program would."""
    filler = journal / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as fh:
        while True:
            fh.write(bytes(4096))
            fh.flush()
    return filler


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_a_boot_started_on_a_still_full_disk_reads_as_a_clean_stop_not_written(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk", "256k") as journal:
        proc, address = serve(journal, "--journal-level", "full")
        try:
            await fill(address, journal)
        finally:
            code, err = stop(proc)
        assert code == 0, err
        filler = fill_with_a_file(journal)  # the disk stays full for the next boot
        proc, address = serve(journal, "--journal-level", "full")
        try:
            await publish(address, 50)
        finally:
            code, err = stop(proc)
        assert code == 0, err
        full_boot = LossMarker(journal).read()
        assert full_boot is not None
        assert full_boot.ended
        code, out = verify_here(journal)
        assert code == 1, out  # its losses are in its marker only, not yet in a record
        section = out.split(f"boot {full_boot.boot_id}:")[1]
        assert "none of its records reached disk" in section
        assert "STOP NOT WRITTEN: it stopped cleanly" in section
        assert "LOSS NOT REPORTED: its marker says" in section
        assert "UNCLEAN STOP" not in out
        filler.unlink()
        proc, address = serve(journal)
        code, err = stop(proc)
        assert code == 0, err
        assert "stopped cleanly but its stop record did not reach disk" in err
        [note] = [r for r in read_journal([journal]) if r.get("lost_boot_id")]
        assert (note["lost_boot_id"], note["cause"]) == (full_boot.boot_id, "write failed")
        code, out = verify_here(journal)
        assert code == 0, out
        section = out.split(f"boot {full_boot.boot_id}:")[1].split("  boot ")[0]
        assert "none of its records reached disk" in section
        assert "STOP NOT WRITTEN" in section
        assert "UNCLEAN STOP" not in out


async def test_a_middleware_started_at_the_wrap_serves_a_new_consumer_every_record(
    tmp_path: Path,
) -> None:
    """``serve --journal-offset-start 4294967276``: the offsets cross 0 within the first
    records, and a consumer holding nothing (no boot, offset 0) is told to recover from
    the boot's first record, then reads every one, through the wrap."""
    proc, address = serve(
        tmp_path / "journal", "--journal-level", "full", "--journal-offset-start", "4294967276"
    )
    try:
        await publish(address, 40)
        md = (("app-id", "collector"),)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = journal_pb2_grpc.JournalServiceStub(channel)

            async def poll(boot: str, offset: int) -> Any:
                return await stub.Poll(
                    journal_pb2.PollRequest(
                        component="LIVE", boot_id=boot, offset=offset, max=1000
                    ),
                    metadata=md,
                    timeout=10,
                )

            first = await poll("", 0)
            assert first.WhichOneof("answer") == "recovery", first
            boot, n0 = first.recovery.boot_id, first.recovery.n0
            assert n0 == 4294967276
            offsets: list[int] = []
            offset = (n0 - 1) % 2**32
            while (answer := await poll(boot, offset)).WhichOneof("answer") == "records":
                offsets += [json.loads(line)["offset"] for line in answer.records.lines]
                offset = answer.records.last_offset
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert offsets[:25] == [(n0 + i) % 2**32 for i in range(25)]  # ..., 2^32 - 1, 0, 1, ...
