"""Typed keys: the VSS metadata of the middleware's keys, and the rule each write must pass.

``serve --vss FILE`` loads VSS JSON catalogs (:mod:`vehicle_middleware.vss.catalog`); every
signal becomes a key at start (with no value until one is written) and gets a
value check in the V-Store, so every write path (the project's ``Set`` and
``Publish``, KUKSA's ``PublishValue``, ``Set`` and provider streams) refuses a
value of the wrong type, outside ``[min, max]`` or not among the allowed
values, with INVALID_ARGUMENT naming the key, the value and the rule; a
failure (:class:`vehicle_middleware.contract.values.Failure`) fits every
datatype, its detail bounded. A typed
key's values are ``vehicle.value.v1`` bytes (:mod:`vehicle_middleware.contract.values`).
Keys no catalog describes stay opaque bytes, as before.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from vehicle_middleware.contract.values import (
    DOUBLE_TAG,
    FLOAT32_TAG,
    Failure,
    ValueEncodingError,
    decode_kind,
    failure_problem,
    kind_of_datatype,
)
from vehicle_middleware.vss import Signal, check_value, float_bounds, load_catalog
from vehicle_middleware.vstore import ValueCheck, VStore

__all__ = ["Signals", "value_check"]

_FLOAT32: Final = struct.Struct("<f")
_DOUBLE: Final = struct.Struct("<d")
# A float or double signal's number in its own width: the stored tag, then the number.
_OWN_WIDTH: Final = {
    "float": (struct.Struct("<Bf").unpack, FLOAT32_TAG),
    "double": (struct.Struct("<Bd").unpack, DOUBLE_TAG),
}
log = logging.getLogger(__name__)


def value_check(signal: Signal) -> ValueCheck | None:
    """The V-Store check of a signal's writes (None: a datatype with no encoding, unchecked).

    For a ``float`` or ``double`` signal with :func:`vehicle_middleware.vss.float_bounds`, a
    number stored as a float or a double is read where it lies and accepted
    within those bounds; anything else (a NaN, a value outside them, another
    encoding) gets the full rules. The same verdicts (a test holds them to
    it) without the full rules' work: this runs for every write to such a
    key. A number in the signal's own width (the common case) is read with
    its tag by one ``unpack``.
    """
    if kind_of_datatype(signal.datatype) is None:
        return None

    def check(data: bytes) -> str | None:
        try:
            value, _ = decode_kind(data)
        except ValueEncodingError as e:
            return f"{e}; the key is typed ({signal.datatype}): write a vehicle.value.v1 value"
        if isinstance(value, Failure):  # any key may fail, whatever its datatype
            return failure_problem(value)
        return check_value(signal, value)

    bounds = float_bounds(signal)
    if bounds is None:
        return check
    lo, hi = bounds

    def check_any_width(data: bytes) -> str | None:
        size = len(data)
        if size == 5 and data[0] == FLOAT32_TAG:
            value: float = _FLOAT32.unpack_from(data, 1)[0]
        elif size == 9 and data[0] == DOUBLE_TAG:
            value = _DOUBLE.unpack_from(data, 1)[0]
        else:
            return check(data)
        return None if lo <= value <= hi else check(data)

    unpack, own_tag = _OWN_WIDTH[signal.datatype]

    def check_number(data: bytes) -> str | None:
        try:
            tag, value = unpack(data)
        except struct.error:  # not the signal's own width: the other, or no number
            return check_any_width(data)
        return None if tag == own_tag and lo <= value <= hi else check_any_width(data)

    return check_number


class Signals:
    """The signals of the loaded catalogs, by key name. Read-only after start."""

    def __init__(self, signals: Iterable[Signal] = ()) -> None:
        self._by_name: dict[str, Signal] = {}
        for s in signals:
            self._by_name[s.name] = s  # a later catalog's definition wins

    @classmethod
    def load(cls, paths: Sequence[str | Path]) -> Signals:
        """Read the catalogs in order.

        Raises:
            CatalogError: a file that cannot be read or is not VSS JSON (named).
        """
        found: list[Signal] = []
        for path in paths:
            signals = load_catalog(path)
            log.info("catalog %s: %d signals", path, len(signals))
            found.extend(signals)
        return cls(found)

    def get(self, name: str) -> Signal | None:
        """The metadata of key ``name``, or None (an opaque key). O(1)."""
        return self._by_name.get(name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[Signal]:
        return iter(self._by_name.values())

    def install(self, store: VStore) -> None:
        """Add every signal as a key (no value yet) and give it its value check.

        Raises:
            InvalidKeyNameError, KeyCapacityError: a signal's name is not a key
                name, or the keys do not fit (nothing is added).
        """
        unchecked = []
        for signal in self._by_name.values():
            check = value_check(signal)
            store.set_value_check(signal.name, check)
            if check is None:
                unchecked.append(signal.name)
        store.add_keys(self._by_name)
        if unchecked:
            log.info(
                "%d signals have a datatype without an encoding (e.g. %s): not checked",
                len(unchecked),
                unchecked[0],
            )
