"""The build of vehicle-middleware-ess: pure Python by default, its modules compiled on request.

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

# The modules compiled, relative to this directory. Not the errors module (an exception class with
# two built-in bases), not ``queues.py`` and ``budget.py``: compiled, they cost more
# (docs/compiled-build.md).
COMPILED = [
    "vehicle_middleware/ess/config.py",
    "vehicle_middleware/ess/demand.py",
    "vehicle_middleware/ess/events.py",
    "vehicle_middleware/ess/health.py",
    "vehicle_middleware/ess/lifecycle.py",
    "vehicle_middleware/ess/policy.py",
    "vehicle_middleware/ess/presence.py",
    "vehicle_middleware/ess/scheduler.py",
    "vehicle_middleware/ess/stats.py",
    "vehicle_middleware/ess/subscriptions.py",
    "vehicle_middleware/ess/system.py",
    "vehicle_middleware/ess/watch.py",
]


def ext_modules() -> list[Any]:
    if os.environ.get("VMW_MYPYC", "").strip() in ("", "0"):
        return []
    build = runpy.run_path(os.path.join(HERE, "..", "build_support", "compiled.py"))
    extensions: list[Any] = build["ext_modules"](
        "vehicle-middleware-ess", "vehicle_middleware_ess", COMPILED, HERE
    )
    return extensions


setup(ext_modules=ext_modules())
