"""The journal's consumer protocol, without gRPC: the seed-003 answers, the history,
retention with consumers (pinning), the registry, reading segments by offset.

Offsets wrap at 2^32: most cases run twice, from a start far from the top and
from one a few records below it.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.contract.journal.chain import (
    OFFSET_MOD,
    Chain,
    distance,
    pred,
    succ,
    verify_line,
)
from vehicle_middleware.contract.journal.segments import segment_name
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    LimitExceededError,
    OffsetOutOfRangeError,
    UnavailableError,
)
from vehicle_middleware.server.journal.archive import Archive, BootSpan, Segment
from vehicle_middleware.server.journal.consumers import (
    CONSUMERS_NAME,
    Consumers,
    Lost,
    check_component,
)
from vehicle_middleware.server.journal.feed import Feed
from vehicle_middleware.server.journal.history import History
from vehicle_middleware.server.journal.pinning import Pin, lag_bytes, plan
from vehicle_middleware.server.journal.poll_answers import (
    Nothing,
    Read,
    Reason,
    Recover,
    View,
    answer,
    check_limits,
    check_want,
    later,
    lost_after,
    lost_beyond,
)

TOP = OFFSET_MOD - 3  # a boot starting here wraps after three records
STARTS = [1000, TOP]


def at(start: int, i: int) -> int:
    """The i-th offset of a boot starting at ``start``."""
    return (start + i) % OFFSET_MOD


# -- offsets ---------------------------------------------------------------------------


def test_successor_and_predecessor_wrap_at_two_to_the_32() -> None:
    assert succ(OFFSET_MOD - 1) == 0
    assert pred(0) == OFFSET_MOD - 1
    assert distance(OFFSET_MOD - 2, 1) == 3
    assert distance(5, 5) == 0


def test_a_line_whose_value_was_edited_fails_verification() -> None:
    line = Chain().line({"kind": "start", "offset": 1, "settings": {"a": "é"}})
    assert verify_line(line)["offset"] == 1
    with pytest.raises(ValueError, match="hash does not match"):
        verify_line(line.replace(b'"offset":1', b'"offset":2'))
    with pytest.raises(ValueError, match="whole line"):
        verify_line(line[:-1])


# -- the three answers (the consumer contract) ------------------------------------------


def view(start: int, first: int, last: int, *, older: tuple[BootSpan, ...] = ()) -> View:
    """The current boot "cur", started at ``start``, holding offsets ``first..last``."""
    return View((*older, BootSpan("cur", first, last, first == start)), "cur", start)


@pytest.mark.parametrize("start", STARTS)
def test_case_1_an_offset_whose_successor_is_held_reads_on(start: int) -> None:
    v = view(start, start, at(start, 9))
    for i in (0, 2, 3, 8):  # across the wrap when start is near the top
        assert answer(v, "cur", at(start, i)) == Read("cur", at(start, i), start)
        if at(start, i) != 0:  # ("", 0) holds nothing: test_no_boot_and_offset_0_...
            assert answer(v, "", at(start, i)) == Read("cur", at(start, i), start)
    # Holding nothing of the boot yet: p(n0) reads from n0.
    assert answer(v, "cur", pred(start)) == Read("cur", pred(start), start)


@pytest.mark.parametrize("last", [OFFSET_MOD - 1, 0, 1, 5])
def test_no_boot_and_offset_0_holds_nothing_even_after_the_offsets_wrap(last: int) -> None:
    """A boot started near the top whose offsets wrapped through 0 (or end at 0): the
    consumer holding nothing recovers from the boot's first record, never from 1."""
    v = view(TOP, TOP, last)
    got = answer(v, "", 0)
    assert isinstance(got, Recover)
    assert (got.boot_id, got.n0, got.n1, got.reason) == ("cur", TOP, last, Reason.NOT_IN_HISTORY)
    assert "holds nothing" in got.message


@pytest.mark.parametrize("start", STARTS)
def test_case_2_the_newest_offset_gets_nothing_new(start: int) -> None:
    v = view(start, start, at(start, 9))
    assert answer(v, "cur", at(start, 9)) == Nothing("cur", at(start, 9))
    assert answer(v, "", at(start, 9)) == Nothing("cur", at(start, 9))


