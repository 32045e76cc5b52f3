"""Value models of the simulated car: a drive cycle and what follows from it.

Pure and deterministic: :class:`Car` is a state stepped by the caller's clock
(a speed profile that loops every two minutes, and the distance, heading,
position, battery and pedals that follow from it), and each signal has a
model that turns the car, a random generator and the elapsed time into its
next value. Models come from a signal's ``sim`` attribute (see the catalog):

``follow``    a car quantity (``source``), ``* scale + offset``, plus ``noise``
``drift``     a bounded random walk from ``start``, at most ``step`` per second
``steps``     moves by ``step`` per tick towards a random target, holds ``hold`` s
``toggle``    a boolean that flips with probability ``p`` per second
``choice``    one of ``allowed``, changing with probability ``p`` per second
``constant``  ``value`` (or the VSS ``default``)

Every value is then quantized to ``resolution`` and clamped to the signal's
``min``/``max`` and its datatype's range, so a slow drift often repeats the
same value: it is published anyway, as a heartbeat.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from vehicle_middleware.contract.values import Scalar
from vehicle_middleware.providers.catalog import DATATYPES, Signal

__all__ = [
    "DRIVE_CYCLE",
    "Car",
    "Model",
    "UnsupportedSignalError",
    "coerce",
    "model_for",
]

DRIVE_CYCLE: Final = (
    (0.0, 0.0),
    (8.0, 0.0),
    (20.0, 50.0),
    (40.0, 50.0),
    (55.0, 100.0),
    (80.0, 100.0),
    (88.0, 30.0),
    (104.0, 30.0),
    (114.0, 0.0),
    (120.0, 0.0),
)
"""(seconds, km/h) waypoints of the speed profile; it loops."""
_PERIOD: Final = DRIVE_CYCLE[-1][0]
_INT_RANGES: Final = {
    f"{s}int{b}": ((0, 2**b - 1) if s else (-(2 ** (b - 1)), 2 ** (b - 1) - 1))
    for s in ("", "u")
    for b in (8, 16, 32, 64)
}
_INT_RANGES["uint64"] = (0, 2**63 - 1)  # a v1 value is an int64
_MASS_KG: Final = 2000.0
_BATTERY_J: Final = 82.0 * 3.6e6
_START: Final = (57.7089, 11.9746)  # Gothenburg


class UnsupportedSignalError(ValueError):
    """A signal the simulation cannot drive (an array or struct datatype, a bad ``sim``)."""


def cycle_speed(t: float) -> float:
    """The drive cycle's speed (km/h) at ``t`` seconds, linear between waypoints."""
    t %= _PERIOD
    for (t0, v0), (t1, v1) in itertools.pairwise(DRIVE_CYCLE):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
    return 0.0


@dataclass(slots=True)
class Car:
    """The simulated car's state; :meth:`advance` moves it to time ``t``."""

    t: float = 0.0
    speed: float = 0.0  # km/h
    accel: float = 0.0  # m/s^2
    distance: float = 0.0  # km
    heading: float = 90.0  # degrees
    yaw_rate: float = 0.0  # degrees/s
    latitude: float = _START[0]
    longitude: float = _START[1]
    soc: float = 80.0  # percent
    power_w: float = 0.0
    cruise_speed: float = 0.0
    stopped_for: float = 0.0

    def advance(self, t: float) -> None:
        """Integrate up to ``t`` in steps of at most 0.1 s (no-op if ``t`` is not later)."""
        while self.t < t:
            dt = min(0.1, t - self.t)
            self._step(self.t + dt, dt)

    def _step(self, t: float, dt: float) -> None:
        v0 = self.speed
        self.speed = cycle_speed(t)
        self.accel = (self.speed - v0) / 3.6 / dt
        v = self.speed / 3.6
        self.distance += v * dt / 1000.0
        moving = min(1.0, self.speed / 30.0)
        self.yaw_rate = 4.0 * math.sin(2 * math.pi * t / 45.0) * moving
        self.heading = (self.heading + self.yaw_rate * dt) % 360.0
        h = math.radians(self.heading)
        self.latitude += v * math.cos(h) * dt / 111_320.0
        self.longitude += v * math.sin(h) * dt / (111_320.0 * math.cos(math.radians(self.latitude)))
        drive = _MASS_KG * self.accel * v + 0.5 * 1.2 * 0.6 * v**3 + 0.01 * _MASS_KG * 9.81 * v
        self.power_w = drive if drive >= 0 else 0.6 * drive  # regenerating at 60 %
        self.soc = max(0.0, self.soc - self.power_w * dt / _BATTERY_J * 100.0)
        self.stopped_for = self.stopped_for + dt if self.speed < 0.1 else 0.0
        if abs(self.accel) < 0.05 and self.speed > 40:
            self.cruise_speed = round(self.speed)
        self.t = t

    def quantity(self, name: str) -> float | bool | str:
        """A named quantity models can follow (``source``)."""
        getter = _QUANTITIES.get(name)
        if getter is None:
            raise UnsupportedSignalError(
                f"unknown source {name!r}; known: {', '.join(sorted(_QUANTITIES))}"
            )
        return getter(self)


