"""Which cores a test run imports: the pure ``.py`` files or the mypyc-compiled ones.

Built with ``VMW_MYPYC=1``, the distributions vehicle-middleware-vstore, -ess and
-server compile the modules their ``setup.py`` lists (``COMPILED``): those of
``vehicle_middleware.vstore`` and ``vehicle_middleware.ess``, and the streams'
encoders; built without, they are pure Python (docs/compiled-build.md). Both are
tested:

* ``make unit`` runs every test in ``.venv``, where vehicle-middleware-server is installed
  editable and pure: every core module must be its ``.py`` file there, so that
  an extension built in place cannot silently stand in for the code under test;
* ``make unit-compiled`` runs the cores' tests in ``.venv-compiled`` with
  ``VMW_EXPECT_COMPILED=1``: each listed module must then be a compiled
  extension, and every core module the installed copy, not this source tree.

And the build's choice itself: pure unless asked, loud when asked and unable.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("vstore", "ess", "middleware")
"""The distributions with a compiled build: each folder's setup.py names its modules."""
EXPECT_COMPILED = os.environ.get("VMW_EXPECT_COMPILED") == "1"


def _compiled_paths(part: str) -> list[str]:
    """``COMPILED`` of a part's setup.py, read without running it."""
    setup = ROOT / part / "setup.py"
    for node in ast.parse(setup.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "COMPILED" for t in node.targets
        ):
            paths = ast.literal_eval(node.value)
            assert isinstance(paths, list)
            return [str(p) for p in paths]
    raise AssertionError(f"{part}/setup.py has no COMPILED list")


def _module(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


COMPILED = {_module(p) for part in PARTS for p in _compiled_paths(part)}
CORES = sorted(
    _module(p.relative_to(ROOT / package).as_posix())
    for package in ("vstore", "ess")
    for p in (ROOT / package / "vehicle_middleware" / package).glob("*.py")
)
ENCODERS = [
    "vehicle_middleware.server.wire",
    "vehicle_middleware.server.rpc.batches",
    "vehicle_middleware.server.kuksa.response_cuts",
    "vehicle_middleware.server.kuksa.entries",
    "vehicle_middleware.server.kuksa.ingest",
]
"""Outside the cores, the bytes on the hottest streams compiled too: an app
stream's batches and a KUKSA v2 subscription's responses (its drained events
cut into them, and their bytes), and a KUKSA provider's publishes of floats
read (pure functions of their input, no I/O)."""

REFERENCES = [
    "vehicle_middleware.server.codecs",
    "vehicle_middleware.server.rpc.batches_reference",
    "vehicle_middleware.server.kuksa.entries_reference",
    "vehicle_middleware.server.kuksa.ingest_reference",
]
"""The seam and the reference twins of the fast codecs: Python in both builds (the
readable implementation, and the one ``VMW_REFERENCE_CODECS=1`` runs)."""


def test_setup_compiles_the_hot_modules_of_the_cores() -> None:
    assert set(CORES) | set(ENCODERS) >= COMPILED, (
        "setup.py names a module that is neither a core module nor an encoder"
    )
    hot = {
        "vehicle_middleware.vstore.store",
        "vehicle_middleware.vstore.keys",
        "vehicle_middleware.ess.system",
        "vehicle_middleware.ess.subscriptions",
        "vehicle_middleware.ess.watch",
        "vehicle_middleware.ess.events",
        *ENCODERS,
    }
    assert hot <= COMPILED
    assert not set(REFERENCES) & COMPILED


@pytest.mark.parametrize("name", CORES + ENCODERS + REFERENCES)
def test_the_core_module_is_compiled_only_where_expected(name: str) -> None:
    module = importlib.import_module(name)
    where = Path(module.__file__ or "")
    compiled = where.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    if EXPECT_COMPILED:
        assert compiled == (name in COMPILED), f"{name} loaded from {where}"
        assert not any(
            where.is_relative_to(ROOT / part) for part in ("vstore", "ess", "middleware")
        ), f"{name} loaded from the source tree ({where}), not the compiled install"
    else:
        assert where.suffix == ".py", f"{name} loaded from {where}, not its .py file"


def _run_setup(
    monkeypatch: pytest.MonkeyPatch, part: str, argv: list[str] | None = None
) -> dict[str, Any]:
    """Run setup.py as a build backend would, with a stand-in for setuptools;
    returns what it passed to ``setup()``."""
    passed: dict[str, Any] = {}
    fake = types.ModuleType("setuptools")
    fake.setup = passed.update  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "setuptools", fake)
    setup = ROOT / part / "setup.py"
    monkeypatch.setattr(sys, "argv", [str(setup), *(argv or ["bdist_wheel"])])
    monkeypatch.chdir(setup.parent)
    runpy.run_path(str(setup), run_name="__main__")
    return passed


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("value", [None, "0", ""])
def test_the_default_build_is_pure_python(
    monkeypatch: pytest.MonkeyPatch, value: str | None, part: str
) -> None:
    # No extension: a machine without a C compiler (or mypy) builds and installs it.
    if value is None:
        monkeypatch.delenv("VMW_MYPYC", raising=False)
    else:
        monkeypatch.setenv("VMW_MYPYC", value)
    monkeypatch.setitem(sys.modules, "mypyc.build", None)  # not even importable
    assert _run_setup(monkeypatch, part) == {"ext_modules": []}


@pytest.mark.parametrize("part", PARTS)
def test_an_unknown_setting_is_refused(monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    monkeypatch.setenv("VMW_MYPYC", "yes")
    with pytest.raises(SystemExit, match="VMW_MYPYC='yes'"):
        _run_setup(monkeypatch, part)


@pytest.mark.parametrize("part", PARTS)
def test_asking_for_the_compiled_cores_without_mypyc_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, part: str
) -> None:
    monkeypatch.setenv("VMW_MYPYC", "1")
    monkeypatch.setitem(sys.modules, "mypyc.build", None)  # import raises ImportError
    with pytest.raises(SystemExit, match=r"mypyc is not importable.*--no-build-isolation"):
        _run_setup(monkeypatch, part)


@pytest.mark.parametrize("part", PARTS)
def test_an_editable_install_is_never_compiled(monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    monkeypatch.setenv("VMW_MYPYC", "1")
    with pytest.raises(SystemExit, match="editable install is pure"):
        _run_setup(monkeypatch, part, ["editable_wheel"])
