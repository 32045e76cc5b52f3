"""The simulated car: schedule, determinism, plausible typed values, faults."""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict

import pytest
from vehicle_middleware.providers.catalog import Signal, default_catalog
from vehicle_middleware.providers.models import cycle_speed
from vehicle_middleware.providers.simulation import Simulation, Stall, extra_signals

_INT_BOUNDS = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "uint16": (0, 65535),
    "int16": (-32768, 32767),
}


def drive(sim: Simulation, seconds: float, step: float = 0.01) -> list[tuple[float, str, object]]:
    out = []
    t = 0.0
    while t <= seconds:
        out += [(t, name, value) for name, value in sim.step(t)]
        t = round(t + step, 6)
    return out


def test_the_same_seed_gives_the_same_drive() -> None:
    a = drive(Simulation(default_catalog(), seed=7), 5)
    b = drive(Simulation(default_catalog(), seed=7), 5)
    c = drive(Simulation(default_catalog(), seed=8), 5)
    assert a == b
    assert a != c


def test_each_signal_ticks_at_its_own_rate() -> None:
    signals = {s.name: s for s in default_catalog()}
    sim = Simulation(list(signals.values()))
    counts = Counter(name for _, name, _ in drive(sim, 20))
    for name, n in counts.items():
        hz = float(signals[name].sim.get("hz", 0.1 if signals[name].type == "attribute" else 1.0))
        # Once at 0, then once per period from a phase within the first period.
        assert hz * 20 - 1 <= n <= hz * 20 + 2, (name, hz, n)
    assert set(counts) == set(signals)
    assert 600 < sim.rate < 800


def test_a_late_caller_gets_each_due_signal_once_not_a_burst() -> None:
    sim = Simulation(default_catalog())
    first = sim.step(0.0)
    late = sim.step(100.0)
    assert len(first) == len(late) == len({n for n, _ in late}) == len(sim.names)
    assert sim.next_due() > 100.0


def test_values_have_their_datatype_and_stay_within_bounds() -> None:
    signals = {s.name: s for s in default_catalog()}
    for _, name, value in drive(Simulation(list(signals.values()), seed=3), 130, step=0.05):
        s = signals[name]
        if s.datatype == "boolean":
            assert isinstance(value, bool)
        elif s.datatype == "string":
            assert isinstance(value, str)
            assert not s.allowed or value in s.allowed
        elif s.datatype in ("float", "double"):
            assert isinstance(value, float)
        else:
            assert isinstance(value, int)
            assert not isinstance(value, bool)
            lo, hi = _INT_BOUNDS.get(s.datatype, (-(2**63), 2**63 - 1))
            assert lo <= value <= hi
        if s.min is not None and not isinstance(value, str):
            assert value >= s.min, (name, value)
        if s.max is not None and not isinstance(value, str):
            assert value <= s.max, (name, value)


def test_speed_follows_the_drive_cycle_windows_step_and_temperatures_repeat_as_heartbeats() -> None:
    seen: dict[str, list[object]] = defaultdict(list)
    for _, name, value in drive(Simulation(default_catalog(), seed=1), 130, step=0.05):
        seen[name].append(value)
    speed = seen["Vehicle.Speed"]
    assert max(speed) == pytest.approx(100.0)
    assert min(speed) == 0.0
    assert cycle_speed(60.0) == 100.0
    assert cycle_speed(120.0 + 60.0) == 100.0
    window = seen["Vehicle.Body.Windows.Row2.Right.Level"]
    assert set(window) <= set(range(0, 101, 10))
    assert len(set(window)) > 1
    temperature = seen["Vehicle.Cabin.HVAC.Zone.Row1.Left.Temperature"]
    repeats = sum(a == b for a, b in itertools.pairwise(temperature))
    assert repeats > len(temperature) // 2  # mostly re-published unchanged


def test_a_stall_silences_only_its_prefix_and_only_for_its_window() -> None:
    stall = Stall("Vehicle.Cabin.HVAC.Zone", start=5.0, seconds=4.0)
    events = drive(Simulation(default_catalog(), stalls=[stall]), 12)
    zone = [t for t, name, _ in events if name.startswith("Vehicle.Cabin.HVAC.Zone.")]
    assert not [t for t in zone if 5.0 <= t < 9.0]
    assert [t for t in zone if t >= 9.0]
    assert [t for t in zone if t < 5.0]
    others = [t for t, name, _ in events if name == "Vehicle.Cabin.HVAC.AmbientAirTemperature"]
    assert [t for t in others if 5.0 <= t < 9.0]


