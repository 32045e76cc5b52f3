"""What a subscription asks to be sampled: its filter.

A subscription without a filter gets an event for every write its trigger
selects. A :class:`Filter` narrows that, per (app, key):

* ``min_interval_ns``: at most one event per interval; the latest value wins;
* ``threshold``: for numeric values, an event only when the value moved by at
  least this much since the last event;
* ``range``: for numeric values, an event only when the value enters or leaves
  ``[lo, hi]``.

This module holds the filter as a value and its rules of validity; how the
ESS applies it: :mod:`vehicle_middleware.ess.gates`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.ess.errors import InvalidFilterError

__all__ = ["MAX_INTERVAL_NS", "MIN_INTERVAL_NS", "Filter"]

MIN_INTERVAL_NS: Final = 1_000_000
"""The shortest interval a filter may ask: 1 ms."""
MAX_INTERVAL_NS: Final = 3_600_000_000_000
"""The longest: one hour."""


@dataclass(frozen=True, slots=True)
class Filter:
    """A subscription's filter. Every part is optional; an empty filter is no filter.

    Attributes:
        min_interval_ns: at least this long between two events of the key (0: no
            interval).
        threshold: an event only when the numeric value moved by at least this
            much (absolute) since the last event (None: no threshold).
        range: ``(lo, hi)``: an event only when the numeric value enters or
            leaves ``[lo, hi]`` (None: no range).
    """

    min_interval_ns: int = 0
    threshold: float | None = None
    range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        interval = self.min_interval_ns
        if interval and not MIN_INTERVAL_NS <= interval <= MAX_INTERVAL_NS:
            raise InvalidFilterError(
                "filter.min_interval_ms",
                f"{interval / 1e6:g} ms is outside the allowed 1 to "
                f"{MAX_INTERVAL_NS // 1_000_000} ms",
            )
        if self.threshold is not None and not (
            math.isfinite(self.threshold) and self.threshold > 0
        ):
            raise InvalidFilterError(
                "filter.threshold", f"{self.threshold} is not a finite number above 0"
            )
        if self.range is not None:
            lo, hi = self.range
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise InvalidFilterError("filter.range", f"[{lo}, {hi}] is not finite")
            if lo > hi:
                raise InvalidFilterError("filter.range", f"lo {lo} is above hi {hi}")

    @classmethod
    def of_ms(
        cls,
        *,
        min_interval_ms: int | None = None,
        threshold: float | None = None,
        range: tuple[float, float] | None = None,
    ) -> Filter:
        """A filter from the wire's units: ``min_interval_ms`` in ms, where None is
        no interval and an explicit 0 is invalid (an interval of nothing).

        Raises:
            InvalidFilterError: a part outside its rule (the field and the rule).
        """
        if min_interval_ms is not None and not (
            MIN_INTERVAL_NS // 1_000_000 <= min_interval_ms <= MAX_INTERVAL_NS // 1_000_000
        ):
            raise InvalidFilterError(
                "filter.min_interval_ms",
                f"{min_interval_ms} ms is outside the allowed 1 to "
                f"{MAX_INTERVAL_NS // 1_000_000} ms",
            )
        return cls((min_interval_ms or 0) * 1_000_000, threshold, range)

    @property
    def min_interval_ms(self) -> int | None:
        """The interval in ms (None: no interval)."""
        return self.min_interval_ns // 1_000_000 if self.min_interval_ns else None

    @property
    def empty(self) -> bool:
        """Whether the filter asks nothing (the same as no filter)."""
        return not self.min_interval_ns and self.threshold is None and self.range is None

    @property
    def numeric(self) -> bool:
        """Whether the filter judges values as numbers (threshold or range): the
        key must hold numeric values."""
        return self.threshold is not None or self.range is not None
