"""How the ESS's filters read values as numbers: the v1 value encoding and the VSS catalog.

The ESS core judges threshold and range filters on numbers but does not know
the value encoding (:mod:`vehicle_middleware.contract.values`): the middleware
hands it this :class:`vehicle_middleware.ess.Numbers`. A key is numeric if its
VSS datatype is (an integer or floating-point type, not an array), or, without
a datatype, if its current value is a number.
"""

from __future__ import annotations

from typing import Final

from vehicle_middleware.contract.values import ValueEncodingError, decode_kind, kind_of_datatype
from vehicle_middleware.server.signals import Signals

__all__ = ["ValueNumbers"]

_NUMERIC_KINDS: Final = frozenset({"int", "uint", "float", "float32"})
"""The v1 value kinds that are numbers (a bool is not)."""


class ValueNumbers:
    """:class:`vehicle_middleware.ess.Numbers` of the v1 value encoding, with the
    datatypes of ``signals`` (the VSS catalogs; none without ``--vss``)."""

    __slots__ = ("_signals",)

    def __init__(self, signals: Signals | None) -> None:
        self._signals = signals

    def number(self, data: bytes) -> float | None:
        """The number in ``data``; None for any other kind, an array, or bytes that
        are no v1 value (e.g. a failure state, a string). O(len(data))."""
        try:
            value, kind = decode_kind(data)
        except ValueEncodingError:
            return None
        if kind not in _NUMERIC_KINDS:
            return None
        assert isinstance(value, int | float)
        return float(value)

    def not_numeric(self, name: str, current: bytes | None) -> str | None:
        """Why key ``name`` takes no threshold or range (None: it is numeric)."""
        signal = self._signals.get(name) if self._signals is not None else None
        if signal is not None and signal.datatype:
            if kind_of_datatype(signal.datatype) in _NUMERIC_KINDS:
                return None
            return f"its VSS datatype is {signal.datatype}"
        if current is None:
            return "it has no VSS datatype and has never been written"
        if self.number(current) is None:
            return "it has no VSS datatype and its value is not a number"
        return None
