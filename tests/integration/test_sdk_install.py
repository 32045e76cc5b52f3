"""The SDK installs alone: an in-car app gets the contract and grpcio, nothing of the server.

The wheels of ``proto`` and ``sdk`` are built from copies
of their source trees (once per module) and installed, not editable, with
pip into a fresh virtualenv of this interpreter; their dependencies come from
the index (pip's cache makes a second run quick). The test then says what
that virtualenv holds (exactly the two and what they declare, transitively;
none of the server's dependencies; no ``vehicle_middleware.server``, ``vehicle_middleware.ess``,
``vehicle_middleware.vstore``) and runs a provider and an app from it against a real
middleware process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.integration.test_process import start, stop

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = frozenset(
    {
        "bitarray",
        "sortedcontainers",
        "pyjwt",
        "cryptography",
        "prometheus-client",
        "grpcio-health-checking",
        "grpcio-reflection",
        "pyspark",
        "matplotlib",
        "pyarrow",
        "vehicle-middleware-server",
        "vehicle-middleware-vstore",
        "vehicle-middleware-ess",
        "vehicle-middleware-replica",
        "vehicle-middleware-providers",
        "vehicle-middleware-telemetry-export",
        "vehicle-middleware-tools",
        "vehicle-middleware-samples",
    }
)
"""Distributions of the server and the data centre: never in an app's install."""
PIP: Final = ("-m", "pip", "--disable-pip-version-check", "-q")
"""pip, quiet, as ``python *PIP install ...``."""
VENV_ENV: Final = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
"""The environment of a command of a fresh virtualenv: without PYTHONPATH, which may
name this checkout's folders (whose metadata pip would take as installed)."""
PIP_TIMEOUT = 600.0
"""Seconds a pip command may take: generous, for a cold cache on a slow index."""

_INVENTORY = """
import importlib.metadata, importlib.util, json

def found(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent, vehicle_middleware, is not there at all
        return False

print(json.dumps({
    "dists": {
        d.metadata["Name"]: d.requires or [] for d in importlib.metadata.distributions()
    },
    "modules": {
        m: found(m)
        for m in ("vehicle_middleware.sdk", "vehicle_middleware.contract",
                  "vehicle_middleware.proto", "vehicle_middleware.vss",
                  "vehicle_middleware.server", "vehicle_middleware.ess",
                  "vehicle_middleware.vstore", "vehicle_middleware.replica",
                  "vehicle_middleware.telemetry_export")
    },
}))
"""

_CAR = """
import asyncio, sys
from vehicle_middleware.contract import values
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, Sub

async def main(address: str) -> None:
    async with (
        ProviderClient(address, "installed-provider", reconnect=False) as provider,
        AppClient(address, "installed-app", reconnect=False) as app,
    ):
        await provider.add_keys(["Vehicle.Speed"])
        [result] = await app.subscribe([Sub("Vehicle.Speed")])
        assert result.ok, result
        await provider.publish({"Vehicle.Speed": values.encode(88.25)})
        async for event in app.events():
            if isinstance(event, DataEvent):
                print(f"app received {event.name} = {values.decode(event.data)!r}", flush=True)
                return

asyncio.run(asyncio.wait_for(main(sys.argv[1]), 60))
"""


@dataclass(frozen=True)
class Installed:
    python: Path
    """The fresh virtualenv's interpreter."""
    baseline: frozenset[str]
    """What the fresh virtualenv held before the install (pip)."""
    seconds: dict[str, float]
    """How long each step took."""


def run_checked(
    *argv: str | Path, cwd: Path, timeout: float = PIP_TIMEOUT, env: dict[str, str] | None = None
) -> str:
    """Run ``argv`` (with ``env``, else this process's environment); it must exit 0.
    Returns its stdout."""
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheels(base: Path, dists: tuple[str, ...], *, isolated: bool = True) -> Path:
    """The wheels of ``dists`` (top-level folders), built from copies of their sources
    into ``base/wheels``, without their dependencies. ``isolated=False`` builds with
    this interpreter's setuptools instead of one pip installs for each build."""
    # Copies: a build writes build/ and *.egg-info beside the sources it reads.
    sources = []
    for dist in dists:
        src = base / "src" / dist
        shutil.copytree(
            ROOT / dist,
            src,
            ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"),
        )
        sources.append(src)
    wheels = base / "wheels"
    isolation = () if isolated else ("--no-build-isolation",)
    run_checked(
        sys.executable, *PIP, "wheel", "--no-deps", *isolation, "-w", wheels, *sources, cwd=base
    )
    return wheels


