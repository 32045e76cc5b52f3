"""The journal writer: a bounded buffer on the event loop's side, a thread on disk's.

``Journal.record`` (event loop) stamps a record with its time and appends it
to a bounded deque: an append and a length test, never a wait. If the buffer
is full the record is dropped and counted; the next record that fits is
preceded by a ``journal_dropped`` record with the count.

The writer thread gives records their offsets (in the order written, so a
lost record is a gap in the offsets exactly where it was lost), links them
into the hash chain, and appends them in batches to size-rotated segment
files (:mod:`rotation`; one ``write`` per batch; with gzip, one member per
batch) after each burst, so a crash leaves at most a torn last line.

Every loss is reported by a record, never only by a gap:

- a batch that fails to reach disk (a full disk) is cut back to its last
  whole line; its records are lost, and a ``journal_dropped`` record
  (``cause`` ``write failed``) precedes the next record that is written;
- at stop, if writes were still failing, the writer frees its reserve file
  and writes that count and the ``stop`` record;
- if the process dies first, the next boot reports what the marker file says
  this one had not written (``cause`` ``not written before the process
  ended``, ``lost_boot_id`` naming this boot): see :mod:`reserve`.

After each rotation the writer runs retention (:mod:`retention`: the oldest
segments beyond ``max_bytes`` go, ``journal_trimmed`` and ``consumer_cut``
records say what). One process writes a directory (:mod:`directory_lock`).

A directory removed while the middleware runs (``rm -rf``) is found within
``_CHECK_EVERY_S`` and before the next segment opens (its lock file is gone
or another file: no per-record cost). The writer then makes it again and
takes its lock, and the first record written there is a ``journal_dropped``
(``cause`` ``directory removed``) counting this boot's records that went with
it; the chain goes on from the last record written, so ``journal verify``
of the new directory names where what is left starts. If another middleware
holds the path by then (or it cannot be made), the journal writes nothing
more in this boot (:attr:`Journal.directory_lost`): two middlewares never
write one directory. Either way it is logged, counted
(:attr:`Journal.removed_total`) and told to :attr:`Journal.on_directory`.

Consumers: with a ``history``, the writer thread hands every batch it has
written (the lines as written, their offsets and kinds) to it after the
write: a list extend per batch, nothing per event on the event loop's side.
"""

from __future__ import annotations

import gzip
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD, Chain
from vehicle_middleware.contract.journal.records import (
    KIND_FIELDS,
    LEVEL_OF,
    Cause,
    Kind,
    Level,
    refusal,
)
from vehicle_middleware.server.journal.boot_chain import previous_end
from vehicle_middleware.server.journal.directory_lock import DirectoryLock, JournalInUseError
from vehicle_middleware.server.journal.history import History
from vehicle_middleware.server.journal.reserve import LossMarker, MarkerState, Reserve
from vehicle_middleware.server.journal.retention import Retention, RetentionGuard
from vehicle_middleware.server.journal.rotation import SegmentFile
from vehicle_middleware.server.metrics.collectors import Figure

__all__ = ["Journal", "JournalInUseError"]

log = logging.getLogger(__name__)

_STOP: Final = object()
# Compared per record by the writer thread: bound once (an enum member's lookup on its
# class is an attribute lookup per use).
_JOURNAL_DROPPED: Final = Kind.JOURNAL_DROPPED
_STOP_KIND: Final = Kind.STOP
_MARKED: Final = (_JOURNAL_DROPPED, _STOP_KIND)
_IDLE_WAIT_S: Final = 0.005
"""The writer's poll while records come: their latency to disk (not to apps), and
how many a wake-up takes in one go."""
_IDLE_MAX_S: Final = 0.1
"""The poll it backs off to, doubling, while none comes: an idle middleware's writer
wakes about 10 times a second rather than at every ``_IDLE_WAIT_S`` (each wake takes
the GIL from the event loop)."""
_BATCH_BYTES: Final = 256 * 1024
_MARK_EVERY_S: Final = 0.5
_CHECK_EVERY_S: Final = 0.25
"""How often the writer checks that it still holds its directory (one stat, one fstat;
also before opening each segment)."""
_SPEC: Final = {kind: (LEVEL_OF[kind], KIND_FIELDS[kind]) for kind in Kind}
"""Per kind: its level and the fields it carries (one lookup per record)."""


@dataclass(slots=True)
class _Gap:
    """Records the buffer dropped: the writer skips their offsets."""

    n: int


