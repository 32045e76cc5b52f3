"""The V-Store: current value, version and write time of every atomized key.

The store owns the values; it fires exactly the three events of the V-Store's
rules (docs/design.md, "The V-Store") to one listener (the ESS)
synchronously, after its own state is updated:

* ``key_added(id, name)`` when a key is created,
* ``key_removed(id, name)`` when a key is removed (its id may then be reused),
* ``data_updated(id, changed, data, time_ns)`` after every write, ``changed``
  telling whether the bytes differ from the previous value.

``data_updated`` carries the stored ``bytes`` object itself and the write's
time, so an unwatched update costs no copy and no allocation beyond the write,
and a watched one no second look-up (:meth:`VStore.peek` returns the same).

Values are opaque ``bytes``. Each key has a version (``uint64``: 0 before the
first write, +1 per write) and the time of its last write in nanoseconds since
the epoch (the provider's source time when given, else the store's clock).
Writes may be conditional on the version (compare-and-set): a writer whose view
is stale is refused and told the current version. A key may have a value
check (:meth:`VStore.set_value_check`, e.g. its VSS datatype and range): every
write of the key passes it or is refused with ``InvalidValueError``.

Not thread-safe: one event loop drives it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, TypeAlias, cast

from vehicle_middleware.vstore.errors import (
    InvalidKeyNameError,
    InvalidValueError,
    KeyCapacityError,
    UnknownKeyError,
    ValueTooLargeError,
    VersionConflictError,
    VStoreError,
)
from vehicle_middleware.vstore.keys import KeyRegistry, check_key_name

__all__ = [
    "DEFAULT_MAX_VALUE_SIZE",
    "CheckedRow",
    "Entry",
    "SetResult",
    "StoreListener",
    "Update",
    "VStore",
    "ValueCheck",
]

DEFAULT_MAX_VALUE_SIZE: Final = 64 * 1024
_U64: Final = 2**64
_WORD: Final = 2**62 - 1
"""The largest int compiled code holds in a machine word. A write time up to it
(every time until the year 2116) is checked against it first: compiled, comparing
a time with 2**64, a number beyond a machine word, makes a new object of the time
for each update; the rest of the uint64 range goes the slow way."""
# The version slot of a free id: lets the write path tell a removed id from a
# live one with the version read it does anyway.
_FREE_VERSION: Final = -1


ValueCheck = Callable[[bytes], str | None]
"""A key's rule: None if the bytes may be written, else the value and the rule broken."""


class StoreListener(Protocol):
    """Receiver of the V-Store's three events. Called synchronously."""

    def key_added(self, key_id: int, name: str) -> None: ...

    def key_removed(self, key_id: int, name: str) -> None: ...

    def data_updated(self, key_id: int, changed: bool, data: bytes, time_ns: int) -> None: ...


class _NoListener:
    """The listener of a store nobody listens to."""

    def key_added(self, key_id: int, name: str) -> None:
        pass

    def key_removed(self, key_id: int, name: str) -> None:
        pass

    def data_updated(self, key_id: int, changed: bool, data: bytes, time_ns: int) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Entry:
    """A snapshot of one key. ``data`` is None until the first write."""

    name: str
    key_id: int
    data: bytes | None
    version: int
    time_ns: int


class Update(NamedTuple):
    """One write of a batch: by name or id, optionally conditional on ``if_version``.

    A NamedTuple, not a frozen dataclass: one is made per published update, and
    a tuple is made in C, with no ``__init__`` run in Python."""

    key: str | int
    data: bytes | bytearray | memoryview
    if_version: int | None = None
    time_ns: int | None = None


UpdateRow: TypeAlias = tuple[str | int, bytes | bytearray | memoryview, int | None, int | None]
"""What :meth:`VStore.set_many` takes: an :class:`Update`, or the same four values as a
plain tuple (a batch decoded from the wire is built so: a plain tuple is made in C,
without the NamedTuple's constructor)."""


CheckedRow: TypeAlias = tuple[int, bytes, int | None, int | None]
"""An update :meth:`VStore.check_many` accepted: by key id, its data as ``bytes``."""


