"""The collector's rules without a middleware: what each answer makes it land, and a
flush interrupted between its position and its renames (a killed collector)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vehicle_middleware.contract.journal.chain import OFFSET_MOD, Chain, pred, succ
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2 as pb
from vehicle_middleware.telemetry_export.collector import Collector, Options
from vehicle_middleware.telemetry_export.errors import CollectError
from vehicle_middleware.telemetry_export.landing_area import Landing
from vehicle_middleware.telemetry_export.positions import Position, complete_pending, load_position
from vehicle_middleware.telemetry_export.vehicle_state import Vehicle

TOP = OFFSET_MOD - 2


def lines(boot: str, start: int, n: int, chain: Chain | None = None) -> list[bytes]:
    chain = chain or Chain()
    return [
        chain.line({"kind": "lost", "boot_id": boot, "offset": (start + i) % OFFSET_MOD})
        for i in range(n)
    ]


def records(boot: str, batch: list[bytes]) -> pb.Records:
    last = json.loads(batch[-1])["offset"]
    return pb.Records(
        boot_id=boot, lines=batch, last_offset=last, newest_boot_id=boot, newest_offset=last
    )


def landed(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data, notes = [], []
    for path in sorted(root.rglob("*.jsonl")):
        if any(p.startswith("_") for p in path.relative_to(root).parts):
            continue
        target = data if path.name.startswith("part-") else notes
        target += [json.loads(x) for x in path.read_text().splitlines()]
    return data, notes


def vehicle(boot: str = "a", offset: int = pred(TOP)) -> Vehicle:
    return Vehicle("car", "addr", "coll", Position(boot_id=boot, offset=offset))


def test_records_across_the_wrap_land_once_in_a_file_named_by_their_first_offset(
    tmp_path: Path,
) -> None:
    v = vehicle()
    chain = Chain()
    batch = lines("a", TOP, 5, chain)
    v.take_records(records("a", batch[:3]))
    v.take_records(records("a", batch[1:]))  # sent again (a retried stream): not twice
    v.flush(Landing(str(tmp_path)))
    data, notes = landed(tmp_path)
    assert [r["offset"] for r in data] == [TOP, TOP + 1, 0, 1, 2]
    assert notes == []
    assert v.counts.duplicates == 2
    assert (tmp_path / f"vehicle=car/boot=a/part-{TOP:010d}-000000.jsonl").exists()
    held = load_position(Landing(str(tmp_path)), "car")
    assert held is not None
    assert (held.position.offset, held.position.files) == (2, 1)
    assert held.position.hash == json.loads(batch[-1])["hash"]


def test_an_edited_record_or_a_broken_link_is_landed_and_counted(tmp_path: Path) -> None:
    v = vehicle()
    batch = lines("a", TOP, 4)
    edited = batch[1].replace(b'"kind":"lost"', b'"kind":"gone"')
    v.take_records(records("a", [batch[0], edited, batch[3]]))  # and record 2 missing
    assert v.counts.bad_hash == 1
    assert v.counts.broken_links == 1  # batch[3] does not link to batch[1]
    v.flush(Landing(str(tmp_path)))
    assert len(landed(tmp_path)[0]) == 3


def test_an_overrun_history_lands_a_gap_and_the_chain_resumes_after_it(tmp_path: Path) -> None:
    v = vehicle()
    v.take_records(records("a", lines("a", TOP, 2)))  # TOP, TOP + 1
    v.take_recovery(pb.Recovery(boot_id="a", n0=5, n1=9, reason=pb.RECOVERY_REASON_NOT_IN_HISTORY))
    assert (v.at.boot_id, v.at.offset) == ("a", 4)
    v.take_records(records("a", lines("a", 5, 2, Chain())))  # a new chain start: accepted
    v.flush(Landing(str(tmp_path)))
    data, [gap] = landed(tmp_path)
    assert [r["offset"] for r in data] == [TOP, TOP + 1, 5, 6]
    assert gap | {"time_ns": 0} == {
        "kind": "collect_gap",
        "vehicle_id": "car",
        "boot_id": "a",
        "from_offset": 0,
        "to_offset": 4,
        "count": 5,
        "reason": "history overrun",
        "time_ns": 0,
        "collector": "coll",
    }
    assert v.counts.broken_links == 0


def test_a_restart_lands_one_restart_and_what_the_cut_consumer_lost(tmp_path: Path) -> None:
    v = vehicle()
    v.take_records(records("a", lines("a", TOP, 2)))
    lost = pb.LostRange(
        boot_id="a", from_offset=TOP + 1, to_offset=3, count=4, reason="consumer cut loose"
    )
    recovery = pb.Recovery(
        boot_id="b", n0=77, n1=80, reason=pb.RECOVERY_REASON_CUT_LOOSE, lost=[lost]
    )
    v.take_recovery(recovery)
    v.take_records(records("b", lines("b", 77, 1)))
    v.flush(Landing(str(tmp_path)))
    _, notes = landed(tmp_path)
    [gap] = [n for n in notes if n["kind"] == "collect_gap"]
    [restart] = [n for n in notes if n["kind"] == "collect_restart"]
    # It had TOP + 1 already: the gap starts after it.
    assert (gap["boot_id"], gap["from_offset"], gap["to_offset"], gap["count"]) == ("a", 0, 3, 4)
    assert gap["reason"] == "consumer cut loose"
    assert (restart["old_boot_id"], restart["new_boot_id"]) == ("a", "b")
    # The same recovery again (the collector was killed before it acknowledged): nothing new.
    v.take_recovery(recovery)
    assert v.counts.restarts == 1


def test_the_end_of_a_boot_is_a_restart_without_a_gap() -> None:
    v = vehicle()
    v.take_records(records("a", lines("a", TOP, 2)))
    v.take_recovery(pb.Recovery(boot_id="b", n0=9, n1=12, reason=pb.RECOVERY_REASON_BOOT_ENDED))
    assert (v.counts.restarts, v.counts.gaps) == (1, 0)
    assert (v.at.boot_id, v.at.offset) == ("b", 8)


def test_a_recovery_offering_what_the_collector_holds_keeps_its_position() -> None:
    v = vehicle()
    v.take_records(records("a", lines("a", TOP, 3)))
    v.take_recovery(
        pb.Recovery(boot_id="a", n0=TOP, n1=5, reason=pb.RECOVERY_REASON_NOT_IN_HISTORY)
    )
    assert v.at.offset == 0
    assert v.at.hash is not None
    assert v.counts.gaps == 0


class KilledAfterTheFirstRename(Landing):
    """A landing area whose collector dies after the first rename of a flush."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.moves = 0

    def move(self, src: str, dst: str) -> None:
        self.moves += 1
        if self.moves == 2:
            raise KeyboardInterrupt("killed")
        super().move(src, dst)