def _voltage(c: Car) -> float:
    return 330.0 + 0.8 * c.soc - 0.02 * c.power_w / 400.0


_QUANTITIES: Final[dict[str, Callable[[Car], float | bool | str]]] = {
    "zero": lambda c: 0.0,
    "speed": lambda c: c.speed,
    "moving": lambda c: c.speed > 0.5,
    "distance": lambda c: c.distance,
    "accel": lambda c: c.accel,
    "lateral": lambda c: c.speed / 3.6 * math.radians(c.yaw_rate),
    "yaw_rate": lambda c: c.yaw_rate,
    "heading": lambda c: c.heading,
    "latitude": lambda c: c.latitude,
    "longitude": lambda c: c.longitude,
    "steering": lambda c: 15.0 * c.yaw_rate,
    "throttle": lambda c: (
        min(100.0, max(0.0, 30.0 * c.accel + 0.3 * c.speed)) if c.accel >= 0 else 0.0
    ),
    "brake": lambda c: min(100.0, -40.0 * c.accel) if c.accel < -0.1 else 0.0,
    "hard_braking": lambda c: c.accel < -2.0,
    "brake_light": lambda c: "ACTIVE" if c.accel < -0.1 else "INACTIVE",
    "parked": lambda c: c.stopped_for > 1.0,
    "door_open": lambda c: 2.0 < c.stopped_for < 6.0,
    "reversing": lambda c: False,
    "gear": lambda c: 127 if c.stopped_for > 1.0 else 1,
    "cruising": lambda c: abs(c.accel) < 0.05 and c.speed > 40,
    "cruise_speed": lambda c: c.cruise_speed,
    "power_kw": lambda c: c.power_w / 1000.0,
    "power_w": lambda c: c.power_w,
    "torque": lambda c: c.power_w / max(50.0, c.speed * 95.0 * 2 * math.pi / 60.0),
    "soc": lambda c: c.soc,
    "range_m": lambda c: c.soc / 100.0 * 82.0 / 0.18 * 1000.0,
    "voltage": _voltage,
    "current": lambda c: c.power_w / _voltage(c),
    "module_voltage": lambda c: _voltage(c) / 16.0,
}


class Model(Protocol):
    """Gives a signal's next value."""

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        """The value at ``car.t``, ``dt`` seconds after the previous call."""
        ...


@dataclass(slots=True)
class _Follow:
    source: str
    scale: float = 1.0
    offset: float = 0.0
    noise: float = 0.0

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        q = car.quantity(self.source)
        if isinstance(q, bool | str):
            return q
        return q * self.scale + self.offset + (rng.gauss(0.0, self.noise) if self.noise else 0.0)


@dataclass(slots=True)
class _Drift:
    x: float
    step: float
    lo: float
    hi: float

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        self.x = min(self.hi, max(self.lo, self.x + rng.uniform(-self.step, self.step) * dt))
        return self.x


