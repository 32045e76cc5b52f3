"""Build a middleware's journal and the feed its consumers read, from the settings."""

from __future__ import annotations

from pathlib import Path

from vehicle_middleware.contract.journal.records import Level
from vehicle_middleware.server.config import JournalSettings
from vehicle_middleware.server.journal.consumers import Consumers
from vehicle_middleware.server.journal.feed import Feed
from vehicle_middleware.server.journal.history import History
from vehicle_middleware.server.journal.writer import Journal

__all__ = ["build_journal"]

_ANSWER_SLACK = 64 * 1024
"""Room left in a message beside an answer's lines (field tags, the other fields)."""


def build_journal(
    settings: JournalSettings, boot_id: str, *, vehicle_id: str, max_message_bytes: int
) -> tuple[Journal, Feed]:
    """The journal of ``settings.dir`` (which must be set) and its feed.

    ``vehicle_id`` is written in every record; ``max_message_bytes`` bounds the
    consumers' answers.

    The registry of consumers is read from the directory now; the directory
    itself is taken (locked) when the server starts.
    """
    directory = Path(settings.dir)
    history = History(max_records=settings.history_records, max_bytes=settings.history_bytes)
    consumers = Consumers(
        directory,
        max_consumers=settings.max_consumers,
        max_per_app=settings.max_consumers_per_app,
    )
    consumers.load()
    start = settings.offset_start
    journal = Journal(
        directory,
        vehicle_id=vehicle_id,
        boot_id=boot_id,
        level=Level.parse(settings.level),
        segment_bytes=settings.segment_bytes,
        max_bytes=settings.max_bytes,
        compress=settings.gzip,
        buffer=settings.buffer,
        offset_start=None if start < 0 else start,
        history=history,
    )
    feed = Feed(
        directory,
        boot_id=boot_id,
        first_offset=journal.first_offset,
        history=history,
        consumers=consumers,
        max_lag_bytes=settings.consumer_max_lag_bytes,
        answer_bytes=max(1024, max_message_bytes - _ANSWER_SLACK),
    )
    journal.guard(feed)
    return journal, feed
