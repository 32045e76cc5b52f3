"""The replicated state of every key, the conflict rule, and the state's digest. Pure.

The conflict rule, the same on every node: of two writes of one key, the one
with the higher ``(version, stamp, origin)`` wins. A write made after another
of the key was seen has a higher version (the key's version + 1), so it
always wins; two writes made concurrently on two nodes from the same version
are decided by their stamps (the later one), then by node id. Applying the
writes a node receives in any order therefore ends in the same value on
every node, and versions are the same everywhere.

The digest is a SHA-256 per key over (name, version, stamp, origin, SHA-256
of the value), XOR-ed together: independent of order, so two nodes with the
same state have the same digest. It is computed when asked, for the keys
changed since the last time.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["KeyState", "KeyStates"]


@dataclass(frozen=True, slots=True)
class KeyState:
    """A key as replicated: its latest value and the write that made it."""

    name: str
    data: bytes | None
    version: int
    time_ns: int
    stamp: int
    origin: str

    @property
    def rank(self) -> tuple[int, int, str]:
        """What the conflict rule compares."""
        return (self.version, self.stamp, self.origin)


def _key_digest(s: KeyState) -> int:
    value = b"" if s.data is None else hashlib.sha256(s.data).digest()
    name = s.name.encode()
    origin = s.origin.encode()
    raw = b"".join(
        (
            struct.pack(">H", len(name)),
            name,
            struct.pack(">QQH", s.version, s.stamp, len(origin)),
            origin,
            value,
        )
    )
    return int.from_bytes(hashlib.sha256(raw).digest(), "big")


class KeyStates:
    """Every key's :class:`KeyState`, by name."""

    __slots__ = ("_digest", "_dirty", "_parts", "_states")

    def __init__(self) -> None:
        self._states: dict[str, KeyState] = {}
        self._parts: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._digest = 0

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, name: object) -> bool:
        return name in self._states

    def __iter__(self) -> Iterator[KeyState]:
        return iter(self._states.values())

    def get(self, name: str) -> KeyState | None:
        return self._states.get(name)

    def wins(self, name: str, version: int, stamp: int, origin: str) -> bool:
        """Whether a write of ``name`` ranked so beats what the key holds. O(1)."""
        held = self._states.get(name)
        return held is None or (version, stamp, origin) > held.rank

    def put(self, state: KeyState) -> None:
        """Hold ``state`` for its key (the caller applied the conflict rule). O(1)."""
        self._states[state.name] = state
        self._dirty.add(state.name)

    def add(self, name: str) -> bool:
        """Know the key (added, no value) if unknown; True if it was unknown."""
        if name in self._states:
            return False
        self.put(KeyState(name, None, 0, 0, 0, ""))
        return True

    def forget(self, name: str) -> None:
        """The key was removed on this node (removals are not replicated)."""
        if self._states.pop(name, None) is not None:
            self._dirty.add(name)

    def digest(self) -> bytes:
        """The state's digest (32 bytes). O(keys changed since the last call)."""
        for name in self._dirty:
            old = self._parts.pop(name, 0)
            state = self._states.get(name)
            new = _key_digest(state) if state is not None else 0
            self._digest ^= old ^ new
            if state is not None:
                self._parts[name] = new
        self._dirty.clear()
        return self._digest.to_bytes(32, "big")

    def check(self) -> None:
        """Assert the invariants (for tests): the cached digest is the digest."""
        full = 0
        for state in self._states.values():
            full ^= _key_digest(state)
        assert self.digest() == full.to_bytes(32, "big")
        assert set(self._parts) == set(self._states)
