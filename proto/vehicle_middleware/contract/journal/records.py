"""Journal record kinds, the fields each carries, and the levels that select them.

Every record is a flat JSON object with the fields of :data:`ENVELOPE` and
those its kind carries (:data:`KIND_FIELDS`, explained in :data:`Kind`'s
members). The envelope: ``kind``, ``vehicle_id``, ``boot_id``, ``offset``
(uint32, random start per boot, +1 per record in written order modulo 2^32,
including records that were lost: the buffer dropped them or the disk refused
them), ``time_ns`` (when it was recorded; a record the writer adds itself, a
``journal_trimmed`` or a ``write failed`` count, carries the time of the record
written before it, so times never go back in offset order), ``prev_hash`` and
``hash`` (the chain).

The full level writes one record per batch (the format since journal version 2):
``publish_batch`` and ``delivered_batch``. Nothing that can be derived is
recorded: an event was queued iff it was delivered or dropped (a drop record),
so there is no per-event ``queued`` record. Journals written before it
hold one record per event (``publish``, ``queued``, ``delivered``); they are
still read, and :func:`expand` turns batch records into these.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

__all__ = [
    "BATCH_FIELDS",
    "ENVELOPE",
    "FIELDS",
    "HASH_FIELDS",
    "KINDS",
    "KIND_FIELDS",
    "LEVEL_OF",
    "OPTIONAL_BATCH_ARRAYS",
    "Cause",
    "Kind",
    "Level",
    "expand",
    "refusal",
    "unknown_fields",
]


class Level(enum.IntEnum):
    """How much the journal records; each level includes the ones below it."""

    LIFECYCLE = 1
    """Lifecycle only: no per-event records."""
    DROPS = 2
    """Lifecycle, and every evicted, lost or discarded event (the default)."""
    FULL = 3
    """Every record: also each publish, queued and delivered event."""

    @classmethod
    def parse(cls, name: str) -> Level:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"journal level must be {', '.join(cls.names()[:-1])} or {cls.names()[-1]}, "
                f"got {name!r}"
            ) from None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The levels' names as settings spell them: ``lifecycle``, ``drops``, ``full``."""
        return tuple(level.name.lower() for level in cls)


