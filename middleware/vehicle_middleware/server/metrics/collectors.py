"""The extension point of the figures: parts that keep their own register a collector.

A collector is a callable returning :class:`Figure` values; it is called on
the event loop each time the figures are read (a Prometheus scrape, a
``GetStats`` call), so it must be quick and must read, not compute. Its
figures appear in the Prometheus text under their own names and in
``GetStats``' ``extra`` field. Meant for what other parts keep: the journal's
consumers (their lag), peer links (their states)::

    runtime.collectors.register("journal_consumers", lambda: [
        Figure("vmw_journal_consumer_lag_records", "records not yet acknowledged",
               "gauge", (("consumer", c.name),), c.lag)
        for c in consumers
    ])

A collector that raises is skipped for that reading (and logged once until it
works again): a part's bug does not break the figures of the others.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["Collector", "Collectors", "Figure"]

log = logging.getLogger(__name__)

_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True, slots=True)
class Figure:
    """One sample: a Prometheus series' name, labels and value.

    ``kind`` ``counter``: a count that only grows while the process lives (its
    name should end in ``_total``); ``gauge``: a value that goes up and down.
    """

    name: str
    help: str
    kind: Literal["gauge", "counter"]
    labels: tuple[tuple[str, str], ...]
    value: float

    def __post_init__(self) -> None:
        if _NAME.fullmatch(self.name) is None:
            raise ValueError(f"figure name {self.name!r}: use [a-zA-Z_:][a-zA-Z0-9_:]*")
        if self.kind not in ("gauge", "counter"):
            raise ValueError(
                f"figure {self.name}: kind must be gauge or counter, not {self.kind!r}"
            )


Collector = Callable[[], Iterable[Figure]]


class Collectors:
    """Named collectors, called in registration order."""

    def __init__(self) -> None:
        self._collectors: dict[str, Collector] = {}
        self._failing: set[str] = set()

    def register(self, name: str, collector: Collector) -> None:
        """Add (or replace) the collector ``name``."""
        self._collectors[name] = collector

    def unregister(self, name: str) -> None:
        """Remove the collector ``name`` (idempotent)."""
        self._collectors.pop(name, None)
        self._failing.discard(name)

    def names(self) -> list[str]:
        return list(self._collectors)

    def collect(self) -> list[Figure]:
        """Every collector's figures now; a failing collector's are left out."""
        out: list[Figure] = []
        for name, collector in list(self._collectors.items()):
            try:
                figures = list(collector())
            except Exception:
                if name not in self._failing:
                    self._failing.add(name)
                    log.exception("metrics collector %s failed; its figures are left out", name)
                continue
            if name in self._failing:
                self._failing.discard(name)
                log.info("metrics collector %s works again", name)
            out.extend(figures)
        return out