def test_a_flush_cut_short_is_completed_by_the_next_collector(tmp_path: Path) -> None:
    v = vehicle()
    v.take_records(records("a", lines("a", TOP, 3)))
    v.take_recovery(pb.Recovery(boot_id="b", n0=9, n1=12, reason=pb.RECOVERY_REASON_BOOT_ENDED))
    v.take_records(records("b", lines("b", 9, 2)))
    with pytest.raises(KeyboardInterrupt):
        v.flush(KilledAfterTheFirstRename(str(tmp_path)))
    landing = Landing(str(tmp_path))
    held = load_position(landing, "car")
    assert held is not None
    assert len(held.pending) == 3  # boot a's file, boot b's, the restart record
    assert (held.position.boot_id, held.position.offset) == ("b", 10)
    complete_pending(landing, "car", held, "coll")
    data, notes = landed(tmp_path)
    assert [r["offset"] for r in data] == [TOP, TOP + 1, 0, 9, 10]
    assert [n["kind"] for n in notes] == ["collect_restart"]
    again = load_position(landing, "car")
    assert again is not None
    assert again.pending == []
    assert (again.position.files, again.position.done_boots) == (2, ["a"])
    assert succ(TOP + 1) == 0


def registration(vehicle: str = "car") -> pb.RegisterConsumerResponse:
    return pb.RegisterConsumerResponse(
        created=True, position=pb.Position(boot_id="a", offset=pred(TOP)), vehicle_id=vehicle
    )


def test_a_vehicle_is_held_by_one_collector_until_its_lease_passes_or_it_is_taken_over(
    tmp_path: Path,
) -> None:
    landing = Landing(str(tmp_path))
    first = Collector(["addr"], landing, Options(name="one"))._attach("addr", registration())
    with pytest.raises(CollectError, match="is collected by 'one'"):
        Collector(["addr"], landing, Options(name="two"))._attach("addr", registration())
    second = Collector(["addr"], landing, Options(name="two", take_over=True))._attach(
        "addr", registration()
    )
    assert second.landed == first.landed  # it goes on from where the first stood
    first.take_records(records("a", lines("a", TOP, 1)))
    with pytest.raises(CollectError, match="taken over by collector 'two'"):
        first.flush(landing)  # the first stops instead of writing over the second's position
    expired = Collector(["addr"], landing, Options(name="three", lease_s=0.0))
    assert expired._attach("addr", registration()).owner == "three"


def test_an_idle_collector_renews_its_lease(tmp_path: Path) -> None:
    landing = Landing(str(tmp_path))
    v = Collector(["addr"], landing, Options(name="one"))._attach("addr", registration())
    before = load_position(landing, "car")
    assert before is not None
    v.flush(landing, heartbeat_s=3600)  # nothing to land, the lease is fresh: nothing written
    assert load_position(landing, "car") == before
    v.flush(landing, heartbeat_s=0)
    after = load_position(landing, "car")
    assert after is not None
    assert after.heartbeat_ns > before.heartbeat_ns
    assert after.position == before.position
