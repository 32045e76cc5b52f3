"""The build of vehicle-middleware-server: pure Python by default, the streams' encoders compiled on
request.

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

# The modules compiled, relative to this directory: the fast codecs
# (``vehicle_middleware/server/codecs.py``), the encoders of the streams that write the
# most messages and the reader of a KUKSA provider's publishes. Pure functions of what
# they encode or read, no I/O. Their reference twins (``*_reference.py``) stay Python:
# they are the readable implementation, run with ``VMW_REFERENCE_CODECS=1``.
COMPILED = [
    "vehicle_middleware/server/wire.py",
    "vehicle_middleware/server/rpc/batches.py",
    "vehicle_middleware/server/kuksa/response_cuts.py",
    "vehicle_middleware/server/kuksa/entries.py",
    "vehicle_middleware/server/kuksa/ingest.py",
]


def ext_modules() -> list[Any]:
    if os.environ.get("VMW_MYPYC", "").strip() in ("", "0"):
        return []
    build = runpy.run_path(os.path.join(HERE, "..", "build_support", "compiled.py"))
    extensions: list[Any] = build["ext_modules"](
        "vehicle-middleware-server", "vehicle_middleware_server", COMPILED, HERE
    )
    return extensions


setup(ext_modules=ext_modules())