class Journal:
    """One middleware process's journal.

    ``opener`` opens a segment for appending (unbuffered, see :mod:`rotation`);
    tests pass one that fails like a full disk. ``history`` gets every batch
    written; :meth:`guard` keeps retention from removing what consumers have
    not acknowledged.
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
        self._batch_limit = min(_BATCH_BYTES, segment_bytes)
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
        self._retention = Retention(directory, boot_id=boot_id, max_bytes=max_bytes)
        self._consumed = 0  # producer records given an offset
        self.written = 0
        self._unreported = 0  # records not on disk that no written record reports yet
        self.write_failures = 0
        self.failed_total = 0
        """Records lost to failed writes in this boot (write_failures resets when writes work)."""
        self._stop_written = False
        self._ended = False  # the writer finished at a clean stop (told to the marker)
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
        self._last_written: tuple[int, str] | None = None  # offset and hash, last on disk
        self._last_time_ns = 0  # of the record emitted last
        self._segment = SegmentFile(
            directory,
            started_ns=clock(),
            boot_id=boot_id,
            segment_bytes=segment_bytes,
            compress=compress,
            opener=opener,
        )
        self._marker = LossMarker(directory)
        self._reserve = Reserve(directory)
        self._lock = DirectoryLock(directory)
        self._reserve_used = False
        self._checked_at = 0.0
        self._written_here = 0  # records written since the directory was (re)taken
        self._removed_unreported = 0  # of them, removed with it, for the next record
        self.directory_lost = ""
        """Why the journal writes nothing ("" while it writes its directory): the
        directory was removed and another middleware holds it now, or it cannot be
        made again. Records are then lost, counted in :attr:`removed_total`."""
        self.directory_removals = 0
        """Times the directory was found removed while this boot wrote it."""
        self.removed_total = 0
        """Records of this boot lost to a removed directory: written and removed with
        it, or refused while the journal could not write its directory."""
        self.on_directory: Callable[[str], None] | None = None
        """Called (on the writer thread) with :attr:`directory_lost` whenever it changes."""
        self._marked_at = 0.0
        self._mark_now = False
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._stopped = threading.Event()

    # -- the event loop's side ------------------------------------------------------

    def guard(self, guard: RetentionGuard) -> None:
        """Keep retention from removing what ``guard``'s consumers have not acknowledged
        (before :meth:`start`)."""
        self._guard = guard
        self._retention.guard = guard

    def lock(self) -> None:
        """Create the directory and take it for this process (idempotent): see
        :mod:`directory_lock`.

        Raises:
            JournalInUseError: another live process holds the directory.
        """
        self._lock.acquire()

    def unlock(self) -> None:
        """Give the directory up (after :meth:`lock`, when not starting after all)."""
        self._lock.release()

    def start(self, **fields: Any) -> None:
        """Create the directory, start the writer, and record ``start``.

        ``start`` names where the previous boot that wrote here ended
        (:mod:`boot_chain`). Also reports, for that boot, the records its
        marker says never reached disk if it ended without a ``stop``.
        """
        self.lock()
        previous = self._marker.read()
        end = previous_end(self.directory, previous, self.boot_id)
        if end is not None:
            fields.update(end.start_fields())
        if not self._reserve.make():
            log.warning("journal: no room for the reserve file in %s", self.directory)
        if not self._marker.open():
            log.warning("journal: cannot allocate the loss marker in %s", self.directory)
        self._thread.start()
        self.record(Kind.START, **fields)
        if previous is not None and previous.boot_id != self.boot_id and not previous.stopped:
            lost = previous.unwritten(self.directory)
            log.warning(
                "journal: the previous boot %s %s; %d of its records never reached disk",
                previous.boot_id,
                "stopped cleanly but its stop record did not reach disk (a full disk)"
                if previous.ended
                else "ended without a stop record",
                lost,
            )
            if lost:
                # A boot that stopped cleanly lost them to failed writes, not to a crash.
                self.record(
                    Kind.JOURNAL_DROPPED,
                    count=lost,
                    cause=Cause.WRITE if previous.ended else Cause.CRASH,
                    lost_boot_id=previous.boot_id,
                )

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

    def figures(self) -> list[Figure]:
        """The directory's figures for the metrics (a Prometheus scrape, GetStats)."""
        return [
            Figure(
                "vmw_journal_directory_lost",
                "1 while the journal writes nothing: its directory was removed and another "
                "middleware holds it now, or it cannot be made again",
                "gauge",
                (),
                1 if self.directory_lost else 0,
            ),
            Figure(
                "vmw_journal_directory_removals_total",
                "Times the journal directory was found removed while this boot wrote it",
                "counter",
                (),
                self.directory_removals,
            ),
            Figure(
                "vmw_journal_records_removed_total",
                "Journal records of this boot lost to a removed directory",
                "counter",
                (),
                self.removed_total,
            ),
        ]

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
            if self._removed_unreported:
                self._note_removed()
            self._emit_one(rec)
            if self._batch_bytes >= self._batch_limit:
                self._write_and_tick()

    def _write_and_tick(self) -> None:
        """Write the batch, check the directory, keep the loss marker current, and let
        retention's guard tick."""
        self._write_batch()
        if time.monotonic() - self._checked_at >= _CHECK_EVERY_S:
            self._check_directory()
        if self._removed_unreported and not self.directory_lost:
            self._note_removed()  # at once, also when no record comes
            self._write_batch()
        self._mark()
        if self._guard is not None:
            self._guard.tick()

    def _check_directory(self) -> bool:
        """Whether the journal still writes its directory; if the directory was removed,
        take it again (a new directory, lock, marker and reserve; the next record opens
        a new segment) and count what went with it, or, when another middleware holds it
        now or it cannot be made, write nothing more (:attr:`directory_lost`)."""
        self._checked_at = time.monotonic()
        if self.directory_lost:
            return False
        reason = self._lock.lost()
        if not reason:
            return True
        gone = self._written_here
        self.directory_removals += 1
        self.removed_total += gone
        self._written_here = 0
        self._segment.close()  # a removed file: the next record opens one in the new directory
        self._marker.close()
        try:
            self._lock.retake()
        except (JournalInUseError, OSError) as e:
            self.directory_lost = f"{reason}; this boot writes no journal any more: {e}"
            log.error(
                "journal: %s (%d records of this boot went with it)", self.directory_lost, gone
            )
            if self.on_directory is not None:
                self.on_directory(self.directory_lost)
            return False
        self._marker.open()
        self._reserve.make()
        self._removed_unreported += gone
        self._mark_now = True
        log.error(
            "journal: %s while this middleware wrote it: %d records of this boot went with it; "
            "writing on in a new %s, whose first records say so",
            reason,
            gone,
            self.directory,
        )
        if self.on_directory is not None:
            self.on_directory("")
        return True

    def _note_removed(self) -> None:
        count, self._removed_unreported = self._removed_unreported, 0
        self._emit_one(self._own(Kind.JOURNAL_DROPPED, count=count, cause=Cause.REMOVED))

    def _note_failures(self) -> None:
        count, self._unreported = self._unreported, 0
        self._emit_one(self._own(Kind.JOURNAL_DROPPED, count=count, cause=Cause.WRITE))

    def _emit_one(self, rec: dict[str, Any]) -> None:
        """Give ``rec`` the next offset, link it, and add it to the batch."""
        if self._batch_bytes >= self._segment.room:
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
        if self.directory_lost:  # not ours to write any more: lost, and counted
            self.removed_total += len(batch)
            self._chain.last = self._batch_prev
            return
        data = b"".join(batch)
        payload = gzip.compress(data, 6) if self._compress else data
        done, error = self._segment.append(payload)
        if done == len(payload):
            kept, written = len(batch), len(payload)
        else:
            kept, written = 0, 0
            if not self._compress:  # a cut gzip member is unreadable from the cut on
                while kept < len(batch) and written + len(batch[kept]) <= done:
                    written += len(batch[kept])
                    kept += 1
        self._segment.keep(written, len(payload))
        self.written += kept
        self._written_here += kept
        if kept:
            self._last_written = (offsets[kept - 1], hashes[kept - 1])
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

    def _rotate(self) -> None:
        """Write the batch, check the directory is still this journal's, open the next
        segment, and run retention."""
        self._write_batch()
        if self._check_directory() and self._segment.rotate():
            self._retain()

    def _retain(self) -> None:
        """One retention pass (:mod:`retention`): its records are written before any
        segment goes."""
        trim = self._retention.plan()
        if trim is None:
            return
        for fields in trim.consumer_cuts():
            self._emit_one(self._own(Kind.CONSUMER_CUT, **fields))
        for boot in trim.boots():
            # While the segment just opened is empty, a boot whose chain now starts there
            # starts at the next record: the trim record itself.
            fresh = (
                {"offset": self._next_offset, "prev_hash": self._chain.last}
                if self._segment.size == 0
                else None
            )
            self._emit_one(self._own(Kind.JOURNAL_TRIMMED, **trim.trimmed(boot, fresh)))
        self._write_batch()
        self._retention.remove(trim)

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
                last_offset=None if self._last_written is None else self._last_written[0],
                last_hash="" if self._last_written is None else self._last_written[1],
                ended=self._ended,
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
            self._segment.close()
            self._ended = self._stop_reason is not None
            self._mark_now = True
            self._mark()
            self._marker.close()
            if self._guard is not None:
                self._guard.close()
            self.unlock()
            self._stopped.set()
