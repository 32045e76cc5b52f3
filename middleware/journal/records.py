"""Journal record kinds and the levels that select them.

Every record is a flat JSON object with, besides its own fields:
``kind``, ``vehicle_id``, ``boot_id``, ``offset`` (uint32, random start per
boot, +1 per record in written order modulo 2^32, including records that were
lost: the buffer dropped them or the disk refused them),
``time_ns`` (when it was recorded; a record the writer adds itself, a
``journal_trimmed`` or a ``write failed`` count, carries the time of the record
written before it, so times never go back in offset order), ``prev_hash`` and ``hash`` (the chain).

- lifecycle: ``start`` (``version``, ``settings``) and ``stop`` (``reason``);
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
  offset and prev_hash, or nowhere when ``kept_offset`` is null).
- drops: ``evicted`` / ``lost`` / ``discarded`` (``app``, ``key``,
  ``key_id``, ``queue``, ``seq``, ``reason``).
- full: ``publish`` (``key``, ``key_id``, ``version``, ``changed``, ``size``,
  ``writer``); ``queued`` (``app``, ``key_id``, ``queue``, ``seq``);
  ``delivered`` (``app``, ``key_id``, ``seq``, ``queue``, ``write_time_ns``,
  ``sent_ns``).
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["KINDS", "LEVEL_OF", "Level"]


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
    "evicted": Level.DROPS,
    "lost": Level.DROPS,
    "discarded": Level.DROPS,
    "publish": Level.FULL,
    "queued": Level.FULL,
    "delivered": Level.FULL,
}
KINDS: Final = tuple(LEVEL_OF)
