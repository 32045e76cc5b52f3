"""A KUKSA subscription as a normal ESS subscription.

Each KUKSA ``Subscribe`` call is an ESS app of its own, ``<app>.kuksa-sub-N``
(the ESS keeps one stream per app), with one queue (queue 0) of
``buffer_size`` events (0: the default 100; the ESS caps it at 200) and an
ON_UPDATE subscription per key: the drop rule, the drop counters, the
slow-app reports and the journal's records apply to it as to any app. The
app goes when the call ends.

KUKSA messages map a path to one datapoint, so a drained batch is cut where
a key repeats: :func:`updates` yields lists of ``(key id, value, time)``
with each key at most once, in delivery order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from vmw.ess import DataUpdated, QueueConfig, Status, SubscriptionRequest, Trigger
from vmw.server.access import Caller
from vmw.server.delivery import AppStream, EndReason
from vmw.server.errors import (
    InvalidRequestError,
    PermissionDeniedError,
    UnauthenticatedError,
    UnavailableError,
)
from vmw.server.journal.taps import record_delivered
from vmw.server.runtime import Runtime
from vmw.vstore import UnknownKeyError

__all__ = ["DEFAULT_BUFFER", "Update", "updates"]

log = logging.getLogger(__name__)

DEFAULT_BUFFER = 100
"""Queue length of a subscription that asks for ``buffer_size`` 0."""
Update = tuple[int, bytes | None, int]
"""``(key id, value bytes, write time in ns)``."""

_numbers = itertools.count(1)


def _check(rt: Runtime, who: Caller, names: Sequence[str]) -> None:
    if not names:
        raise InvalidRequestError("signal_paths", "give at least one signal")
    limit = min(rt.settings.max_keys_per_request, rt.settings.max_subscriptions_per_app)
    if len(names) > limit:
        raise InvalidRequestError("signal_paths", f"at most {limit} per request, got {len(names)}")
    for i, name in enumerate(names):
        # By name first: a denial tells nothing about whether the key exists.
        rt.access.check(who, "read", name, field=f"signal_paths[{i}]")
        if name not in rt.store:
            e = UnknownKeyError(name)
            e.index = i
            raise e


async def updates(
    rt: Runtime, who: Caller, names: Sequence[str], buffer_size: int
) -> AsyncGenerator[list[Update], None]:
    """Subscribe ``who`` to ``names``; first the current values, then every write.

    Raises (before anything is yielded):
        InvalidRequestError: no names, too many.
        PermissionDeniedError: a name the caller may not read.
        UnknownKeyError: a name that is not a key.
        LimitExceededError, BudgetExceededError: the apps or the event budget.
    """
    names = list(dict.fromkeys(names))
    _check(rt, who, names)
    app = f"{who.app}.kuksa-sub-{next(_numbers)}"
    length = buffer_size or DEFAULT_BUFFER
    queue = QueueConfig(0, min_length=min(10, length), max_length=length)
    stream = rt.open_stream(app, [queue], who.grants)
    rt.access.stream_opened(app)
    expiry = None
    if who.expires_at is not None:
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(max(0.0, who.expires_at - time.time()), stream.expire)
    ess = rt.ess
    store = rt.store
    last: dict[int, bytes | None] = {}
    try:
        requests = [SubscriptionRequest(n, 0, Trigger.ON_UPDATE, want_current=True) for n in names]
        with rt.access.calling(who):
            results = ess.register(app, requests)
        first: list[Update] = []
        for i, r in enumerate(results):
            rt.record(
                "register",
                app=app,
                key=r.key,
                key_id=r.key_id,
                queue=0,
                trigger="on_update",
                status=r.status.name.lower(),
            )
            if r.status is Status.NOT_FOUND:
                e = UnknownKeyError(r.key)
                e.index = i
                raise e
            if r.status is not Status.OK:
                raise PermissionDeniedError(
                    who.app, "read", r.key, r.detail or r.status.name, field=f"signal_paths[{i}]"
                )
            last[r.key_id] = r.current
            if r.current is not None:
                first.append((r.key_id, r.current, store.peek(r.key_id)[1]))
        log.info("app %s: KUKSA subscription %s to %d keys", who.app, app, len(names))
        if first:
            yield first
        try:
            async for batch in _deliver(rt, app, stream, last):
                yield batch
        except asyncio.CancelledError:
            # Cancelled by the runtime (its end reason says why) or by gRPC (the peer went away).
            ended = _ended(stream, who)
            if ended is None:
                raise
            raise ended from None
        ended = _ended(stream, who)
        if ended is not None:
            raise ended
    finally:
        if expiry is not None:
            expiry.cancel()
        rt.access.stream_closed(app)
        rt.close_stream(stream)


def _ended(stream: AppStream, who: Caller) -> Exception | None:
    """Why the runtime ended the stream, as the error the caller gets (None: it did not)."""
    if stream.end_reason is EndReason.EXPIRED:
        return UnauthenticatedError(
            f"the token of app {who.app!r} expired: its KUKSA subscription ends"
        )
    if stream.end_reason is EndReason.SHUTDOWN:
        return UnavailableError("the middleware is shutting down; subscribe again when it is back")
    return None


async def _deliver(
    rt: Runtime, app: str, stream: AppStream, last: dict[int, bytes | None]
) -> AsyncIterator[list[Update]]:
    """The delivery loop: wait for the doorbell, drain a batch, cut it where a key repeats."""
    ess = rt.ess
    journal = rt.journal
    batch_max = rt.settings.batch_max
    doorbell = stream.doorbell
    while stream.end_reason is None:
        doorbell.clear()
        if not ess.pending(app):
            await doorbell.wait()
            continue
        events = ess.drain(app, batch_max)
        batch: list[Update] = []
        seen: set[int] = set()
        for e in events:
            if type(e) is not DataUpdated:
                continue  # lifecycle and health events: KUKSA has no message for them
            data = e.data if e.data is not None else last.get(e.key)
            last[e.key] = data
            if e.key in seen:
                yield batch
                batch, seen = [], set()
            batch.append((e.key, data, e.time_ns))
            seen.add(e.key)
        if batch:
            yield batch
        if journal is not None and journal.full:
            record_delivered(journal, app, events)
        if not ess.pending(app):
            rt.slow_apps.drained(app)