@pytest.mark.parametrize("start", STARTS)
def test_case_3_an_overrun_history_gets_a_recovery_with_n0_and_n1(start: int) -> None:
    # Retention removed the first 5 records: the consumer holding record 2 fell behind.
    v = view(start, at(start, 5), at(start, 9))
    got = answer(v, "cur", at(start, 2))
    assert isinstance(got, Recover)
    assert (got.boot_id, got.n0, got.n1) == ("cur", at(start, 5), at(start, 9))
    assert got.reason is Reason.NOT_IN_HISTORY
    # The contract as written (no boot): the same recovery.
    seed = answer(v, "", at(start, 2))
    assert isinstance(seed, Recover)
    assert (seed.boot_id, seed.n0, seed.n1) == (got.boot_id, got.n0, got.n1)
    # The way back in: poll with p(n0).
    assert answer(v, "cur", pred(got.n0)) == Read("cur", pred(got.n0), at(start, 5))


@pytest.mark.parametrize("start", STARTS)
def test_a_new_consumer_holding_nothing_gets_a_recovery(start: int) -> None:
    v = view(start, start, at(start, 9))
    got = answer(v, "", at(start, 500))  # never written: no boot given, so a recovery
    assert isinstance(got, Recover)
    assert (got.n0, got.n1) == (start, at(start, 9))


@pytest.mark.parametrize("start", STARTS)
def test_an_offset_the_named_boot_never_wrote_is_out_of_range(start: int) -> None:
    v = view(start, start, at(start, 9))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset: \d+ is not an offset of boot 'cur'"):
        answer(v, "cur", at(start, 10))
    with pytest.raises(OffsetOutOfRangeError):
        answer(v, "cur", at(start, -2))  # before the boot's first record (p(start) is fine)
    # Even when retention removed the start: the writer knows where the boot began.
    trimmed = view(start, at(start, 5), at(start, 9))
    with pytest.raises(OffsetOutOfRangeError):
        answer(trimmed, "cur", at(start, 12))


@pytest.mark.parametrize("start", STARTS)
def test_the_last_record_of_a_boot_that_ended_recovers_into_the_next_boot(start: int) -> None:
    old = BootSpan("old", 77, 99, True)
    v = view(start, start, at(start, 9), older=(old,))
    assert answer(v, "old", 80) == Read("old", 80, 77)
    with pytest.raises(OffsetOutOfRangeError):
        answer(v, "old", 50)  # its start is held: 50 was never written
    got = answer(v, "old", 99)
    assert isinstance(got, Recover)
    assert (got.boot_id, got.n0, got.n1, got.reason) == (
        "cur",
        start,
        at(start, 9),
        Reason.BOOT_ENDED,
    )
    # The seed's own client (no boot) sees the restart as a recovery naming the new boot.
    got = answer(v, "", 99)
    assert isinstance(got, Recover)
    assert got.boot_id == "cur"


def test_a_boot_no_longer_held_sends_a_consumer_to_its_home_or_the_oldest_boot() -> None:
    old = BootSpan("old", 77, 99, False)
    v = view(1000, 1000, 1009, older=(old,))
    live = answer(v, "gone", 5)
    assert isinstance(live, Recover)
    assert (live.boot_id, live.reason) == ("cur", Reason.BOOT_NOT_HELD)
    reliable = answer(v, "gone", 5, home=("gone", 5))
    assert isinstance(reliable, Recover)
    assert reliable.boot_id == "old"  # everything held is news to it
    assert answer(v, "gone", 5, home=("cur", 1003)).boot_id == "cur"  # type: ignore[union-attr]


def test_nothing_written_yet_is_unavailable() -> None:
    with pytest.raises(UnavailableError, match="no record yet"):
        answer(View((), "cur", 5), "", 0)


