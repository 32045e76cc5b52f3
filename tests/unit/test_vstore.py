"""The V-Store: key syntax, atomization, versions, compare-and-set, events."""

from __future__ import annotations

import itertools

import pytest
from vehicle_middleware.vstore import (
    InvalidKeyNameError,
    KeyCapacityError,
    KeyRegistry,
    UnknownKeyError,
    Update,
    ValueTooLargeError,
    VersionConflictError,
    VStore,
)


class Recorder:
    """A listener that records what the store fires, reading nothing."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, object]] = []
        self.written: list[tuple[int, bytes, int]] = []
        """What each ``data_updated`` carried: the key id, the bytes and the time."""

    def key_added(self, key_id: int, name: str) -> None:
        self.events.append(("key_added", key_id, name))

    def key_removed(self, key_id: int, name: str) -> None:
        self.events.append(("key_removed", key_id, name))

    def data_updated(self, key_id: int, changed: bool, data: bytes, time_ns: int) -> None:
        self.events.append(("data_updated", key_id, changed))
        self.written.append((key_id, data, time_ns))


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def store(rec: Recorder) -> VStore:
    ticks = itertools.count(1000, 10)
    return VStore(max_value_size=16, clock=lambda: next(ticks), listener=rec)


@pytest.mark.parametrize(
    "name",
    ["Vehicle", "Vehicle.Speed", "Vehicle.Cabin.HVAC.AmbientAirTemperature", "a_b.C9", "x" * 255],
)
def test_valid_key_names_are_accepted(store: VStore, name: str) -> None:
    assert store.add_key(name) >= 1
    store.check()


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        ("x" * 256, "at most 255 bytes"),
        ("Vehicle..Speed", "dot-separated"),
        (".Vehicle", "dot-separated"),
        ("Vehicle.", "dot-separated"),
        ("Vehicle.Spe-ed", "[A-Za-z0-9_]"),
        ("Vehicle.Speed ", "[A-Za-z0-9_]"),
        ("Vehicle.Größe", "[A-Za-z0-9_]"),
        ("Vehicle/Speed", "[A-Za-z0-9_]"),
    ],
)
def test_invalid_key_names_are_rejected_with_a_clear_error(
    store: VStore, rec: Recorder, name: str, fragment: str
) -> None:
    with pytest.raises(InvalidKeyNameError) as err:
        store.add_key(name)
    assert fragment in str(err.value)
    assert isinstance(err.value, ValueError)
    assert len(store) == 0
    assert rec.events == []


def test_ids_start_at_one_and_adding_is_idempotent(store: VStore, rec: Recorder) -> None:
    a = store.add_key("Vehicle.A")
    b = store.add_key("Vehicle.B")
    assert (a, b) == (1, 2)
    assert store.add_key("Vehicle.A") == a
    assert rec.events == [("key_added", 1, "Vehicle.A"), ("key_added", 2, "Vehicle.B")]


def test_removed_ids_are_recycled_lowest_first(store: VStore) -> None:
    ids = [store.add_key(f"Vehicle.K{i}") for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]
    store.remove_key("Vehicle.K3")  # id 4
    store.remove_key("Vehicle.K1")  # id 2
    assert store.add_key("Vehicle.New1") == 2
    assert store.add_key("Vehicle.New2") == 4
    assert store.add_key("Vehicle.New3") == 6
    store.check()


def test_remove_fires_key_removed_and_forgets_the_value(store: VStore, rec: Recorder) -> None:
    key = store.add_key("Vehicle.A")
    store.set(key, b"v")
    assert store.remove_key("Vehicle.A") == key
    assert rec.events[-1] == ("key_removed", key, "Vehicle.A")
    assert "Vehicle.A" not in store
    with pytest.raises(UnknownKeyError, match="does not exist"):
        store.get("Vehicle.A")
    with pytest.raises(UnknownKeyError):
        store.set(key, b"w")
    # A new key that reuses the id starts fresh.
    assert store.add_key("Vehicle.B") == key
    assert store.get("Vehicle.B").data is None
    assert store.get("Vehicle.B").version == 0
    store.check()


def test_removing_an_unknown_key_is_an_error_that_changes_nothing(
    store: VStore, rec: Recorder
) -> None:
    store.add_key("Vehicle.A")
    with pytest.raises(UnknownKeyError):
        store.remove_key("Vehicle.B")
    with pytest.raises(UnknownKeyError):
        store.remove_key(7)
    assert len(store) == 1
    assert len(rec.events) == 1


def test_key_capacity_is_enforced() -> None:
    store = VStore(max_keys=2)
    store.add_key("Vehicle.A")
    store.add_key("Vehicle.B")
    with pytest.raises(KeyCapacityError, match="maximum of 2 keys"):
        store.add_key("Vehicle.C")
    assert store.add_key("Vehicle.A") == 1  # an existing key still resolves
    with pytest.raises(KeyCapacityError):
        store.add_keys(["Vehicle.A", "Vehicle.C"])
    assert len(store) == 2


def test_add_keys_validates_every_name_before_adding_any(store: VStore, rec: Recorder) -> None:
    with pytest.raises(InvalidKeyNameError):
        store.add_keys(["Vehicle.A", "bad name"])
    assert len(store) == 0
    assert rec.events == []
    assert store.add_keys(["Vehicle.A", "Vehicle.B", "Vehicle.A"]) == [1, 2, 1]


def test_each_write_bumps_the_version_and_records_the_clock(store: VStore) -> None:
    key = store.add_key("Vehicle.Speed")
    assert store.get(key).version == 0
    assert store.set("Vehicle.Speed", b"\x01") == 1
    assert store.set(key, b"\x01") == 2
    entry = store.get("Vehicle.Speed")
    assert (entry.data, entry.version, entry.time_ns) == (b"\x01", 2, 1010)


def test_a_source_time_given_by_the_provider_is_kept(store: VStore) -> None:
    key = store.add_key("Vehicle.Speed")
    store.set(key, b"x", time_ns=42)
    assert store.get(key).time_ns == 42
    with pytest.raises(ValueError, match="time_ns"):
        store.set(key, b"y", time_ns=-1)
    assert store.get(key).data == b"x"


def test_data_updated_says_whether_the_bytes_changed(store: VStore, rec: Recorder) -> None:
    key = store.add_key("Vehicle.Speed")
    store.set(key, b"a")
    store.set(key, b"a")
    store.set(key, b"b")
    store.set(key, b"")
    store.set(key, b"")
    updates = [e for e in rec.events if e[0] == "data_updated"]
    assert [e[2] for e in updates] == [True, False, True, True, False]


def test_firing_data_updated_hands_the_stored_value_and_time_without_a_copy(
    store: VStore, rec: Recorder
) -> None:
    key = store.add_key("Vehicle.Blob")
    value = b"0123456789"
    store.set(key, value, time_ns=42)
    store.set_many([(key, value, None, 43)])
    assert store.peek(key)[0] is value
    assert rec.written == [(key, value, 42), (key, value, 43)]
    assert all(data is value for _, data, _ in rec.written)


def test_mutable_buffers_are_copied_so_the_store_stays_immutable(store: VStore) -> None:
    key = store.add_key("Vehicle.Blob")
    buf = bytearray(b"abc")
    store.set(key, buf)
    buf[0] = ord("z")
    assert store.get(key).data == b"abc"
    with pytest.raises(TypeError, match="must be bytes"):
        store.set(key, "text")  # type: ignore[arg-type]


def test_a_value_above_the_limit_is_rejected_and_nothing_changes(
    store: VStore, rec: Recorder
) -> None:
    key = store.add_key("Vehicle.Blob")
    store.set(key, b"ok")
    n = len(rec.events)
    with pytest.raises(ValueTooLargeError) as err:
        store.set(key, b"x" * 17)
    assert (err.value.size, err.value.limit) == (17, 16)
    assert "17 bytes; the limit is 16 bytes" in str(err.value)
    assert store.get(key).data == b"ok"
    assert len(rec.events) == n


def test_compare_and_set_rejects_a_stale_version_and_reports_the_current(
    store: VStore, rec: Recorder
) -> None:
    key = store.add_key("Vehicle.Door")
    store.set(key, b"closed")  # version 1
    assert store.set(key, b"open", if_version=1) == 2
    n = len(rec.events)
    with pytest.raises(VersionConflictError) as err:
        store.set(key, b"closed", if_version=1)
    assert (err.value.expected, err.value.current) == (1, 2)
    assert "current version is 2" in str(err.value)
    assert store.get(key).data == b"open"
    assert len(rec.events) == n


def test_set_many_reports_conflicts_per_update_and_applies_the_rest(store: VStore) -> None:
    a = store.add_key("Vehicle.A")
    b = store.add_key("Vehicle.B")
    store.set(a, b"1")
    results = store.set_many(
        [Update(a, b"2", if_version=0), Update("Vehicle.B", b"x"), Update(a, b"3", if_version=1)]
    )
    assert [(r.key_id, r.version, r.conflict) for r in results] == [
        (a, 1, True),
        (b, 1, False),
        (a, 2, False),
    ]
    assert store.get(a).data == b"3"


def test_write_many_writes_what_set_many_writes_without_the_results() -> None:
    """A provider's stream takes ``write_many``: the same values, versions, times
    and listener calls as ``set_many``, and the count of its conflicts."""
    batch = [
        Update("Vehicle.A", b"2", if_version=0),  # stale: a conflict
        Update("Vehicle.B", b"x"),
        Update("Vehicle.A", b"3", if_version=1),
        Update("Vehicle.B", b"x", time_ns=7),  # unchanged, its own time
        Update("Vehicle.A", bytearray(b"4"), time_ns=0),
        Update("Vehicle.B", b"y", if_version=9),  # another conflict
    ]
    seen: list[tuple[list[tuple[bytes | None, int, int]], list[tuple[str, int, object]]]] = []
    for write in ("set_many", "write_many"):
        rec = Recorder()
        store = VStore(max_value_size=16, clock=itertools.count(1000, 10).__next__, listener=rec)
        store.add_key("Vehicle.A")
        store.add_key("Vehicle.B")
        store.set("Vehicle.A", b"1")
        result = getattr(store, write)(batch)
        entries = [store.get(name) for name in ("Vehicle.A", "Vehicle.B")]
        seen.append(([(e.data, e.version, e.time_ns) for e in entries], rec.events))
        if write == "write_many":
            assert result == 2
        else:
            assert [r.conflict for r in result] == [True, False, False, False, False, True]
    assert seen[0] == seen[1]
    assert seen[1][0] == [(b"4", 3, 0), (b"x", 2, 7)]


@pytest.mark.parametrize("write", ["set_many", "write_many"])
def test_set_many_with_malformed_input_writes_nothing(
    store: VStore, rec: Recorder, write: str
) -> None:
    many = getattr(store, write)
    a = store.add_key("Vehicle.A")
    n = len(rec.events)
    with pytest.raises(UnknownKeyError):
        many([Update(a, b"1"), Update("Vehicle.Missing", b"2")])
    with pytest.raises(ValueTooLargeError):
        many([Update(a, b"1"), Update(a, b"y" * 100)])
    assert store.get(a).version == 0
    assert len(rec.events) == n


@pytest.mark.parametrize("key", [True, 1.0, None, b"Vehicle.A"])
def test_a_key_that_is_neither_a_name_nor_an_id_is_a_type_error(store: VStore, key: object) -> None:
    store.add_key("Vehicle.A")
    with pytest.raises(TypeError, match="a key is a name"):
        store.set(key, b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a key is a name"):
        store.get(key)  # type: ignore[arg-type]
    assert store.get("Vehicle.A").version == 0


def test_times_and_versions_must_be_uint64_integers(store: VStore) -> None:
    key = store.add_key("Vehicle.A")
    for bad in (True, -1, 2**64, 1.5):
        with pytest.raises(ValueError, match=r"must be an integer in 0\.\.2\*\*64-1"):
            store.set(key, b"x", time_ns=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="if_version must be"):
            store.set(key, b"x", if_version=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyNameError, match="must be a string"):
        store.add_key(["Vehicle.A"])  # type: ignore[arg-type]
    assert store.get(key).version == 0


def test_list_keys_returns_a_branch_not_a_string_prefix(store: VStore) -> None:
    for name in [
        "Vehicle.Cabin",
        "Vehicle.Cabin.Door.Row1.Left.IsOpen",
        "Vehicle.Cabin.HVAC.Temp",
        "Vehicle.CabinLight",
        "Vehicle.Speed",
    ]:
        store.add_key(name)
    assert [n for n, _ in store.list_keys("Vehicle.Cabin")] == [
        "Vehicle.Cabin",
        "Vehicle.Cabin.Door.Row1.Left.IsOpen",
        "Vehicle.Cabin.HVAC.Temp",
    ]
    assert [n for n, _ in store.list_keys("Vehicle.Cabin.")] == [
        "Vehicle.Cabin",
        "Vehicle.Cabin.Door.Row1.Left.IsOpen",
        "Vehicle.Cabin.HVAC.Temp",
    ]
    assert len(store.list_keys()) == 5
    assert store.list_keys("Vehicle.Nothing") == []
    assert store.list_keys("Vehicle.Speed") == [("Vehicle.Speed", store.id_of("Vehicle.Speed"))]


def test_registry_check_catches_a_broken_free_set() -> None:
    reg = KeyRegistry()
    reg.add("Vehicle.A")
    reg.add("Vehicle.B")
    reg.remove("Vehicle.A")
    reg.check()
    reg._free.clear()  # corrupt it on purpose: check() must notice
    with pytest.raises(AssertionError, match="free set"):
        reg.check()


def test_apply_sets_the_replicated_version_and_time_and_fires_data_updated(
    rec: Recorder,
) -> None:
    store = VStore(listener=rec)
    key = store.add_key("Vehicle.A")
    store.set(key, b"x")
    store.apply("Vehicle.A", b"y", version=7, time_ns=123)
    assert store.get(key) == store.get("Vehicle.A")
    entry = store.get(key)
    assert (entry.data, entry.version, entry.time_ns) == (b"y", 7, 123)
    store.apply(key, b"y", version=7, time_ns=124)  # a tie decided elsewhere
    assert rec.events[-2:] == [("data_updated", key, True), ("data_updated", key, False)]
    store.check()


def test_apply_never_takes_a_key_back_nor_writes_version_0() -> None:
    store = VStore()
    key = store.add_key("Vehicle.A")
    with pytest.raises(ValueError, match="at least 1"):
        store.apply(key, b"x", version=0, time_ns=1)
    store.apply(key, b"x", version=5, time_ns=1)
    with pytest.raises(ValueError, match="never below its current 5"):
        store.apply(key, b"y", version=4, time_ns=1)
    with pytest.raises(UnknownKeyError):
        store.apply("Vehicle.Nope", b"y", version=9, time_ns=1)
    assert store.get(key).data == b"x"
    store.check()


def test_check_many_validates_like_set_many_and_writes_nothing(rec: Recorder) -> None:
    store = VStore(max_value_size=4, listener=rec)
    a = store.add_key("Vehicle.A")
    checked = store.check_many(
        [Update("Vehicle.A", bytearray(b"ab"), time_ns=7), Update(a, b"c", if_version=0)]
    )
    assert [tuple(row) for row in checked] == [(a, b"ab", None, 7), (a, b"c", 0, None)]
    assert all(type(row[1]) is bytes for row in checked)
    plain = [(a, b"d", None, 8), (a, b"e", None, None)]  # a provider's batch: by id, bytes
    assert store.check_many(plain) == plain
    with pytest.raises(ValueTooLargeError) as err:
        store.check_many([Update(a, b"ok"), Update(a, b"12345")])
    assert err.value.index == 1
    assert store.get(a).version == 0
    assert rec.events == [("key_added", a, "Vehicle.A")]


def test_a_batch_refuses_every_bad_update_by_its_index_and_writes_nothing(
    store: VStore, rec: Recorder
) -> None:
    """The batch path's fast checks (one comparison per update) let no bad id,
    size, time or version through, and name the update."""
    a = store.add_key("Vehicle.A")
    gone = store.add_key("Vehicle.Gone")
    store.remove_key("Vehicle.Gone")
    n = len(rec.events)
    for bad in (0, -1, gone, a + 1000):
        with pytest.raises(UnknownKeyError) as err:
            store.set_many([Update(a, b"1"), Update(bad, b"2")])
        assert err.value.index == 1
    for field, update in (
        ("time_ns", Update(a, b"2", time_ns=2**64)),
        ("time_ns", Update(a, b"2", time_ns=True)),
        ("if_version", Update(a, b"2", if_version=-1)),
    ):
        with pytest.raises(ValueError, match=rf"updates\[1\]\.{field} must be an integer"):
            store.set_many([Update(a, b"1"), update])
    assert store.get(a).version == 0
    assert len(rec.events) == n


def test_a_batch_takes_every_write_time_of_the_uint64_range(store: VStore, rec: Recorder) -> None:
    """The batch path checks a time against a machine word's range first and the
    rest of 0..2**64-1 the slow way: both edges of each part are written, with
    their times, and one past the range is refused."""
    a = store.add_key("Vehicle.A")
    edges = [0, 2**62 - 1, 2**62, 2**64 - 1]
    store.set_many([Update(a, str(i).encode(), time_ns=t) for i, t in enumerate(edges)])
    assert [time_ns for _, _, time_ns in rec.written] == edges
    assert store.get(a).time_ns == 2**64 - 1
    with pytest.raises(ValueError, match=r"updates\[0\]\.time_ns must be an integer"):
        store.set_many([Update(a, b"x", time_ns=2**64)])
    assert store.get(a).version == len(edges)


def test_the_listener_can_be_read_to_wrap_it(rec: Recorder) -> None:
    store = VStore()
    assert store.listener is None
    store.set_listener(rec)
    assert store.listener is rec
