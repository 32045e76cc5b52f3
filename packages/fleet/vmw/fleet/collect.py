"""``python -m vmw.fleet collect``: the journals of a fleet, as they are written,
into a landing area that Spark ingests.

One collector follows one or many middlewares (one per vehicle) as a reliable
consumer of their ``JournalService`` (``Follow``, or ``Poll`` with ``--poll``
or ``--once``) and writes what it receives into the landing area, a local
path or a Hadoop-filesystem URI, by the landing contract
(:mod:`vmw.contract.journal.landing`):

- ``LANDING/vehicle=V/boot=B/part-<first offset:010d>-<n>.jsonl``: journal
  lines exactly as the middleware wrote them; each file appears atomically
  (written under ``_tmp/``, then renamed);
- ``LANDING/vehicle=V/collector-<name>-<unix ns>.jsonl``: ``collect_gap``
  (offsets the middleware wrote that could not be collected) and
  ``collect_restart`` (the collector followed a restarted middleware into its
  new boot) records;
- ``LANDING/_positions/vehicle=V.json``: where the collector stands per
  vehicle (boot, offset, the last record's hash, the files written, who holds
  it). Another collector can take a vehicle over from there.

Every record is verified as it arrives (its hash over its own bytes, and its
chain link to the record before it, by :mod:`vmw.contract.journal.chain`); a
record that fails is still landed (the analysis then flags the broken chain)
and counted.

No duplicate, no gap, across kills: a flush writes its files under
``_tmp/``, then the position with the renames it is about to do ("pending"),
then renames, then the position without them. A collector that restarts
completes a pending flush first, then asks the middleware for the records
after its position; only then does it acknowledge them (``Follow``'s acks,
or the ``ack`` of its next ``Poll``: it polls from the last record received
and acknowledges the last one landed), so the middleware releases only what
is landed.

Not a Spark job: plain Python, a process per collector; ``ingest --stream``
does the heavy work.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
from vmw.contract.channel import RECEIVE_LIMIT, open_channel
from vmw.contract.journal import landing as layout
from vmw.contract.journal.chain import OFFSET_MOD, distance, pred, succ, verify_line
from vmw.contract.journal.landing import CollectorKind
from vmw.contract.journal.records import Kind
from vmw.contract.wire import APP_ID_HEADER, AUTH_HEADER
from vmw.proto.journal.v1 import journal_pb2 as pb
from vmw.proto.journal.v1 import journal_pb2_grpc as pb_grpc
from vmw.sdk import Tls
from vmw.sdk.cli import (
    TlsOptionsError,
    TokenFormatError,
    add_tls_arguments,
    app_id_for,
    tls_from_args,
)

__all__ = ["Collector", "Landing", "add_collect_parser", "collect_main"]

log = logging.getLogger(__name__)

_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)
_HALF: Final = OFFSET_MOD // 2
_RETRYABLE: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
_TOO_LARGE: Final = "Received message larger than max"
"""gRPC's RESOURCE_EXHAUSTED when a message is over the channel's receive limit: the
same answer would come again, so it is fatal (a middleware's RESOURCE_EXHAUSTED, e.g. a
rate limit, is retried)."""
_REASON_OF: Final = {
    pb.RECOVERY_REASON_CUT_LOOSE: "consumer cut loose",
    pb.RECOVERY_REASON_NOT_IN_HISTORY: "history overrun",
    pb.RECOVERY_REASON_BOOT_NOT_HELD: "middleware restarted before they were read",
    pb.RECOVERY_REASON_BOOT_ENDED: "middleware restarted before they were read",
}


class CollectError(RuntimeError):
    """A source or the landing area cannot be used (the message says why)."""


class _StreamEnded(Exception):
    """A Follow stream ended without an error status: connect again."""


# -- the landing area --------------------------------------------------------------------


class Landing:
    """A landing area: a local directory, or any filesystem ``pyarrow.fs`` opens by URI.

    Writes of whole files only; :meth:`replace` is atomic on a local disk and
    on HDFS a delete then a rename (a crash in between leaves the temporary
    file, which :meth:`read_replaced` reads).
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._fs: Any = None
        self._root: str
        if "://" not in target:
            self._root = str(Path(target).resolve())
            return
        try:
            from pyarrow import fs as pafs  # type: ignore[import-untyped]
        except ImportError:
            if target.startswith("file://"):
                self._root = target.removeprefix("file://")
                return
            raise CollectError(
                f"landing area {target!r}: a Hadoop-filesystem URI needs pyarrow "
                "(pip install pyarrow; for hdfs:// also a Hadoop client); or give a local path"
            ) from None
        try:
            self._fs, self._root = pafs.FileSystem.from_uri(target)
        except Exception as e:
            raise CollectError(f"landing area {target!r}: {e}") from e

    def _path(self, rel: str) -> str:
        return f"{self._root.rstrip('/')}/{rel}"

    def write(self, rel: str, data: bytes) -> None:
        """Write a whole file (its directory made), durable on a local disk."""
        path = self._path(rel)
        if self._fs is None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            return
        self._fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with self._fs.open_output_stream(path) as out:
            out.write(data)

    def exists(self, rel: str) -> bool:
        path = self._path(rel)
        if self._fs is None:
            return Path(path).exists()
        from pyarrow import fs as pafs

        info = self._fs.get_file_info(path)
        return bool(info.type != pafs.FileType.NotFound)

    def read(self, rel: str) -> bytes | None:
        path = self._path(rel)
        try:
            if self._fs is None:
                return Path(path).read_bytes()
            with self._fs.open_input_stream(path) as fh:
                return bytes(fh.read())
        except FileNotFoundError:
            return None

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` to the new name ``dst`` (its directory made)."""
        if self._fs is None:
            Path(self._path(dst)).parent.mkdir(parents=True, exist_ok=True)
            os.rename(self._path(src), self._path(dst))
            return
        self._fs.create_dir(self._path(dst).rsplit("/", 1)[0], recursive=True)
        self._fs.move(self._path(src), self._path(dst))

    def replace(self, rel: str, data: bytes) -> None:
        """Write ``rel`` whole, replacing it: through ``rel + '.tmp'`` and a rename."""
        tmp = rel + ".tmp"
        self.write(tmp, data)
        if self._fs is None:
            os.replace(self._path(tmp), self._path(rel))
            return
        with contextlib.suppress(FileNotFoundError, OSError):
            self._fs.delete_file(self._path(rel))
        self._fs.move(self._path(tmp), self._path(rel))

    def read_replaced(self, rel: str) -> bytes | None:
        """What :meth:`replace` last wrote to ``rel``."""
        data = self.read(rel)
        return data if data is not None else self.read(rel + ".tmp")


# -- positions -------------------------------------------------------------------------------


@dataclass(slots=True)
class Position:
    """Where the collector stands for one vehicle: everything up to here is landed."""

    boot_id: str = ""
    offset: int = 0
    hash: str | None = None
    """The last landed record's hash: the next record's prev_hash (None: not known)."""
    files: int = 0
    """Files landed for the vehicle (numbers the next one)."""
    done_boots: list[str] = field(default_factory=list)
    """Boots the collector has moved past (their gaps are recorded), the newest last."""

    def copy(self) -> Position:
        return dataclasses.replace(self, done_boots=list(self.done_boots))


@dataclass(slots=True)
class Held:
    """A vehicle's position file: the position, who holds the vehicle, and a flush
    that was under way (its renames) when the collector stopped."""

    position: Position
    owner: str
    heartbeat_ns: int
    pending: list[tuple[str, str]]


def load_position(landing: Landing, vehicle: str) -> Held | None:
    """The vehicle's position file, or None."""
    data = landing.read_replaced(layout.position_path(vehicle))
    if data is None:
        return None
    doc = json.loads(data)
    pending = doc.get("pending") or {}
    state = pending.get("state", doc)
    position = Position(
        boot_id=str(state.get("boot_id", "")),
        offset=int(state.get("offset", 0)),
        hash=state.get("hash"),
        files=int(state.get("files", 0)),
        done_boots=[str(b) for b in state.get("done_boots", [])],
    )
    if not pending:
        position = Position(
            boot_id=str(doc.get("boot_id", "")),
            offset=int(doc.get("offset", 0)),
            hash=doc.get("hash"),
            files=int(doc.get("files", 0)),
            done_boots=[str(b) for b in doc.get("done_boots", [])],
        )
    return Held(
        position,
        str(doc.get("owner", "")),
        int(doc.get("heartbeat_ns", 0)),
        [(str(a), str(b)) for a, b in pending.get("moves", [])],
    )


def save_position(
    landing: Landing,
    vehicle: str,
    position: Position,
    owner: str,
    *,
    pending: tuple[Position, list[tuple[str, str]]] | None = None,
) -> None:
    doc: dict[str, Any] = {"vehicle_id": vehicle, "owner": owner, "heartbeat_ns": time.time_ns()}
    doc |= dataclasses.asdict(position)
    if pending is not None:
        state, moves = pending
        doc["pending"] = {"state": dataclasses.asdict(state), "moves": moves}
    landing.replace(layout.position_path(vehicle), json.dumps(doc, sort_keys=True).encode())


def complete_pending(landing: Landing, vehicle: str, held: Held, owner: str) -> None:
    """Finish a flush a killed collector left: its files were whole under ``_tmp``."""
    if not held.pending:
        return
    for tmp, final in held.pending:
        if not landing.exists(final) and landing.exists(tmp):
            landing.move(tmp, final)
    save_position(landing, vehicle, held.position, owner)
    log.info("collect: %s: completed the flush a stopped collector left", vehicle)


# -- one vehicle ---------------------------------------------------------------------------


@dataclass(slots=True)
class Counts:
    records: int = 0
    """Records landed."""
    files: int = 0
    gaps: int = 0
    """collect_gap records written."""
    gap_offsets: int = 0
    restarts: int = 0
    bad_hash: int = 0
    broken_links: int = 0
    duplicates: int = 0
    """Records received again (at or before the position): not landed twice."""


class Vehicle:
    """What the collector holds of one vehicle: its position, and what is not landed yet."""

    def __init__(self, vehicle_id: str, address: str, owner: str, position: Position) -> None:
        self.vehicle_id = vehicle_id
        self.address = address
        self.owner = owner
        self.landed = position
        """The position on the landing area."""
        self.at = position.copy()
        """The position including what is buffered."""
        self._parts: list[tuple[str, int, list[bytes]]] = []  # (boot, first offset, lines)
        self._notes: list[dict[str, Any]] = []  # collector records to land
        self.buffered = 0
        self.buffered_since = 0.0
        self.boot_stopped = False
        """A ``stop`` record is buffered: the boot is over, nothing to wait for."""
        self.counts = Counts()
        self.newest: tuple[str, int] | None = None
        self.state = "connecting"
        self.drained = False
        self.saved_at = time.monotonic()

    # -- what arrives ----------------------------------------------------------------------

    def take_records(self, records: pb.Records) -> None:
        """Verify and buffer records; see the module docstring for what fails."""
        self.newest = (records.newest_boot_id, records.newest_offset)
        boot = records.boot_id
        if boot != self.at.boot_id:
            # Not announced by a recovery (only on a first contact): a new boot.
            self._enter(boot, restarted=bool(self.at.boot_id))
        at = self.at
        for line in records.lines:
            try:
                rec = verify_line(line)
            except ValueError as e:
                try:
                    rec = json.loads(line)
                    offset = int(rec["offset"])
                except (ValueError, KeyError, TypeError):
                    log.error("collect: %s: a line that is not a record (%s): dropped", self, e)
                    continue
                self.counts.bad_hash += 1
                log.error("collect: %s: record %d of boot %s: %s", self, offset, boot, e)
            offset = int(rec["offset"])
            if at.hash is not None and distance(offset, at.offset) < _HALF:
                self.counts.duplicates += 1  # at or before the position: landed already
                continue
            if at.hash is not None and rec.get("prev_hash") != at.hash:
                self.counts.broken_links += 1
                log.error(
                    "collect: %s: record %d of boot %s does not link to the record before it "
                    "(its prev_hash is not that record's hash): landed, the analysis will flag it",
                    self,
                    offset,
                    boot,
                )
            self._add(boot, offset, line)
            at.offset, at.hash = offset, str(rec.get("hash", ""))
            if rec.get("kind") == Kind.STOP:
                self.boot_stopped = True  # the boot's last record: land it now
        at.offset = records.last_offset

    def take_recovery(self, rec: pb.Recovery) -> None:
        """Record what a recovery answer says could not be collected; move to where it says."""
        at = self.at
        lost_here = [x for x in rec.lost if x.boot_id not in at.done_boots]
        if rec.boot_id == at.boot_id:
            if distance(pred(rec.n0), at.offset) <= distance(pred(rec.n0), rec.n1):
                return  # it offers what we hold already: keep our position (and chain)
            # Same boot: everything from after our position to before n0 is gone.
            start, end = succ(at.offset), pred(rec.n0)
            if at.boot_id and distance(start, end) < _HALF:
                cut = [x for x in lost_here if x.boot_id == at.boot_id]
                self._gap(at.boot_id, start, end, cut[0].reason if cut else _REASON_OF[rec.reason])
            lost_here = [x for x in lost_here if x.boot_id != at.boot_id]
        else:
            for x in lost_here:
                if x.boot_id == rec.boot_id:
                    continue  # the new boot's loss shows as its own recovery range
                start = x.from_offset
                if x.boot_id == at.boot_id and 0 < distance(start, succ(at.offset)) < _HALF:
                    start = succ(at.offset)
                self._gap(x.boot_id, start, x.to_offset, x.reason)
            if (
                at.boot_id
                and not any(x.boot_id == at.boot_id for x in lost_here)
                and (rec.reason == pb.RECOVERY_REASON_BOOT_NOT_HELD)
            ):
                log.warning(
                    "collect: %s: boot %s is no longer held by the middleware: what it wrote "
                    "after offset %d is unknown (not recorded as a gap)",
                    self,
                    at.boot_id,
                    at.offset,
                )
            self._enter(rec.boot_id, restarted=bool(at.boot_id))
            lost_here = []
        at.boot_id, at.offset = rec.boot_id, pred(rec.n0)
        at.hash = None  # the chain resumes after a gap: the next record starts it
        log.warning("collect: %s: recovery: %s", self, rec.message)

    def _enter(self, boot: str, *, restarted: bool) -> None:
        at = self.at
        if restarted and at.boot_id and at.boot_id not in at.done_boots:
            self._notes.append(
                {
                    "kind": CollectorKind.RESTART.value,
                    "vehicle_id": self.vehicle_id,
                    "old_boot_id": at.boot_id,
                    "new_boot_id": boot,
                    "time_ns": time.time_ns(),
                    "collector": self.owner,
                }
            )
            self.counts.restarts += 1
            at.done_boots = [*at.done_boots, at.boot_id][-32:]
            log.info("collect: %s: the middleware restarted: boot %s -> %s", self, at.boot_id, boot)
        at.boot_id, at.hash = boot, None

    def _gap(self, boot: str, start: int, end: int, reason: str) -> None:
        count = distance(start, end) + 1
        self._notes.append(
            {
                "kind": CollectorKind.GAP.value,
                "vehicle_id": self.vehicle_id,
                "boot_id": boot,
                "from_offset": start,
                "to_offset": end,
                "count": count,
                "reason": reason,
                "time_ns": time.time_ns(),
                "collector": self.owner,
            }
        )
        self.counts.gaps += 1
        self.counts.gap_offsets += count
        log.warning(
            "collect: %s: offsets %d..%d of boot %s (%d) not collected: %s",
            self,
            start,
            end,
            boot,
            count,
            reason,
        )

    def _add(self, boot: str, offset: int, line: bytes) -> None:
        if not self._parts or self._parts[-1][0] != boot:
            self._parts.append((boot, offset, []))
        self._parts[-1][2].append(line)
        if not self.buffered:
            self.buffered_since = time.monotonic()
        self.buffered += 1

    def discard(self) -> None:
        """Forget what is not landed (it will be received again)."""
        self._parts, self._notes, self.buffered = [], [], 0
        self.at = self.landed.copy()

    @property
    def dirty(self) -> bool:
        """Whether something is not landed yet (records, collector records, a new position)."""
        return bool(self._parts or self._notes) or self.at != self.landed

    # -- landing -----------------------------------------------------------------------------

    def flush(self, landing: Landing, *, heartbeat_s: float | None = None) -> None:
        """Land what is buffered and the position after it (blocking: run in a thread).

        With nothing to land, the position is written again when ``heartbeat_s``
        passed since it was last written: the lease another collector respects.

        Raises:
            CollectError: another collector took the vehicle over (its position
                names another owner): this one must stop following it.
        """
        due = heartbeat_s is not None and time.monotonic() - self.saved_at >= heartbeat_s
        if not self.dirty and not due:
            return
        held = load_position(landing, self.vehicle_id)
        if held is not None and held.owner != self.owner:
            raise CollectError(
                f"vehicle {self.vehicle_id!r} was taken over by collector {held.owner!r}; "
                "this one stops following it"
            )
        self.saved_at = time.monotonic()
        after = self.at.copy()
        files = self.landed.files
        moves: list[tuple[str, str]] = []
        writes: list[tuple[str, bytes]] = []
        vehicle = self.vehicle_id
        for boot, first, lines in self._parts:
            name = layout.data_path(vehicle, boot, first, files)
            writes.append((name, b"".join(lines)))
            files += 1
        if self._notes:
            name = layout.collector_path(vehicle, self.owner, time.time_ns())
            body = "".join(json.dumps(n, sort_keys=True) + "\n" for n in self._notes)
            writes.append((name, body.encode()))
        after.files = files
        for final, data in writes:
            tmp = layout.tmp_path(vehicle, final, self.owner)
            landing.write(tmp, data)
            moves.append((tmp, final))
        if moves:
            save_position(landing, self.vehicle_id, self.landed, self.owner, pending=(after, moves))
            for tmp, final in moves:
                landing.move(tmp, final)
        save_position(landing, self.vehicle_id, after, self.owner)
        self.counts.records += self.buffered
        self.counts.files += sum(1 for _, final in moves if layout.is_data_path(final))
        self._parts, self._notes, self.buffered = [], [], 0
        self.boot_stopped = False
        self.landed = after
        self.at = after.copy()

    def lag(self) -> str:
        if self.newest is None:
            return "lag unknown"
        boot, newest = self.newest
        if boot != self.at.boot_id:
            return f"in an earlier boot ({self.at.boot_id[:8]})"
        return f"lag {distance(self.at.offset, newest):,} records"

    def __str__(self) -> str:
        return self.vehicle_id


# -- the collector ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    component: str = "collector"
    name: str = "collector"
    """The collector's name in its records and file names, and in the position's lease."""
    app_id: str = "collector"
    token: str = ""
    tls: Tls | None = None
    once: bool = False
    poll: bool = False
    max_records: int = 1000
    window: int = 64
    flush_s: float = 1.0
    flush_records: int = 100_000
    poll_interval_s: float = 0.2
    progress_s: float = 5.0
    lease_s: float = 30.0
    take_over: bool = False
    retry_s: float = 30.0
    """--once: give up on a source that does not answer for this long."""


class Collector:
    """Collect from ``sources`` into ``landing`` until stopped (or drained, with ``once``)."""

    def __init__(self, sources: Sequence[str], landing: Landing, options: Options) -> None:
        self.sources = list(sources)
        self.landing = landing
        self.o = options
        self.vehicles: dict[str, Vehicle] = {}
        self.failures: dict[str, str] = {}
        self._stop = asyncio.Event()
        md: list[tuple[str, str]] = [(APP_ID_HEADER, options.app_id)]
        if options.token:
            md.append((AUTH_HEADER, f"Bearer {options.token}"))
        self._md = tuple(md)

    def _channel(self, address: str) -> grpc.aio.Channel:
        """The SDK's channel: keepalive pings (a middleware that goes silent, e.g. a car
        that lost power, ends the call within seconds, even an idle Follow: it would
        wait forever otherwise while the lease keeps other collectors out), quick
        reconnects, the receive limit, and TLS."""
        return open_channel(address, tls=self.o.tls)

    def stop(self) -> None:
        """Stop cleanly: land what is buffered, store positions, end."""
        self._stop.set()

    async def run(self) -> int:
        """0 when every source was collected (drained, with ``once``) or stopped cleanly."""
        progress = asyncio.create_task(self._progress())
        try:
            await asyncio.gather(*(self._source(s) for s in self.sources))
        finally:
            progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await progress
            self._print_progress(final=True)
        return 1 if self.failures else 0

    async def _source(self, address: str) -> None:
        try:
            await self._collect(address)
        except CollectError as e:
            self._fail(address, str(e))

    async def _collect(self, address: str) -> None:
        """Collect one source until stopped (or drained); reconnect on transient errors.

        Raises:
            CollectError: the source cannot be collected (refused, another collector
                holds or took its vehicle, the landing area fails).
        """
        backoff = 0.2
        vehicle: Vehicle | None = None
        since = time.monotonic()
        while not self._stop.is_set():
            try:
                async with self._channel(address) as channel:
                    stub = pb_grpc.JournalServiceStub(channel)  # type: ignore[no-untyped-call]
                    reg = await stub.RegisterConsumer(
                        pb.RegisterConsumerRequest(component=self.o.component),
                        metadata=self._md,
                        timeout=10,
                    )
                    if vehicle is None:
                        vehicle = await asyncio.to_thread(self._attach, address, reg)
                    backoff, since = 0.2, time.monotonic()
                    vehicle.state = "collecting"
                    if self.o.poll or self.o.once:
                        await self._poll(stub, vehicle)
                    else:
                        await self._follow(stub, vehicle)
                    if self.o.once:
                        return
            except grpc.aio.AioRpcError as e:
                if vehicle is not None:
                    await self._flush(vehicle)
                    vehicle.state = f"reconnecting ({e.code().name})"
                if _TOO_LARGE in (e.details() or ""):
                    raise CollectError(
                        f"an answer was larger than this collector receives ({e.details()}; "
                        f"its limit is {RECEIVE_LIMIT // 2**20} MiB): the middleware's "
                        "answers are bounded by its max_message_bytes (less 64 KiB); set "
                        f"it to {RECEIVE_LIMIT // 2**20} MiB or less"
                    ) from None
                if e.code() not in _RETRYABLE:
                    raise CollectError(f"{e.code().name}: {e.details()}") from None
                if self.o.once and time.monotonic() - since > self.o.retry_s:
                    raise CollectError(
                        f"no answer for {self.o.retry_s:g} s ({e.details()})"
                    ) from None
                log.info(
                    "collect: %s: %s (%s); retrying in %.1f s",
                    address,
                    e.code().name,
                    e.details(),
                    backoff,
                )
            except _StreamEnded:
                log.info("collect: %s: the Follow stream ended; following again", address)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff)
            backoff = min(2.0, backoff * 2)
        if vehicle is not None:
            await self._flush(vehicle)

    def _fail(self, address: str, why: str) -> None:
        self.failures[address] = why
        log.error("collect: %s: %s", address, why)

    def _attach(self, address: str, reg: pb.RegisterConsumerResponse) -> Vehicle:
        """The vehicle of a source: its position from the landing area (a pending flush
        completed), or where the registration put the consumer."""
        vid = reg.vehicle_id
        if _NAME.fullmatch(vid) is None:
            raise CollectError(f"vehicle id {vid!r} cannot name a landing directory")
        if vid in self.vehicles:
            raise CollectError(f"vehicle {vid!r} is also served by {self.vehicles[vid].address}")
        held = load_position(self.landing, vid)
        if held is None:
            position = Position(boot_id=reg.position.boot_id, offset=reg.position.offset)
        else:
            age = (time.time_ns() - held.heartbeat_ns) / 1e9
            if held.owner != self.o.name and age < self.o.lease_s and not self.o.take_over:
                raise CollectError(
                    f"vehicle {vid!r} is collected by {held.owner!r} (its position was written "
                    f"{age:.0f} s ago; the lease is {self.o.lease_s:g} s): stop it, wait, or "
                    "pass --take-over"
                )
            complete_pending(self.landing, vid, held, self.o.name)
            position = held.position
        vehicle = Vehicle(vid, address, self.o.name, position)
        save_position(self.landing, vid, position, self.o.name)  # take the lease
        self.vehicles[vid] = vehicle
        log.info(
            "collect: %s (%s) from boot %s offset %d",
            vid,
            address,
            position.boot_id or "(none)",
            position.offset,
        )
        return vehicle

    async def _flush(self, vehicle: Vehicle) -> None:
        await asyncio.to_thread(vehicle.flush, self.landing, heartbeat_s=self.o.lease_s / 3)

    def _due(self, vehicle: Vehicle) -> bool:
        return (
            vehicle.buffered >= self.o.flush_records
            or vehicle.boot_stopped
            or (vehicle.dirty and time.monotonic() - vehicle.buffered_since >= self.o.flush_s)
        )

    async def _poll(self, stub: pb_grpc.JournalServiceStub, vehicle: Vehicle) -> None:
        while not self._stop.is_set():
            at, landed = vehicle.at, vehicle.landed
            answer = await stub.Poll(
                pb.PollRequest(
                    component=self.o.component,
                    boot_id=at.boot_id,
                    offset=at.offset,
                    max=self.o.max_records,
                    # Read on from what it received; release only what it landed.
                    ack=pb.Position(boot_id=landed.boot_id, offset=landed.offset),
                ),
                metadata=self._md,
                timeout=30,
            )
            kind = answer.WhichOneof("answer")
            if kind == "records":
                vehicle.take_records(answer.records)
            elif kind == "recovery":
                vehicle.take_recovery(answer.recovery)
            else:
                await self._flush(vehicle)
                if self.o.once:
                    # Acknowledge what is landed, then stop: drained.
                    landed = vehicle.landed
                    await stub.Poll(
                        pb.PollRequest(
                            component=self.o.component,
                            boot_id=landed.boot_id,
                            offset=landed.offset,
                            max=1,
                        ),
                        metadata=self._md,
                        timeout=30,
                    )
                    vehicle.drained = True
                    vehicle.state = "drained"
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.o.poll_interval_s)
                continue
            if self._due(vehicle):
                await self._flush(vehicle)

    async def _follow(self, stub: pb_grpc.JournalServiceStub, vehicle: Vehicle) -> None:
        call = stub.Follow(metadata=self._md)
        at = vehicle.landed
        await call.write(
            pb.FollowRequest(
                start=pb.FollowStart(
                    component=self.o.component,
                    boot_id=at.boot_id,
                    offset=at.offset,
                    max=self.o.max_records,
                    window=self.o.window,
                )
            )
        )
        queue: asyncio.Queue[pb.FollowBatch | None] = asyncio.Queue()

        async def read() -> None:
            try:
                while True:
                    message = await call.read()
                    if message is grpc.aio.EOF:
                        break
                    await queue.put(message)
            finally:
                await queue.put(None)

        reader = asyncio.create_task(read())
        stop = asyncio.create_task(self._stop.wait())
        expected, unacked = 0, 0
        try:
            while True:
                timeout = self.o.lease_s / 3  # at least a heartbeat for the lease
                if vehicle.dirty:
                    timeout = max(0.0, vehicle.buffered_since + self.o.flush_s - time.monotonic())
                got = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait(
                    {got, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if got not in done:
                    got.cancel()
                    if stop in done:
                        break
                    message = None
                    timed_out = True
                else:
                    message, timed_out = got.result(), False
                    if message is None:
                        await reader  # raises the stream's error
                        raise _StreamEnded()
                if message is not None:
                    if message.seq != expected:
                        log.error(
                            "collect: %s: Follow group %d came after %d: a gap in a reliable "
                            "stream; following again from the landed position",
                            vehicle,
                            message.seq,
                            expected - 1,
                        )
                        vehicle.discard()
                        raise _StreamEnded()
                    expected += 1
                    unacked += 1
                    if message.WhichOneof("answer") == "records":
                        vehicle.take_records(message.records)
                    else:
                        vehicle.take_recovery(message.recovery)
                if timed_out or unacked >= self.o.window or self._due(vehicle):
                    await self._flush(vehicle)
                    if unacked:
                        try:
                            await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=expected - 1)))
                        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                            # The call ended as the ack went out (the middleware stopped
                            # or died): the reader holds its status; follow again.
                            await reader  # raises the stream's error, if it had one
                            raise _StreamEnded() from None
                        unacked = 0
        finally:
            stop.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
            await self._flush(vehicle)
            with contextlib.suppress(
                grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError, asyncio.InvalidStateError
            ):
                if unacked and not call.done():
                    await call.write(pb.FollowRequest(ack=pb.FollowAck(seq=expected - 1)))
            call.cancel()

    # -- progress ------------------------------------------------------------------------------

    async def _progress(self) -> None:
        self._last = (time.monotonic(), 0)
        while True:
            await asyncio.sleep(self.o.progress_s)
            self._print_progress()

    def _print_progress(self, *, final: bool = False) -> None:
        now = time.monotonic()
        total = sum(v.counts.records for v in self.vehicles.values())
        then, before = getattr(self, "_last", (now, 0))
        rate = (total - before) / (now - then) if now > then else 0.0
        self._last = (now, total)
        parts = [f"{v}: {v.lag()}, {v.state}" for v in self.vehicles.values()]
        parts += [f"{a}: FAILED {why}" for a, why in self.failures.items()]
        head = "collect done" if final else "collect"
        print(
            f"{head}: {total:,} records landed ({rate:,.0f} records/s); " + "; ".join(parts),
            file=sys.stderr,
            flush=True,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "landing": self.landing.target,
            "vehicles": {
                v.vehicle_id: dataclasses.asdict(v.counts)
                | {"boot_id": v.landed.boot_id, "offset": v.landed.offset, "drained": v.drained}
                for v in self.vehicles.values()
            },
            "failed": self.failures,
        }


# -- the command line ------------------------------------------------------------------------


def add_collect_parser(sub: Any) -> None:
    """The ``collect`` subcommand's arguments (``sub``: the subparsers of the CLI)."""
    p = sub.add_parser(
        "collect",
        help="follow middlewares' journals into a landing area (docs/fleet.md)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="ADDR",
        help="a middleware (HOST:PORT or unix:PATH); repeat for each vehicle",
    )
    p.add_argument("--to", required=True, metavar="LANDING", help="landing directory or URI")
    p.add_argument(
        "--component", default="collector", help="consumer component (default collector)"
    )
    p.add_argument("--name", default=None, help="collector name (default the component@host)")
    p.add_argument(
        "--app-id", default=None, help="the app id it calls as (default: the token's subject)"
    )
    p.add_argument("--token", default="", help="a JWT with the journal:read scope (token mode)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="collect what is there, then exit 0")
    mode.add_argument("--follow", action="store_true", help="keep following (the default)")
    p.add_argument("--poll", action="store_true", help="use Poll instead of Follow")
    p.add_argument("--max", type=int, default=1000, help="records per answer (1..1000)")
    p.add_argument("--window", type=int, default=64, help="Follow groups unacknowledged")
    p.add_argument("--flush-s", type=float, default=1.0, help="land at least this often")
    p.add_argument("--flush-records", type=int, default=100_000, help="or this many records")
    p.add_argument("--progress-s", type=float, default=5.0, help="a progress line this often")
    p.add_argument("--lease-s", type=float, default=30.0, help="another collector's hold")
    p.add_argument("--take-over", action="store_true", help="take vehicles another holds")
    p.add_argument("--log-level", default="WARNING")
    add_tls_arguments(p)


def _name(component: str, name: str | None) -> str:
    chosen = name or f"{component}@{socket.gethostname()}"
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", chosen)[:64]
    return cleaned or "collector"


def collect_main(args: argparse.Namespace) -> int:
    """Run ``collect``; its exit status."""
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s"
    )
    if not 1 <= args.max <= 1000:
        print(f"collect: --max must be in 1..1000, got {args.max}", file=sys.stderr)
        return 2
    if not 1 <= args.window <= 256:
        print(f"collect: --window must be in 1..256, got {args.window}", file=sys.stderr)
        return 2
    try:
        landing = Landing(args.to)
        tls = tls_from_args(args)
        app_id = app_id_for(args.app_id, args.token or None, "collector", certificate=args.tls_cert)
    except (CollectError, TlsOptionsError, TokenFormatError) as e:
        print(f"collect: {e}", file=sys.stderr)
        return 2
    options = Options(
        component=args.component,
        name=_name(args.component, args.name),
        app_id=app_id,
        token=args.token,
        tls=tls,
        once=args.once,
        poll=args.poll,
        max_records=args.max,
        window=args.window,
        flush_s=args.flush_s,
        flush_records=args.flush_records,
        progress_s=args.progress_s,
        lease_s=args.lease_s,
        take_over=args.take_over,
    )
    collector = Collector(args.sources, landing, options)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, collector.stop)
        return await collector.run()

    code = asyncio.run(main())
    print(json.dumps(collector.summary(), sort_keys=True))
    return code
