"""The simulated vehicle: which signals are due when, and their values. Pure.

:class:`Simulation` is driven by the caller's clock: :meth:`Simulation.step`
at time ``t`` returns every signal due by then, each once, with its value.
A signal ticks at its own rate (``sim.hz``, scaled by ``rate_scale``) and
phase; a caller that falls behind (a stall) does not get a burst of catch-up
ticks: each late signal is published once and its missed ticks are skipped,
so it goes on at its own phase and the signals stay spread out. Same seed,
same times: same values.

The simulation can follow its signals' demand (:meth:`Simulation.follow`): a
signal nobody watches is not sampled, a watched one is sampled at the interval
its subscribers ask but never faster than its own period. Until told, every
signal is wanted at its own rate.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.contract.values import Scalar
from vehicle_middleware.providers.catalog import Signal
from vehicle_middleware.providers.models import (
    Car,
    Model,
    UnsupportedSignalError,
    coerce,
    model_for,
)

__all__ = ["Simulation", "Stall", "extra_signals"]

log = logging.getLogger(__name__)

_DEFAULT_HZ: Final = {"attribute": 0.1}


@dataclass(frozen=True, slots=True)
class Stall:
    """Signals under ``prefix`` publish nothing from ``start`` for ``seconds``:
    a fault to show staleness detection (e.g. a cabin sensor that went quiet)."""

    prefix: str
    start: float
    seconds: float

    def covers(self, name: str, t: float) -> bool:
        return self.start <= t < self.start + self.seconds and (
            name == self.prefix or name.startswith(self.prefix + ".")
        )


@dataclass(slots=True)
class _Driven:
    signal: Signal
    model: Model
    resolution: float | None
    period: float
    phase: float
    """When its second tick is: signals of one rate do not all tick at once."""
    last_t: float = 0.0
    ticked: bool = False
    interval: float = 0.0
    """The shortest interval its subscribers ask (0: every tick)."""
    watched: bool = True
    scheduled: bool = True
    """It has an entry in the schedule (an unwatched one loses it when it is due)."""

    @property
    def step_period(self) -> float:
        """Its period as followed: its own, or the interval asked if that is longer."""
        return max(self.period, self.interval)


class Simulation:
    """Values of the catalog's signals over time."""

    def __init__(
        self,
        signals: Sequence[Signal],
        *,
        seed: int = 0,
        rate_scale: float = 1.0,
        stalls: Sequence[Stall] = (),
    ) -> None:
        """Args:
        signals: what to drive; a signal the models cannot drive (an array
            datatype, a bad ``sim``) is left out and listed in :attr:`skipped`.
        seed: the random generator's seed.
        rate_scale: every rate times this (e.g. 10 for a load test).

        Raises:
            ValueError: ``rate_scale`` not positive.
        """
        if rate_scale <= 0:
            raise ValueError(f"rate_scale must be above 0, not {rate_scale}")
        self.car = Car()
        self._rng = random.Random(seed)
        self._stalls = tuple(stalls)
        self.skipped: list[str] = []
        """Reasons, one per signal left out."""
        self._driven: list[_Driven] = []
        for s in signals:
            try:
                model, resolution = model_for(s)
            except UnsupportedSignalError as e:
                self.skipped.append(str(e))
                continue
            raw = s.sim.get("hz", _DEFAULT_HZ.get(s.type, 1.0))
            if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:
                self.skipped.append(f"{s.name}: sim.hz must be a number above 0, not {raw!r}")
                continue
            hz = float(raw) * rate_scale
            period = 1.0 / hz
            phase = period * (1.0 - self._rng.random())  # in (0, period]
            self._driven.append(_Driven(s, model, resolution, period, phase))
        # (due time, index): every signal is due at 0 (the car's initial state),
        # then at its phase, then once per period: ECUs do not tick in step.
        self._due: list[tuple[float, int]] = [(0.0, i) for i in range(len(self._driven))]
        heapq.heapify(self._due)
        self._index = {d.signal.name: i for i, d in enumerate(self._driven)}

    @property
    def names(self) -> list[str]:
        """The names of the signals driven."""
        return [d.signal.name for d in self._driven]

    @property
    def rate(self) -> float:
        """Updates per second, all signals together (stalls aside)."""
        return sum(1.0 / d.period for d in self._driven)

    def period(self, name: str) -> float:
        """The signal's own period, in seconds (KeyError: not driven)."""
        return self._driven[self._index[name]].period

    @property
    def demanded_rate(self) -> float:
        """Updates per second as the demand asks (stalls aside): the watched signals,
        each at its followed period; :attr:`rate` until any demand was told."""
        return sum(1.0 / d.step_period for d in self._driven if d.watched)

    def follow(self, name: str, *, watched: bool, min_interval_s: float, t: float) -> None:
        """Follow the demand of signal ``name`` from time ``t``: sampled while
        ``watched``, at most once per ``min_interval_s`` (0: every tick) and never
        faster than its own period. A signal that becomes watched is due at its
        next tick (:func:`_next_tick`), within one period: an app that subscribes
        to every signal gets them spread over their periods, as ECUs tick, not all
        in one batch, which could overflow its queue before it reads.
        Unknown names are ignored. O(log n).
        """
        i = self._index.get(name)
        if i is None:
            return
        d = self._driven[i]
        d.watched = watched
        d.interval = min_interval_s if watched else 0.0
        if watched and not d.scheduled:
            d.scheduled = True
            heapq.heappush(self._due, (_next_tick(d, t), i))

    def next_due(self) -> float:
        """When the next signal is due (``inf`` with none)."""
        return self._due[0][0] if self._due else float("inf")

    def step(self, t: float) -> list[tuple[str, Scalar]]:
        """Every signal due by ``t``, once each, with its value at ``t``.

        O(k log n) for k signals due out of n.
        """
        self.car.advance(t)
        out: list[tuple[str, Scalar]] = []
        while self._due and self._due[0][0] <= t:
            due, i = heapq.heappop(self._due)
            d = self._driven[i]
            if not d.watched:  # nobody wants it: off the schedule until someone does
                d.scheduled = False
                continue
            period = d.step_period
            nxt = due + period if d.ticked else d.phase
            d.ticked = True
            if nxt <= t:
                # Late (the caller was blocked): skip the missed ticks but stay on
                # this signal's own grid. Rescheduling from ``t`` instead would line
                # every late signal up on the same instant, a burst every period.
                nxt += period * (math.floor((t - nxt) / period) + 1)
                while nxt <= t:  # rounding
                    nxt += period
            heapq.heappush(self._due, (nxt, i))
            name = d.signal.name
            if any(s.covers(name, t) for s in self._stalls):
                continue
            value = d.model.next(self.car, t - d.last_t, self._rng)
            d.last_t = t
            out.append((name, coerce(d.signal, value, d.resolution)))
        return out


def _next_tick(d: _Driven, t: float) -> float:
    """The first tick of ``d`` at or after ``t`` on its own grid: its phase, then
    once per period as followed."""
    if t <= d.phase:
        return d.phase
    period = d.step_period
    return d.phase + period * math.ceil((t - d.phase) / period)


def extra_signals(n: int, *, hz: float = 1.0) -> list[Signal]:
    """``n`` more drifting float signals under ``Vehicle.Private.Sim`` (for "more keys")."""
    width = len(str(n))
    return [
        Signal(
            name=f"Vehicle.Private.Sim.Signal{i:0{width}d}",
            type="sensor",
            datatype="float",
            min=0.0,
            max=100.0,
            description="A synthetic signal to make the catalog bigger.",
            sim={"model": "drift", "start": 50.0, "step": 1.0, "resolution": 0.1, "hz": hz},
        )
        for i in range(1, n + 1)
    ]
