"""Journal record kinds and the levels that select them.

Every record is a flat JSON object with, besides its own fields:
``kind``, ``vehicle_id``, ``boot_id``, ``offset`` (uint32, random start per
boot, +1 per record in written order modulo 2^32, including records that were
lost: the buffer dropped them or the disk refused them),
``time_ns`` (when it was recorded; a record the writer adds itself, a
``journal_trimmed`` or a ``write failed`` count, carries the time of the record
written before it, so times never go back in offset order), ``prev_hash`` and ``hash`` (the chain).

- lifecycle: ``start`` (``address``, ``level``, ``settings``) and ``stop`` (``reason``);
  ``key_added`` / ``key_removed`` (``app``, ``key``, ``key_id``); ``connect`` /
  ``disconnect`` (``app``, ``stream``: ``events`` or ``publish``,
  ``details``); ``register`` / ``deregister`` (``app``, ``key``, ``key_id``,
  ``queue``, ``trigger``, ``status``); ``journal_dropped`` (``count``,
  ``cause``: records lost by the journal itself: ``buffer full``, ``write
  failed``, or ``not written before the process ended`` with
  ``lost_boot_id``, the earlier boot the count belongs to, written by the
  next boot); ``journal_trimmed`` (``trimmed_boot_id``, ``files``,
  ``bytes``, ``kept_offset``, ``kept_prev_hash``: retention removed that
  boot's oldest segments, and its chain now starts at the record with that
  offset and prev_hash, or nowhere when ``kept_offset`` is null);
  ``consumer_cut`` (``app``, ``component``, ``lost_boot_id``, ``from_offset``,
  ``to_offset``, ``count``, ``reason``): retention removed records a
  registered journal consumer had not acknowledged, because they were more
  than its bound (``journal_consumer_max_lag_bytes``): that consumer lost the
  offsets ``from_offset..to_offset`` (inclusive, may wrap; ``count`` offsets)
  of that boot; written before the segments go, beside ``journal_trimmed``;
  signal health (see ``vmw.ess.health``, ``vmw.ess.presence``): ``key_stale``
  (``key``, ``key_id``, ``write_time_ns``: its last write, 0 if never,
  ``period_ns``, ``apps``: the subscribers told, ``transition``: false when
  only told to a new subscriber of a key already stale) when a watched key
  goes unwritten for longer than its expected period; ``key_fresh`` (``key``,
  ``key_id``, ``write_time_ns``: the write that ended the silence, ``apps``,
  ``transition``)
  when it is written again; ``provider_gone`` (``app``: the provider,
  ``keys``, ``key_ids``: every key whose claim ended as it went away,
  ``apps``: the subscribers told) and ``provider_back`` (``app``: the
  provider claiming them now, ``keys``, ``key_ids``: those of its keys that
  had no provider, ``apps``).
  several nodes (``vmw.server.cluster``): ``peer_up`` (``peer``, ``address``,
  ``boot``) and ``peer_down`` (``peer``, ``address``, ``error``) when this
  node's link to a peer changes state; ``cluster_refused`` (``peer``,
  ``reason``: tampered, too old, in the future, already held, broken link,
  malformed; ``count``, and the first such event's ``origin``, ``seq``,
  ``event_hash`` and ``detail``): events a peer sent that changed nothing, one
  record per peer and reason per tick; a key a peer's write added has
  ``key_added`` with ``app`` ``peer:ORIGIN``.
- drops: ``evicted`` / ``lost`` / ``discarded`` (``app``, ``key``,
  ``key_id``, ``queue``, ``seq``, ``reason``).
- full, one record per batch (the format since issue 19): ``publish_batch``
  (``writer``, and one entry per write in ``key_ids``, ``keys`` (names),
  ``versions``, ``changes``, ``sizes``: a request's writes, recorded at their
  time);
  ``delivered_batch`` (``app``, ``sent_ns``, and one entry per event in
  ``key_ids``, ``seqs``, ``queues``, ``write_times_ns``: one batch handed to
  the app's stream). Nothing that can be derived is recorded: an event was
  queued iff it was delivered or dropped (a drop record), so there is no
  per-event ``queued`` record.
- full, one record per event (journals written before issue 19; still read):
  ``publish`` (``key``, ``key_id``, ``version``, ``changed``, ``size``,
  ``writer``); ``queued`` (``app``, ``key_id``, ``queue``, ``seq``);
  ``delivered`` (``app``, ``key_id``, ``seq``, ``queue``, ``write_time_ns``,
  ``sent_ns``). :func:`expand` turns batch records into these.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any, Final

__all__ = ["BATCH_FIELDS", "FIELDS", "KINDS", "LEVEL_OF", "Level", "expand", "unknown_fields"]


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
                f"journal level must be lifecycle, drops or full, got {name!r}"
            ) from None


LEVEL_OF: Final[dict[str, Level]] = {
    "start": Level.LIFECYCLE,
    "stop": Level.LIFECYCLE,
    "key_added": Level.LIFECYCLE,
    "key_removed": Level.LIFECYCLE,
    "connect": Level.LIFECYCLE,
    "disconnect": Level.LIFECYCLE,
    "register": Level.LIFECYCLE,
    "deregister": Level.LIFECYCLE,
    "journal_dropped": Level.LIFECYCLE,
    "journal_trimmed": Level.LIFECYCLE,
    "peer_up": Level.LIFECYCLE,
    "peer_down": Level.LIFECYCLE,
    "cluster_refused": Level.LIFECYCLE,
    "consumer_cut": Level.LIFECYCLE,
    "key_stale": Level.LIFECYCLE,
    "key_fresh": Level.LIFECYCLE,
    "provider_gone": Level.LIFECYCLE,
    "provider_back": Level.LIFECYCLE,
    "evicted": Level.DROPS,
    "lost": Level.DROPS,
    "discarded": Level.DROPS,
    "publish_batch": Level.FULL,
    "delivered_batch": Level.FULL,
    "publish": Level.FULL,
    "queued": Level.FULL,
    "delivered": Level.FULL,
}
KINDS: Final = tuple(LEVEL_OF)

FIELDS: Final[dict[str, str]] = {
    # every record
    "kind": "string",
    "vehicle_id": "string",
    "boot_id": "string",
    "offset": "long",
    "time_ns": "long",
    "prev_hash": "string",
    "hash": "string",
    # by kind (see above)
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
}
"""Every field a record may carry, with its type: the one definition of the
journal's fields (``vmw.fleet.schema`` reads journals by it; the
writer asserts each record it takes keeps to it). ``long`` and ``int`` are
JSON integers (64 and 32 bits), ``json`` a nested JSON value (readers keep its
text). A field added to a record is added here first."""


def unknown_fields(fields: Iterable[str]) -> list[str]:
    """The names among ``fields`` that :data:`FIELDS` lacks (none, for a record
    that keeps to the journal's format)."""
    return sorted(f for f in fields if f not in FIELDS)


BATCH_FIELDS: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "publish_batch": (
        "publish",
        {
            "key_ids": "key_id",
            "keys": "key",
            "versions": "version",
            "changes": "changed",
            "sizes": "size",
        },
    ),
    "delivered_batch": (
        "delivered",
        {"key_ids": "key_id", "seqs": "seq", "queues": "queue", "write_times_ns": "write_time_ns"},
    ),
}
"""Per batch kind: the per-event kind it stands for, and its array fields -> that
kind's scalar fields (the one definition readers expand batches by)."""


def expand(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Records with each batch record replaced by its per-event records.

    An expanded record keeps the batch's other fields (``app``, ``writer``,
    ``sent_ns``, ``time_ns``, ``offset``, ...) and gets ``batch_index``.
    """
    for rec in records:
        spec = BATCH_FIELDS.get(rec.get("kind", ""))
        if spec is None:
            yield rec
            continue
        kind, columns = spec
        common = {k: v for k, v in rec.items() if k not in columns}
        arrays = [rec.get(name) or [] for name in columns]
        for index, values in enumerate(zip(*arrays, strict=True)):
            yield (
                common
                | dict(zip(columns.values(), values, strict=True))
                | {
                    "kind": kind,
                    "batch_index": index,
                }
            )
