"""Recorded signal files: what the replay provider reads and the logger app writes.

Two formats, by file name:

* JSON lines (``.jsonl``, ``.ndjson``, ``.json``): one object per line with
  ``key``, ``value`` (a JSON boolean, number or string) and the time, as
  ``time_ns`` (integer nanoseconds) or ``time`` (seconds); optionally ``type``
  (``bool``, ``int``, ``float``, ``string``) to force the value's type. Other
  fields are ignored, so the logger app's output replays as it is.
* CSV (``.csv``): a header row naming the columns ``time`` or ``time_ns``,
  ``key``, ``value`` and optionally ``type``. Without ``type``, one type is
  chosen per key from all its values: booleans if all are ``true``/``false``,
  ints if all are integers, floats if all are numbers (``20`` on a key that
  also has ``20.5`` is the float 20.0), strings otherwise. Numbers are plain
  ASCII decimals (``1e3`` and ``-0.5`` are, ``nan``, ``1_000`` are not).

Times in seconds are read as decimals, so nanoseconds survive at epoch scale.

Either may be gzip-compressed (``.gz`` after the extension). Samples are put
in time order with a stable sort, so each key's samples keep the file's order.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Final

from vehicle_middleware.contract.values import Scalar

__all__ = ["RecordingError", "Sample", "group_by_time", "read_recording"]

_TYPES: Final = ("bool", "int", "float", "string")
_INT: Final = re.compile(r"^[+-]?[0-9]+$")
_FLOAT: Final = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


class RecordingError(ValueError):
    """A recording this reader cannot take; names the file, line and problem."""


@dataclass(frozen=True, slots=True)
class Sample:
    time_ns: int
    key: str
    value: Scalar


def read_recording(path: str | Path) -> list[Sample]:
    """Every sample of the file, in time order (stable: per-key order is kept).

    Raises:
        RecordingError: unreadable, unknown format, or a bad line (by number).
    """
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    kind = suffixes[-1] if suffixes else ""
    if kind not in (".csv", ".jsonl", ".ndjson", ".json"):
        raise RecordingError(f"{path}: use a .csv or .jsonl file (optionally .gz), not {kind!r}")
    try:
        with _open(path) as f:
            samples = list(_csv(f, path) if kind == ".csv" else _jsonl(f, path))
    except OSError as e:
        raise RecordingError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise RecordingError(f"{path}: not UTF-8 text: {e}") from e
    samples.sort(key=lambda s: s.time_ns)
    return samples


def group_by_time(samples: Iterable[Sample]) -> Iterator[list[Sample]]:
    """Consecutive samples of the same time, together (a provider writes them as one batch)."""
    group: list[Sample] = []
    for s in samples:
        if group and s.time_ns != group[0].time_ns:
            yield group
            group = []
        group.append(s)
    if group:
        yield group


def _open(path: Path) -> IO[str]:
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def _jsonl(f: IO[str], path: Path) -> Iterator[Sample]:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_float=Decimal)
        except json.JSONDecodeError as e:
            raise RecordingError(f"{path}:{n}: not JSON: {e.msg}") from e
        if not isinstance(obj, dict):
            raise RecordingError(f"{path}:{n}: a line must be a JSON object")
        yield _sample(obj, f"{path}:{n}", from_text=False)


def _csv(f: IO[str], path: Path) -> Iterator[Sample]:
    reader = csv.DictReader(f)
    columns = set(reader.fieldnames or ())
    if "key" not in columns or "value" not in columns or not columns & {"time", "time_ns"}:
        raise RecordingError(
            f"{path}:1: the header must name key, value and time (seconds) or time_ns, "
            f"not {sorted(columns)}"
        )
    rows = list(enumerate(reader, 2))
    kinds: dict[str, set[str]] = {}
    for _, row in rows:
        if not row.get("type") and isinstance(row.get("value"), str):
            kinds.setdefault(row.get("key") or "", set()).add(_kind_of(row["value"]))
    per_key = {key: _common_kind(k) for key, k in kinds.items()}
    for n, row in rows:
        if not row.get("type") and row.get("key") in per_key:
            row = {**row, "type": per_key[row["key"]]}
        yield _sample(row, f"{path}:{n}", from_text=True)


def _kind_of(text: str) -> str:
    if text in ("true", "false"):
        return "bool"
    if _INT.match(text):
        return "int"
    if _FLOAT.match(text):
        return "float"
    return "string"


def _common_kind(kinds: set[str]) -> str:
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds == {"int", "float"}:
        return "float"
    return "string"


def _sample(obj: dict[str, Any], where: str, *, from_text: bool) -> Sample:
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise RecordingError(f"{where}: 'key' must be a non-empty string")
    if obj.get("time_ns") not in (None, ""):
        time_ns = _number(obj["time_ns"], where, "time_ns", integer=True)
    elif obj.get("time") not in (None, ""):
        time_ns = round(_decimal(obj["time"], where, "time") * 1_000_000_000)
    else:
        raise RecordingError(f"{where}: needs 'time' (seconds) or 'time_ns'")
    if "value" not in obj or obj["value"] is None:
        raise RecordingError(f"{where}: 'value' is missing")
    kind = obj.get("type") or None
    if kind is not None and kind not in _TYPES:
        raise RecordingError(f"{where}: 'type' {kind!r} is not one of {', '.join(_TYPES)}")
    return Sample(int(time_ns), key, _value(obj["value"], kind, where, from_text=from_text))


def _decimal(raw: Any, where: str, name: str) -> Decimal:
    if isinstance(raw, bool) or not isinstance(raw, str | int | Decimal):
        raise RecordingError(f"{where}: {name!r} must be a number, not {raw!r}")
    text = str(raw)
    if not _FLOAT.match(text):
        raise RecordingError(f"{where}: {name!r} must be a number, not {raw!r}")
    return Decimal(text)


def _number(raw: Any, where: str, name: str, *, integer: bool = False) -> int | float:
    try:
        x = int(raw) if integer else float(raw)
    except (TypeError, ValueError):
        raise RecordingError(f"{where}: {name!r} must be a number, not {raw!r}") from None
    if isinstance(x, float) and not math.isfinite(x):
        raise RecordingError(f"{where}: {name!r} must be finite")
    if isinstance(raw, bool):
        raise RecordingError(f"{where}: {name!r} must be a number, not {raw!r}")
    return x


def _value(raw: Any, kind: str | None, where: str, *, from_text: bool) -> Scalar:
    if isinstance(raw, dict | list):
        raise RecordingError(f"{where}: 'value' must be a boolean, number or string")
    if isinstance(raw, Decimal):
        raw = float(raw)  # the correctly rounded double of the JSON text
    try:
        if kind == "string":
            return str(raw)
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("true", "false"):
                return str(raw).lower() == "true"
            raise ValueError(raw)
        if kind == "int":
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError(raw)
            return int(raw)
        if kind == "float":
            if isinstance(raw, str) and not _FLOAT.match(raw):
                raise ValueError(raw)
            return float(raw)
    except (TypeError, ValueError):
        raise RecordingError(f"{where}: value {raw!r} is not a {kind}") from None
    if not from_text:
        assert isinstance(raw, bool | int | float | str)
        return raw
    text = str(raw)
    if text in ("true", "false"):
        return text == "true"
    if _INT.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text
