"""The landing area's layout has one definition (vehicle_middleware.contract.journal.landing):
the collector writes by it, and every reader finds by it what was written."""

from __future__ import annotations

from pathlib import Path

from vehicle_middleware.contract.journal import landing


def test_a_data_files_path_parses_back_into_its_vehicle_and_boot() -> None:
    path = landing.data_path("car-7", "b0", 42, 3)
    assert path == "vehicle=car-7/boot=b0/part-0000000042-000003.jsonl"
    assert landing.parse_data_path(path) == ("car-7", "b0")
    assert landing.parse_data_path(f"file:///land/{path}") == ("car-7", "b0")
    assert landing.is_data_path(path)


def test_other_paths_are_no_data_files() -> None:
    collector = landing.collector_path("car-7", "c1", 1_790_000_000_000_000_000)
    assert collector == "vehicle=car-7/collector-c1-1790000000000000000.jsonl"
    for path in (
        collector,
        landing.position_path("car-7"),
        landing.tmp_path("car-7", "collector-c1-1.jsonl", "c1"),
        "vehicle=car-7/boot=b0/notes.txt",
    ):
        assert landing.parse_data_path(path) is None, path
    assert landing.position_path("car-7") == "_positions/vehicle=car-7.json"
    assert landing.tmp_path("car-7", landing.data_path("car-7", "b", 1, 0), "c1") == (
        "vehicle=car-7/_tmp/part-0000000001-000000.jsonl.c1"
    )


def test_the_globs_find_what_the_paths_name_and_skip_the_bookkeeping(tmp_path: Path) -> None:
    data = landing.data_path("car", "b0", 1, 0)
    notes = landing.collector_path("car", "c1", 5)
    tmp = landing.tmp_path("car", data, "c1")
    for rel in (data, notes, tmp, landing.position_path("car")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob(landing.DATA_GLOB))
    assert found == [data]
    found = [p.relative_to(tmp_path).as_posix() for p in tmp_path.glob(landing.COLLECTOR_GLOB)]
    assert found == [notes]
    assert landing.is_bookkeeping(Path(tmp).parts)
    assert landing.is_bookkeeping(Path(landing.position_path("car")).parts)
    assert not landing.is_bookkeeping(Path(data).parts)


def test_the_collector_kinds_and_their_required_fields() -> None:
    assert landing.COLLECTOR_KINDS == ("collect_gap", "collect_restart")
    assert set(landing.COLLECTOR_REQUIRED) == set(landing.CollectorKind)
    for fields in landing.COLLECTOR_REQUIRED.values():
        assert set(fields) <= landing.COLLECTOR_FIELDS.keys()
