"""The dashboard app: a live terminal view of the keys it watches.

Per key: the latest value (decoded), events per second, the events the seq
numbers say were missed, and its health: ``stale`` while the middleware says
it is not written as expected (``KeyStale`` until ``KeyFresh``), ``no
provider`` while its provider is gone (``ProviderGone`` until
``ProviderBack``); unhealthy keys are listed first. Above them the totals,
the middleware's boot, reconnections, and which keys are stale and which
providers are missing. :class:`DashboardView` is the pure part (fed batches,
rendered to text at a given size); the app redraws it a few times a second.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from vehicle_middleware.contract.values import Failure, ValueEncodingError, decode
from vehicle_middleware.sdk import (
    ClientEvent,
    DataEvent,
    KeyFreshEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderGoneEvent,
    ReconnectedEvent,
    ResyncEvent,
)

__all__ = ["DashboardView", "format_value"]


def format_value(data: bytes) -> str:
    """A value for a narrow column: floats with 2 decimals, strings as they are, a
    failure as ``FAILED(code)``."""
    try:
        v = decode(data)
    except ValueEncodingError:
        return f"<{len(data)} bytes>"
    if isinstance(v, Failure):
        return f"FAILED({v.code.label})"
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
    stale: bool = False
    provider_gone: str | None = None
    """The provider that went away from this key, while none claims it."""

    @property
    def health(self) -> str:
        if self.provider_gone is not None:
            return "no provider"
        return "stale" if self.stale else ""


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

    def _row(self, key: int, name: str | None) -> _Row:
        return self.rows.setdefault(name or f"#{key}", _Row())

    def update(self, batch: Sequence[ClientEvent]) -> None:
        for e in batch:
            if isinstance(e, KeyStaleEvent | KeyFreshEvent):
                self._row(e.key, e.name).stale = isinstance(e, KeyStaleEvent)
            elif isinstance(e, ProviderGoneEvent | ProviderBackEvent):
                gone = e.provider if isinstance(e, ProviderGoneEvent) else None
                for key, name in zip(e.keys, e.names, strict=True):
                    self._row(key, name).provider_gone = gone
            elif isinstance(e, ResyncEvent):
                for row in self.rows.values():
                    row.stale = False  # keys still stale are told again after a resync
            elif isinstance(e, DataEvent):
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
                        row.stale = False
                for r in e.results:
                    if r.ok and r.current is not None:
                        self.seed(r.key, r.current)
                    if r.ok:
                        row = self.rows.setdefault(r.key, _Row())
                        row.provider_gone = "?" if r.no_provider else None

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

    def health(self) -> str:
        """One line: the stale keys and the missing providers (empty when all is well)."""
        stale = sorted(n for n, r in self.rows.items() if r.stale)
        gone: dict[str, int] = {}
        for r in self.rows.values():
            if r.provider_gone is not None:
                gone[r.provider_gone] = gone.get(r.provider_gone, 0) + 1
        parts = []
        if stale:
            shown = ", ".join(stale[:2]) + (f" and {len(stale) - 2} more" if len(stale) > 2 else "")
            parts.append(f"{len(stale)} stale: {shown}")
        if gone:
            parts.append(
                "provider gone: " + ", ".join(f"{p} ({n} keys)" for p, n in sorted(gone.items()))
            )
        return " | ".join(parts)

    def render(self, width: int, height: int) -> str:
        """The screen: a header, the health line, then one line per key (as many as
        fit): unhealthy keys first, then by name."""
        missed = sum(r.missed for r in self.rows.values())
        boot = f"boot {self.boot_id[:8]}" if self.boot_id else "not connected yet"
        lines = [
            f"{self.title} | {boot} | {self.rate:,.0f} events/s | {missed:,} missed"
            f" | {len(self.rows)} keys | {self.reconnects} reconnects",
            self.health() or "health: no stale key, no provider gone",
        ]
        name_w = max(20, width - 52)
        lines.append(f"{'KEY':<{name_w}} {'VALUE':>14} {'EV/S':>8} {'MISSED':>8} {'HEALTH':<11}")
        room = max(0, height - len(lines) - 1)
        names = sorted(self.rows, key=lambda n: (not self.rows[n].health, n))
        for name in names[:room]:
            r = self.rows[name]
            shown = name if len(name) <= name_w else "…" + name[-(name_w - 1) :]
            lines.append(
                f"{shown:<{name_w}} {r.value[:14]:>14} {r.rate:>8.1f} {r.missed:>8,} {r.health}"
            )
        if len(names) > room:
            lines.append(f"... {len(names) - room} more keys (narrow them with --prefix)")
        return "\n".join(line[:width] for line in lines)
