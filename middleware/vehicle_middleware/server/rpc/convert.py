"""Translation between protobuf messages and the cores' domain objects. The only place.

Validation of the request's *shape* (empty, too many items) lives here too, in
:func:`check_count`, so every servicer says it the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vehicle_middleware.ess import (
    DataUpdated,
    Event,
    Filter,
    InvalidFilterError,
    KeyAdded,
    KeyDemand,
    KeyFresh,
    KeyRemoved,
    KeyStale,
    ProviderBack,
    ProviderGone,
    QueueConfig,
    RawEvent,
    RegisterResult,
    ResyncRequired,
    Status,
    SubscriptionInfo,
    SubscriptionRequest,
    Trigger,
    unpack_queue,
)
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.journal.v1 import journal_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.server.errors import InvalidRequestError, LimitExceededError
from vehicle_middleware.server.journal.consumers import Lost
from vehicle_middleware.server.journal.feed import ConsumerState, Records
from vehicle_middleware.server.journal.follow import Group
from vehicle_middleware.server.journal.poll_answers import Nothing, Reason, Recover
from vehicle_middleware.vstore import Entry, SetResult, Update, UpdateRow

__all__ = [
    "check_count",
    "check_fits",
    "consumer_info",
    "event_batch",
    "filter_from_pb",
    "filter_to_pb",
    "follow_batch",
    "get_response",
    "head_conflict_response",
    "poll_response",
    "publish_rows",
    "queue_configs",
    "queue_configs_to_pb",
    "register_response",
    "set_response",
    "started_batch",
    "subscription_infos",
    "subscription_requests",
    "updates",
]

_TRIGGER_FROM_PB = {
    ess_pb2.TRIGGER_ON_CHANGE: Trigger.ON_CHANGE,
    ess_pb2.TRIGGER_ON_UPDATE: Trigger.ON_UPDATE,
}
_TRIGGER_TO_PB = {v: k for k, v in _TRIGGER_FROM_PB.items()}
_STATUS_TO_PB = {
    Status.OK: ess_pb2.STATUS_OK,
    Status.NOT_FOUND: ess_pb2.STATUS_NOT_FOUND,
    Status.PERMISSION_DENIED: ess_pb2.STATUS_PERMISSION_DENIED,
    Status.INVALID_ARGUMENT: ess_pb2.STATUS_INVALID_ARGUMENT,
}


def check_fits(what: str, size: int, max_bytes: int, advice: str) -> None:
    """Refuse a response that would exceed the message size limit."""
    if size > max_bytes:
        raise LimitExceededError(
            "message size", max_bytes, f"{what} would be {size} bytes; {advice}"
        )


def check_count(field: str, items: Sequence[Any], limit: int) -> None:
    """Refuse an empty repeated field or one longer than ``limit``."""
    if not items:
        raise InvalidRequestError(field, "must not be empty")
    if len(items) > limit:
        raise InvalidRequestError(field, f"at most {limit} per request, got {len(items)}")


# -- EventService ----------------------------------------------------------------


def queue_configs(pbs: Sequence[ess_pb2.QueueConfig]) -> list[QueueConfig]:
    return [QueueConfig(p.queue, p.min_length, p.max_length) for p in pbs]


def queue_configs_to_pb(cfgs: Sequence[QueueConfig]) -> list[ess_pb2.QueueConfig]:
    return [
        ess_pb2.QueueConfig(queue=c.queue, min_length=c.min_length, max_length=c.max_length)
        for c in cfgs
    ]


def started_batch(
    boot_id: str, cfgs: Sequence[QueueConfig], *, window: int = 0, head: str = ""
) -> ess_pb2.EventBatch:
    started = ess_pb2.StreamStarted(
        boot_id=boot_id, queues=queue_configs_to_pb(cfgs), window=window, head=head
    )
    return ess_pb2.EventBatch(events=[ess_pb2.Event(started=started)])


def event_batch(events: Sequence[Event | RawEvent]) -> ess_pb2.EventBatch:
    """One EventBatch of drained events. The delivery hot path.

    Built in place (``events.add()`` and field assignment), not by one
    ``Event(data_updated=DataUpdated(...))`` constructor call per event, which
    copies each nested message into the batch.
    """
    batch = ess_pb2.EventBatch()
    add = batch.events.add
    for e in events:
        if isinstance(e, tuple):  # a DataUpdated, or the plain tuple of its fields
            if isinstance(e, DataUpdated):
                key, seq, time_ns, data, queue, writes = e
            else:  # a row: its queue and writes packed
                key, seq, time_ns, data, packed = e
                queue, writes = unpack_queue(packed)
            d = add().data_updated
            d.key = key
            d.seq = seq
            d.time_ns = time_ns
            if data is not None:
                d.data = data
            if queue:
                d.queue = queue
            if writes > 1:
                d.writes = writes
        elif isinstance(e, KeyAdded):
            a = add().key_added
            a.SetInParent()
            a.key = e.key
            a.name = e.name
        elif isinstance(e, KeyRemoved):
            r = add().key_removed
            r.SetInParent()
            r.key = e.key
            r.name = e.name
        elif isinstance(e, ResyncRequired):
            resync = add().resync
            resync.SetInParent()
            resync.lost = e.lost
        else:
            _health_event(add(), e)
    return batch


def _health_event(pb: ess_pb2.Event, e: Event) -> None:
    """Fill ``pb`` with a health event (rare: off the data branch of the hot path)."""
    if isinstance(e, KeyStale):
        pb.key_stale.SetInParent()
        pb.key_stale.key = e.key
        pb.key_stale.last_write_ns = e.last_write_ns
        pb.key_stale.period_ns = e.period_ns
    elif isinstance(e, KeyFresh):
        pb.key_fresh.SetInParent()
        pb.key_fresh.key = e.key
        pb.key_fresh.write_ns = e.write_ns
    elif isinstance(e, ProviderGone):
        pb.provider_gone.SetInParent()
        pb.provider_gone.provider = e.provider
        pb.provider_gone.keys.extend(e.keys)
    elif isinstance(e, ProviderBack):
        pb.provider_back.SetInParent()
        pb.provider_back.provider = e.provider
        pb.provider_back.keys.extend(e.keys)
    else:  # pragma: no cover - every Event kind is handled above
        raise TypeError(f"not an ESS event: {e!r}")


def subscription_requests(pbs: Sequence[ess_pb2.Subscription]) -> list[SubscriptionRequest]:
    out = []
    for i, p in enumerate(pbs):
        trigger = _TRIGGER_FROM_PB.get(p.trigger)
        if trigger is None:
            raise InvalidRequestError(
                f"subscriptions[{i}].trigger",
                f"unknown trigger {p.trigger}; use TRIGGER_ON_CHANGE (0) or TRIGGER_ON_UPDATE (1)",
            )
        flt: Filter | None = None
        error: InvalidFilterError | None = None
        if p.HasField("filter"):
            try:
                flt = filter_from_pb(p.filter)
            except InvalidFilterError as e:
                error = e
        out.append(
            SubscriptionRequest(
                p.key, p.queue, trigger, p.want_current, filter=flt, filter_error=error
            )
        )
    return out


def filter_from_pb(pb: ess_pb2.Filter) -> Filter | None:
    """The filter of a ``Filter`` message (None for an empty one).

    Raises:
        InvalidFilterError: a part outside its rule.
    """
    flt = Filter.of_ms(
        min_interval_ms=pb.min_interval_ms if pb.HasField("min_interval_ms") else None,
        threshold=pb.threshold if pb.HasField("threshold") else None,
        range=(pb.range.lo, pb.range.hi) if pb.HasField("range") else None,
    )
    return None if flt.empty else flt


def filter_to_pb(flt: Filter | None) -> ess_pb2.Filter | None:
    """A ``Filter`` message of a filter (None for none)."""
    if flt is None:
        return None
    pb = ess_pb2.Filter()
    if flt.min_interval_ms is not None:
        pb.min_interval_ms = flt.min_interval_ms
    if flt.threshold is not None:
        pb.threshold = flt.threshold
    if flt.range is not None:
        pb.range.lo, pb.range.hi = flt.range
    return pb


def register_response(results: Sequence[RegisterResult]) -> list[ess_pb2.SubscriptionResult]:
    out = []
    for r in results:
        pb = ess_pb2.SubscriptionResult(
            key=r.key,
            key_id=r.key_id,
            status=_STATUS_TO_PB[r.status],
            detail=r.detail,
            seq=r.seq,
            no_provider=r.no_provider,
        )
        if r.current is not None:
            pb.current = r.current
        out.append(pb)
    return out


def subscription_infos(infos: Sequence[SubscriptionInfo]) -> list[ess_pb2.SubscriptionInfo]:
    return [
        ess_pb2.SubscriptionInfo(
            key=i.key,
            key_id=i.key_id,
            queue=i.queue,
            trigger=_TRIGGER_TO_PB[i.trigger],
            filter=filter_to_pb(i.filter),
        )
        for i in infos
    ]


# -- VStore ----------------------------------------------------------------------


def updates(pbs: Sequence[vstore_pb2.Update]) -> list[Update]:
    out = []
    for i, p in enumerate(pbs):
        which = p.WhichOneof("key")
        if which is None:
            raise InvalidRequestError(f"updates[{i}].key", "give the key's name or its id")
        key: str | int = p.name if which == "name" else p.id
        out.append(
            Update(
                key,
                p.data,
                if_version=p.if_version if p.HasField("if_version") else None,
                time_ns=p.time_ns if p.HasField("time_ns") else None,
            )
        )
    return out


def publish_rows(pbs: Sequence[vstore_pb2.IdUpdate]) -> list[UpdateRow]:
    """A ``Publish`` message's updates as the V-Store's rows (by id; ``time_ns`` None
    where absent: the store's clock). ``HasField`` is asked only where ``time_ns``
    reads 0 (absent, or set to 0): asked of every update, it is a large share
    of the conversion."""
    return [(u.id, u.data, None, u.time_ns or (0 if u.HasField("time_ns") else None)) for u in pbs]


def set_response(results: Sequence[SetResult], *, head: str = "") -> vstore_pb2.SetResponse:
    return vstore_pb2.SetResponse(
        results=[
            vstore_pb2.SetResult(key_id=r.key_id, version=r.version, conflict=r.conflict)
            for r in results
        ],
        head=head,
    )


def head_conflict_response(current: Sequence[tuple[int, int]], head: str) -> vstore_pb2.SetResponse:
    """A Set refused whole for its ``if_head``: per update (key id, current
    version), and the head to read and retry from."""
    return vstore_pb2.SetResponse(
        results=[
            vstore_pb2.SetResult(key_id=k, version=v, head_conflict=True, head=head)
            for k, v in current
        ],
        head=head,
    )


def get_response(
    entries: Sequence[Entry], not_found: Sequence[str], no_provider: Callable[[int], bool]
) -> vstore_pb2.GetResponse:
    """``no_provider``: whether a key id's provider went away (``EventSubSystem.no_provider``)."""
    values = []
    for e in entries:
        v = vstore_pb2.Value(
            name=e.name,
            id=e.key_id,
            version=e.version,
            time_ns=e.time_ns,
            no_provider=no_provider(e.key_id),
        )
        if e.data is not None:
            v.data = e.data
        values.append(v)
    return vstore_pb2.GetResponse(values=values, not_found=list(not_found))


def demand_update(
    changes: Mapping[int, KeyDemand], names: Mapping[int, str]
) -> vstore_pb2.DemandUpdate:
    """A WatchDemand message: each key's demand (``names``: key id -> name)."""
    return vstore_pb2.DemandUpdate(
        keys=[
            vstore_pb2.KeyDemand(
                key=key,
                name=names[key],
                watched=d.watched,
                min_interval_ms=d.min_interval_ns // 1_000_000,
            )
            for key, d in changes.items()
        ]
    )


# -- the journal service -------------------------------------------------------------

_REASON_TO_PB = {
    Reason.NOT_IN_HISTORY: journal_pb2.RECOVERY_REASON_NOT_IN_HISTORY,
    Reason.BOOT_ENDED: journal_pb2.RECOVERY_REASON_BOOT_ENDED,
    Reason.BOOT_NOT_HELD: journal_pb2.RECOVERY_REASON_BOOT_NOT_HELD,
    Reason.CUT_LOOSE: journal_pb2.RECOVERY_REASON_CUT_LOOSE,
}


def _lost_ranges(lost: Sequence[Lost]) -> list[journal_pb2.LostRange]:
    return [
        journal_pb2.LostRange(
            boot_id=x.boot_id,
            from_offset=x.from_offset,
            to_offset=x.to_offset,
            count=x.count,
            reason=x.reason,
        )
        for x in lost
    ]


def _records(r: Records) -> journal_pb2.Records:
    return journal_pb2.Records(
        boot_id=r.boot_id,
        lines=r.lines,
        last_offset=r.last_offset,
        newest_boot_id=r.newest_boot_id,
        newest_offset=r.newest_offset,
        caught_up=r.caught_up,
    )


def _recovery(r: Recover) -> journal_pb2.Recovery:
    return journal_pb2.Recovery(
        boot_id=r.boot_id,
        n0=r.n0,
        n1=r.n1,
        reason=_REASON_TO_PB[r.reason],
        message=r.message,
        lost=_lost_ranges(r.lost),
        current_boot_id=r.current_boot_id,
    )


def poll_response(answer: Records | Nothing | Recover, vehicle_id: str) -> journal_pb2.PollResponse:
    """A journal answer as its Poll response."""
    if isinstance(answer, Records):
        return journal_pb2.PollResponse(records=_records(answer), vehicle_id=vehicle_id)
    if isinstance(answer, Nothing):
        return journal_pb2.PollResponse(
            nothing_new=journal_pb2.NothingNew(boot_id=answer.boot_id, offset=answer.offset),
            vehicle_id=vehicle_id,
        )
    return journal_pb2.PollResponse(recovery=_recovery(answer), vehicle_id=vehicle_id)


def follow_batch(group: Group, vehicle_id: str) -> journal_pb2.FollowBatch:
    """A Follow group as its message."""
    if isinstance(group.answer, Records):
        return journal_pb2.FollowBatch(
            seq=group.seq, records=_records(group.answer), vehicle_id=vehicle_id
        )
    return journal_pb2.FollowBatch(
        seq=group.seq, recovery=_recovery(group.answer), vehicle_id=vehicle_id
    )


def consumer_info(state: ConsumerState) -> journal_pb2.ConsumerInfo:
    """A registered consumer for ListConsumers."""
    c = state.consumer
    return journal_pb2.ConsumerInfo(
        app=c.app,
        component=c.component,
        position=journal_pb2.Position(boot_id=c.boot_id, offset=c.offset),
        registered_ns=c.registered_ns,
        acknowledged_ns=c.acked_ns,
        unacknowledged_bytes=state.lag_bytes,
        cuts=c.cuts,
        lost=_lost_ranges(c.lost),
    )