class Kind(enum.StrEnum):
    """Every kind of journal record (its ``kind`` field): the one list of them.

    A member is its string (``Kind.STOP == "stop"``), so a record read back
    compares with it as it is. What each kind carries is :data:`KIND_FIELDS`.
    """

    # -- lifecycle
    START = "start"
    """The middleware started: ``address``, ``level``, ``settings``, and where the
    boot that wrote the directory before it ended (the boots' chain): its
    ``prev_boot_id``, the offset and hash of its last record written
    (``prev_boot_offset``, null if it wrote none; ``prev_boot_hash``), and
    whether that was its ``stop`` (``prev_boot_stopped``); no ``prev_boot_id``
    for a directory's first boot. ``journal verify`` holds that boot's records
    to it: a removed tail or boot shows. (Test and synthetic journals may set a
    ``version`` string; readers, whose ``version`` is publish's number, read it
    as null.)"""
    STOP = "stop"
    """It stopped cleanly: ``reason``. A boot without one was killed or crashed."""
    KEY_ADDED = "key_added"
    """``app``, ``key``, ``key_id``; a key a peer's write added has ``app`` ``peer:ORIGIN``."""
    KEY_REMOVED = "key_removed"
    """``app``, ``key``, ``key_id``."""
    CONNECT = "connect"
    """``app``, ``stream`` (``events`` or ``publish``), ``details``."""
    DISCONNECT = "disconnect"
    """``app``, ``stream``, ``reason``: why an events stream ended (closed, replaced,
    token expired, shutdown, failed); a publish stream's has ``details`` instead
    (``{}``), as an events stream's had before the end reasons."""
    REGISTER = "register"
    """``app``, ``key``, ``key_id``, ``queue``, ``trigger``, ``status``, ``filter``:
    null, or the subscription's filter as ``{"min_interval_ms": int | null,
    "threshold": float | null, "range": [lo, hi] | null}`` (absent in journals
    written before filters: none)."""
    DEREGISTER = "deregister"
    """``app``, ``key``, ``key_id``, ``status``."""
    JOURNAL_DROPPED = "journal_dropped"
    """Records lost by the journal itself: ``count``, ``cause`` (a :class:`Cause`),
    and, written by the next boot, ``lost_boot_id``: the earlier boot the count
    belongs to (:attr:`Cause.CRASH`, or :attr:`Cause.WRITE` for a boot that
    stopped cleanly on a full disk)."""
    JOURNAL_TRIMMED = "journal_trimmed"
    """Retention removed a boot's oldest segments: ``trimmed_boot_id``, ``files``,
    ``bytes``, and where that boot's chain now starts: the record with offset
    ``kept_offset`` and prev_hash ``kept_prev_hash``, or nowhere when
    ``kept_offset`` is null."""
    CONSUMER_CUT = "consumer_cut"
    """Retention removed records a registered journal consumer had not
    acknowledged, because they were more than its bound
    (``journal_consumer_max_lag_bytes``): ``app``, ``component``, ``lost_boot_id``,
    ``from_offset``, ``to_offset`` (inclusive, may wrap), ``count`` offsets of
    that boot, ``reason``; written before the segments go, beside
    ``journal_trimmed``."""
    # -- signal health (see vehicle_middleware.ess.health, vehicle_middleware.ess.presence)
    KEY_STALE = "key_stale"
    """A watched key went unwritten for longer than its expected period: ``key``,
    ``key_id``, ``write_time_ns`` (its last write, 0 if never), ``period_ns``,
    ``apps`` (the subscribers told), ``transition`` (false when only told to a
    new subscriber of a key already stale)."""
    KEY_FRESH = "key_fresh"
    """It is written again: ``key``, ``key_id``, ``write_time_ns`` (the write that
    ended the silence), ``apps``, ``transition``."""
    PROVIDER_GONE = "provider_gone"
    """``app`` (the provider), ``keys``, ``key_ids`` (every key whose claim ended
    as it went away), ``apps`` (the subscribers told)."""
    PROVIDER_BACK = "provider_back"
    """``app`` (the provider claiming them now), ``keys``, ``key_ids`` (those of its
    keys that had no provider), ``apps``."""
    # -- several nodes (vehicle_middleware.server.cluster)
    PEER_UP = "peer_up"
    """This node's link to a peer came up: ``peer``, ``address``, ``boot``."""
    PEER_DOWN = "peer_down"
    """It went down: ``peer``, ``address``, ``error``."""
    CLUSTER_REFUSED = "cluster_refused"
    """Events a peer sent that changed nothing, one record per peer and reason per
    tick: ``peer``, ``reason`` (tampered, too old, in the future, already held,
    broken link, malformed), ``count``, and the first such event's ``origin``,
    ``seq``, ``event_hash`` and ``detail``."""
    # -- drops
    EVICTED = "evicted"
    """``app``, ``key``, ``key_id``, ``queue``, ``seq``, ``reason``, and ``writes``
    where the event stood for more than one write (a filtered subscription's;
    absent: 1)."""
    LOST = "lost"
    """As ``evicted``."""
    DISCARDED = "discarded"
    """As ``evicted``."""
    # -- full, one record per batch
    PUBLISH_BATCH = "publish_batch"
    """A request's writes, recorded at their time: ``writer``, and one entry per
    write in ``key_ids``, ``keys`` (names), ``versions``, ``changes``, ``sizes``;
    ``failures`` where a write of the request is a failure in place of a value
    (:class:`vehicle_middleware.contract.values.Failure`): per write its code
    (``sensor_fault``, ``out_of_range``, ``not_available``, ``network_error``,
    ``overload``, ``unspecified``), null for a value. Absent when none is: an
    ordinary write adds nothing."""
    DELIVERED_BATCH = "delivered_batch"
    """One batch handed to the app's stream: ``app``, ``sent_ns``, and one entry per
    event in ``key_ids``, ``seqs``, ``queues``, ``write_times_ns``, and
    ``write_counts`` (how many writes each event stood for) only where some event
    stood for more than one (a filtered subscription's; absent: 1 each). Expanded,
    an event's count is its ``writes``, as in a drop record."""
    # -- full, one record per event (journals written before the batch records; still read)
    PUBLISH = "publish"
    """``key``, ``key_id``, ``version``, ``changed``, ``size``, ``writer``, ``failure``
    (its code, or absent for a value)."""
    QUEUED = "queued"
    """``app``, ``key_id``, ``queue``, ``seq``."""
    DELIVERED = "delivered"
    """``app``, ``key_id``, ``seq``, ``queue``, ``write_time_ns``, ``sent_ns``; expanded
    from a ``delivered_batch`` with ``write_counts``, also ``writes``."""


class Cause(enum.StrEnum):
    """Why the journal lost records (a ``journal_dropped`` record's ``cause``)."""

    BUFFER = "buffer full"
    """The writer's buffer was full: the event loop never waits for the disk."""
    WRITE = "write failed"
    """A write did not reach the disk (a full disk)."""
    CRASH = "not written before the process ended"
    """Taken but not written when the process died; reported by the next boot."""
    REMOVED = "directory removed"
    """Written, then removed with the journal directory while the middleware ran
    (``rm -rf``); reported by the same boot, first in the directory it made again."""