class SetResult(NamedTuple):
    """Outcome of one write of a batch (a NamedTuple, as :class:`Update`: one per write).

    ``conflict`` False: written, ``version`` is the new version.
    ``conflict`` True: refused by compare-and-set, ``version`` is the current one.
    """

    key_id: int
    version: int
    conflict: bool = False


class VStore:
    """Key/value store with atomized keys, versions and change events."""

    __slots__ = (
        "_checks",
        "_checks_by_name",
        "_clock",
        "_keys",
        "_listener",
        "_max_value_size",
        "_removals",
        "_times",
        "_values",
        "_versions",
    )

    def __init__(
        self,
        *,
        max_value_size: int = DEFAULT_MAX_VALUE_SIZE,
        max_keys: int = 1_000_000,
        clock: Callable[[], int] = time.time_ns,
        listener: StoreListener | None = None,
    ) -> None:
        """Create an empty store.

        Args:
            max_value_size: largest value accepted, in bytes (default 64 KiB).
            max_keys: most keys held at once.
            clock: returns the current time in ns since the epoch (injected for tests).
            listener: receiver of key_added / key_removed / data_updated.
        """
        if max_value_size < 0:
            raise ValueError(f"max_value_size must be >= 0, got {max_value_size}")
        self._max_value_size = max_value_size
        self._keys = KeyRegistry(max_keys=max_keys)
        self._clock = clock
        self._listener: StoreListener = listener if listener is not None else _NoListener()
        # Parallel lists indexed by key id (index 0 unused): cheaper on the write
        # path than one object per key.
        self._values: list[bytes | None] = [None]
        self._versions: list[int] = [_FREE_VERSION]
        self._times: list[int] = [0]
        self._checks: list[ValueCheck | None] = [None]
        self._checks_by_name: dict[str, ValueCheck] = {}
        self._removals = 0

    # -- wiring ------------------------------------------------------------

    def set_listener(self, listener: StoreListener | None) -> None:
        """Replace the listener (None: nobody listens)."""
        self._listener = listener if listener is not None else _NoListener()

    @property
    def listener(self) -> StoreListener | None:
        """The listener (None: nobody listens); to wrap it in another."""
        return None if isinstance(self._listener, _NoListener) else self._listener

    @property
    def max_value_size(self) -> int:
        """Largest value accepted, in bytes."""
        return self._max_value_size

    @property
    def max_keys(self) -> int:
        """Most keys held at once."""
        return self._keys.max_keys

    def set_value_check(self, name: str, check: ValueCheck | None) -> None:
        """Give the key ``name`` a rule every write must pass (None: remove it).

        Kept by name: it applies to the key now if it exists, and whenever a
        key of that name is added again later. Writes already stored are not
        checked again. Idempotent.
        """
        if check is None:
            self._checks_by_name.pop(name, None)
        else:
            self._checks_by_name[name] = check
        key_id = self._keys.id_of(name)
        if key_id is not None:
            self._checks[key_id] = check

    def value_check(self, name: str) -> ValueCheck | None:
        """The rule set for ``name``, or None."""
        return self._checks_by_name.get(name)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    # -- keys --------------------------------------------------------------

    def add_key(self, name: str) -> int:
        """Add a key, or return the id of the existing one (idempotent).

        Fires ``key_added`` only when the key is new.

        Raises:
            InvalidKeyNameError, KeyCapacityError: nothing changes.
        """
        key_id, created = self._keys.add(name)
        if created:
            self._grow(key_id)
            self._checks[key_id] = self._checks_by_name.get(name)
            self._listener.key_added(key_id, name)
        return key_id

    def add_keys(self, names: Iterable[str]) -> list[int]:
        """Add several keys; all names are validated before any is added.

        Returns the ids in the order of ``names``.

        Raises:
            InvalidKeyNameError: a name is invalid (nothing is added).
            KeyCapacityError: the new keys do not all fit (nothing is added).
        """
        names = list(names)
        new: set[str] = set()
        for i, n in enumerate(names):
            if n not in self._keys:
                try:
                    new.add(check_key_name(n))
                except InvalidKeyNameError as e:
                    e.index = i
                    raise
        if len(self._keys) + len(new) > self._keys.max_keys:
            raise KeyCapacityError(self._keys.max_keys)
        return [self.add_key(n) for n in names]

    def remove_key(self, key: str | int) -> int:
        """Remove a key by name or id; fires ``key_removed``; returns the freed id.

        The id may be handed to the next new key.

        Raises:
            UnknownKeyError: no such key (nothing changes).
        """
        name = self._name(key)
        key_id = self._keys.remove(name)
        self._values[key_id] = None
        self._versions[key_id] = _FREE_VERSION
        self._times[key_id] = 0
        self._checks[key_id] = None
        self._removals += 1
        self._listener.key_removed(key_id, name)
        return key_id

    @property
    def removals(self) -> int:
        """Keys removed so far. A removed key's id may be handed to the next new
        key: what a caller keeps by id holds while this number stays the same."""
        return self._removals

    def id_of(self, name: str) -> int | None:
        """The id of ``name``, or None. O(1)."""
        return self._keys.id_of(name)

    def name_of(self, key_id: int) -> str | None:
        """The name of ``key_id``, or None. O(1)."""
        return self._keys.name_of(key_id)

    def id_bound(self) -> int:
        """Every live key id is below this bound."""
        return self._keys.id_bound()

    def list_keys(
        self, prefix: str = "", *, start_after: str = "", limit: int | None = None
    ) -> list[tuple[str, int]]:
        """``(name, id)`` of the keys in the branch ``prefix``, sorted by name.

        See :meth:`KeyRegistry.iter_prefix` for what a branch matches. For
        paging: at most ``limit`` keys, the first after ``start_after``.
        """
        found = self.iter_keys(prefix, start_after=start_after)
        return list(found if limit is None else itertools.islice(found, limit))

    def iter_keys(self, prefix: str = "", *, start_after: str = "") -> Iterator[tuple[str, int]]:
        """Like :meth:`list_keys`, lazily. Do not change the store while iterating."""
        return self._keys.iter_prefix(prefix, start_after=start_after)

    # -- values ------------------------------------------------------------

    def set(
        self,
        key: str | int,
        data: bytes | bytearray | memoryview,
        *,
        if_version: int | None = None,
        time_ns: int | None = None,
    ) -> int:
        """Write ``data`` to a key (by name or id) and fire ``data_updated``.

        Args:
            key: name or id.
            data: the new value (bytes; a bytearray or memoryview is copied).
            if_version: write only if the key's version equals this.
            time_ns: the source time of the value; default: the store's clock.
        Returns:
            The key's new version.
        Raises:
            UnknownKeyError, ValueTooLargeError, InvalidValueError, TypeError,
                ValueError: bad input; nothing changes.
            VersionConflictError: ``if_version`` is stale; nothing changes.
        Complexity: O(1) plus the byte comparison with the previous value
            (and the key's value check, if it has one).
        """
        key_id = key if type(key) is int else self._resolve(key)
        if type(data) is not bytes:
            data = _as_bytes(data)
        if key_id <= 0 or key_id >= len(self._versions):
            raise UnknownKeyError(key_id)
        version = self._versions[key_id]  # _FREE_VERSION for a removed id
        if version < 0 or len(data) > self._max_value_size:
            self._check_write(key_id, data)
        check = self._checks[key_id]
        if check is not None:
            problem = check(data)
            if problem is not None:
                raise InvalidValueError(self._name(key_id), problem)
        # The rest is _apply's for one write, inlined: one call fewer on every write.
        if if_version is not None:
            _check_u64("if_version", if_version)
            if if_version != version:
                raise VersionConflictError(self._name(key_id), if_version, version)
        if time_ns is None:
            time_ns = self._clock()
        else:
            _check_u64("time_ns", time_ns)
        old = self._values[key_id]
        self._values[key_id] = data
        self._versions[key_id] = version + 1
        self._times[key_id] = time_ns
        # `old is not data` short-cuts the comparison for a re-published object.
        self._listener.data_updated(
            key_id, old is None or (old is not data and old != data), data, time_ns
        )
        return version + 1

    def set_many(self, updates: Sequence[UpdateRow]) -> list[SetResult]:
        """Apply a batch of writes in order; one result per update.

        Malformed input (unknown key, value too large, a value its key's check
        refuses, bad type) rejects the whole batch before anything is written.
        A compare-and-set conflict is not malformed: it is reported in that
        update's result and the other updates still apply.

        Raises:
            UnknownKeyError, ValueTooLargeError, InvalidValueError, TypeError, ValueError.
        """
        results: list[SetResult] = []
        self._apply(self.check_many(updates), results)
        return results

    def write_many(self, updates: Sequence[UpdateRow]) -> int:
        """:meth:`set_many` for a writer that looks at no write's result (a provider's
        stream): the same checks, refusals and writes, without a result object per
        update. Returns how many updates compare-and-set refused.

        Raises:
            UnknownKeyError, ValueTooLargeError, InvalidValueError, TypeError, ValueError.
        """
        return self._apply(self.check_many(updates), None)

    def _apply(self, checked: Sequence[CheckedRow], results: list[SetResult] | None) -> int:
        """Write a batch :meth:`check_many` accepted, in order, without checking again;
        each write's result goes to ``results`` where given. Returns the conflicts."""
        values, versions, times = self._values, self._versions, self._times
        listener = self._listener
        conflicts = 0
        # Ints passed on as they are: annotated Any, the compiled build does not
        # unbox them and box them anew (docs/compiled-build.md, "Ints on the hot path").
        key_id: Any
        time_ns: Any
        for key_id, data, if_version, time_ns in checked:
            version = versions[key_id]
            if if_version is not None and if_version != version:
                conflicts += 1
                if results is not None:
                    results.append(SetResult(key_id, version, conflict=True))
                continue
            if time_ns is None:
                time_ns = self._clock()
            old = values[key_id]
            values[key_id] = data
            versions[key_id] = version + 1
            times[key_id] = time_ns
            # `old is not data` short-cuts the comparison for a re-published object.
            listener.data_updated(
                key_id, old is None or (old is not data and old != data), data, time_ns
            )
            if results is not None:
                results.append(SetResult(key_id, version + 1))
        return conflicts

    def versions(self) -> list[int]:
        """A copy of every id's version, indexed by key id (-1 where no key has
        the id, and at 0). A key's version counts its writes since it was
        added, so two copies tell how often each key was written between them.
        O(ids), one C-level copy.
        """
        return self._versions.copy()

    def check_many(self, updates: Sequence[UpdateRow]) -> Sequence[CheckedRow]:
        """Validate a batch as :meth:`set_many` does, writing nothing.

        Returns the updates in order, each by key id with its data as ``bytes``:
        ``updates`` itself where every update already is (a provider's batch), so
        the common case makes no second row per update.

        Raises:
            UnknownKeyError, ValueTooLargeError, InvalidValueError (with the
                update's ``index``), TypeError, ValueError.
        """
        converted: dict[int, CheckedRow] = {}  # index -> the update by id, as bytes
        versions = self._versions
        ids = len(versions)  # nothing is written here: no id is added meanwhile
        checks = self._checks
        max_size = self._max_value_size
        # The common case costs a few comparisons per update (a Publish batch
        # runs this for every update); the slow calls run only to say what is
        # wrong. (time_ns: annotated Any as in _apply.)
        time_ns: Any
        for i, u in enumerate(updates):
            key, data, if_version, time_ns = u
            try:
                if type(key) is int and type(data) is bytes:
                    key_id = key
                else:  # by name, or a buffer
                    key_id = key if type(key) is int else self._resolve(key)
                    data = data if type(data) is bytes else _as_bytes(data)
                    converted[i] = (key_id, data, if_version, time_ns)
                if not 0 < key_id < ids or versions[key_id] < 0 or len(data) > max_size:
                    self._check_write(key_id, data)
                check = checks[key_id]
                if check is not None:
                    problem = check(data)
                    if problem is not None:
                        raise InvalidValueError(self._name(key_id), problem)
            except VStoreError as e:
                e.index = i
                raise
            if time_ns is not None and (type(time_ns) is not int or not 0 <= time_ns <= _WORD):
                _check_u64(f"updates[{i}].time_ns", time_ns)  # the rest of 0..2**64-1
            if if_version is not None:
                _check_u64(f"updates[{i}].if_version", if_version)
        if not converted:
            return cast("Sequence[CheckedRow]", updates)  # each checked above: by id, bytes
        checked = list(updates)
        for i, row in converted.items():
            checked[i] = row
        return cast("list[CheckedRow]", checked)

    def apply(self, key: str | int, data: bytes, *, version: int, time_ns: int) -> None:
        """Write ``data`` with a given ``version`` and time, and fire ``data_updated``.

        For a write made elsewhere and replicated here (:mod:`replica`): its
        version and time travel with it, so every node ends with the same
        version of the key. The caller decides that the write is newer than
        what the key holds (the replication's conflict rule); no value check
        runs (the node that accepted the write ran its own).

        Raises:
            UnknownKeyError: no such key. ValueError: ``version`` or
                ``time_ns`` is not a uint64, or ``version`` is 0 or below the
                key's (a replicated write never takes a key back).
        Complexity: O(1) plus the byte comparison with the previous value.
        """
        key_id = key if type(key) is int else self._resolve(key)
        if key_id <= 0 or key_id >= len(self._versions) or self._versions[key_id] < 0:
            raise UnknownKeyError(key_id)
        _check_u64("version", version)
        _check_u64("time_ns", time_ns)
        if version < max(1, self._versions[key_id]):
            raise ValueError(
                f"version {version} of {self._name(key_id)!r}: a written key's version is "
                f"at least 1 and never below its current {self._versions[key_id]}"
            )
        old = self._values[key_id]
        self._values[key_id] = data
        self._versions[key_id] = version
        self._times[key_id] = time_ns
        self._listener.data_updated(
            key_id, old is None or (old is not data and old != data), data, time_ns
        )

    def peek(self, key_id: int) -> tuple[bytes | None, int]:
        """``(data, time_ns)`` of a live key id, without copying the value.

        The caller must not hold on to ids of removed keys. O(1).
        """
        return self._values[key_id], self._times[key_id]

    def get(self, key: str | int) -> Entry:
        """A snapshot of one key by name or id.

        Raises:
            UnknownKeyError: no such key.
        """
        name = self._name(key)
        key_id = self._resolve(name)
        return Entry(
            name, key_id, self._values[key_id], self._versions[key_id], self._times[key_id]
        )

    def version_of(self, key_id: int) -> int:
        """Current version of a live key id (0 before the first write)."""
        return self._versions[key_id]

    # -- internals ---------------------------------------------------------

    def _resolve(self, name: str | int) -> int:
        if not isinstance(name, str):
            if type(name) is int:
                return name
            raise TypeError(f"a key is a name (str) or an id (int), got {type(name).__name__}")
        key_id = self._keys.id_of(name)
        if key_id is None:
            raise UnknownKeyError(name)
        return key_id

    def _name(self, key: str | int) -> str:
        if not isinstance(key, str):
            key = self._resolve(key)  # rejects what is neither a name nor an id
            name = self._keys.name_of(key)
            if name is None:
                raise UnknownKeyError(key)
            return name
        if key not in self._keys:
            raise UnknownKeyError(key)
        return key

    def _check_write(self, key_id: int, data: bytes) -> None:
        name = self._name(key_id)
        if len(data) > self._max_value_size:
            raise ValueTooLargeError(name, len(data), self._max_value_size)

    def _grow(self, key_id: int) -> None:
        while len(self._values) <= key_id:
            self._values.append(None)
            self._versions.append(_FREE_VERSION)
            self._times.append(0)
            self._checks.append(None)
        self._versions[key_id] = 0

    def check(self) -> None:
        """Assert every invariant of the store (for tests)."""
        self._keys.check()
        bound = self._keys.id_bound()
        assert len(self._values) == len(self._versions) == len(self._times) == bound
        assert len(self._checks) == bound
        for key_id in range(bound):
            name = self._keys.name_of(key_id)
            if name is None:
                assert self._values[key_id] is None
                assert self._versions[key_id] == _FREE_VERSION
                assert self._checks[key_id] is None
            else:
                assert self._checks[key_id] is self._checks_by_name.get(name)
                v = self._values[key_id]
                assert (v is None) == (self._versions[key_id] == 0), f"version/value of {name}"
                assert v is None or len(v) <= self._max_value_size
                assert 0 <= self._versions[key_id] < _U64


def _check_u64(what: str, value: object) -> None:
    if type(value) is not int or not 0 <= value < _U64:
        raise ValueError(f"{what} must be an integer in 0..2**64-1, got {value!r}")


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"data must be bytes, got {type(data).__name__}")
