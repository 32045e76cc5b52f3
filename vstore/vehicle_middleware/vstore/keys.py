"""Key names and their atomization to dense integer ids.

A key name is a dot-separated path of segments made of ``[A-Za-z0-9_]``, 1 to
255 bytes long (``Vehicle.Cabin.HVAC.AmbientAirTemperature``). The
:class:`KeyRegistry` assigns each name a ``uint32`` id, never 0, and recycles
the ids of removed keys lowest-first from a sorted free set, so the id space
stays dense and every id-indexed structure (the ESS watched bitmap) stays
small.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from sortedcontainers import SortedDict, SortedSet
from vehicle_middleware.vstore.errors import InvalidKeyNameError, KeyCapacityError, UnknownKeyError

__all__ = ["MAX_KEY_ID", "MAX_KEY_NAME_BYTES", "KeyRegistry", "check_key_name"]

MAX_KEY_NAME_BYTES: Final = 255
MAX_KEY_ID: Final = 2**32 - 1

_SEGMENT: Final = r"[A-Za-z0-9_]+"
_NAME_RE: Final = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*", re.ASCII)


def check_key_name(name: object) -> str:
    """Validate a key name and return it.

    Raises:
        InvalidKeyNameError: the name is not a str, is empty, longer than 255
            bytes, or not dot-separated segments of ``[A-Za-z0-9_]``.
    """
    if not isinstance(name, str):
        raise InvalidKeyNameError(repr(name), "a key name must be a string")
    if not name:
        raise InvalidKeyNameError(name, "a key name must not be empty")
    if len(name) > MAX_KEY_NAME_BYTES:
        # Valid names are ASCII, so characters == bytes; longer is wrong either way.
        raise InvalidKeyNameError(
            name, f"a key name is at most {MAX_KEY_NAME_BYTES} bytes, this one is {len(name)}"
        )
    if _NAME_RE.fullmatch(name) is None:
        raise InvalidKeyNameError(
            name,
            "a key name is dot-separated non-empty segments of [A-Za-z0-9_], "
            "e.g. 'Vehicle.Cabin.HVAC.AmbientAirTemperature'",
        )
    return name


class KeyRegistry:
    """Bijection between key names and dense ``uint32`` ids.

    Not thread-safe: the middleware drives it from one event loop.
    """

    __slots__ = ("_free", "_ids", "_max_keys", "_names")

    def __init__(self, *, max_keys: int = 1_000_000) -> None:
        if not 1 <= max_keys <= MAX_KEY_ID:
            raise ValueError(f"max_keys must be in 1..{MAX_KEY_ID}, got {max_keys}")
        self._max_keys = max_keys
        # _names[i] is the name of id i, or None when i is free. Index 0 is never used.
        self._names: list[str | None] = [None]
        self._ids: SortedDict = SortedDict()  # name -> id, sorted for prefix listing
        self._free: SortedSet = SortedSet()  # ids below len(_names) that are free

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, name: object) -> bool:
        return name in self._ids

    @property
    def max_keys(self) -> int:
        """The most keys this registry will hold at once."""
        return self._max_keys

    def id_bound(self) -> int:
        """One more than the highest id ever assigned: every live id is below it."""
        return len(self._names)

    def add(self, name: str) -> tuple[int, bool]:
        """Atomize ``name``; idempotent.

        Returns:
            ``(id, created)``: the key's id and whether it was new.
        Raises:
            InvalidKeyNameError: bad syntax (the registry is unchanged).
            KeyCapacityError: the registry is full (unchanged).
        Complexity: O(log n) for a new key (sorted index), O(1) for an existing one.
        """
        if not isinstance(name, str):
            check_key_name(name)  # raises, naming the type
        existing = self._ids.get(name)
        if existing is not None:
            return existing, False
        check_key_name(name)
        if len(self._ids) >= self._max_keys:
            raise KeyCapacityError(self._max_keys)
        if self._free:
            key_id: int = self._free.pop(0)  # lowest free id first
            self._names[key_id] = name
        else:
            key_id = len(self._names)
            self._names.append(name)
        self._ids[name] = key_id
        return key_id, True

    def remove(self, name: str) -> int:
        """Forget ``name`` and free its id for reuse; returns the freed id.

        Raises:
            UnknownKeyError: no such key.
        """
        key_id = self._ids.pop(name, None)
        if key_id is None:
            raise UnknownKeyError(name)
        self._names[key_id] = None
        self._free.add(key_id)
        return int(key_id)

    def id_of(self, name: str) -> int | None:
        """The id of ``name``, or None if it does not exist. O(1)."""
        key_id: int | None = self._ids.get(name)
        return key_id

    def name_of(self, key_id: int) -> str | None:
        """The name of ``key_id``, or None if the id is not in use. O(1)."""
        if 0 < key_id < len(self._names):
            return self._names[key_id]
        return None

    def iter_prefix(self, prefix: str = "", *, start_after: str = "") -> Iterator[tuple[str, int]]:
        """Yield ``(name, id)`` in name order for the branch ``prefix``.

        ``prefix`` names a branch of the tree: ``Vehicle.Cabin`` yields the key
        ``Vehicle.Cabin`` itself, if it exists, and every key below it
        (``Vehicle.Cabin.*``), but not ``Vehicle.CabinLight``. An empty prefix
        yields every key. A trailing dot is ignored. With ``start_after``, only
        names sorting after it (for paging).

        Complexity: O(log n + k) for k results.
        """
        branch = prefix.rstrip(".")
        if not branch:
            names = self._ids.irange(minimum=start_after or None, inclusive=(False, False))
            for name in names:
                yield name, self._ids[name]
            return
        exact = self._ids.get(branch)
        if exact is not None and branch > start_after:
            yield branch, exact
        # '/' is the character right after '.', so this range is exactly "branch.*".
        low = max(branch + ".", start_after)
        inclusive = (low != start_after, False)
        for name in self._ids.irange(low, branch + "/", inclusive=inclusive):
            yield name, self._ids[name]

    def check(self) -> None:
        """Assert every invariant of the registry (for tests)."""
        assert self._names[0] is None, "id 0 must never be used"
        assert len(self._ids) <= self._max_keys
        live = {i for i, n in enumerate(self._names) if n is not None}
        assert set(self._free) == set(range(1, len(self._names))) - live, "free set mismatch"
        assert len(live) == len(self._ids)
        for name, key_id in self._ids.items():
            assert self._names[key_id] == name, f"name/id mismatch for {name!r}"
            check_key_name(name)
        # Every free id is below the bound (ids are only ever appended).
        assert all(0 < i < len(self._names) for i in self._free), "free id out of range"
