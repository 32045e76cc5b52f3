"""The dashboard app: a live terminal view of the keys it watches.

Per key: the latest value (decoded), events per second, and the events the
seq numbers say were missed; above them the totals, the middleware's boot
and reconnections. :class:`DashboardView` is the pure part (fed batches,
rendered to text at a given size); the app redraws it a few times a second.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from middleware.client import ClientEvent, DataEvent, ReconnectedEvent
from middleware.client.values import ValueEncodingError, decode

__all__ = ["DashboardView", "format_value"]


def format_value(data: bytes) -> str:
    """A value for a narrow column: floats with 2 decimals, strings as they are."""
    try:
        v = decode(data)
    except ValueEncodingError:
        return f"<{len(data)} bytes>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


@dataclass(slots=True)
class _Row:
    value: str = "?"
    events: int = 0
    missed: int = 0
    rate: float = 0.0
    counted: int = 0  # events at the last rate update


class DashboardView:
    """What the dashboard shows, updated by batches; rendered by :meth:`render`."""

    def __init__(self, title: str, *, clock: float | None = None) -> None:
        self.title = title
        self.rows: dict[str, _Row] = {}
        self.boot_id = ""
        self.reconnects = 0
        self._rated_at = time.monotonic() if clock is None else clock
        self.rate = 0.0
        self._total = 0
        self._total_counted = 0

    def connected(self, boot_id: str) -> None:
        """The event stream is open, to the middleware process ``boot_id``."""
        self.boot_id = boot_id

    def seed(self, name: str, data: bytes) -> None:
        """A key's current value, known from subscribing (not an event)."""
        self.rows.setdefault(name, _Row()).value = format_value(data)

    def update(self, batch: Sequence[ClientEvent]) -> None:
        for e in batch:
            if isinstance(e, DataEvent):
                row = self.rows.setdefault(e.name or f"#{e.key}", _Row())
                row.events += 1
                row.missed += e.missed
                self._total += 1
                if e.data is not None:
                    row.value = format_value(e.data)
            elif isinstance(e, ReconnectedEvent):
                self.reconnects += 1
                self.boot_id = e.boot_id
                if e.middleware_restarted:
                    for row in self.rows.values():
                        row.value = "?"
                for r in e.results:
                    if r.ok and r.current is not None:
                        self.seed(r.key, r.current)

    def tick(self, now: float) -> None:
        """Update the rates: events since the last tick over the time since."""
        dt = now - self._rated_at
        if dt <= 0:
            return
        for row in self.rows.values():
            row.rate = (row.events - row.counted) / dt
            row.counted = row.events
        self.rate = (self._total - self._total_counted) / dt
        self._total_counted = self._total
        self._rated_at = now

    def render(self, width: int, height: int) -> str:
        """The screen: a header, then one line per key (as many as fit), sorted by name."""
        missed = sum(r.missed for r in self.rows.values())
        boot = f"boot {self.boot_id[:8]}" if self.boot_id else "not connected yet"
        lines = [
            f"{self.title} | {boot} | {self.rate:,.0f} events/s | {missed:,} missed"
            f" | {len(self.rows)} keys | {self.reconnects} reconnects",
            "",
        ]
        name_w = max(20, width - 40)
        lines.append(f"{'KEY':<{name_w}} {'VALUE':>14} {'EV/S':>8} {'MISSED':>8}")
        room = max(0, height - len(lines) - 1)
        names = sorted(self.rows)
        for name in names[:room]:
            r = self.rows[name]
            shown = name if len(name) <= name_w else "…" + name[-(name_w - 1) :]
            lines.append(f"{shown:<{name_w}} {r.value[:14]:>14} {r.rate:>8.1f} {r.missed:>8,}")
        if len(names) > room:
            lines.append(f"... {len(names) - room} more keys (narrow them with --prefix)")
        return "\n".join(line[:width] for line in lines)
