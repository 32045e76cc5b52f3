"""A KUKSA subscription as a normal ESS subscription.

Each KUKSA ``Subscribe`` call is an ESS app of its own, ``<app>/kuksa-sub-N``
(the ESS keeps one stream per app), with one queue (queue 0) of
``buffer_size`` events (0: the default 100; the ESS caps it at 200; its
reservation, at most 10 of them, counts towards its app's share of the event
budget, and queues 1 and 2 reserve nothing) and an
ON_UPDATE subscription per key: the drop rule, the drop counters, the
slow-app reports and the journal's records apply to it as to any app. The
app goes when the call ends.

The call is a stream session (:mod:`vehicle_middleware.server.session`), the lifecycle and
delivery loop of the own event streams. A KUKSA subscriber wants the value
with every write, so the subscriptions ask the ESS for it
(:func:`subscription_requests`). KUKSA messages map a path to one datapoint,
so a drained batch is cut where a key repeats
(:mod:`vehicle_middleware.server.kuksa.response_cuts`):
:meth:`KuksaSubscriptions.updates` yields sequences of updates (data events: key id, seq, write
time, value, queue) with each key at most once, in delivery order.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Final

from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.ess import (
    EventSubSystem,
    Filter,
    QueueConfig,
    Status,
    SubscriptionRequest,
    Trigger,
)
from vehicle_middleware.server import codecs
from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.permissions import require
from vehicle_middleware.server.auth.read_policy import StreamReadPolicy
from vehicle_middleware.server.config import RequestLimits
from vehicle_middleware.server.errors import (
    InvalidRequestError,
    LimitExceededError,
    PermissionDeniedError,
)
from vehicle_middleware.server.journal.taps import filter_record
from vehicle_middleware.server.kuksa import entries_reference
from vehicle_middleware.server.kuksa.response_cuts import Update, cut
from vehicle_middleware.server.session import Record, Streams
from vehicle_middleware.vstore import UnknownKeyError, VStore

__all__ = [
    "DEFAULT_BUFFER",
    "SUBSCRIPTION_MARK",
    "KuksaSubscriptions",
    "Update",
    "subscription_queues",
    "subscription_requests",
]

log = logging.getLogger(__name__)

SUBSCRIPTION_MARK: Final = "/kuksa-sub-"
"""A KUKSA subscription's ESS app is ``<app>/kuksa-sub-N``: no caller can claim it,
since an app id (or a token's subject, or a certificate's name) never holds a ``/``
(:mod:`vehicle_middleware.server.auth.authentication`), so no other stream can replace it."""
DEFAULT_BUFFER = 100
"""Queue length of a subscription that asks for ``buffer_size`` 0."""

_numbers = itertools.count(1)

_CUTS: Final[dict[codecs.Codecs, codecs.Cut]] = {
    codecs.Codecs.FAST: cut,
    codecs.Codecs.REFERENCE: entries_reference.cut,
}
"""A subscription's cut of its drained events, by the implementation selected
(:func:`vehicle_middleware.server.codecs.select`)."""


class KuksaSubscriptions:
    """The KUKSA subscriptions of one middleware: each a stream session of its own
    ESS app (see the module)."""

    def __init__(
        self,
        *,
        store: VStore,
        ess: EventSubSystem,
        streams: Streams,
        read_policy: StreamReadPolicy,
        limits: RequestLimits,
        record: Record,
    ) -> None:
        self._store = store
        self._ess = ess
        self._streams = streams
        self._read_policy = read_policy
        self._limits = limits
        self._record = record

    def check_count(self, field: str, count: int) -> None:
        """Refuse a subscription of no signal, or of more than one request or app may hold.

        Raises:
            InvalidRequestError: naming ``field`` and the limit.
        """
        if not count:
            raise InvalidRequestError(field, "give at least one signal")
        limit = min(self._limits.max_keys_per_request, self._limits.max_subscriptions_per_app)
        if count > limit:
            raise InvalidRequestError(field, f"at most {limit} per request, got {count}")

    def _check(self, who: Caller, names: Sequence[str], field: str) -> None:
        self.check_count(field, len(names))
        for i, name in enumerate(names):
            # By name first: a denial tells nothing about whether the key exists.
            require(who, "read", name, field=f"{field}[{i}]")
            if name not in self._store:
                e = UnknownKeyError(name)
                e.index = i
                raise e
        # One app's subscriptions, on its own stream and every KUKSA subscription of it.
        held = self._streams.subscriptions_held(who.app)
        limit = self._limits.max_subscriptions_per_app
        if held + len(names) > limit:
            raise LimitExceededError(
                "subscriptions",
                limit,
                f"app {who.app!r} holds {held} and asks for {len(names)} more",
            )

    async def updates(
        self,
        who: Caller,
        names: Sequence[str],
        buffer_size: int,
        field: str = "signal_paths",
        *,
        flt: Filter | None = None,
    ) -> AsyncGenerator[Sequence[Update], None]:
        """Subscribe ``who`` to ``names`` (the request's ``field``); first the current
        values, then every write (with ``flt``, at most one per key per interval: the
        latest, at the interval's end).

        The subscription is a stream session like an app's own event stream
        (:mod:`vehicle_middleware.server.session`): the same lifecycle, delivery loop, journal
        records and end reasons, mapped to the same statuses.

        Raises (before anything is yielded):
            InvalidRequestError: no names, too many.
            PermissionDeniedError: a name the caller may not read.
            UnknownKeyError: a name that is not a key.
            LimitExceededError, BudgetExceededError: the apps or the event budget.
        Raises later:
            StreamEndedError: the middleware ended it (token expired, shutting down).
        """
        names = list(dict.fromkeys(names))
        self._check(who, names, field)
        app = f"{who.app}{SUBSCRIPTION_MARK}{next(_numbers)}"
        length = buffer_size or DEFAULT_BUFFER
        async with self._streams.session(who, subscription_queues(length), app=app) as session:
            first = self._register(who, app, names, field, flt)
            log.info("app %s: KUKSA subscription %s to %d keys", who.app, app, len(names))
            # At once, as the KUKSA databroker does: every subscribed signal, with its
            # value where it has one (a client may wait for this before it starts).
            yield first
            cuts = _CUTS[codecs.selected()]
            async for events in session.batches():
                for batch in cuts(events):
                    yield batch

    def _register(
        self,
        who: Caller,
        app: str,
        names: list[str],
        field: str,
        flt: Filter | None,
    ) -> list[Update]:
        """Register the subscription's keys; returns each with its current value (None:
        none written yet), in the order asked."""
        with self._read_policy.calling(who):
            results = self._ess.register(app, subscription_requests(names, flt))
        first: list[Update] = []
        for i, r in enumerate(results):
            self._record(
                Kind.REGISTER,
                app=app,
                key=r.key,
                key_id=r.key_id,
                queue=0,
                trigger="on_update",
                status=r.status.name.lower(),
                filter=filter_record(flt),
            )
            if r.status is Status.NOT_FOUND:
                e = UnknownKeyError(r.key)
                e.index = i
                raise e
            if r.status is not Status.OK:
                raise PermissionDeniedError(
                    who.app, "read", r.key, r.detail or r.status.name, field=f"{field}[{i}]"
                )
            first.append((r.key_id, r.seq, self._store.peek(r.key_id)[1], r.current, 0))
        return first


def subscription_queues(length: int) -> list[QueueConfig]:
    """A KUKSA subscription's queues: queue 0 of ``length`` events, reserving up to 10
    of them; queues 1 and 2, which none of its subscriptions uses, reserve nothing."""
    return [
        QueueConfig(0, min_length=min(10, length), max_length=length),
        QueueConfig(1, min_length=0, max_length=1),
        QueueConfig(2, min_length=0, max_length=1),
    ]


def subscription_requests(
    names: Sequence[str], flt: Filter | None = None
) -> list[SubscriptionRequest]:
    """A KUKSA subscription's ESS subscriptions: queue 0, every write, each event
    with its value (also of a write that stored equal bytes), the current values
    for the first response, and the call's filter (its ``min_sample_interval``)."""
    return [
        SubscriptionRequest(
            name, 0, Trigger.ON_UPDATE, want_current=True, with_value=True, filter=flt
        )
        for name in names
    ]