@given(
    start=st.integers(0, OFFSET_MOD - 1),
    removed=st.integers(0, 40),
    held=st.integers(1, 40),
    probe=st.integers(-5, 90),
)
def test_answers_agree_with_a_plain_list_of_offsets(
    start: int, removed: int, held: int, probe: int
) -> None:
    """The reference: the boot's offsets as a list; what is held is a slice of it."""
    written = [at(start, i) for i in range(removed + held)]
    kept = written[removed:]
    v = view(start, kept[0], kept[-1])
    offset = at(start, probe)
    if offset == kept[-1]:
        expected: type = Nothing
    elif offset == pred(kept[0]) or offset in kept:
        expected = Read
    elif offset in written or offset == pred(start):
        expected = Recover
    else:
        with pytest.raises(OffsetOutOfRangeError):
            answer(v, "cur", offset)
        assert isinstance(answer(v, "", offset), Recover)  # the seed's client: a recovery
        return
    assert type(answer(v, "cur", offset)) is expected


def test_poll_limits_and_kinds_are_checked_with_the_field_named() -> None:
    check_limits(1)
    check_limits(1000)
    for bad in (0, 1001, 5000):
        with pytest.raises(InvalidRequestError, match=rf"^max: must be in 1..1000, got {bad}$"):
            check_limits(bad)
    assert check_want([]) is None
    assert check_want(["evicted", "lost"]) == {"evicted", "lost"}
    with pytest.raises(InvalidRequestError, match=r"want\[1\]: unknown record kind 'nope'"):
        check_want(["lost", "nope"])


def test_a_component_is_1_to_16_word_characters_and_live_is_reserved() -> None:
    check_component("collector_1")
    check_component("LIVE")
    with pytest.raises(InvalidRequestError, match="'LIVE' is reserved"):
        check_component("LIVE", live=False)
    for bad in ("", "a-b", "x" * 17, "é"):
        with pytest.raises(InvalidRequestError, match=r"component: must be 1 to 16 characters"):
            check_component(bad)


def test_positions_order_by_boot_then_wrapping_offset() -> None:
    old = BootSpan("old", 77, 99, True)
    v = view(TOP, TOP, at(TOP, 9), older=(old,))
    assert later(v, ("old", 80), ("old", 81))
    assert later(v, ("old", 99), ("cur", pred(TOP)))
    assert later(v, ("cur", TOP), ("cur", at(TOP, 5)))  # across the wrap
    assert not later(v, ("cur", at(TOP, 5)), ("cur", TOP))
    assert later(v, ("gone", 5), ("old", 77))  # a boot not held is older than every held one
    cut = Lost("old", 80, 90, 11, "consumer cut loose")
    assert lost_after(v, cut, "old", 79)
    assert not lost_after(v, cut, "old", 90)
    assert not lost_after(v, cut, "cur", TOP)
    assert lost_after(v, Lost("cur", TOP, at(TOP, 4), 5, "x"), "old", 99)


# -- the history ---------------------------------------------------------------------------


def fill(history: History, start: int, n: int, *, kinds: tuple[str, ...] = ("lost",)) -> None:
    offsets = [at(start, i) for i in range(n)]
    history.add(
        offsets,
        [f'{{"offset":{o}}}\n'.encode() for o in offsets],
        [kinds[i % len(kinds)] for i in range(n)],
    )


@pytest.mark.parametrize("start", STARTS)
def test_the_history_keeps_the_newest_records_within_both_bounds(start: int) -> None:
    h = History(max_records=10, max_bytes=10_000)
    for i in range(7):
        fill(h, at(start, 3 * i), 3)
        h.check()
    assert h.window() == (at(start, 11), at(start, 20))
    assert len(h) == 10
    by_bytes = History(max_records=100, max_bytes=60)
    fill(by_bytes, start, 20)
    by_bytes.check()
    assert by_bytes.bytes <= 60


