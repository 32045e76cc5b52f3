"""How many streams each app has open, and the per-app limit of provider streams.

:class:`StreamCounts` counts every app's open streams (event streams,
``Publish`` and ``WatchDemand`` streams, the provider streams) and refuses a
provider stream beyond
``max_publish_streams_per_app``. It tells the write claims
(:mod:`vehicle_middleware.server.auth.claims`) when an app's first stream opens and when its
last one ends: a claim holds while its app has a stream.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from vehicle_middleware.server.errors import LimitExceededError

__all__ = ["Presence", "StreamCounts"]


class Presence(Protocol):
    """Told when an app comes to have open streams and when it has none left."""

    def streams_began(self, app: str) -> None:
        """``app`` opened its first stream."""
        ...

    def streams_ended(self, app: str, *, clean: bool) -> None:
        """``app``'s last stream ended (``clean``: to flush, the app goes on)."""
        ...


class StreamCounts:
    """The open streams of every app of one middleware."""

    def __init__(self, *, max_publish_streams_per_app: int, presence: Presence) -> None:
        self._max_publish = max_publish_streams_per_app
        self._presence = presence
        self._streams: Counter[str] = Counter()  # open streams per app
        self._publish_streams: Counter[str] = Counter()

    def opened(self, app: str, *, publish: bool = False) -> None:
        """Count a stream; refuse a Publish stream beyond the per-app limit.

        Raises:
            LimitExceededError: ``app`` already has its limit of Publish streams open.
        """
        if publish:
            limit = self._max_publish
            if self._publish_streams[app] >= limit:
                raise LimitExceededError(
                    "Publish streams (WatchDemand streams included)",
                    limit,
                    f"app {app!r} already has {self._publish_streams[app]} open",
                )
            self._publish_streams[app] += 1
        self._streams[app] += 1
        if self._streams[app] == 1:
            self._presence.streams_began(app)

    def closed(self, app: str, *, publish: bool = False, clean: bool = False) -> None:
        """Uncount a stream; ``clean``: it ended to flush (the app goes on)."""
        if publish:
            self._publish_streams[app] -= 1
            if self._publish_streams[app] <= 0:
                del self._publish_streams[app]
        self._streams[app] -= 1
        if self._streams[app] <= 0:
            del self._streams[app]
            self._presence.streams_ended(app, clean=clean)

    def publish_stream_count(self) -> int:
        """Open Publish streams, all apps together (for the metrics)."""
        return sum(self._publish_streams.values())