def test_signals_the_models_cannot_drive_are_skipped_with_a_reason() -> None:
    odd = [
        Signal("Vehicle.A", "sensor", "float[]"),
        Signal("Vehicle.B", "sensor", "float", sim={"model": "follow", "source": "warp"}),
        Signal("Vehicle.C", "sensor", "float", sim={"model": "teleport"}),
        Signal("Vehicle.D", "sensor", "uint8"),
    ]
    sim = Simulation(odd)
    assert sim.names == ["Vehicle.D"]
    assert len(sim.skipped) == 3
    assert "float[]" in sim.skipped[0]
    assert "warp" in sim.skipped[1]
    assert "teleport" in sim.skipped[2]


def test_more_keys_on_request() -> None:
    sim = Simulation(default_catalog() + extra_signals(1000))
    assert len(sim.names) == len(default_catalog()) + 1000
    assert "Vehicle.Private.Sim.Signal0001" in sim.names
    with pytest.raises(ValueError, match="rate_scale"):
        Simulation([], rate_scale=0)


@pytest.mark.parametrize(
    ("sim", "message"),
    [
        ({"model": "steps", "step": 0}, r"Vehicle\.X: sim\.step must be above 0, not 0"),
        ({"model": "toggle", "p": 2}, r"sim\.p must be at most 1"),
        ({"model": "constant", "value": "abc"}, r"sim\.value 'abc' is not a float"),
        ({"model": "drift", "start": "warm"}, r"sim\.start must be a number, not 'warm'"),
        (
            {"model": "follow", "source": "speed", "resolution": -1},
            r"sim\.resolution must be above 0",
        ),
        ({"hz": "fast"}, r"sim\.hz must be a number above 0, not 'fast'"),
    ],
)
def test_a_bad_sim_attribute_is_refused_at_start_naming_signal_and_field(
    sim: dict[str, object], message: str
) -> None:
    simulation = Simulation([Signal("Vehicle.X", "sensor", "float", sim=sim)])
    assert simulation.names == []
    assert re.search(message, simulation.skipped[0]), simulation.skipped


def test_large_integers_keep_their_precision() -> None:
    big = Signal("Vehicle.Big", "sensor", "int64", sim={"model": "constant", "value": 2**60 + 1})
    [(_, value)] = Simulation([big]).step(0.0)
    assert value == 2**60 + 1


_ONE_HZ = frozenset(
    s.name for s in default_catalog() if s.sim.get("hz", 0.1 if s.type == "attribute" else 1.0) == 1
)


def _drive_from(sim: Simulation, start: float, seconds: float) -> list[tuple[float, str, object]]:
    out: list[tuple[float, str, object]] = []
    for i in range(round(seconds / 0.01)):
        t = round(start + i * 0.01, 6)
        out += [(t, name, value) for name, value in sim.step(t)]
    return out


def _busiest_slot(sim: Simulation, start: float, seconds: float) -> int:
    """The most signals published in one 10 ms step from ``start`` for ``seconds``."""
    most = 0
    for i in range(round(seconds / 0.01)):
        most = max(most, len(sim.step(round(start + i * 0.01, 6))))
    return most


def test_after_a_stall_each_signal_keeps_its_own_phase_instead_of_lining_up() -> None:
    sim = Simulation(default_catalog())
    sim.step(0.0)  # every signal once: the car's initial state
    phases_before = {
        name: (t % 1.0) for t, name, _ in _drive_from(sim, 1.0, 2.0) if name in _ONE_HZ
    }
    before = _busiest_slot(sim, 3.0, 5.0)
    caught_up = sim.step(10.0)  # the caller was blocked for 2 s
    assert len(caught_up) == len({n for n, _ in caught_up})  # each signal at most once
    after = _busiest_slot(sim, 10.01, 5.0)
    assert after <= before + 2, (before, after)
    # The 1 Hz signals still tick at the phases they had before the stall.
    phases_after = {
        name: (t % 1.0) for t, name, _ in _drive_from(sim, 15.01, 2.0) if name in _ONE_HZ
    }
    assert phases_after.keys() == phases_before.keys()
    for name, phase in phases_before.items():
        assert abs(phases_after[name] - phase) < 0.011 or abs(phases_after[name] - phase) > 0.989


