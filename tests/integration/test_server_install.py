"""The middleware installs and runs alone, as README.md's "Run the middleware" says.

The distributions README.md's server install names (and ``make server-venv``
installs) are built as wheels from copies of their sources and installed, not
editable, with their dependencies from the index, into a fresh virtualenv of
this interpreter, by this interpreter's pip. The test then says what that
virtualenv holds (the server, and nothing of the SDK, the providers, the fleet
side or the development tools), and starts its ``vehicle-middleware serve``
console script, which its own ``vehicle-middleware health`` finds serving.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.integration.test_process import start, stop
from tests.integration.test_sdk_install import (
    PIP,
    VENV_ENV,
    build_wheels,
    inventory,
    run_checked,
)

ROOT = Path(__file__).resolve().parents[2]
NOT_IN_THE_SERVER = frozenset(
    {
        "vehicle-middleware-sdk",
        "vehicle-middleware-providers",
        "vehicle-middleware-telemetry-export",
        "vehicle-middleware-tools",
        "vehicle-middleware-samples",
        "pyspark",
        "matplotlib",
        "pyarrow",
        "pandas",
        "pytest",
        "hypothesis",
        "mypy",
        "ruff",
        "grpcio-tools",
    }
)
"""Distributions of the SDK, the data centre and development: never in the server's install."""


def readme_server_install() -> tuple[str, ...]:
    """The folders (with extras) README.md's server install names: ``proto[grpc]``, ..."""
    readme = (ROOT / "README.md").read_text()
    [line] = [
        line
        for line in readme.splitlines()
        if "pip install" in line and "./middleware" in line and "venv-server" in line
    ]
    words = shlex.split(line.split("pip install", 1)[1])
    return tuple(w.removeprefix("./") for w in words)


def test_make_server_venv_installs_what_the_readme_says() -> None:
    makefile = (ROOT / "Makefile").read_text()
    [dists] = re.findall(r"^SERVER_DISTS\s*:=\s*(.*)$", makefile, re.M)
    assert tuple(dists.split()) == readme_server_install()


@dataclass(frozen=True)
class Installed:
    venv: Path
    baseline: frozenset[str]
    """What the fresh virtualenv held before the install (nothing)."""
    seconds: dict[str, float]
    """How long each step took."""

    def script(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("server-install")
    wanted = readme_server_install()
    seconds: dict[str, float] = {}
    t = time.monotonic()
    # This interpreter's setuptools builds the five: no build environment set up for each.
    wheels = build_wheels(base, tuple(w.partition("[")[0] for w in wanted), isolated=False)
    seconds["build wheels"] = time.monotonic() - t
    t = time.monotonic()
    venv = base / "venv"
    # Without pip of its own (this interpreter's pip installs into it): ensurepip would
    # cost more than the rest of the set-up.
    run_checked(sys.executable, "-m", "venv", "--without-pip", venv, cwd=base, timeout=120)
    python = venv / "bin" / "python"
    baseline = frozenset(canonicalize_name(n) for n in inventory(python, base)["dists"])
    seconds["make venv"] = time.monotonic() - t
    t = time.monotonic()
    # Each wheel with the extras the README asks of its folder (proto[grpc]).
    requirements = []
    for want in wanted:
        folder, bracket, extras = want.partition("[")
        [wheel] = [p for p in wheels.glob("*.whl") if _folder_of(p.name.split("-")[0]) == folder]
        requirements.append(f"{wheel}{bracket}{extras}")
    # --no-compile: the test runs a few modules once; byte-compiling every dependency
    # would be most of the install's time.
    run_checked(
        sys.executable,
        *PIP,
        "--python",
        python,
        "install",
        "--no-compile",
        *requirements,
        cwd=base,
        env=VENV_ENV,
    )
    seconds["install"] = time.monotonic() - t
    yield Installed(venv, baseline, seconds)
    print(
        "\nserver install: " + ", ".join(f"{step} {s:.1f} s" for step, s in seconds.items()),
        file=sys.stderr,
    )


def _folder_of(wheel_name: str) -> str:
    """The top-level folder of a distribution, from its wheel's name."""
    short = wheel_name.removeprefix("vehicle_middleware_")
    return {"contract": "proto", "server": "middleware"}.get(short, short)


def test_the_server_installs_without_the_sdk_the_fleet_side_or_development_tools(
    installed: Installed, tmp_path: Path
) -> None:
    found = inventory(installed.venv / "bin" / "python", tmp_path)
    added = {canonicalize_name(n) for n in found["dists"]} - installed.baseline
    assert {
        "vehicle-middleware-contract",
        "vehicle-middleware-vstore",
        "vehicle-middleware-ess",
        "vehicle-middleware-replica",
        "vehicle-middleware-server",
        "grpcio",
        "grpcio-health-checking",
        "grpcio-reflection",
    } <= added
    assert not added & NOT_IN_THE_SERVER, added & NOT_IN_THE_SERVER
    modules = found["modules"]
    assert modules["vehicle_middleware.server"]
    assert modules["vehicle_middleware.ess"]
    assert not modules["vehicle_middleware.sdk"]
    assert not modules["vehicle_middleware.telemetry_export"]


def test_the_installed_script_serves_and_its_health_check_finds_it_serving(
    installed: Installed, tmp_path: Path
) -> None:
    # The virtualenv's own code only: not this checkout's, which PYTHONPATH may name.
    env = {**VENV_ENV, "PYTHONPATH": ""}
    t = time.monotonic()
    proc, address = start(
        "--listen", "127.0.0.1:0", env=env, command=(installed.script("vehicle-middleware"),)
    )
    try:
        installed.seconds["start"] = time.monotonic() - t
        out = run_checked(
            installed.script("vehicle-middleware"),
            "health",
            "--target",
            address,
            cwd=tmp_path,
            timeout=60,
            env=env,
        )
    finally:
        code, err = stop(proc)
    assert out.startswith(f"{address}: SERVING\n"), out
    assert "  vehicle.ess.v1.EventService\n" in out
    assert code == 0, err
