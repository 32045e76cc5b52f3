"""Build a middleware's journal and the feed its consumers read, from the settings."""

from __future__ import annotations

from pathlib import Path

from vehicle_middleware.contract.journal.records import Level
from vehicle_middleware.server.config import Settings
from vehicle_middleware.server.journal.consumers import Consumers
from vehicle_middleware.server.journal.feed import Feed
from vehicle_middleware.server.journal.history import History
from vehicle_middleware.server.journal.writer import Journal

__all__ = ["build_journal"]

_ANSWER_SLACK = 64 * 1024
"""Room left in a message beside an answer's lines (field tags, the other fields)."""


def build_journal(settings: Settings, boot_id: str) -> tuple[Journal, Feed]:
    """The journal of ``settings.journal_dir`` (which must be set) and its feed.

    The registry of consumers is read from the directory now; the directory
    itself is taken (locked) when the server starts.
    """
    directory = Path(settings.journal_dir)
    history = History(
        max_records=settings.journal_history_records, max_bytes=settings.journal_history_bytes
    )
    consumers = Consumers(directory, max_consumers=settings.journal_max_consumers)
    consumers.load()
    start = settings.journal_offset_start
    journal = Journal(
        directory,
        vehicle_id=settings.vehicle_id,
        boot_id=boot_id,
        level=Level.parse(settings.journal_level),
        segment_bytes=settings.journal_segment_bytes,
        max_bytes=settings.journal_max_bytes,
        compress=settings.journal_gzip,
        buffer=settings.journal_buffer,
        offset_start=None if start < 0 else start,
        history=history,
    )
    feed = Feed(
        directory,
        boot_id=boot_id,
        first_offset=journal.first_offset,
        history=history,
        consumers=consumers,
        max_lag_bytes=settings.journal_consumer_max_lag_bytes,
        answer_bytes=max(1024, settings.max_message_bytes - _ANSWER_SLACK),
    )
    journal.guard(feed)
    return journal, feed