_DROP: Final = "app key key_id queue seq reason writes"
_SPECS: Final[dict[Kind, tuple[Level, str]]] = {
    Kind.START: (
        Level.LIFECYCLE,
        "address level settings version prev_boot_id prev_boot_offset prev_boot_hash "
        "prev_boot_stopped",
    ),
    Kind.STOP: (Level.LIFECYCLE, "reason"),
    Kind.KEY_ADDED: (Level.LIFECYCLE, "app key key_id"),
    Kind.KEY_REMOVED: (Level.LIFECYCLE, "app key key_id"),
    Kind.CONNECT: (Level.LIFECYCLE, "app stream details"),
    Kind.DISCONNECT: (Level.LIFECYCLE, "app stream reason details"),
    Kind.REGISTER: (Level.LIFECYCLE, "app key key_id queue trigger status filter"),
    Kind.DEREGISTER: (Level.LIFECYCLE, "app key key_id status"),
    Kind.JOURNAL_DROPPED: (Level.LIFECYCLE, "count cause lost_boot_id"),
    Kind.JOURNAL_TRIMMED: (
        Level.LIFECYCLE,
        "trimmed_boot_id files bytes kept_offset kept_prev_hash",
    ),
    Kind.CONSUMER_CUT: (
        Level.LIFECYCLE,
        "app component lost_boot_id from_offset to_offset count reason",
    ),
    Kind.KEY_STALE: (Level.LIFECYCLE, "key key_id write_time_ns period_ns apps transition"),
    Kind.KEY_FRESH: (Level.LIFECYCLE, "key key_id write_time_ns apps transition"),
    Kind.PROVIDER_GONE: (Level.LIFECYCLE, "app keys key_ids apps"),
    Kind.PROVIDER_BACK: (Level.LIFECYCLE, "app keys key_ids apps"),
    Kind.PEER_UP: (Level.LIFECYCLE, "peer address boot"),
    Kind.PEER_DOWN: (Level.LIFECYCLE, "peer address error"),
    Kind.CLUSTER_REFUSED: (
        Level.LIFECYCLE,
        "peer reason count origin seq event_hash detail",
    ),
    Kind.EVICTED: (Level.DROPS, _DROP),
    Kind.LOST: (Level.DROPS, _DROP),
    Kind.DISCARDED: (Level.DROPS, _DROP),
    Kind.PUBLISH_BATCH: (Level.FULL, "writer key_ids keys versions changes sizes failures"),
    Kind.DELIVERED_BATCH: (
        Level.FULL,
        "app sent_ns key_ids seqs queues write_times_ns write_counts",
    ),
    Kind.PUBLISH: (Level.FULL, "key key_id version changed size writer failure"),
    Kind.QUEUED: (Level.FULL, "app key_id queue seq"),
    Kind.DELIVERED: (Level.FULL, "app key_id seq queue write_time_ns sent_ns writes"),
}

# Keyed by the kinds, looked up by any string (a Kind is its string).
LEVEL_OF: Final[Mapping[str, Level]] = {kind: level for kind, (level, _) in _SPECS.items()}
"""The level at which each kind is written."""
KIND_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    kind: frozenset(names.split()) for kind, (_, names) in _SPECS.items()
}
"""The fields each kind may carry besides :data:`ENVELOPE` (the writer refuses
any other: see :func:`refusal`)."""
KINDS: Final = tuple(Kind)
"""Every kind's name, in :class:`Kind`'s order."""

ENVELOPE: Final = ("kind", "vehicle_id", "boot_id", "offset", "time_ns", "prev_hash", "hash")
"""The fields every record carries (the writer and the chain set them)."""
HASH_FIELDS: Final = ("hash", "prev_hash", "kept_prev_hash")
"""The fields that hold a record's hash (hex SHA-256)."""

