"""What the KUKSA ``GetServerInfo`` calls say about this server."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["SERVER_NAME", "SERVER_VERSION"]

SERVER_NAME: Final = "vehicle-middleware"
try:
    SERVER_VERSION: Final = version("vehicle-middleware")
except PackageNotFoundError:  # run from a source tree that is not installed
    SERVER_VERSION = "0.0.0"  # type: ignore[misc]
