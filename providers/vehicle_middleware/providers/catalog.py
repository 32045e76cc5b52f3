"""Signal catalogs for the providers: the loader is :mod:`vehicle_middleware.vss.catalog` (shared
with the middleware); this module adds the project's own catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from vehicle_middleware.vss.catalog import (
    ARRAY_DATATYPES,
    DATATYPES,
    CatalogError,
    Signal,
    expand_instances,
    load_catalog,
    parse_catalog,
)

__all__ = [
    "ARRAY_DATATYPES",
    "DATATYPES",
    "DEFAULT_CATALOG",
    "CatalogError",
    "Signal",
    "default_catalog",
    "expand_instances",
    "load_catalog",
    "parse_catalog",
]

DEFAULT_CATALOG: Final = Path(__file__).parent / "catalogs" / "vehicle.json"


def default_catalog() -> list[Signal]:
    """The project's own catalog (a few hundred signals of one car)."""
    return load_catalog(DEFAULT_CATALOG)