@pytest.mark.parametrize("start", STARTS)
def test_the_history_reads_after_an_offset_across_the_wrap(start: int) -> None:
    h = History(max_records=100, max_bytes=1 << 20)
    fill(h, start, 10)
    s = h.after(pred(start), max_records=4, max_bytes=1 << 20)
    assert s is not None
    assert [json.loads(x)["offset"] for x in s.lines] == [at(start, i) for i in range(4)]
    assert (s.last_offset, s.end) == (at(start, 3), False)
    s = h.after(at(start, 7), max_records=4, max_bytes=1 << 20)
    assert s is not None
    assert [json.loads(x)["offset"] for x in s.lines] == [at(start, 8), at(start, 9)]
    assert s.end
    newest = h.after(at(start, 9), max_records=4, max_bytes=1 << 20)
    assert newest is not None
    assert (newest.lines, newest.last_offset) == ((), at(start, 9))
    assert h.after(at(start, 10), max_records=4, max_bytes=1 << 20) is None
    assert h.after(at(start, -2), max_records=4, max_bytes=1 << 20) is None


def test_the_history_filters_by_kind_and_reports_how_far_it_read() -> None:
    h = History(max_records=100, max_bytes=1 << 20)
    fill(h, 0, 12, kinds=("lost", "evicted", "delivered_batch"))
    s = h.after(pred(0), max_records=2, max_bytes=1 << 20, want=frozenset({"evicted"}))
    assert s is not None
    assert [json.loads(x)["offset"] for x in s.lines] == [1, 4]
    assert s.last_offset == 4  # the next read starts after the last record read
    tail = h.after(10, max_records=5, max_bytes=1 << 20, want=frozenset({"evicted"}))
    assert tail is not None
    assert (tail.lines, tail.last_offset, tail.end) == ((), 11, True)


def test_an_answer_holds_at_least_one_record_and_at_most_its_bytes() -> None:
    h = History(max_records=100, max_bytes=1 << 20)
    fill(h, 0, 10)
    s = h.after(pred(0), max_records=100, max_bytes=1)
    assert s is not None
    assert len(s.lines) == 1
    s = h.after(pred(0), max_records=100, max_bytes=40)
    assert s is not None
    assert sum(map(len, s.lines)) <= 40 < sum(map(len, s.lines)) + 16


def test_the_history_wakes_an_armed_waiter_once() -> None:
    h = History(max_records=10, max_bytes=1000)
    woken: list[int] = []
    h.on_add(lambda: woken.append(1))
    fill(h, 0, 1)
    assert woken == []
    h.arm()
    fill(h, 1, 1)
    fill(h, 2, 1)
    assert woken == [1]


def test_a_live_reader_behind_the_history_skips_to_its_newest_records() -> None:
    h = History(max_records=10, max_bytes=1000)
    fill(h, TOP, 30)
    assert h.tail(at(TOP, 25), 3) == at(TOP, 25)  # in memory: stays
    assert h.tail(at(TOP, 2), 3) == at(TOP, 26)  # behind: just before the newest 3
    assert h.tail(at(TOP, 2), 0) == at(TOP, 29)


# -- retention with consumers --------------------------------------------------------------


def segs(boot: str, start: int, sizes: list[int], per: int = 10) -> list[Segment]:
    """Segments of ``per`` records each; the last of the list is the boot's growing one."""
    out = []
    for i, size in enumerate(sizes):
        first = at(start, i * per)
        last = None if i == len(sizes) - 1 else at(first, per - 1)
        out.append(Segment(Path(f"{boot}-{i}"), boot, size, first, last))
    return out


@pytest.mark.parametrize("start", STARTS)
def test_retention_without_consumers_removes_the_oldest_segments(start: int) -> None:
    s = segs("b", start, [100] * 6)
    got = plan(s, total_bytes=600, max_bytes=300, max_lag_bytes=1000, pins=[])
    assert [x.path.name for x in got.remove] == ["b-0", "b-1", "b-2"]
    assert got.cuts == ()


@pytest.mark.parametrize("start", STARTS)
def test_a_consumer_within_its_bound_keeps_what_it_has_not_acknowledged(start: int) -> None:
    s = segs("b", start, [100] * 6)
    pin = Pin("app", "c", "b", at(start, 14))  # holds records of segment 1
    got = plan(s, total_bytes=600, max_bytes=300, max_lag_bytes=1000, pins=[pin])
    assert [x.path.name for x in got.remove] == ["b-0"]
    assert got.held_by == (pin,)
    assert lag_bytes(pin, s) == 500
    done = Pin("app", "c", "b", at(start, 19))  # acknowledged all of segment 1
    assert [
        x.path.name
        for x in plan(s, total_bytes=600, max_bytes=300, max_lag_bytes=1000, pins=[done]).remove
    ] == ["b-0", "b-1"]  # segment 2 is not acknowledged yet: it stays


