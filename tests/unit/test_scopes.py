"""Scopes and key patterns."""

from __future__ import annotations

import time

import pytest
from vehicle_middleware.server.auth.scopes import ScopeError, compile_glob, parse_scopes


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("Vehicle.Cabin.*", "Vehicle.Cabin.Temp", True),
        ("Vehicle.Cabin.*", "Vehicle.Cabin.Seat.Row1", False),
        ("Vehicle.**", "Vehicle", True),
        ("Vehicle.**", "Vehicle.A.B", True),
        ("Vehicle.**", "VehicleX", False),
        ("**", "A.B", True),
        ("**.Speed", "Speed", True),
        ("**.Speed", "A.B.Speed", True),
        ("**.Speed", "A.Speedo", False),
        ("**.**.X", "X", True),
        ("Vehicle.**.Speed", "Vehicle.Speed", True),
        ("Vehicle.**.Speed", "Vehicle.A.B.Speed", True),
        ("A.*.**", "A", False),
        ("A.*.**", "A.B.C", True),
        ("Vehicle.Speed", "Vehicle.Speed", True),
        ("Vehicle.Speed", "Vehicle.SpeedX", False),
    ],
)
def test_key_patterns_match_by_segment(pattern: str, name: str, expected: bool) -> None:
    assert compile_glob(pattern).matches(name) is expected


def test_pathological_patterns_match_in_linear_time() -> None:
    pattern = compile_glob("A." + ".".join(["**", "x"] * 10) + ".Z")
    name = ".".join(["A"] + ["x"] * 200)
    t0 = time.perf_counter()
    assert not pattern.matches(name)
    assert time.perf_counter() - t0 < 0.5


def test_provide_implies_read_but_not_create() -> None:
    g = parse_scopes("provide:Vehicle.Cabin.** read:Vehicle.Speed")
    assert g.allows("read", "Vehicle.Cabin.Temp")
    assert g.allows("provide", "Vehicle.Cabin.Temp")
    assert not g.allows("create", "Vehicle.Cabin.Temp")
    assert g.allows("read", "Vehicle.Speed")
    assert not g.allows("provide", "Vehicle.Speed")


@pytest.mark.parametrize("bad", ["write:Vehicle", "write", "read:", "read:Vehicle..X", "read:Ve-h"])
def test_malformed_scopes_are_refused(bad: str) -> None:
    with pytest.raises(ScopeError):
        parse_scopes(bad)


def test_the_peer_scope_takes_no_pattern_and_names_no_keys() -> None:
    grants = parse_scopes("peer read:Vehicle.*")
    assert grants.peer
    assert not parse_scopes("read").peer
    assert not grants.allows("provide", "Vehicle.Speed")
    with pytest.raises(ScopeError, match="peer"):
        parse_scopes("peer:Vehicle.**")
