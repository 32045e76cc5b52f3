"""examples/actuation/media.py (docs/app-developers.md, "Actuation") runs as its
docstring says: against a real middleware serving the shipped catalog, the
provider sets what the app asks, and the catalog and the provider refuse the rest."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from vehicle_middleware.server.server import RunningServer

from tests.integration.test_quickstart import finish

ROOT = Path(__file__).parents[2]
PROGRAM = "examples/actuation/media.py"
CATALOG = ROOT / "providers/vehicle_middleware/providers/catalogs/vehicle.json"
VOLUME = "Vehicle.Cabin.Infotainment.Media.Volume"
SOURCE = "Vehicle.Cabin.Infotainment.Media.Played.Source"
ALLOWED = "['UNKNOWN', 'FM', 'AM', 'DAB', 'STREAMING', 'BLUETOOTH']"

pytestmark = pytest.mark.settings(vss=(str(CATALOG),))


async def test_the_actuation_example_runs_against_the_shipped_catalog(
    server: RunningServer,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        PROGRAM,
        server.address,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    code, out, err = await finish(proc)
    assert code == 0, err
    assert out.splitlines() == [
        f"provider: {VOLUME} to 40",
        f"app sees {VOLUME} = 40",
        f"provider: {VOLUME} to 55",
        f"provider: {SOURCE} to 'BLUETOOTH'",
        f"app sees {VOLUME} = 55",
        f"app sees {SOURCE} = 'BLUETOOTH'",
        f"app refused: INVALID_ARGUMENT: targets[0]: value for '{SOURCE}' refused: "
        f"value 'TAPE' is not one of the allowed values {ALLOWED}",
        f"app refused: INVALID_ARGUMENT: targets[0]: value for '{VOLUME}' refused: "
        "value 101 is above the max 100 percent",
        f"app refused: INVALID_ARGUMENT: value for '{VOLUME}' refused: the provider "
        "refused it: muted by the driver",
    ]