@pytest.mark.parametrize("start", STARTS)
def test_a_consumer_beyond_its_bound_is_cut_loose_with_what_it_lost(start: int) -> None:
    s = segs("b", start, [100] * 6)
    pin = Pin("app", "c", "b", at(start, 14))
    got = plan(s, total_bytes=600, max_bytes=300, max_lag_bytes=250, pins=[pin])
    assert [x.path.name for x in got.remove] == ["b-0", "b-1", "b-2"]
    [cut] = got.cuts
    assert cut.pin == pin
    assert cut.lag_bytes == 500
    assert cut.lost == [Lost("b", at(start, 15), at(start, 29), 15, "consumer cut loose")]
    assert (cut.boot_id, cut.offset) == ("b", at(start, 29))


def test_a_consumer_behind_in_an_older_boot_pins_every_later_boot() -> None:
    s = segs("old", 50, [100, 100], per=5)
    s[-1] = Segment(s[-1].path, "old", 100, s[-1].first, at(s[-1].first, 4))  # it ended
    s += segs("new", 9000, [100] * 3)
    pin = Pin("app", "c", "old", 52)
    got = plan(s, total_bytes=500, max_bytes=100, max_lag_bytes=10_000, pins=[pin])
    assert got.remove == ()
    cut = plan(s, total_bytes=500, max_bytes=100, max_lag_bytes=150, pins=[pin])
    assert [x.path.name for x in cut.remove] == ["old-0", "old-1", "new-0", "new-1"]
    assert cut.cuts[0].lost == [
        Lost("old", 53, 59, 7, "consumer cut loose"),
        Lost("new", 9000, 9019, 20, "consumer cut loose"),
    ]


def test_retention_never_removes_the_segment_being_written() -> None:
    s = segs("b", 0, [100] * 3)
    s[-1] = Segment(s[-1].path, "b", 100, s[-1].first, 29)
    got = plan(s, total_bytes=300, max_bytes=0, max_lag_bytes=0, pins=[], keep=frozenset({"b-2"}))
    assert [x.path.name for x in got.remove] == ["b-0", "b-1"]


# -- the registry ------------------------------------------------------------------------


def test_the_registry_survives_a_restart_and_registration_is_idempotent(tmp_path: Path) -> None:
    reg = Consumers(tmp_path, max_consumers=2)
    _, created = reg.register("app", "coll", "b", 41)
    assert created
    again, created = reg.register("app", "coll", "other", 99)
    assert not created
    assert (again.boot_id, again.offset) == ("b", 41)
    v = View((BootSpan("b", 0, 100, True),), "b", 0)
    reg.ack(
        "app",
        "coll",
        "b",
        50,
        moves_on=lambda b, o: later(v, (b, o), ("b", 50)),
        keep_lost=lambda _: True,
    )
    lost = [Lost("b", 51, 70, 20, "consumer cut loose")]
    assert reg.cut("app", "coll", "b", 70, lost, beyond=functools.partial(lost_beyond, v)) == lost
    reg.check()
    reg.flush()
    back = Consumers(tmp_path, max_consumers=2)
    back.load()
    got = back.get("app", "coll")
    assert got is not None
    assert (got.boot_id, got.offset, got.cuts) == ("b", 70, 1)
    assert got.lost == [Lost("b", 51, 70, 20, "consumer cut loose")]
    assert back.get("other-app", "coll") is None  # a consumer is (app, component)


