"""The journal writer: a bounded buffer on the event loop's side, a thread on disk's.

``Journal.record`` (event loop) stamps a record with its time and appends it
to a bounded deque: an append and a length test, never a wait. If the buffer
is full the record is dropped and counted; the next record that fits is
preceded by a ``journal_dropped`` record with the count.

The writer thread gives records their offsets (in the order written, so a
lost record is a gap in the offsets exactly where it was lost), links them
into the hash chain, and appends them in batches to size-rotated segment
files (one ``write`` per batch; with gzip, one member per batch) after each
burst, so a crash leaves at most a torn last line.

Every loss is reported by a record, never only by a gap:

- a batch that fails to reach disk (a full disk) is cut back to its last
  whole line; its records are lost, and a ``journal_dropped`` record
  (``cause`` ``write failed``) precedes the next record that is written;
- at stop, if writes were still failing, the writer frees its reserve file
  and writes that count and the ``stop`` record;
- if the process dies first, the next boot reports what the marker file says
  this one had not written (``cause`` ``not written before the process
  ended``, ``lost_boot_id`` naming this boot): see :mod:`reserve`.

Retention: when the directory holds more than ``max_bytes`` of segments, the
oldest go, and a ``journal_trimmed`` record per boot whose segments went says
where that boot's chain now starts (``kept_offset``, ``kept_prev_hash``), so
a verifier tells retention from tampering. With a ``feed``
(:mod:`vmw.server.journal.feed`) retention keeps what registered consumers
have not acknowledged, within their bound, and a ``consumer_cut`` record says
what a consumer beyond it lost (:mod:`vmw.server.journal.pinning`).

Consumers: with a ``history``, the writer thread hands every batch it has
written (the lines as written, their offsets and kinds) to it after the
write: a list extend per batch, nothing per event on the event loop's side.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from vmw.contract.journal.chain import OFFSET_MOD, Chain
from vmw.contract.journal.records import KIND_FIELDS, LEVEL_OF, Cause, Kind, Level, refusal
from vmw.contract.journal.segments import (
    first_record,
    last_offset,
    segment_boot,
    segment_files,
    segment_name,
)
from vmw.server.journal.history import History
from vmw.server.journal.pinning import Cut, Plan
from vmw.server.journal.reserve import LOCK_NAME, LossMarker, MarkerState, Reserve

__all__ = ["Journal", "JournalInUseError", "RetentionGuard", "segment_files"]

log = logging.getLogger(__name__)

_STOP: Final = object()
# Compared per record by the writer thread: bound once (an enum member's lookup on its
# class costs ~0.1 us in Python 3.11).
_JOURNAL_DROPPED: Final = Kind.JOURNAL_DROPPED
_STOP_KIND: Final = Kind.STOP
_MARKED: Final = (_JOURNAL_DROPPED, _STOP_KIND)
_IDLE_WAIT_S: Final = 0.005
"""The writer's poll while records come: their latency to disk (not to apps), and
how many a wake-up takes in one go."""
_IDLE_MAX_S: Final = 0.1
"""The poll it backs off to, doubling, while none comes: an idle middleware's writer
wakes about 10 times a second, not 200 (each wake takes the GIL from the event loop;
measured idle, 1,936 wake-ups and 0.24 s of CPU in 10 s at the fixed 5 ms poll)."""
_BATCH_BYTES: Final = 256 * 1024
_MARK_EVERY_S: Final = 0.5
_SPEC: Final = {kind: (LEVEL_OF[kind], KIND_FIELDS[kind]) for kind in Kind}
"""Per kind: its level and the fields it carries (one lookup per record)."""


@dataclass(slots=True)
class _Gap:
    """Records the buffer dropped: the writer skips their offsets."""

    n: int


class JournalInUseError(RuntimeError):
    """Another live process writes the journal directory."""


class RetentionGuard(Protocol):
    """What retention asks before removing segments (the journal's feed); ``tick`` is
    called often by the writer thread (after each write, and when idle) and is cheap."""

    def plan_retention(self, max_bytes: int, current: Path | None) -> tuple[Plan, int]: ...

    def apply_cuts(self, decided: Plan) -> Sequence[Cut]: ...

    def tick(self) -> None: ...

    def removed(self, paths: Sequence[Path]) -> None: ...

    def close(self) -> None: ...


def _open_unbuffered(path: Path) -> Any:
    # Unbuffered: one write per batch, whose result says exactly what reached the file.
    return path.open("ab", buffering=0)


class Journal:
    """One middleware process's journal.

    ``opener`` opens a segment for appending (unbuffered); tests pass one that
    fails like a full disk. ``history`` gets every batch written; :meth:`guard`
    keeps retention from removing what consumers have not acknowledged.
    """

    def __init__(
        self,
        directory: Path,
        *,
        vehicle_id: str,
        boot_id: str,
        level: Level = Level.DROPS,
        segment_bytes: int = 8 * 1024 * 1024,
        max_bytes: int = 256 * 1024 * 1024,
        compress: bool = False,
        buffer: int = 100_000,
        clock: Callable[[], int] = time.time_ns,
        offset_start: int | None = None,
        opener: Callable[[Path], Any] | None = None,
        history: History | None = None,
    ) -> None:
        self.directory = directory
        self.vehicle_id = vehicle_id
        self.boot_id = boot_id
        self.level = level
        self.full = level >= Level.FULL
        """Whether per-event records (publish, queued, delivered) are wanted."""
        self.drops = level >= Level.DROPS
        self._segment_bytes = segment_bytes
        self._batch_limit = min(_BATCH_BYTES, segment_bytes)
        self._max_bytes = max_bytes
        self._compress = compress
        self._bound = buffer
        self._clock = clock
        self._buffer: deque[Any] = deque()
        # Producer (event loop) side.
        self._dropped = 0  # records the buffer refused since the last report
        self._accepted = 0  # records taken (buffered or dropped): each will use an offset
        self.dropped_total = 0
        self._stop_reason: str | None = None
        # Writer side.
        self._next_offset = secrets.randbelow(OFFSET_MOD) if offset_start is None else offset_start
        self._next_offset %= OFFSET_MOD
        self.first_offset = self._next_offset
        """The offset of this boot's first record."""
        self._history = history
        self._guard: RetentionGuard | None = None
        self._held = ""  # consumers holding retention back, as last logged
        self._consumed = 0  # producer records given an offset
        self.written = 0
        self._unreported = 0  # records not on disk that no written record reports yet
        self.write_failures = 0
        self.failed_total = 0
        """Records lost to failed writes in this boot (write_failures resets when writes work)."""
        self._stop_written = False
        self._chain = Chain()
        self._batch: list[bytes] = []  # linked lines not yet written
        self._batch_hashes: list[str] = []  # their hashes, to roll the chain back on a failure
        self._batch_offsets: list[int] = []  # their offsets and kinds, for the history
        self._batch_kinds: list[str] = []
        # (index, losses reported, is stop) of the batch's journal_dropped and stop lines: a
        # journal_dropped of this boot that is lost reports its count again.
        self._batch_marks: list[tuple[int, int, bool]] = []
        self._batch_bytes = 0
        self._batch_prev = ""  # the chain's last hash on disk, before the batch
        self._last_time_ns = 0  # of the record emitted last
        self._file: Any = None  # an unbuffered binary file
        self._opener = opener or _open_unbuffered
        self._file_bytes = 0
        self._segment = 0
        self._open_failed = False
        self._marker = LossMarker(directory)
        self._reserve = Reserve(directory)
        self._lock_fd: int | None = None
        self._reserve_used = False
        self._marked_at = 0.0
        self._mark_now = False
        self._started_ns = clock()
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._stopped = threading.Event()

    # -- the event loop's side ------------------------------------------------------

    def guard(self, guard: RetentionGuard) -> None:
        """Keep retention from removing what ``guard``'s consumers have not acknowledged
        (before :meth:`start`)."""
        self._guard = guard

    def lock(self) -> None:
        """Create the directory and take it for this process (idempotent).

        Two middlewares writing one directory would report each other's live
        boot as crashed and remove each other's segments.

        Raises:
            JournalInUseError: another live process holds the directory.
        """
        if self._lock_fd is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise JournalInUseError(
                f"journal directory {self.directory} is in use by another middleware "
                f"(pid {holder}): give each middleware its own --journal-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        """Give the directory up (after :meth:`lock`, when not starting after all)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    def start(self, **fields: Any) -> None:
        """Create the directory, start the writer, and record ``start``.

        Also reports, for the previous boot that wrote here, the records its
        marker says never reached disk if it ended without a ``stop``.
        """
        self.lock()
        previous = self._marker.read()
        if not self._reserve.make():
            log.warning("journal: no room for the reserve file in %s", self.directory)
        if not self._marker.open():
            log.warning("journal: cannot allocate the loss marker in %s", self.directory)
        self._thread.start()
        self.record(Kind.START, **fields)
        if previous is not None and previous.boot_id != self.boot_id and not previous.stopped:
            lost = self._lost_by(previous)
            log.warning(
                "journal: the previous boot %s ended without a stop record; %d of its records "
                "never reached disk",
                previous.boot_id,
                lost,
            )
            if lost:
                self.record(
                    Kind.JOURNAL_DROPPED,
                    count=lost,
                    cause=Cause.CRASH,
                    lost_boot_id=previous.boot_id,
                )

    def _lost_by(self, previous: MarkerState) -> int:
        """Records a dead boot had taken but not written, by its marker and its last segment."""
        files = [p for p in segment_files(self.directory) if segment_boot(p) == previous.boot_id]
        last = last_offset(files)
        if last is None:
            return previous.unreported + previous.pending
        expected_last = (previous.next_offset - 1 + previous.pending) % OFFSET_MOD
        tail = (expected_last - last) % OFFSET_MOD
        return tail if tail < OFFSET_MOD // 2 else 0

    def record(self, kind: Kind, **fields: Any) -> None:
        """Stamp and buffer one record (if its level is on). Never blocks.

        ``kind`` is a :class:`Kind` (or its string) and ``fields`` within those it
        carries (``records.KIND_FIELDS``), else AssertionError names both.
        """
        # The journal's format: a kind or a field it lacks would reach no reader. One
        # lookup and a frozenset subset test: as cheap as the FIELDS check it replaces.
        spec = _SPEC.get(kind)
        assert spec is not None, refusal(kind, fields)
        assert spec[1].issuperset(fields), refusal(kind, fields)
        if spec[0] > self.level:
            return
        self._accepted += 1
        buffer = self._buffer
        if len(buffer) >= self._bound:
            self._dropped += 1
            self.dropped_total += 1
            return
        if self._dropped:
            self._note_dropped()
        fields["kind"] = kind
        fields["vehicle_id"] = self.vehicle_id
        fields["boot_id"] = self.boot_id
        fields["time_ns"] = self._clock()
        buffer.append(fields)

    def _note_dropped(self) -> None:
        self._accepted += 1
        self._buffer.append(_Gap(self._dropped))
        self._buffer.append(
            self._stamp(Kind.JOURNAL_DROPPED, count=self._dropped, cause=Cause.BUFFER)
        )
        self._dropped = 0

    def _stamp(self, kind: Kind, **fields: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "vehicle_id": self.vehicle_id,
            "boot_id": self.boot_id,
            "time_ns": self._clock(),
            **fields,
        }

    def _own(self, kind: Kind, **fields: Any) -> dict[str, Any]:
        """A record the writer adds itself, between records already stamped.

        It carries the time of the record written before it, so that times never
        go back in offset order (readers that lost a boot's ``start`` order by time).
        """
        assert KIND_FIELDS[kind].issuperset(fields), refusal(kind, fields)
        rec = self._stamp(kind, **fields)
        rec["time_ns"] = self._last_time_ns or rec["time_ns"]
        return rec

    def close(self, reason: str = "shutdown", timeout: float = 10.0) -> None:
        """Record ``stop`` (past the buffer's bound), let the writer drain, and wait for it."""
        if not self._thread.is_alive():
            self.unlock()
            return
        if self._dropped:
            self._note_dropped()
        self._stop_reason = reason
        self._accepted += 1
        self._buffer.append(self._stamp(Kind.STOP, reason=reason))
        self._buffer.append(_STOP)
        self._thread.join(timeout)

    def pending(self) -> int:
        """Records buffered, not yet written."""
        return len(self._buffer)

    # -- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        try:
            wait, consumed = _IDLE_WAIT_S, self._consumed
            while self.write_buffered():
                if self._consumed != consumed:
                    wait, consumed = _IDLE_WAIT_S, self._consumed
                else:
                    wait = min(wait * 2, _IDLE_MAX_S)
                time.sleep(wait)
        except Exception:
            log.exception("journal writer failed")
        finally:
            self._finish()

    def write_buffered(self) -> bool:
        """The writer's step: link and write every record buffered now; False at the
        stop (then :meth:`close`'s caller finishes). The writer thread's, or, for a
        journal whose thread is not started, its caller's (``bench.instructions``)."""
        buffer = self._buffer
        while True:
            try:
                rec = buffer.popleft()
            except IndexError:
                self._write_and_tick()
                return True
            if rec is _STOP:
                return False
            if type(rec) is _Gap:
                self._next_offset = (self._next_offset + rec.n) % OFFSET_MOD
                self._consumed += rec.n
                continue
            self._consumed += 1
            if self._unreported:
                self._note_failures()
            self._emit_one(rec)
            if self._batch_bytes >= self._batch_limit:
                self._write_and_tick()

    def _write_and_tick(self) -> None:
        """Write the batch, keep the loss marker current, and let retention's guard tick."""
        self._write_batch()
        self._mark()
        if self._guard is not None:
            self._guard.tick()

    def _note_failures(self) -> None:
        count, self._unreported = self._unreported, 0
        self._emit_one(self._own(Kind.JOURNAL_DROPPED, count=count, cause=Cause.WRITE))

    def _emit_one(self, rec: dict[str, Any]) -> None:
        """Give ``rec`` the next offset, link it, and add it to the batch."""
        if self._file is None or self._file_bytes + self._batch_bytes >= self._segment_bytes:
            self._rotate()
        offset = rec["offset"] = self._next_offset
        self._next_offset = (offset + 1) % OFFSET_MOD
        self._last_time_ns = rec["time_ns"]
        line = self._chain.line(rec)
        self._batch.append(line)
        self._batch_hashes.append(rec["hash"])
        self._batch_bytes += len(line)
        kind = rec["kind"]
        self._batch_offsets.append(offset)
        self._batch_kinds.append(kind)
        if kind in _MARKED:
            covers = rec["count"] if kind == _JOURNAL_DROPPED and "lost_boot_id" not in rec else 0
            self._batch_marks.append((len(self._batch) - 1, covers, kind == _STOP_KIND))

    def _write_batch(self) -> None:
        """Append the batch to the segment; what does not fit is cut back and counted lost."""
        if not self._batch:
            return
        batch, hashes, marks = self._batch, self._batch_hashes, self._batch_marks
        offsets, kinds = self._batch_offsets, self._batch_kinds
        self._batch, self._batch_hashes, self._batch_marks, self._batch_bytes = [], [], [], 0
        self._batch_offsets, self._batch_kinds = [], []
        data = b"".join(batch)
        payload = gzip.compress(data, 6) if self._compress else data
        done, error = self._append(payload)
        if done == len(payload):
            kept, written = len(batch), len(payload)
        else:
            kept, written = 0, 0
            if not self._compress:  # a cut gzip member is unreadable from the cut on
                while kept < len(batch) and written + len(batch[kept]) <= done:
                    written += len(batch[kept])
                    kept += 1
            if self._file is not None:
                # Cut a torn line (or gzip member) so the segment ends on a whole record.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._file.fileno(), self._file_bytes + written)
        self._file_bytes += written
        self.written += kept
        if self._history is not None and kept:
            if kept == len(batch):
                self._history.add(offsets, batch, kinds)
            else:
                self._history.add(offsets[:kept], batch[:kept], kinds[:kept])
        for index, _, stop in marks:
            if index < kept:
                self._mark_now = True  # a report or the stop reached disk
                self._stop_written = self._stop_written or stop
        if kept < len(batch):
            if not self._unreported and not self.write_failures:
                log.error("journal write failed (%s); records are lost until writes work", error)
            self.write_failures += len(batch) - kept
            self.failed_total += len(batch) - kept
            self._unreported += len(batch) - kept
            self._unreported += sum(covers for index, covers, _ in marks if index >= kept)
            self._chain.last = hashes[kept - 1] if kept else self._batch_prev
            self._mark_now = True
        elif self.write_failures and self._unreported == 0:
            if self._reserve_used:
                log.warning(
                    "journal: the count of the %d records lost and the stop record were "
                    "written in the room of the reserve file",
                    self.write_failures,
                )
            else:
                log.warning("journal writes work again (%d records were lost)", self.write_failures)
            self.write_failures = 0
        self._batch_prev = self._chain.last

    def _append(self, payload: bytes) -> tuple[int, OSError | None]:
        """Write ``payload`` to the open segment; bytes written, and the error that stopped it."""
        if self._file is None:
            return 0, OSError("no segment file is open")
        done = 0
        view = memoryview(payload)
        try:
            while done < len(payload):
                n = self._file.write(view[done:])
                if not n:
                    raise OSError("short write")
                done += n
        except OSError as e:
            return done, e
        return done, None

    def _rotate(self) -> None:
        self._write_batch()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if not self._open_failed:
            self._segment += 1
        path = self.directory / segment_name(
            self._started_ns, self.boot_id, self._segment, compress=self._compress
        )
        try:
            self._file = self._opener(path)
        except OSError as e:
            if not self._open_failed:
                log.error("journal cannot open %s: %s", path.name, e)
            self._open_failed = True
            return
        self._open_failed = False
        self._file_bytes = self._file.seek(0, os.SEEK_END)
        self._retain()

    def _retain(self) -> None:
        """Remove the oldest segments beyond ``max_bytes``; record where each boot now starts.

        The ``journal_trimmed`` records reach the file before any segment goes,
        so a crash in between leaves at worst a record of a trim not yet done
        (harmless), never a trim no record explains (a false tamper alarm).
        """
        files = segment_files(self.directory)
        sizes = {p: p.stat().st_size for p in files}
        total = sum(sizes.values())
        removed: dict[str, list[Path]] = {}
        decided: Plan | None = None
        if self._guard is None:
            for p in files[:-1]:  # never the one being written
                if total <= self._max_bytes:
                    break
                total -= sizes[p]
                removed.setdefault(segment_boot(p) or "", []).append(p)
        else:
            decided, _ = self._guard.plan_retention(self._max_bytes, files[-1] if files else None)
            for seg in decided.remove:
                removed.setdefault(seg.boot_id, []).append(seg.path)
                sizes.setdefault(seg.path, seg.size)
            self._note_held(decided)
        if not removed:
            return
        gone = {p for ps in removed.values() for p in ps}
        kept = [p for p in files if p not in gone]
        # The cuts go into the registry first, checked against the positions now (a
        # consumer may have acknowledged since the plan): a consumer_cut record says
        # only what a consumer really lost. (A crash before the records reach disk
        # leaves a cut the registry knows and its next recovery answer tells.)
        applied = (
            self._guard.apply_cuts(decided)
            if decided is not None and self._guard is not None
            else ()
        )
        for cut in applied:
            for lost in cut.lost:
                self._emit_one(
                    self._own(
                        Kind.CONSUMER_CUT,
                        app=cut.pin.app,
                        component=cut.pin.component,
                        lost_boot_id=lost.boot_id,
                        from_offset=lost.from_offset,
                        to_offset=lost.to_offset,
                        count=lost.count,
                        reason=f"{cut.lag_bytes} bytes unacknowledged, beyond the consumer "
                        "bound (journal_consumer_max_lag_bytes)",
                    )
                )
        # This boot's first: if its chain now starts in the segment just opened, the trim
        # record itself is that segment's first record, so its offset and prev_hash are next.
        for boot in sorted(removed, key=lambda b: b != self.boot_id):
            rest = [p for p in kept if segment_boot(p) == boot]
            anchor: dict[str, Any] | None
            if rest and rest[0] == files[-1] and self._file_bytes == 0:
                anchor = {"offset": self._next_offset, "prev_hash": self._chain.last}
            else:
                anchor = first_record(rest[0]) if rest else None
            self._emit_one(
                self._own(
                    Kind.JOURNAL_TRIMMED,
                    trimmed_boot_id=boot,
                    files=len(removed[boot]),
                    bytes=sum(sizes[p] for p in removed[boot]),
                    kept_offset=None if anchor is None else anchor.get("offset"),
                    kept_prev_hash="" if anchor is None else anchor.get("prev_hash", ""),
                )
            )
        self._write_batch()
        for p in sorted(gone):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            log.info("journal retention removed %s", p.name)
        if self._guard is not None:
            self._guard.removed(sorted(gone))

    def _note_held(self, decided: Plan) -> None:
        """Log once per episode that consumers keep retention from going further."""
        held = ", ".join(sorted({f"{p.app}/{p.component}" for p in decided.held_by}))
        if held and held != self._held:
            log.warning(
                "journal: retention keeps segments beyond journal_max_bytes (%d) for consumers "
                "that have not acknowledged them: %s",
                self._max_bytes,
                held,
            )
        elif not held and self._held:
            log.info("journal: consumers no longer hold retention back")
        self._held = held

    def _mark(self) -> None:
        """Keep the loss marker current: at once after a loss or a report, else every 0.5 s."""
        now = time.monotonic()
        if not self._mark_now and now - self._marked_at < _MARK_EVERY_S:
            return
        self._marked_at, self._mark_now = now, False
        self._marker.write(
            MarkerState(
                boot_id=self.boot_id,
                next_offset=self._next_offset,
                pending=self._accepted - self._consumed,
                unreported=self._unreported,
                stopped=self._stop_written,
            )
        )

    def _finish(self) -> None:
        """Write what is left; on a full disk, use the reserve for the loss count and stop."""
        try:
            self._write_batch()
            stop_lost = self._stop_reason is not None and not self._stop_written
            if self._unreported or stop_lost:
                self._reserve.release()
                self._reserve_used = True
                if self._unreported:
                    self._note_failures()
                if stop_lost:
                    self._emit_one(self._own(Kind.STOP, reason=self._stop_reason))
                self._write_batch()
                if self._unreported:
                    log.error(
                        "journal: %d records lost and not reported in this boot; the next "
                        "boot reports them",
                        self._unreported,
                    )
        except Exception:
            log.exception("journal writer failed at stop")
        finally:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None
            self._mark_now = True
            self._mark()
            self._marker.close()
            if self._guard is not None:
                self._guard.close()
            self.unlock()
            self._stopped.set()