@dataclass(slots=True)
class _Steps:
    x: float
    step: float
    hold: float
    lo: float
    hi: float
    target: float = field(init=False)
    hold_until: float = 0.0

    def __post_init__(self) -> None:
        self.target = self.x

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        if self.x == self.target:
            if car.t >= self.hold_until:
                n = int((self.hi - self.lo) // self.step)
                self.target = self.lo + self.step * rng.randint(0, max(0, n))
                self.hold_until = car.t + self.hold * rng.uniform(0.5, 1.5)
        elif abs(self.target - self.x) <= self.step:
            self.x = self.target
        else:
            self.x += math.copysign(self.step, self.target - self.x)
        return self.x


@dataclass(slots=True)
class _Toggle:
    state: bool
    p: float

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        if rng.random() < 1.0 - (1.0 - self.p) ** dt:
            self.state = not self.state
        return self.state


@dataclass(slots=True)
class _Choice:
    options: tuple[Any, ...]
    p: float
    current: Any

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        if rng.random() < 1.0 - (1.0 - self.p) ** dt:
            self.current = rng.choice(self.options)
        return self.current


@dataclass(slots=True)
class _Constant:
    value: Any

    def next(self, car: Car, dt: float, rng: random.Random) -> Any:
        return self.value


def coerce(signal: Signal, value: Any, resolution: float | None = None) -> Scalar:
    """``value`` as the signal's datatype: quantized, clamped to min/max and the type's range."""
    dt = signal.datatype
    if dt == "boolean":
        return bool(value)
    if dt == "string":
        return str(value)
    if dt in _INT_RANGES and type(value) is int and resolution in (None, 1):
        lo, hi = _INT_RANGES[dt]
        bounded = max(lo, min(hi, value))
        if signal.min is not None:
            bounded = max(bounded, math.ceil(signal.min))
        if signal.max is not None:
            bounded = min(bounded, math.floor(signal.max))
        return bounded
    x = float(value)
    if resolution:
        x = float(round(round(x / resolution) * resolution, _decimals(resolution)))
    if signal.min is not None:
        x = max(x, float(signal.min))
    if signal.max is not None:
        x = min(x, float(signal.max))
    if dt in _INT_RANGES:
        lo, hi = _INT_RANGES[dt]
        return min(hi, max(lo, round(x)))
    return x


def _decimals(resolution: float) -> int:
    text = f"{resolution:.10f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def model_for(signal: Signal) -> tuple[Model, float | None]:
    """The model of ``signal`` and its resolution, from its ``sim`` attribute or its type.

    Every value is checked here, before anything runs, so a bad catalog fails
    at start naming the signal, the field and what it must be.

    Raises:
        UnsupportedSignalError: a datatype without a v1 encoding, or a ``sim``
            the simulation does not know or cannot use.
    """
    if signal.datatype not in DATATYPES:
        raise UnsupportedSignalError(f"{signal.name}: datatype {signal.datatype!r} is not a scalar")
    sim: Mapping[str, Any] = signal.sim
    kind = sim.get("model") or _default_model(signal)
    lo = signal.min if signal.min is not None else -1e9
    hi = signal.max if signal.max is not None else 1e9

    def num(
        field: str, default: float, *, above: float | None = None, at_most: float | None = None
    ) -> float:
        raw = sim.get(field, default)
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise UnsupportedSignalError(
                f"{signal.name}: sim.{field} must be a number, not {raw!r}"
            )
        if above is not None and not raw > above:
            raise UnsupportedSignalError(
                f"{signal.name}: sim.{field} must be above {above:g}, not {raw}"
            )
        if at_most is not None and raw > at_most:
            raise UnsupportedSignalError(
                f"{signal.name}: sim.{field} must be at most {at_most:g}, not {raw}"
            )
        return float(raw)

    default_resolution = 1.0 if signal.datatype in _INT_RANGES else None
    resolution = num("resolution", 1.0, above=0) if "resolution" in sim else default_resolution
    model: Model
    if kind == "follow":
        source = sim.get("source")
        if source not in _QUANTITIES:
            known = ", ".join(sorted(_QUANTITIES))
            raise UnsupportedSignalError(
                f"{signal.name}: sim.source {source!r} is not one of {known}"
            )
        model = _Follow(str(source), num("scale", 1.0), num("offset", 0.0), num("noise", 0.0))
    elif kind == "drift":
        default = signal.default if isinstance(signal.default, int | float) else _mid(lo, hi)
        span = hi - lo if hi - lo < 1e9 else 100.0
        model = _Drift(num("start", default), num("step", span / 200.0, above=0), lo, hi)
    elif kind == "steps":
        model = _Steps(
            num("start", lo if lo > -1e9 else 0.0),
            num("step", 1.0, above=0),
            num("hold", 10.0),
            lo,
            hi,
        )
    elif kind == "toggle":
        model = _Toggle(bool(sim.get("start", False)), num("p", 0.01, at_most=1.0))
    elif kind == "choice":
        options = tuple(sim.get("options", signal.allowed))
        if not options:
            raise UnsupportedSignalError(f"{signal.name}: sim.model choice needs 'allowed' values")
        model = _Choice(options, num("p", 0.01, at_most=1.0), sim.get("start", options[0]))
    elif kind == "constant":
        value = sim.get("value", signal.default if signal.default is not None else _zero(signal))
        try:
            coerce(signal, value)
        except (TypeError, ValueError):
            raise UnsupportedSignalError(
                f"{signal.name}: sim.value {value!r} is not a {signal.datatype}"
            ) from None
        model = _Constant(value)
    else:
        raise UnsupportedSignalError(f"{signal.name}: unknown sim.model {kind!r}")
    return model, resolution


def _default_model(signal: Signal) -> str:
    if signal.type == "attribute":
        return "constant"
    if signal.datatype == "boolean":
        return "toggle"
    if signal.datatype == "string":
        return "choice" if signal.allowed else "constant"
    return "drift"


def _mid(lo: float, hi: float) -> float:
    return (lo + hi) / 2.0 if hi - lo < 1e9 else 0.0


def _zero(signal: Signal) -> Scalar:
    if signal.datatype == "boolean":
        return False
    if signal.datatype == "string":
        return signal.allowed[0] if signal.allowed else ""
    return signal.min if signal.min is not None else 0
