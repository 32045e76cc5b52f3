"""vstore: the atomized-key value store of the vehicle middleware.

Owns key names and their atomization to integer ids (recycled), values with
their per-key version and write time, and the events a listener is told
(``key_added``, ``key_removed``, ``data_updated``). Pure and synchronous: no
I/O, no gRPC, time from an injected clock.

Imports only the standard library and ``sortedcontainers``; must not import
``ess``, ``middleware`` or anything of a process (``tests/unit/test_layout.py``).
"""

from vehicle_middleware.vstore.errors import (
    InvalidKeyNameError,
    InvalidValueError,
    KeyCapacityError,
    UnknownKeyError,
    ValueTooLargeError,
    VersionConflictError,
    VStoreError,
)
from vehicle_middleware.vstore.keys import (
    MAX_KEY_ID,
    MAX_KEY_NAME_BYTES,
    KeyRegistry,
    check_key_name,
)
from vehicle_middleware.vstore.store import (
    DEFAULT_MAX_VALUE_SIZE,
    CheckedRow,
    Entry,
    SetResult,
    StoreListener,
    Update,
    UpdateRow,
    ValueCheck,
    VStore,
)

__all__ = [
    "DEFAULT_MAX_VALUE_SIZE",
    "MAX_KEY_ID",
    "MAX_KEY_NAME_BYTES",
    "CheckedRow",
    "Entry",
    "InvalidKeyNameError",
    "InvalidValueError",
    "KeyCapacityError",
    "KeyRegistry",
    "SetResult",
    "StoreListener",
    "UnknownKeyError",
    "Update",
    "UpdateRow",
    "VStore",
    "VStoreError",
    "ValueCheck",
    "ValueTooLargeError",
    "VersionConflictError",
    "check_key_name",
]