FIELDS: Final[dict[str, str]] = {
    # every record
    "kind": "string",
    "vehicle_id": "string",
    "boot_id": "string",
    "offset": "long",
    "time_ns": "long",
    "prev_hash": "string",
    "hash": "string",
    # by kind (see KIND_FIELDS)
    "app": "string",
    "key": "string",
    "key_id": "long",
    "queue": "int",
    "seq": "long",
    "reason": "string",
    "version": "long",
    "changed": "boolean",
    "size": "long",
    "writer": "string",
    "write_time_ns": "long",
    "sent_ns": "long",
    "count": "long",
    "cause": "string",
    "stream": "string",
    "trigger": "string",
    "status": "string",
    "details": "json",
    "trimmed_boot_id": "string",
    "files": "long",
    "bytes": "long",
    "kept_offset": "long",
    "kept_prev_hash": "string",
    "lost_boot_id": "string",
    "key_ids": "array<long>",
    "keys": "array<string>",
    "versions": "array<long>",
    "changes": "array<boolean>",
    "sizes": "array<long>",
    "seqs": "array<long>",
    "queues": "array<int>",
    "write_times_ns": "array<long>",
    "address": "string",
    "level": "string",
    "settings": "json",
    "component": "string",
    "from_offset": "long",
    "to_offset": "long",
    "period_ns": "long",
    "apps": "array<string>",
    "transition": "boolean",
    "peer": "string",
    "boot": "string",
    "error": "string",
    "origin": "string",
    "event_hash": "string",
    "detail": "string",
    "prev_boot_id": "string",
    "prev_boot_offset": "long",
    "prev_boot_hash": "string",
    "prev_boot_stopped": "boolean",
    "failures": "array<string>",
    "failure": "string",
    "filter": "json",
    "writes": "long",
    "write_counts": "array<long>",
}
"""Every field a record may carry, with its type: the one definition of the
journal's fields (``vehicle_middleware.telemetry_export.schema`` reads journals by it; the
writer asserts each record it takes keeps to it). ``long`` and ``int`` are
JSON integers (64 and 32 bits), ``json`` a nested JSON value (readers keep its
text). A field added to a record is added here first."""


def unknown_fields(fields: Iterable[str]) -> list[str]:
    """The names among ``fields`` that :data:`FIELDS` lacks (none, for a record
    that keeps to the journal's format)."""
    return sorted(f for f in fields if f not in FIELDS)


def refusal(kind: str, fields: Iterable[str]) -> str | None:
    """Why a record of ``kind`` carrying ``fields`` (besides :data:`ENVELOPE`) is
    not one of the journal's format, naming the kind and the fields; None if it is.

    Linear in ``fields``; the writer's check (a frozenset subset test) says
    whether to ask.
    """
    names = list(fields)
    allowed = KIND_FIELDS.get(kind)
    if allowed is None:
        return (
            f"unknown journal record kind {kind!r} (fields {', '.join(sorted(names)) or 'none'}): "
            f"the kinds are vehicle_middleware.contract.journal.records.Kind ({', '.join(KINDS)})"
        )
    extra = sorted(set(names) - allowed)
    if not extra:
        return None
    outside = [f for f in extra if f not in FIELDS]
    return (
        f"a {str(kind)!r} record does not carry {', '.join(extra)}"
        + (
            f" ({', '.join(outside)}: in no record of the format, records.FIELDS)"
            if outside
            else ""
        )
        + f"; it carries {', '.join(sorted(allowed))}"
    )


BATCH_FIELDS: Final[Mapping[str, tuple[Kind, dict[str, str]]]] = {
    Kind.PUBLISH_BATCH: (
        Kind.PUBLISH,
        {
            "key_ids": "key_id",
            "keys": "key",
            "versions": "version",
            "changes": "changed",
            "sizes": "size",
            "failures": "failure",
        },
    ),
    Kind.DELIVERED_BATCH: (
        Kind.DELIVERED,
        {
            "key_ids": "key_id",
            "seqs": "seq",
            "queues": "queue",
            "write_times_ns": "write_time_ns",
            "write_counts": "writes",
        },
    ),
}
"""Per batch kind: the per-event kind it stands for, and its array fields -> that
kind's scalar fields (the one definition readers expand batches by)."""
OPTIONAL_BATCH_ARRAYS: Final[Mapping[str, object]] = {"failures": None, "write_counts": 1}
"""The batch arrays a record may leave out, and what each entry then holds: no
failure (a value), one write per event."""


def expand(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Records with each batch record replaced by its per-event records.

    An expanded record keeps the batch's other fields (``app``, ``writer``,
    ``sent_ns``, ``time_ns``, ``offset``, ...) and gets ``batch_index``; an
    optional array the batch left out (:data:`OPTIONAL_BATCH_ARRAYS`) is left
    out of its events.
    """
    for rec in records:
        spec = BATCH_FIELDS.get(rec.get("kind", ""))
        if spec is None:
            yield rec
            continue
        kind, columns = spec
        common = {k: v for k, v in rec.items() if k not in columns}
        # An optional array left out stays out of the events: absent there too.
        columns = {a: f for a, f in columns.items() if a in rec or a not in OPTIONAL_BATCH_ARRAYS}
        arrays = [rec.get(name) or [] for name in columns]
        for index, values in enumerate(zip(*arrays, strict=True)):
            yield (
                common
                | dict(zip(columns.values(), values, strict=True))
                | {
                    "kind": kind.value,
                    "batch_index": index,
                }
            )
