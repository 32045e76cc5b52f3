"""vstore: the atomized-key value store of the vehicle middleware.

Pure and synchronous: no I/O, no gRPC, time from an injected clock.
"""

from vstore.errors import (
    InvalidKeyNameError,
    InvalidValueError,
    KeyCapacityError,
    UnknownKeyError,
    ValueTooLargeError,
    VersionConflictError,
    VStoreError,
)
from vstore.keys import MAX_KEY_ID, MAX_KEY_NAME_BYTES, KeyRegistry, check_key_name
from vstore.store import (
    DEFAULT_MAX_VALUE_SIZE,
    Entry,
    SetResult,
    StoreListener,
    Update,
    ValueCheck,
    VStore,
)

__all__ = [
    "DEFAULT_MAX_VALUE_SIZE",
    "MAX_KEY_ID",
    "MAX_KEY_NAME_BYTES",
    "Entry",
    "InvalidKeyNameError",
    "InvalidValueError",
    "KeyCapacityError",
    "KeyRegistry",
    "SetResult",
    "StoreListener",
    "UnknownKeyError",
    "Update",
    "VStore",
    "VStoreError",
    "ValueCheck",
    "ValueTooLargeError",
    "VersionConflictError",
    "check_key_name",
]
