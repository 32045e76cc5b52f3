"""The landing area's layout: where a collector puts a fleet's journal lines for Spark.

Paths are relative to the landing area (a local directory or a Hadoop-filesystem
URI), ``/``-separated:

- ``vehicle=V/boot=B/part-<first offset:010d>-<n:06d>.jsonl``: journal lines
  exactly as the middleware wrote them, of one boot, from the offset in the
  name on; ``n`` numbers the vehicle's data files (:func:`data_path`);
- ``vehicle=V/collector-<collector>-<unix ns>.jsonl``: the collector's own
  records (:class:`CollectorKind`; in no hash chain: no offset, no hash),
  one JSON object a line (:func:`collector_path`);
- ``vehicle=V/_tmp/...``: files being written, renamed into place whole;
- ``_positions/vehicle=V.json``: where the collector stands per vehicle.

Paths with a component starting with ``_`` or ``.`` are bookkeeping, never
data (as Spark's file sources skip them). Written by the collector
(``vehicle_middleware.telemetry_export``); read by the Spark ingest, the demo's
export check and the benches.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "COLLECTOR_FIELDS",
    "COLLECTOR_GLOB",
    "COLLECTOR_KINDS",
    "COLLECTOR_REQUIRED",
    "DATA_GLOB",
    "POSITIONS",
    "TMP",
    "CollectorKind",
    "collector_path",
    "data_path",
    "is_bookkeeping",
    "is_data_path",
    "parse_data_path",
    "position_path",
    "tmp_path",
    "vehicle_dir",
]


class CollectorKind(enum.StrEnum):
    """The records a collector adds to a landing area (their ``kind``)."""

    GAP = "collect_gap"
    """Offsets ``from_offset..to_offset`` (inclusive, wrapping) of ``boot_id`` were
    written but not collected: ``count`` of them, and why (``reason``)."""
    RESTART = "collect_restart"
    """The collector followed the middleware into a new boot: ``old_boot_id`` ->
    ``new_boot_id``."""


COLLECTOR_KINDS: Final = tuple(CollectorKind)
COLLECTOR_FIELDS: Final[Mapping[str, str]] = {
    "kind": "string",
    "vehicle_id": "string",
    "time_ns": "long",
    "collector": "string",
    # collect_gap
    "boot_id": "string",
    "from_offset": "long",
    "to_offset": "long",
    "count": "long",
    "reason": "string",
    # collect_restart
    "old_boot_id": "string",
    "new_boot_id": "string",
}
"""Every field a collector record may carry, with its type (as records.FIELDS)."""
COLLECTOR_REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {
    CollectorKind.GAP: ("vehicle_id", "boot_id", "from_offset", "to_offset", "count"),
    CollectorKind.RESTART: ("vehicle_id", "old_boot_id", "new_boot_id"),
}
"""The fields without which a collector record of each kind says nothing."""

POSITIONS: Final = "_positions"
TMP: Final = "_tmp"
DATA_GLOB: Final = "vehicle=*/boot=*/part-*.jsonl"
"""The journal data files, for ``Path.glob`` from the landing area."""
COLLECTOR_GLOB: Final = "vehicle=*/collector-*.jsonl"
"""The collector records' files, for ``Path.glob`` from the landing area."""
_DATA: Final = re.compile(r"(?:^|/)vehicle=([^/]+)/boot=([^/]+)/part-[^/]*\.jsonl$")


def vehicle_dir(vehicle: str) -> str:
    """A vehicle's directory: ``vehicle=V``."""
    return f"vehicle={vehicle}"


def data_path(vehicle: str, boot: str, first_offset: int, n: int) -> str:
    """The data file of ``vehicle``'s ``boot`` whose first line has ``first_offset``;
    ``n`` numbers the vehicle's data files."""
    return f"{vehicle_dir(vehicle)}/boot={boot}/part-{first_offset:010d}-{n:06d}.jsonl"


def collector_path(vehicle: str, collector: str, time_ns: int) -> str:
    """A file of collector records, written by ``collector`` at ``time_ns``."""
    return f"{vehicle_dir(vehicle)}/collector-{collector}-{time_ns}.jsonl"


def tmp_path(vehicle: str, final: str, collector: str) -> str:
    """Where ``collector`` writes the file that becomes ``final`` (renamed whole)."""
    return f"{vehicle_dir(vehicle)}/{TMP}/{final.rsplit('/', 1)[-1]}.{collector}"


def position_path(vehicle: str) -> str:
    """The collector's position file of ``vehicle``."""
    return f"{POSITIONS}/{vehicle_dir(vehicle)}.json"


def parse_data_path(path: str) -> tuple[str, str] | None:
    """``(vehicle, boot)`` of a data file's path (relative, or ending with the
    layout's part: an absolute path or a URI), or None for any other path."""
    m = _DATA.search(path)
    return None if m is None else (m[1], m[2])


def is_data_path(path: str) -> bool:
    """Whether ``path`` is a journal data file of the layout."""
    return _DATA.search(path) is not None


def is_bookkeeping(parts: tuple[str, ...] | list[str]) -> bool:
    """Whether a path (its components, relative to the landing area) is the
    collector's bookkeeping: a component starting with ``_`` or ``.``."""
    return any(p.startswith(("_", ".")) for p in parts)
