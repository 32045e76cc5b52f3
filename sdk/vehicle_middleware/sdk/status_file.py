"""A process's status as a JSON file, rewritten atomically, for whoever supervises it.

The sample apps and providers write their counters here (``--status FILE``)
once a second and when they stop; the demo reads them for its progress line
and its summary. A reader never sees a half-written file (write, then rename).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_status", "status_path", "write_periodically", "write_status"]


def status_path(text: str) -> Path:
    """A ``--status`` argument: a file in a directory that exists (checked at start).

    Raises:
        argparse.ArgumentTypeError: the directory does not exist.
    """
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: directory {path.parent} does not exist")
    return path


def write_status(path: str | Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically (same-directory rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_status(path: str | Path) -> dict[str, Any] | None:
    """The last status written to ``path``, or None if there is none yet."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


async def write_periodically(
    path: str | Path | None,
    snapshot: Callable[[], Mapping[str, Any]],
    stop: asyncio.Event,
    *,
    interval: float = 1.0,
) -> None:
    """Write ``snapshot()`` every ``interval`` seconds until ``stop``, then once more."""
    if path is None:
        await stop.wait()
        return
    while not stop.is_set():
        write_status(path, snapshot())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
    write_status(path, snapshot())
