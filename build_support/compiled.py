"""The compiled build of a distribution's pure modules, shared by their ``setup.py``.

By default (``VMW_MYPYC`` unset or ``0``) a distribution has nothing to compile:
its wheel is pure Python and installs on a machine without a C compiler. With
``VMW_MYPYC=1`` the modules its ``setup.py`` lists are compiled by mypyc into C
extensions placed beside their ``.py`` files (Python imports the extension
first); package ``__init__`` modules, which only re-export, stay Python.

The compiled build needs mypy (which ships mypyc), setuptools and a C compiler
in the build environment, and the distribution's dependencies installed there
for their types: build without isolation from a virtualenv that has them, from
the distribution's folder, e.g.

    VMW_MYPYC=1 pip install --no-build-isolation --no-deps ./ess

(docs/compiled-build.md). An operator who asked for the compiled build gets it
or a failed build, never a silent pure-Python install.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn


def ext_modules(dist: str, group: str, modules: list[str], here: str) -> list[Any]:
    """The C extensions of ``modules`` (paths relative to ``here``): none unless
    ``VMW_MYPYC=1``."""

    def fail(message: str) -> NoReturn:
        sys.exit(f"{dist}: VMW_MYPYC=1: {message}")

    wanted = os.environ.get("VMW_MYPYC", "").strip()
    if wanted in ("", "0"):
        return []
    if wanted != "1":
        sys.exit(
            f"{dist}: VMW_MYPYC={wanted!r}: 1 compiles with mypyc, 0 or unset builds pure Python"
        )
    if {"develop", "editable_wheel"} & set(sys.argv):
        # An editable install would put the extensions into the source tree, where
        # they would hide every later edit of the .py files they were built from.
        fail("the compiled build is for a regular install; an editable install is pure")
    if os.path.abspath(os.getcwd()) != here:
        fail(f"build from {here} (mypy names the compiled modules from the working directory)")
    try:
        from mypyc.build import mypycify
    except ImportError as e:
        fail(
            f"mypyc is not importable ({e}): install mypy and setuptools into the build "
            "environment and build without isolation: "
            f"VMW_MYPYC=1 pip install --no-build-isolation {here}"
        )
    return mypycify(["--config-file", "pyproject.toml", *modules], opt_level="3", group_name=group)