@pytest.mark.parametrize("start", STARTS)
def test_a_cut_planned_before_a_later_acknowledgement_leaves_the_position_alone(
    tmp_path: Path, start: int
) -> None:
    """Retention plans its cuts from a copy of the positions; the consumer may have
    acknowledged since: it loses only what is after its position now, and never
    moves back."""
    v = View((BootSpan("b", start, at(start, 200), True),), "b", start)
    beyond = functools.partial(lost_beyond, v)
    reg = Consumers(tmp_path, max_consumers=4)

    def ack(component: str, i: int) -> bool:
        new = ("b", at(start, i))
        return reg.ack(
            "app",
            component,
            *new,
            moves_on=lambda b, o: later(v, (b, o), new),
            keep_lost=lambda x: lost_after(v, x, *new),
        )

    def lost(i: int, j: int) -> Lost:
        return Lost("b", at(start, i), at(start, j), j - i + 1, "consumer cut loose")

    for component in ("past", "partly", "behind"):
        reg.register("app", component, "b", at(start, 10))
    # The plan saw each at 10 and cuts it at 50 (losing 11..50); meanwhile "past"
    # acknowledged 60, "partly" 30: a cut that comes now leaves "past" alone.
    assert ack("past", 60)
    assert ack("partly", 30)
    assert reg.cut("app", "past", "b", at(start, 50), [lost(11, 50)], beyond=beyond) == []
    got = reg.get("app", "past")
    assert got is not None
    assert (got.offset, got.cuts, got.lost) == (at(start, 60), 0, [])
    assert reg.cut("app", "partly", "b", at(start, 50), [lost(11, 50)], beyond=beyond) == [
        lost(31, 50)
    ]
    got = reg.get("app", "partly")
    assert got is not None
    assert (got.offset, got.cuts, got.lost) == (at(start, 50), 1, [lost(31, 50)])
    # The other way round: an acknowledgement checked before the cut, applied after it,
    # does not move the consumer back into what it lost.
    assert reg.cut("app", "behind", "b", at(start, 50), [lost(11, 50)], beyond=beyond)
    assert not ack("behind", 30)
    got = reg.get("app", "behind")
    assert got is not None
    assert (got.offset, got.lost) == (at(start, 50), [lost(11, 50)])
    reg.check()


@contextlib.contextmanager
def blocked_writes(path: Path) -> Iterator[None]:
    """``path`` is a FIFO while inside: opening it to write blocks until a reader comes
    (a disk that stalls a write or an fsync); at the end a reader comes and it goes."""
    os.mkfifo(path)
    try:
        yield
    finally:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # releases a blocked writer
        os.close(fd)
        path.unlink()


