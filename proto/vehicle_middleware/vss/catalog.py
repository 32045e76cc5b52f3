"""Signal catalogs: VSS JSON files flattened to signals.

The middleware loads them (``serve --vss FILE``: every signal a key from the
start, with its metadata) and the simulated provider publishes them.

The file format is the JSON that COVESA ``vss-tools`` exports (``vspec export
json``): a tree of nodes keyed by name, each with a ``type`` (``branch``,
``sensor``, ``actuator``, ``attribute``), branches with ``children``, leaves
with ``datatype`` and optionally ``unit``, ``min``, ``max``, ``allowed``,
``default`` and ``description``. Both the expanded export and the unexpanded
one (``--no-expand``, branches keep their ``instances``) are read; instances
are expanded here the way vss-tools does (``Row[1,2]`` is ``Row1``, ``Row2``;
a list of plain names is one dimension; a list holding ranges or lists is one
dimension per element; a child with ``"instantiate": false`` is not repeated).

A leaf may carry an extended attribute ``sim`` (vss-tools passes unknown
attributes through with ``-e sim``): how the simulated provider drives it (see
:mod:`vehicle_middleware.providers.models`), and ``expected_period_s`` (``-e
expected_period_s``): the longest the signal may go without a write before
the middleware calls it stale. :func:`expected_period` is that, or for a
sensor or actuator with a rate (``sim.hz``) three of its periods, at least
1 s. The catalog shipped with the project is
``providers/catalogs/vehicle.json`` (``vehicle_middleware.providers.catalog.default_catalog``).
Pure: no gRPC, no middleware.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "ARRAY_DATATYPES",
    "DATATYPES",
    "CatalogError",
    "Signal",
    "expand_instances",
    "expected_period",
    "load_catalog",
    "parse_catalog",
]

LEAF_TYPES: Final = frozenset({"sensor", "actuator", "attribute"})
DATATYPES: Final = frozenset(
    {
        "boolean",
        "string",
        "float",
        "double",
        *(f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)),
    }
)
"""The scalar VSS datatypes."""
ARRAY_DATATYPES: Final = frozenset(f"{t}[]" for t in DATATYPES)
"""The VSS array datatypes (``float[]``, ...). Structs are not supported."""
_RANGE: Final = re.compile(r"^(?P<stem>\w*)\[(?P<lo>\d+),\s*(?P<hi>\d+)\]$")
_NAME: Final = re.compile(r"^[A-Za-z0-9_]+$")
RATE_PERIODS: Final = 3
"""A signal with a rate is stale after this many of its periods without a write..."""
MIN_EXPECTED_S: Final = 1.0
"""...but never sooner than this (a rate's period is no budget for jitter)."""


class CatalogError(ValueError):
    """A catalog file that is not VSS JSON this loader can take; says where and why."""


@dataclass(frozen=True, slots=True)
class Signal:
    """One leaf of the tree: a key a provider adds and writes."""

    name: str
    """Full dotted name, e.g. ``Vehicle.Body.Windows.Row2.Right.Level``."""
    type: str
    """``sensor``, ``actuator`` or ``attribute``."""
    datatype: str
    unit: str | None = None
    min: float | None = None
    max: float | None = None
    allowed: tuple[str | int | float, ...] = ()
    default: Any = None
    description: str = ""
    sim: Mapping[str, Any] = field(default_factory=dict)
    """The ``sim`` extended attribute: how the simulated provider drives it."""
    comment: str = ""
    deprecation: str = ""
    expected_period_s: float | None = None
    """The ``expected_period_s`` extended attribute (seconds), if given."""


def expected_period(signal: Signal) -> float | None:
    """How long ``signal`` may go without a write (seconds), or None.

    Its ``expected_period_s`` if given; else, for a sensor or actuator with a
    rate (``sim.hz``, the simulated car's), :data:`RATE_PERIODS` periods of
    it but at least :data:`MIN_EXPECTED_S`; else None (an attribute, written
    once, is never stale by its rate).
    """
    if signal.expected_period_s is not None:
        return signal.expected_period_s
    hz = signal.sim.get("hz")
    if signal.type == "attribute" or isinstance(hz, bool) or not isinstance(hz, int | float):
        return None
    return max(MIN_EXPECTED_S, RATE_PERIODS / hz) if hz > 0 else None


def load_catalog(path: str | Path) -> list[Signal]:
    """Read a VSS JSON file; signals in tree order.

    Raises:
        CatalogError: unreadable, not JSON, or a node that breaks the format
            (the message names the node's path and the problem).
    """
    path = Path(path)
    try:
        tree = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CatalogError(f"{path}: cannot read the catalog: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}: not JSON: {e}") from e
    try:
        return parse_catalog(tree)
    except CatalogError as e:
        raise CatalogError(f"{path}: {e}") from e


def parse_catalog(tree: Any) -> list[Signal]:
    """Flatten a parsed VSS JSON tree (``{"Vehicle": {...}}``) to its leaves.

    Raises:
        CatalogError: the first node that breaks the format, by path; a name
            given twice.
    """
    if not isinstance(tree, dict) or not tree:
        raise CatalogError("the top level must be an object of root nodes, e.g. {'Vehicle': ...}")
    signals: list[Signal] = []
    for name, node in tree.items():
        signals.extend(_walk(name, node))
    seen: set[str] = set()
    for s in signals:
        if s.name in seen:
            raise CatalogError(f"{s.name}: defined twice")
        seen.add(s.name)
    return signals


def expand_instances(instances: Any, where: str = "instances") -> list[list[str]]:
    """The dimensions of a VSS ``instances`` attribute, each a list of names.

    As vss-tools reads it: a range (``"Row[1,2]"``) or a list is a dimension
    of its own; consecutive plain names form one dimension. So
    ``["Left", "Right"]`` is one dimension, and ``["Row[1,2]", "DriverSide",
    "PassengerSide"]`` and ``["Row[1,2]", ["DriverSide", "PassengerSide"]]``
    are both ``[["Row1", "Row2"], ["DriverSide", "PassengerSide"]]``.

    Raises:
        CatalogError: not a string or a list of strings and lists.
    """
    if isinstance(instances, str):
        return [_names(instances, where)]
    if not isinstance(instances, list) or not instances:
        raise CatalogError(f"{where}: must be a string or a non-empty list")
    dims: list[list[str]] = []
    plain: list[str] = []
    for item in instances:
        if isinstance(item, str) and not _RANGE.match(item):
            plain.append(_checked(item, where))
            continue
        if plain:
            dims.append(plain)
            plain = []
        if isinstance(item, str):
            dims.append(_names(item, where))
        elif isinstance(item, list) and item and all(isinstance(i, str) for i in item):
            dims.append([n for i in item for n in _names(i, where)])
        else:
            raise CatalogError(f"{where}: {item!r} is neither a name, a range nor a list of names")
    if plain:
        dims.append(plain)
    return dims


def _names(spec: str, where: str) -> list[str]:
    m = _RANGE.match(spec)
    if m is None:
        return [_checked(spec, where)]
    lo, hi = int(m["lo"]), int(m["hi"])
    if lo > hi:
        raise CatalogError(f"{where}: range {spec!r} is empty")
    return [_checked(f"{m['stem']}{i}", where) for i in range(lo, hi + 1)]


def _checked(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise CatalogError(f"{where}: {name!r} is not a node name ([A-Za-z0-9_]+)")
    return name


def _walk(path: str, node: Any) -> Iterator[Signal]:
    if not isinstance(node, dict):
        raise CatalogError(f"{path}: a node must be an object")
    kind = node.get("type")
    if kind == "branch":
        yield from _branch(path, node)
    elif kind in LEAF_TYPES:
        yield _leaf(path, node)
    else:
        raise CatalogError(
            f"{path}: type {kind!r} is not one of branch, sensor, actuator, attribute"
        )


def _branch(path: str, node: dict[str, Any]) -> Iterator[Signal]:
    children = node.get("children", {})
    if not isinstance(children, dict):
        raise CatalogError(f"{path}.children: must be an object")
    for name in children:
        _checked(name, f"{path}.children")
    if "instances" not in node:
        for name, child in children.items():
            yield from _walk(f"{path}.{name}", child)
        return
    dims = expand_instances(node["instances"], f"{path}.instances")
    shared = {
        n: c for n, c in children.items() if isinstance(c, dict) and c.get("instantiate") is False
    }
    repeated = {n: c for n, c in children.items() if n not in shared}
    for name, child in shared.items():
        yield from _walk(f"{path}.{name}", child)
    for prefix in _product(dims):
        for name, child in repeated.items():
            yield from _walk(f"{path}.{prefix}.{name}", child)


def _product(dims: list[list[str]]) -> Iterator[str]:
    if not dims:
        yield ""
        return
    head, *rest = dims
    for first in head:
        for tail in _product(rest):
            yield f"{first}.{tail}" if tail else first


def _leaf(path: str, node: dict[str, Any]) -> Signal:
    datatype = node.get("datatype")
    if not isinstance(datatype, str):
        raise CatalogError(f"{path}: a {node['type']} needs a datatype")
    bounds: dict[str, float | None] = {}
    for key in ("min", "max"):
        value = node.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise CatalogError(f"{path}.{key}: must be a number, not {value!r}")
        bounds[key] = value
    lo, hi = bounds["min"], bounds["max"]
    if lo is not None and hi is not None and lo > hi:
        raise CatalogError(f"{path}: min {lo} is above max {hi}")
    allowed = node.get("allowed", [])
    if not isinstance(allowed, list):
        raise CatalogError(f"{path}.allowed: must be a list")
    sim = node.get("sim", {})
    if not isinstance(sim, dict):
        raise CatalogError(f"{path}.sim: must be an object")
    description = node.get("description", "")
    expected = node.get("expected_period_s")
    if expected is not None and (
        isinstance(expected, bool) or not isinstance(expected, int | float) or not expected > 0
    ):
        raise CatalogError(f"{path}.expected_period_s: must be seconds above 0, not {expected!r}")
    return Signal(
        name=path,
        type=node["type"],
        datatype=datatype,
        unit=node.get("unit"),
        min=lo,
        max=hi,
        allowed=tuple(allowed),
        default=node.get("default"),
        description=description if isinstance(description, str) else "",
        sim=sim,
        comment=_text(node.get("comment")),
        deprecation=_text(node.get("deprecation")),
        expected_period_s=float(expected) if expected is not None else None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
