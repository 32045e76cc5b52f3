"""Errors raised by the V-Store.

One class per failure, each narrowing the built-in a caller would expect, with
typed attributes so an adapter (the gRPC layer) can map them to a status code
and a message in one table without parsing strings.
"""

from __future__ import annotations

__all__ = [
    "InvalidKeyNameError",
    "InvalidValueError",
    "KeyCapacityError",
    "UnknownKeyError",
    "VStoreError",
    "ValueTooLargeError",
    "VersionConflictError",
]


class VStoreError(Exception):
    """Base of every error the V-Store raises.

    ``index`` is the position of the offending item when a batch operation
    (``add_keys``, ``set_many``) rejected it, else None.
    """

    index: int | None = None


class InvalidKeyNameError(VStoreError, ValueError):
    """A key name does not follow the key syntax.

    Attributes:
        name: the rejected name (possibly truncated for display by the caller).
        reason: what is wrong and what is allowed.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"invalid key name {_show(name)}: {reason}")


class UnknownKeyError(VStoreError, KeyError):
    """A key (by name or id) does not exist in the store."""

    def __init__(self, key: str | int) -> None:
        self.key = key
        super().__init__(key)

    def __str__(self) -> str:
        # KeyError.__str__ would print only repr(key); say what happened.
        if isinstance(self.key, str):
            return f"key {_show(self.key)} does not exist"
        return f"no key with id {self.key!r}"


class ValueTooLargeError(VStoreError, ValueError):
    """A value is larger than the store's configured maximum."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.key = key
        self.size = size
        self.limit = limit
        super().__init__(f"value for {_show(key)} is {size} bytes; the limit is {limit} bytes")


class InvalidValueError(VStoreError, ValueError):
    """A value breaks the rule of its key (a check set with ``set_value_check``).

    Attributes:
        key: the key's name.
        problem: the value and the rule it breaks, e.g. ``value 300 is above the max 255``.
    """

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"value for {_show(key)} refused: {problem}")


class VersionConflictError(VStoreError):
    """A compare-and-set write named a version that is no longer current.

    The writer's view is stale: it should read ``current`` and decide again.
    """

    def __init__(self, key: str, expected: int, current: int) -> None:
        self.key = key
        self.expected = expected
        self.current = current
        super().__init__(
            f"version conflict on {_show(key)}: write expected version {expected}, "
            f"current version is {current}"
        )


class KeyCapacityError(VStoreError, OverflowError):
    """Adding a key would exceed the store's configured maximum number of keys."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"the store holds its maximum of {limit} keys")


def _show(name: str) -> str:
    """Quote a name for an error message, cut so a hostile name cannot flood a log."""
    return repr(name if len(name) <= 80 else name[:77] + "...")