def inventory(python: Path, cwd: Path) -> dict[str, Any]:
    """``{"dists": {name: requires}, "modules": {module: importable}}`` of ``python``."""
    # -I: only the virtualenv's own site-packages (no PYTHONPATH, user site or cwd).
    found: dict[str, Any] = json.loads(
        run_checked(python, "-I", "-c", _INVENTORY, cwd=cwd, timeout=60)
    )
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("sdk-install")
    seconds: dict[str, float] = {}
    t = time.monotonic()
    wheels = build_wheels(base, ("proto", "sdk"))
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [n.split("-")[0] for n in built] == [
        "vehicle_middleware_contract",
        "vehicle_middleware_sdk",
    ], built
    seconds["build wheels"] = time.monotonic() - t
    t = time.monotonic()
    venv = base / "venv"
    run_checked(sys.executable, "-m", "venv", venv, cwd=base, timeout=120)
    python = venv / "bin" / "python"
    baseline = frozenset(canonicalize_name(n) for n in inventory(python, base)["dists"])
    seconds["make venv"] = time.monotonic() - t
    t = time.monotonic()
    run_checked(python, *PIP, "install", *sorted(wheels.glob("*.whl")), cwd=base, env=VENV_ENV)
    seconds["install"] = time.monotonic() - t
    yield Installed(python, baseline, seconds)
    print(
        "\nSDK install: " + ", ".join(f"{step} {s:.1f} s" for step, s in seconds.items()),
        file=sys.stderr,
    )


def _closure(requires: dict[str, list[str]], root: str) -> set[str]:
    """``root`` and what it requires, transitively, with the extras asked for and
    the markers of this interpreter (the virtualenv's own)."""
    wanted: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        wanted.add(name)
        for line in requires[name]:
            req = Requirement(line)
            environments = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return wanted


def test_the_sdk_installs_with_the_contract_and_its_declared_dependencies_only(
    installed: Installed, tmp_path: Path
) -> None:
    found = inventory(installed.python, tmp_path)
    requires: dict[str, list[str]] = {canonicalize_name(n): r for n, r in found["dists"].items()}
    added = set(requires) - installed.baseline
    # What the SDK declares, and what that declares, and nothing else.
    assert added == _closure(requires, "vehicle-middleware-sdk")
    assert {
        "vehicle-middleware-sdk",
        "vehicle-middleware-contract",
        "grpcio",
        "protobuf",
        "orjson",
    } <= added
    assert not added & SERVER_ONLY, added & SERVER_ONLY
    # The third-party ones are grpcio's, protobuf's and orjson's own.
    third_party = added - {"vehicle-middleware-sdk", "vehicle-middleware-contract"}
    pulled = set().union(*(_closure(requires, d) for d in ("grpcio", "protobuf", "orjson")))
    assert third_party == pulled
    assert found["modules"] == {
        "vehicle_middleware.sdk": True,
        "vehicle_middleware.contract": True,
        "vehicle_middleware.proto": True,
        "vehicle_middleware.vss": True,
        "vehicle_middleware.server": False,
        "vehicle_middleware.ess": False,
        "vehicle_middleware.vstore": False,
        "vehicle_middleware.replica": False,
        "vehicle_middleware.telemetry_export": False,
    }


def test_a_provider_and_an_app_from_the_sdk_install_talk_through_a_real_middleware(
    installed: Installed, tmp_path: Path
) -> None:
    script = tmp_path / "car.py"
    script.write_text(_CAR)
    proc, address = start("--listen", "127.0.0.1:0")
    try:
        t = time.monotonic()
        # -I: the script runs with what the virtualenv holds, not this checkout.
        out = run_checked(installed.python, "-I", script, address, cwd=tmp_path, timeout=90)
        installed.seconds["provider and app"] = time.monotonic() - t
    finally:
        code, err = stop(proc)
    assert out == "app received Vehicle.Speed = 88.25\n"
    assert code == 0, err