def test_a_signal_that_missed_ticks_skips_them_and_resumes_on_its_own_grid() -> None:
    [signal] = extra_signals(1, hz=10.0)
    sim = Simulation([signal], seed=3)
    sim.step(0.0)
    first = sim.next_due()  # its phase, in (0, 0.1]
    sim.step(first)
    assert sim.next_due() == pytest.approx(first + 0.1)
    assert len(sim.step(first + 0.1 * 20 + 0.05)) == 1  # 20 ticks missed: one update
    assert sim.next_due() == pytest.approx(first + 0.1 * 21)


def test_a_signal_nobody_watches_is_not_sampled_and_is_due_within_its_period_when_watched() -> None:
    sim = Simulation(default_catalog())
    sim.step(0.0)
    for name in sim.names:
        sim.follow(name, watched=name == "Vehicle.Speed", min_interval_s=0.0, t=0.0)
    assert {name for _, name, _ in drive_from(sim, 0.01, 30)} == {"Vehicle.Speed"}
    assert sim.demanded_rate == pytest.approx(1 / sim.period("Vehicle.Speed"))
    temperature = "Vehicle.Cabin.HVAC.AmbientAirTemperature"
    sim.follow(temperature, watched=True, min_interval_s=0, t=30.0)
    first = [
        t
        for t, name, _ in drive_from(sim, 30.0, 31.0 + sim.period(temperature))
        if name == temperature
    ]
    assert first, "not sampled within its period"
    assert first[0] <= 30.0 + sim.period(temperature)


def test_signals_watched_at_once_are_sampled_spread_over_their_periods() -> None:
    """An app subscribing to every signal: the car does not sample them all in one
    batch (which could overflow the app's queue before it reads), but each at its
    next tick, within its period."""
    sim = Simulation(default_catalog())
    sim.step(0.0)
    for name in sim.names:
        sim.follow(name, watched=False, min_interval_s=0.0, t=0.0)
    drive_from(sim, 0.01, 30)  # every signal's next tick passed: none is scheduled
    for name in sim.names:
        sim.follow(name, watched=True, min_interval_s=0.0, t=30.0)
    assert len(sim.step(30.0)) < len(sim.names) / 10
    longest = max(sim.period(name) for name in sim.names)
    seen = {name for _, name, _ in drive_from(sim, 30.0, 30.0 + longest + 0.01)}
    assert seen == set(sim.names)


def test_a_watched_signal_follows_the_interval_asked_but_never_faster_than_its_own() -> None:
    speed = "Vehicle.Speed"
    sim = Simulation([s for s in default_catalog() if s.name == speed])
    own = sim.period(speed)
    sim.follow(speed, watched=True, min_interval_s=own * 4, t=0.0)
    slow = [t for t, _, _ in drive_from(sim, 0.0, 20)]
    assert len(slow) == pytest.approx(20 / (own * 4), abs=2)
    sim.follow(speed, watched=True, min_interval_s=own / 10, t=20.0)  # faster: its own rate
    fast = [t for t, _, _ in drive_from(sim, 20.0, 40)]
    assert len(fast) == pytest.approx(20 / own, abs=2)
    assert sim.demanded_rate == pytest.approx(1 / own)


def test_until_told_every_signal_is_wanted_at_its_own_rate() -> None:
    sim = Simulation(default_catalog())
    assert sim.demanded_rate == pytest.approx(sim.rate)
    sim.follow("Vehicle.Nope", watched=False, min_interval_s=0.0, t=0.0)  # ignored
    assert sim.demanded_rate == pytest.approx(sim.rate)


def drive_from(sim: Simulation, start: float, end: float) -> list[tuple[float, str, object]]:
    out = []
    t = start
    while t < end:
        out += [(t, name, value) for name, value in sim.step(t)]
        t = round(t + 0.01, 6)
    return out
