"""Signal and provider health, driven: the ESS's health tick, claims, the journal and the log.

The rules are the ESS's (:mod:`vehicle_middleware.ess.health`: stale and fresh keys;
:mod:`vehicle_middleware.ess.presence`: keys whose provider went away). :class:`HealthWatch`
feeds them:

* expected periods from ``SignalSettings.expect`` (``PREFIX=SECONDS`` rules) and
  the VSS catalogs (:func:`vss.expected_period`), installed once the catalogs
  are loaded;
* a tick every :data:`TICK_S` seconds (:meth:`HealthWatch.run`, a task of
  the server), so a ``KeyFresh`` is up to one tick late and a ``KeyStale``
  comes at most one tick after the period ended; the write path does nothing;
* the write claims (:class:`vehicle_middleware.server.auth.claims.WriteClaims`): a provider whose
  claims end because it went away makes ``ProviderGone``, a claim on keys
  whose provider had gone makes ``ProviderBack``.

Each change is journaled (``key_stale``, ``key_fresh``, ``provider_gone``,
``provider_back``: :mod:`vehicle_middleware.contract.journal.records`) and logged (one line per
tick or claim change, not per key).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.ess import (
    EventSubSystem,
    ExpectedPeriods,
    KeyStale,
    StaleNotice,
    parse_expect_rule,
)
from vehicle_middleware.vss import Signal, expected_period
from vehicle_middleware.vstore import VStore

__all__ = ["TICK_S", "HealthWatch"]

log = logging.getLogger(__name__)

TICK_S: Final = 0.2
"""How often the watched keys with an expected period are looked at."""

Record = Callable[..., None]
"""``Runtime.record``: journal a record of a kind, with fields."""


def _names(names: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


class HealthWatch:
    """Tells apps about stale keys and lost providers; journals and logs it."""

    def __init__(
        self,
        ess: EventSubSystem,
        store: VStore,
        record: Record,
        rules: Sequence[str] = (),
        *,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        """Args:
        ess: the ESS whose subscribers are told.
        store: the V-Store (key names, and the ESS's source of write times).
        record: journals a record (``Runtime.record``).
        rules: ``PREFIX=SECONDS`` expectations (``SignalSettings.expect``, validated there).
        clock: the store's clock (ns since the epoch).
        """
        self._ess = ess
        self._store = store
        self._record = record
        self._rules = [parse_expect_rule(r) for r in rules]
        self._clock = clock
        self.periods = ExpectedPeriods(self._rules)
        self._install()

    def expect_catalog(self, signals: Iterable[Signal]) -> None:
        """Add the catalogs' expected periods (the rules still win). Before serving."""
        catalog: dict[str, float] = {}
        for s in signals:
            period = expected_period(s)
            if period is not None:
                catalog[s.name] = period
        self.periods = ExpectedPeriods(self._rules, catalog)
        self._install()
        if catalog:
            log.info("expected periods: %d catalog signals have one", len(catalog))

    def _install(self) -> None:
        self._ess.expect(self.periods.period_ns if self.periods else None)
        if self._rules:
            log.info(
                "expected periods: %s",
                ", ".join(f"{p}={s:g}s" if s else f"{p}=none" for p, s in self._rules),
            )

    # -- stale keys --------------------------------------------------------------

    def tick(self, now_ns: int | None = None) -> list[StaleNotice]:
        """One look at the followed keys: tell, journal, log. Returns what was told."""
        notices = self._ess.health_tick(self._clock() if now_ns is None else now_ns)
        if not notices:
            return notices
        name_of = self._store.name_of
        stale: list[str] = []
        fresh: list[str] = []
        for n in notices:
            e = n.event
            name = name_of(e.key) or f"#{e.key}"
            if isinstance(e, KeyStale):
                self._record(
                    Kind.KEY_STALE,
                    key=name,
                    key_id=e.key,
                    write_time_ns=e.last_write_ns,
                    period_ns=e.period_ns,
                    apps=list(n.apps),
                    transition=n.transition,
                )
                if n.transition:
                    stale.append(name)
            else:
                self._record(
                    Kind.KEY_FRESH,
                    key=name,
                    key_id=e.key,
                    write_time_ns=e.write_ns,
                    apps=list(n.apps),
                    transition=True,
                )
                fresh.append(name)
        if stale:
            log.warning(
                "%d watched keys went stale (not written as expected): %s",
                len(stale),
                _names(stale),
            )
        if fresh:
            log.info("%d stale keys are written again: %s", len(fresh), _names(fresh))
        return notices

    async def run(self, interval: float = TICK_S) -> None:
        """Tick every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.tick()
            except Exception:  # never let one bad tick end the watch
                log.exception("health tick failed")

    # -- providers ---------------------------------------------------------------

    def claims_changed(self, provider: str, names: Sequence[str], held: bool) -> None:
        """``WriteClaims.on_claims``: ``provider`` claimed ``names`` (``held``), or its
        claims on them ended because it went away."""
        id_of = self._store.id_of
        ids = [i for i in map(id_of, names) if i is not None]
        if not ids:
            return
        if not held:
            told = self._ess.provider_gone(provider, ids)
            self._note(Kind.PROVIDER_GONE, provider, ids, told)
            log.warning(
                "provider %s went away: %d keys have no provider (%d apps subscribed told)",
                provider,
                len(ids),
                len(told),
            )
            return
        back, told = self._ess.provider_back(provider, ids)
        if back:
            self._note(Kind.PROVIDER_BACK, provider, back, told)
            log.info(
                "provider %s claims %d keys that had no provider (%d apps subscribed told)",
                provider,
                len(back),
                len(told),
            )

    def _note(self, kind: Kind, provider: str, ids: Sequence[int], told: dict[str, Any]) -> None:
        name_of = self._store.name_of
        self._record(
            kind,
            app=provider,
            key_ids=list(ids),
            keys=[name_of(i) for i in ids],
            apps=sorted(told),
        )
