"""The journal's record kinds and the fields each carries have one definition
(vehicle_middleware.contract.journal.records), which the writer checks every record against."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from vehicle_middleware.contract.journal.landing import COLLECTOR_KINDS
from vehicle_middleware.contract.journal.records import (
    BATCH_FIELDS,
    ENVELOPE,
    FIELDS,
    HASH_FIELDS,
    KIND_FIELDS,
    KINDS,
    LEVEL_OF,
    Kind,
    Level,
    refusal,
)
from vehicle_middleware.contract.journal.segments import segment_files
from vehicle_middleware.server.journal import Journal, read_journal, verify

ROOT = Path(__file__).resolve().parents[2]
# Calls whose first argument is a record's kind: the writer's, the runtime's and the
# health watch's record, the writer's own records, the synthetic fleet's write.
_RECORDING = {"record", "_record", "_note", "_own", "_stamp", "write"}


_SAMPLE: dict[str, object] = {"string": "s", "long": 1, "int": 0, "boolean": True, "json": {}}
_SAMPLE |= {f"array<{t}>": [] for t in ("long", "string", "boolean", "int")}


def make(tmp_path: Path, **kw: object) -> Journal:
    return Journal(tmp_path, vehicle_id="car-1", boot_id="b", **kw)  # type: ignore[arg-type]


def test_every_kind_has_a_level_and_its_fields_are_fields_of_the_format() -> None:
    assert set(LEVEL_OF) == set(KIND_FIELDS) == set(Kind)
    assert tuple(Kind) == KINDS
    assert set(ENVELOPE) <= FIELDS.keys()
    assert set(HASH_FIELDS) <= FIELDS.keys()
    for kind, fields in KIND_FIELDS.items():
        assert fields <= FIELDS.keys(), (kind, fields - FIELDS.keys())
        assert not fields & set(ENVELOPE), kind
    # Every field of the format is the envelope's or some kind's.
    carried = set(ENVELOPE).union(*KIND_FIELDS.values())
    assert carried == FIELDS.keys()
    for batch, (per_event, columns) in BATCH_FIELDS.items():
        assert set(columns) <= KIND_FIELDS[batch]
        assert set(columns.values()) <= KIND_FIELDS[per_event]
    assert not set(COLLECTOR_KINDS) & set(KINDS)


def test_a_record_of_an_unknown_kind_is_refused_naming_it(tmp_path: Path) -> None:
    j = make(tmp_path, level=Level.FULL)
    j.start(address="a")
    with pytest.raises(AssertionError, match=r"unknown journal record kind 'key_renamed'.*app"):
        j.record("key_renamed", app="a")  # type: ignore[arg-type]
    j.close()
    assert [r["kind"] for r in read_journal([tmp_path])] == ["start", "stop"]


def test_a_field_its_kind_does_not_carry_is_refused_naming_both(tmp_path: Path) -> None:
    """``seq`` is a field of the format (a drop's), but not of ``key_added``."""
    j = make(tmp_path, level=Level.FULL)
    j.start(address="a")
    with pytest.raises(AssertionError, match=r"a 'key_added' record does not carry seq;"):
        j.record(Kind.KEY_ADDED, app="a", key="Vehicle.Speed", key_id=1, seq=4)
    with pytest.raises(AssertionError, match=r"'stop' record does not carry colour \(colour: in"):
        j.record(Kind.STOP, reason="x", colour="red")
    j.close()
    assert [r["kind"] for r in read_journal([tmp_path])] == ["start", "stop"]


def test_the_refusal_says_nothing_of_a_record_that_keeps_to_the_format() -> None:
    assert refusal(Kind.REGISTER, ["app", "key", "key_id", "queue"]) is None
    assert refusal("register", []) is None  # a kind's string is the kind
    message = refusal(Kind.DEREGISTER, ["app", "queue"])
    assert message is not None
    assert "'deregister'" in message
    assert "queue" in message


def test_every_kind_with_every_field_it_carries_is_written_and_read_back(
    tmp_path: Path,
) -> None:
    j = make(tmp_path, level=Level.FULL)
    j.start(address="a", level="full", settings={})
    for kind in Kind:
        if kind in (Kind.START, Kind.STOP):
            continue
        j.record(kind, **{f: _SAMPLE[FIELDS[f]] for f in sorted(KIND_FIELDS[kind])})
    j.close()
    records = read_journal([tmp_path])
    assert [r["kind"] for r in records] == list(KINDS)[:1] + [
        k for k in Kind if k not in (Kind.START, Kind.STOP)
    ] + [Kind.STOP]
    for rec in records:
        assert set(rec) <= set(ENVELOPE) | KIND_FIELDS[rec["kind"]]
    assert verify(records).intact
    lines = segment_files(tmp_path)[0].read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [r["kind"] for r in records]


def _kinds_written_in(path: Path, calls: list[tuple[str, str, set[str]]]) -> set[str]:
    """String literals given as a record's kind in ``path``: the first argument of
    a recording call, and the value of a ``"kind"`` key in a dict display. Adds
    to ``calls`` each recording call's place, kind and keyword arguments."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name not in _RECORDING:
                continue
            kind: str | None = None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                kind = first.value
                found.add(kind)
            elif (
                isinstance(first, ast.Attribute)
                and isinstance(first.value, ast.Name)
                and first.value.id == "Kind"
            ):
                kind = Kind[first.attr]
            if kind is not None:
                keywords = {k.arg for k in node.keywords if k.arg is not None}
                calls.append((f"{path.relative_to(ROOT)}:{node.lineno}", kind, keywords))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "kind"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found.add(value.value)
    return found


def test_every_kind_the_code_and_the_journal_tests_write_is_a_kind() -> None:
    """The server, the fleet side (its synthetic journals) and the journal tests
    write records of these kinds, as strings or as Kind members, with the fields
    their kind carries: a string that is no Kind (nor a collector record's
    kind), or a field its kind lacks, would be refused."""
    sources = [
        *(ROOT / "middleware").rglob("*.py"),
        *(ROOT / "telemetry_export").rglob("*.py"),
        *(ROOT / "tests").rglob("test_journal*.py"),
    ]
    written: set[str] = set()
    calls: list[tuple[str, str, set[str]]] = []
    for path in sources:
        if "proto" not in path.parts:
            written |= _kinds_written_in(path, calls)
    # Not written by the writer: the tests' refused kinds, and a record of an older
    # journal that a chain test links by hand.
    written -= {"key_renamed", "x", "slow_app"}
    assert written, "the scan found nothing: it no longer matches the code"
    unknown = sorted(written - set(KINDS) - set(COLLECTOR_KINDS))
    assert unknown == []
    # And each call's fields in the code are those its kind carries (the tests'
    # calls run: the writer checks them; some are refused on purpose).
    assert len(calls) > 20
    wrong = [
        (where, kind, refusal(kind, fields))
        for where, kind, fields in calls
        if not where.startswith("tests") and refusal(kind, fields) is not None
    ]
    assert wrong == []