def runs_within(work: Callable[[], object], seconds: float) -> bool:
    """Whether ``work()`` returns within ``seconds`` (run in a thread that may stay blocked)."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def test_the_registry_writes_its_file_outside_its_lock_and_acks_write_nothing(
    tmp_path: Path,
) -> None:
    """The event loop reads the registry (every Poll, every Follow group, every scrape)
    and acknowledges into it: a write or fsync that stalls must not stall those."""
    Consumers(tmp_path, max_consumers=4).register("app", "a", "b", 1)
    reg = Consumers(tmp_path, max_consumers=4)
    reg.load()
    with blocked_writes(tmp_path / (CONSUMERS_NAME + ".tmp")):
        # An acknowledgement is memory only (the journal's writer thread writes it later).
        assert runs_within(
            lambda: reg.ack(
                "app", "a", "b", 5, moves_on=lambda b, o: True, keep_lost=lambda _: True
            ),
            2,
        ), "an acknowledgement waited for the registry's file"
        # A registration blocked writing its file does not keep readers out.
        writer = threading.Thread(target=reg.register, args=("app", "c", "b", 1), daemon=True)
        writer.start()

        def read_until_registered() -> None:
            while reg.get("app", "c") is None:  # bounded: runs_within gives it 2 s
                time.sleep(0.001)  # the reader's pace: the reads beside the write are the test
            reg.all()

        assert runs_within(read_until_registered, 2), "a reader waited for the file write"
        assert writer.is_alive()  # still blocked writing: the readers really ran beside it
    writer.join(5)
    assert not writer.is_alive()
    reg.flush()
    back = Consumers(tmp_path, max_consumers=4)
    back.load()
    got = back.get("app", "a")
    assert got is not None
    assert got.offset == 5
    assert back.get("app", "c") is not None
    reg.check()


def test_the_registry_refuses_live_and_more_than_its_limit(tmp_path: Path) -> None:
    reg = Consumers(tmp_path, max_consumers=1)
    with pytest.raises(InvalidRequestError, match="'LIVE' is reserved"):
        reg.register("app", "LIVE", "b", 0)
    reg.register("app", "a", "b", 0)
    with pytest.raises(LimitExceededError, match="journal consumers: 1 are registered"):
        reg.register("app", "b", "b", 0)
    assert reg.unregister("app", "a")
    assert not reg.unregister("app", "a")
    reg.register("app", "b", "b", 0)


def test_a_registry_file_that_does_not_parse_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / CONSUMERS_NAME).write_text("{not json")
    reg = Consumers(tmp_path, max_consumers=4)
    reg.load()
    assert len(reg) == 0
    assert (tmp_path / (CONSUMERS_NAME + ".bad")).exists()


# -- segments on disk ----------------------------------------------------------------------


def write_segments(
    directory: Path, boot: str, start: int, counts: list[int], *, compress: bool = False
) -> list[dict[str, Any]]:
    chain = Chain()
    offset = start
    records = []
    for number, count in enumerate(counts, 1):
        name = segment_name(10**18 + number, boot, number, compress=compress)
        with (gzip.open if compress else open)(directory / name, "wb") as fh:
            for _ in range(count):
                rec = {
                    "kind": "lost" if offset % 2 else "evicted",
                    "boot_id": boot,
                    "offset": offset,
                }
                fh.write(chain.line(rec))
                records.append(rec)
                offset = succ(offset)
    return records


@pytest.fixture
def archives() -> Iterator[Callable[[Path], Archive]]:
    """Archives of a directory, their open segments closed at the test's end (as the
    journal's feed closes its own)."""
    made: list[Archive] = []

    def make(directory: Path) -> Archive:
        made.append(Archive(directory))
        return made[-1]

    yield make
    for archive in made:
        archive.close()


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("start", STARTS)
def test_the_archive_reads_a_boot_after_an_offset_across_segments(
    tmp_path: Path, start: int, compress: bool, archives: Callable[[Path], Archive]
) -> None:
    write_segments(tmp_path, "b", start, [4, 4, 4], compress=compress)
    archive = archives(tmp_path)
    [span] = archive.boots()
    assert (span.boot_id, span.first, span.last, span.starts) == ("b", start, at(start, 11), True)
    got, offset = [], pred(start)
    while True:
        s = archive.read_after("b", offset, base=start, max_records=3, max_bytes=1 << 20)
        if not s.lines:
            break
        got += [json.loads(x)["offset"] for x in s.lines]
        offset = s.last_offset
    assert got == [at(start, i) for i in range(12)]
    evicted = archive.read_after(
        "b",
        pred(start),
        base=start,
        max_records=100,
        max_bytes=1 << 20,
        want=frozenset({"evicted"}),
    )
    assert all(json.loads(x)["kind"] == "evicted" for x in evicted.lines)
    assert evicted.last_offset == at(start, 11)


@pytest.mark.parametrize("compress", [False, True])
def test_the_archive_reads_on_in_a_growing_segment_from_where_it_stopped(
    tmp_path: Path, compress: bool, archives: Callable[[Path], Archive]
) -> None:
    """The reader left at the end of the segment being written reads what is appended
    later (a gzip member per batch); a line torn mid-write is read once it is whole."""
    chain = Chain()
    name = tmp_path / segment_name(10**18, "b", 1, compress=compress)
    lines = [chain.line({"kind": "lost", "boot_id": "b", "offset": o}) for o in range(6)]
    archive = archives(tmp_path)

    def append(data: bytes) -> None:
        with name.open("ab") as fh:
            fh.write(gzip.compress(data) if compress else data)

    def read(offset: int, reader: Archive = archive) -> tuple[list[int], int]:
        got = reader.read_after("b", offset, base=0, max_records=100, max_bytes=1 << 20)
        return [json.loads(x)["offset"] for x in got.lines], got.last_offset

    append(b"".join(lines[:2]))
    assert read(pred(0)) == ([0, 1], 1)
    if not compress:  # a plain segment: the writer is mid-line
        append(lines[2] + lines[3][:10])
        assert read(1) == ([2], 2)
        append(lines[3][10:])
        assert read(2) == ([3], 3)
    else:
        append(b"".join(lines[2:4]))
        assert read(1) == ([2, 3], 3)
    append(b"".join(lines[4:]))
    assert read(3) == ([4, 5], 5)
    assert read(pred(0), archives(tmp_path)) == ([0, 1, 2, 3, 4, 5], 5)  # afresh: the same


