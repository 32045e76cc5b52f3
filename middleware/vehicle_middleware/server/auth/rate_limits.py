"""How fast an app may call: token buckets per connection, per app and per provider stream.

:class:`RateLimits` holds a bucket per TCP connection (twice an app's rate:
several apps may share a connection) and one per app for calls and stream
opens, and hands each new provider stream its own bucket of messages
(:class:`PublishPace`). Both modes (open and token) apply them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from vehicle_middleware.server.config import AccessSettings
from vehicle_middleware.server.errors import LimitExceededError

__all__ = ["PublishPace", "RateLimits", "TokenBucket"]

_MAX_BUCKETS: Final = 10_000


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up."""

    __slots__ = ("_clock", "_last", "_tokens", "burst", "rate")

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def take(self, n: float = 1.0) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    @property
    def full(self) -> bool:
        return self._tokens + (self._clock() - self._last) * self.rate >= self.burst


class PublishPace:
    """One provider stream's messages per second (``publish_messages_per_s``, burst
    ``publish_burst``)."""

    __slots__ = ("_app", "_bucket")

    def __init__(self, app: str, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self._app = app
        self._bucket = TokenBucket(rate, burst, clock)

    def take(self, written: int) -> None:
        """One more message; ``written``: the batches of the stream written so far.

        Raises:
            LimitExceededError: the stream sends faster than its limit.
        """
        if not self._bucket.take():
            b = self._bucket
            raise LimitExceededError(
                "Publish messages/s",
                b.rate,
                f"app {self._app!r} sent more than {b.rate:g} messages/s (burst {b.burst:g}) "
                f"on one stream; {written} batches were written",
            )


class RateLimits:
    """The request rates of one middleware's connections and apps, and its provider
    streams' message rates."""

    def __init__(
        self,
        *,
        requests_per_s: float,
        burst: int,
        publish_messages_per_s: float,
        publish_burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = requests_per_s
        self._burst = burst
        self._publish_rate = publish_messages_per_s
        self._publish_burst = publish_burst
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._peer_buckets: dict[str, TokenBucket] = {}

    @classmethod
    def of(
        cls, settings: AccessSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> RateLimits:
        """The limits ``settings`` set (``rate_limit_rps``, ``rate_limit_burst``,
        ``publish_messages_per_s``, ``publish_burst``)."""
        return cls(
            requests_per_s=settings.rate_limit_rps,
            burst=settings.rate_limit_burst,
            publish_messages_per_s=settings.publish_messages_per_s,
            publish_burst=settings.publish_burst,
            clock=clock,
        )

    def admit_peer(self, peer: str) -> None:
        """Take one request from the connection's bucket (gRPC's ``peer``).

        Raises:
            LimitExceededError: the connection's request rate is exceeded.
        """
        # A Unix socket's callers all show the same peer ("unix:..."): one bucket
        # would make every app on it share one limit. There each app's own applies.
        if peer and not peer.startswith("unix:"):
            rate = self._rate * 2  # several apps may share a connection
            self._take(self._peer_buckets, peer, rate, self._burst * 2, f"connection {peer}")

    def admit(self, app: str) -> None:
        """Take one request from the app's bucket, or raise LimitExceededError."""
        self._take(self._buckets, app, self._rate, self._burst, f"app {app!r}")

    def _take(
        self, buckets: dict[str, TokenBucket], name: str, rate: float, burst: int, who: str
    ) -> None:
        bucket = buckets.get(name)
        if bucket is None:
            if len(buckets) >= _MAX_BUCKETS:  # forget the idle ones: their buckets are full
                for idle in [n for n, b in buckets.items() if b.full]:
                    del buckets[idle]
            bucket = buckets[name] = TokenBucket(rate, burst, self._clock)
        if not bucket.take():
            raise LimitExceededError(
                "rate limit",
                rate,
                f"{who} sent more than {rate:g} requests/s (burst {burst}); slow down and retry",
            )

    def publish_pace(self, app: str) -> PublishPace:
        """The message rate of one new provider stream of ``app`` (own Publish, KUKSA's
        OpenProviderStream: the same limit)."""
        return PublishPace(app, self._publish_rate, self._publish_burst, self._clock)
