"""The build of vehicle-middleware-vstore: pure Python by default, its modules compiled on request.

Everything about the distribution is in ``pyproject.toml``; this file only adds
the compiled build (``VMW_MYPYC=1``, build_support/compiled.py and
docs/compiled-build.md), loaded from the repository only when asked for.
"""

from __future__ import annotations

import os
import runpy
from typing import Any

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))

# The modules compiled, relative to this directory. Not the errors module: mypyc cannot compile
# an exception class with two built-in bases (``UnknownKeyError(VStoreError, KeyError)``).
COMPILED = [
    "vehicle_middleware/vstore/keys.py",
    "vehicle_middleware/vstore/store.py",
]


def ext_modules() -> list[Any]:
    if os.environ.get("VMW_MYPYC", "").strip() in ("", "0"):
        return []
    build = runpy.run_path(os.path.join(HERE, "..", "build_support", "compiled.py"))
    extensions: list[Any] = build["ext_modules"](
        "vehicle-middleware-vstore", "vehicle_middleware_vstore", COMPILED, HERE
    )
    return extensions


setup(ext_modules=ext_modules())