def _bytes_read() -> int:
    """Bytes this process has read through read() and friends so far (Linux)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_a_catch_up_over_gzip_segments_reads_each_segment_once(
    tmp_path: Path, archives: Callable[[Path], Archive]
) -> None:
    """A consumer catching up from disk reads a segment in many answers; a gzip segment
    cannot seek without inflating it from its start, so each answer must go on from an
    open segment, not reopen it (that read a segment once per answer: quadratic)."""
    write_segments(tmp_path, "b", TOP, [1500, 1500, 1500], compress=True)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    archive = archives(tmp_path)
    archive.segments()  # each segment's first line, read once and kept
    before = _bytes_read()
    got, offset = [], pred(TOP)
    while True:
        s = archive.read_after("b", offset, base=TOP, max_records=20, max_bytes=1 << 20)
        if not s.lines:
            break
        got += [json.loads(x)["offset"] for x in s.lines]
        offset = s.last_offset
    read = _bytes_read() - before
    assert got == [at(TOP, i) for i in range(4500)]
    assert read < 2 * size, f"read {read:,} bytes of {size:,} on disk"
    # The newest segment is kept open for the next read; once retention removed it,
    # it is closed (an open file would keep the disk space of the removed one).
    newest = max(tmp_path.glob("*.gz"))
    assert str(newest) in _open_files()
    archive.removed([newest])
    assert str(newest) not in _open_files()


def _open_files() -> set[str]:
    """The paths this process has open (Linux)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def test_a_live_follower_that_starts_before_any_record_reads_from_the_first(
    tmp_path: Path,
) -> None:
    """Nothing held yet (the journal's writer has not handed over its first records):
    a live follower starts just before the boot's first record, not at the offset it
    asked with (0: a position this boot may never write, refused later as OUT_OF_RANGE)."""
    history = History(max_records=100, max_bytes=1_000_000)
    feed = Feed(
        tmp_path,
        boot_id="b1",
        first_offset=230_732_908,
        history=history,
        consumers=Consumers(tmp_path, max_consumers=4),
        max_lag_bytes=1_000_000,
        answer_bytes=1_000_000,
    )
    start = feed.live_start(0, 0)
    assert start == 230_732_907
    history.add([230_732_908, 230_732_909], [b"{}", b"{}"], ["start", "add_keys"])
    assert feed.live_start(start, 10) == start  # now held: reads on from there


def test_an_app_at_its_share_is_refused_naming_it_and_another_app_registers(
    tmp_path: Path,
) -> None:
    reg = Consumers(tmp_path, max_consumers=4, max_per_app=2)
    for c in ("a", "b"):
        reg.register("greedy", c, "b", 0)
    with pytest.raises(LimitExceededError, match="journal consumers of app 'greedy': it has 2"):
        reg.register("greedy", "c", "b", 0)
    reg.register("collector", "a", "b", 0)
    reg.check()


def test_a_registry_saved_under_larger_limits_is_read_back_within_the_shares(
    tmp_path: Path,
) -> None:
    ticks = iter(range(100))
    saved = Consumers(tmp_path, max_consumers=8, clock=lambda: next(ticks))
    for c in ("a", "b", "c", "d", "e"):
        saved.register("greedy", c, "b", 0)
    saved.register("collector", "a", "b", 0)
    back = Consumers(tmp_path, max_consumers=4, max_per_app=2)
    back.load()
    back.check()
    assert [(c.app, c.component) for c in back.all()] == [
        ("collector", "a"),
        ("greedy", "a"),
        ("greedy", "b"),
    ]
    back.register("other", "x", "b", 0)  # room left for an app within its share
    again = Consumers(tmp_path, max_consumers=4, max_per_app=2)
    again.load()  # what was dropped is dropped from the file too
    assert len(again) == 4
