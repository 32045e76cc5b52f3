"""vss: Vehicle Signal Specification catalogs and the rules their metadata sets.

Owns the catalog loader (JSON) and the per-key rules (datatype, min, max,
allowed values, expected period). Pure and synchronous: no I/O beyond reading
a catalog file, no gRPC. The middleware (typed keys, KUKSA), the SDK (value
encoding) and the providers (the simulated car) share it.

Imports only the standard library; must not import anything of the project
(``tests/unit/test_layout.py``).
"""

from vehicle_middleware.vss.catalog import (
    ARRAY_DATATYPES,
    DATATYPES,
    CatalogError,
    Signal,
    expand_instances,
    expected_period,
    load_catalog,
    parse_catalog,
)
from vehicle_middleware.vss.rules import (
    INT_RANGES,
    check_value,
    element_type,
    float_bounds,
    is_array,
)

__all__ = [
    "ARRAY_DATATYPES",
    "DATATYPES",
    "INT_RANGES",
    "CatalogError",
    "Signal",
    "check_value",
    "element_type",
    "expand_instances",
    "expected_period",
    "float_bounds",
    "is_array",
    "load_catalog",
    "parse_catalog",
]
