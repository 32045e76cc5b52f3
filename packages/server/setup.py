"""The build of vmw-server: pure Python by default, the pure cores compiled on request.

Everything about the distribution is in ``pyproject.toml``; this file only adds
the compiled cores. By default (``VMW_MYPYC`` unset or ``0``) there is nothing
to compile: the wheel is pure Python and installs on a machine without a C
compiler. With ``VMW_MYPYC=1`` the modules of ``vmw.vstore`` and ``vmw.ess``
listed in ``COMPILED``, and the fast codecs of the app and KUKSA streams, are
compiled by mypyc into C extensions placed beside their ``.py`` files (Python
imports the extension first); the package ``__init__`` modules, which only
re-export, stay Python.

The compiled build needs mypy (which ships mypyc), setuptools and a C compiler
in the build environment, and the server's dependencies installed there for
their types: build without isolation from a virtualenv that has them, e.g.

    VMW_MYPYC=1 pip install --no-build-isolation ./packages/server

(docs/operators.md, "The compiled cores"). An operator who asked for the
compiled cores gets them or a failed build, never a silent pure-Python install.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from setuptools import setup

# The modules compiled, relative to this directory (mypy names them from it:
# explicit package bases, see [tool.mypy] in pyproject.toml). Not the errors
# modules: mypyc cannot compile an exception class with two built-in bases
# (``UnknownKeyError(VStoreError, KeyError)``), and errors are off the hot path.
# Not ``vmw/ess/queues.py``: mypyc keeps an ``int`` unboxed and must allocate a
# new object for it each time it goes back into a queued tuple, where the
# interpreter shares one, so a push and a drain compiled cost more, not less.
# Not ``vmw/ess/budget.py`` either: the queues read and write its ``free`` for each
# event above a queue's minimum, and a compiled class keeps that number unboxed, a
# new object at each read from Python.
# Beside the cores, the fast codecs (``vmw/server/codecs.py``): the encoders of the
# streams that write the most messages and their varints (an app stream's batches,
# a KUKSA v2 subscription's responses and the cut of its events into them) and the
# reader of a KUKSA provider's publishes of floats. Pure functions of what they
# encode or read, no I/O. Their reference twins (``*_reference.py``) stay Python:
# they are the readable implementation, run with ``VMW_REFERENCE_CODECS=1``.
COMPILED = [
    "vmw/vstore/keys.py",
    "vmw/vstore/store.py",
    "vmw/ess/config.py",
    "vmw/ess/events.py",
    "vmw/ess/health.py",
    "vmw/ess/lifecycle.py",
    "vmw/ess/policy.py",
    "vmw/ess/presence.py",
    "vmw/ess/scheduler.py",
    "vmw/ess/stats.py",
    "vmw/ess/subscriptions.py",
    "vmw/ess/system.py",
    "vmw/ess/watch.py",
    "vmw/server/wire.py",
    "vmw/server/rpc/batches.py",
    "vmw/server/kuksa/cut.py",
    "vmw/server/kuksa/entries.py",
    "vmw/server/kuksa/ingest.py",
]


def _fail(message: str) -> NoReturn:
    sys.exit(f"vmw-server: VMW_MYPYC=1: {message}")


def ext_modules() -> list[Any]:
    """The C extensions to build: none unless ``VMW_MYPYC=1``."""
    wanted = os.environ.get("VMW_MYPYC", "").strip()
    if wanted in ("", "0"):
        return []
    if wanted != "1":
        sys.exit(
            f"vmw-server: VMW_MYPYC={wanted!r}: 1 compiles the cores with mypyc, "
            "0 or unset builds pure Python"
        )
    if {"develop", "editable_wheel"} & set(sys.argv):
        # An editable install would put the extensions into the source tree, where
        # they would hide every later edit of the .py files they were built from.
        _fail("the compiled cores are for a regular install; an editable install is pure")
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.abspath(os.getcwd()) != here:
        _fail(f"build from {here} (mypy names the compiled modules from the working directory)")
    try:
        from mypyc.build import mypycify
    except ImportError as e:
        _fail(
            f"mypyc is not importable ({e}): install mypy and setuptools into the build "
            "environment and build without isolation: "
            "VMW_MYPYC=1 pip install --no-build-isolation ./packages/server"
        )
    return mypycify(
        ["--config-file", "pyproject.toml", *COMPILED],
        opt_level="3",
        group_name="vmw_server",
    )


setup(ext_modules=ext_modules())
