"""The journal of a real middleware process under faults: retention, kill -9, a full disk.

Each case runs ``python -m vehicle_middleware.server serve`` as a process and checks what
``python -m vehicle_middleware.server journal verify`` then says. The full-disk cases mount a
small tmpfs (root only; skipped where mounting is not allowed: the same
losses are covered by the unit tests' injected write errors).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from vehicle_middleware.sdk import ProviderClient
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
