"""Recorded signal files: CSV and JSON lines, types, order, clear errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from vehicle_middleware.providers.recording import (
    RecordingError,
    Sample,
    group_by_time,
    read_recording,
)


def test_csv_values_get_one_type_per_key_or_their_type_column(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text(
        "time,key,value,type\n"
        "0.5,B,true,\n1.0,I,12,\n1.5,F,20,\n2.0,F,20.5,\n2.5,S,ECO,\n3.0,S,12,\n"
        "3.5,X,7,string\n4.0,N,nan,\n4.5,N,1_000,\n1795302922.000000001,T,1e3,\n"
    )
    values = {s.key: [] for s in read_recording(f)}  # type: dict[str, list[object]]
    for s in read_recording(f):
        values[s.key].append(s.value)
    assert values == {
        "B": [True],
        "I": [12],
        "F": [20.0, 20.5],  # 20 on a float key is a float
        "S": ["ECO", "12"],  # a number among strings stays a string
        "X": ["7"],
        "N": ["nan", "1_000"],  # not plain decimals: strings
        "T": [1000.0],
    }
    assert type(values["F"][0]) is float
    assert type(values["I"][0]) is int
    # Seconds are read as decimals: the nanosecond survives at epoch scale.
    assert read_recording(f)[-1].time_ns == 1_795_302_922_000_000_001


def test_json_lines_keep_json_types_and_ignore_other_fields(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(
        '{"time_ns": 2, "key": "A", "value": 1.0, "seq": 9}\n'
        "\n"
        '{"time": 0.000000001, "key": "B", "value": false}\n'
    )
    assert read_recording(f) == [Sample(1, "B", False), Sample(2, "A", 1.0)]


def test_samples_are_put_in_time_order_keeping_each_keys_order(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl.gz"
    lines = ['{"time_ns": 5, "key": "A", "value": 1}', '{"time_ns": 3, "key": "B", "value": 1}']
    lines += ['{"time_ns": 5, "key": "A", "value": 2}', '{"time_ns": 3, "key": "B", "value": 2}']
    f.write_bytes(gzip.compress("\n".join(lines).encode()))
    samples = read_recording(f)
    assert [(s.key, s.value) for s in samples] == [("B", 1), ("B", 2), ("A", 1), ("A", 2)]
    assert [len(g) for g in group_by_time(samples)] == [2, 2]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("r.csv", "when,key,value\n1,A,2\n", r"r\.csv:1: the header must name"),
        ("r.csv", "time,key,value\nsoon,A,2\n", r"r\.csv:2: 'time' must be a number"),
        ("r.csv", "time,key,value,type\n1,A,x,int\n", r"r\.csv:2: value 'x' is not a int"),
        ("r.jsonl", '{"time": 1, "key": "A"}\n', r"r\.jsonl:1: 'value' is missing"),
        ("r.jsonl", '{"time": 1, "key": "A", "value": 1}\n[1]\n', r"r\.jsonl:2: a line must be"),
        ("r.jsonl", '{"key": "A", "value": 1}\n', r"needs 'time'"),
        ("r.jsonl", '{"time": 1, "key": "A", "value": [1]}\n', r"boolean, number or string"),
        ("r.jsonl", '{"time": 1, "key": "A", "value": 1, "type": "blob"}\n', r"'blob' is not one"),
        ("r.txt", "", r"use a \.csv or \.jsonl file"),
    ],
)
def test_a_bad_recording_is_refused_naming_the_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(RecordingError, match=message):
        read_recording(f)


def test_the_shipped_recording_reads() -> None:
    shipped = (
        Path(__file__).parents[2]
        / "providers"
        / "vehicle_middleware"
        / "providers"
        / "recordings"
        / "short-drive.jsonl"
    )
    samples = read_recording(shipped)
    assert len(samples) > 1000
    assert "Vehicle.Body.Windows.Row2.Right.Level" in {s.key for s in samples}
    assert 29e9 < samples[-1].time_ns - samples[0].time_ns <= 30e9
