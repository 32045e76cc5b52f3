"""Translation between the peer protocol's messages and :mod:`replica`'s values. The only place.

Outgoing messages are written as bytes: each event is serialized once (an
event usually goes to every peer) and a message is the concatenation of its
sections' fields, which protobuf reads as one ``PeerMessage``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Final

from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2
from vehicle_middleware.replica import (
    Event,
    GetData,
    Horizon,
    KeyState,
    Kind,
    Leaf,
    Order,
    Outgoing,
    Sync,
    Write,
)
from vehicle_middleware.server.wire import varint

__all__ = [
    "EventBytes",
    "event_from_pb",
    "get_data_from_pb",
    "hello",
    "horizon_from_pb",
    "leaves_from_pb",
    "leaves_to_pb",
    "order_from_pb",
    "states_from_pb",
    "sync_from_pb",
    "welcome",
]

_EVENTS_FIELD: Final = 5
_KINDS: Final = {int(k): k for k in Kind}


def event_to_pb(e: Event) -> cluster_pb2.Event:
    pb = cluster_pb2.Event(
        origin=e.origin,
        boot=e.boot,
        seq=e.seq,
        prev=e.prev,
        seen=e.seen,
        stamp=e.stamp,
        kind=int(e.kind),  # type: ignore[arg-type]
        ref=e.ref,
        won=e.won,
        hash=e.hash,
    )
    add = pb.writes.add
    for w in e.writes:
        pw = add()
        pw.key = w.key
        if w.data is not None:
            pw.data = w.data
        pw.version = w.version
        pw.time_ns = w.time_ns
    return pb


def event_from_pb(pb: cluster_pb2.Event) -> Event:
    """An event as received; its hash is checked by the model, not here."""
    writes = tuple(
        Write(w.key, w.data if w.HasField("data") else None, w.version, w.time_ns)
        for w in pb.writes
    )
    # An unknown kind reads as WRITE: the hash, made over the sender's kind
    # number, then no longer matches and the event is refused as tampered.
    kind = _KINDS.get(pb.kind, Kind.WRITE)
    return Event(
        pb.origin,
        pb.boot,
        pb.seq,
        pb.prev,
        pb.seen,
        pb.stamp,
        kind,
        pb.ref,
        pb.won,
        writes,
        pb.hash,
    )


class EventBytes:
    """Each event's field in a ``PeerMessage``, serialized once (an LRU of them)."""

    def __init__(self, capacity: int = 8192) -> None:
        self._cache: OrderedDict[bytes, bytes] = OrderedDict()
        self._capacity = capacity

    def field(self, e: Event) -> bytes:
        raw = self._cache.get(e.hash)
        if raw is None:
            body = event_to_pb(e).SerializeToString()
            raw = varint(_EVENTS_FIELD << 3 | 2) + varint(len(body)) + body
            self._cache[e.hash] = raw
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        return raw

    def message(self, out: Outgoing) -> bytes:
        """``out`` as the bytes of one ``PeerMessage``."""
        pb = cluster_pb2.PeerMessage()
        if out.state is not None:
            states_to_pb(pb.state, out.state, out.state_head)
        for h in out.horizons:
            pb.horizons.add(origin=h.origin, boot=h.boot, seq=h.seq, hash=h.hash, stamp=h.stamp)
        if out.invs:
            pb.inv.leaves.extend(leaves_to_pb(out.invs))
        for g in out.get_data:
            pb.get_data.add(origin=g.origin, boot=g.boot, seq=g.seq)
        if out.sync is not None:
            pb.sync.leaves.extend(leaves_to_pb(out.sync.leaves))
            pb.sync.digest = out.sync.digest
            pb.sync.head = out.sync.head
        return pb.SerializeToString() + b"".join(self.field(e) for e in out.events)


def leaves_to_pb(leaves: Iterable[Leaf]) -> list[cluster_pb2.Leaf]:
    return [cluster_pb2.Leaf(origin=x.origin, boot=x.boot, seq=x.seq, hash=x.hash) for x in leaves]


def leaves_from_pb(pbs: Iterable[cluster_pb2.Leaf]) -> list[Leaf]:
    return [Leaf(x.origin, x.boot, x.seq, x.hash) for x in pbs]


def horizon_from_pb(pbs: Iterable[cluster_pb2.Horizon]) -> list[Horizon]:
    return [Horizon(h.origin, h.boot, h.seq, h.hash, h.stamp) for h in pbs]


def get_data_from_pb(pbs: Iterable[cluster_pb2.GetData]) -> list[GetData]:
    return [GetData(g.origin, g.boot, g.seq) for g in pbs]


def order_from_pb(pb: cluster_pb2.Order) -> Order:
    return (pb.stamp, pb.origin, pb.hash)


def states_to_pb(pb: cluster_pb2.State, states: Sequence[KeyState], head: Order | None) -> None:
    add = pb.keys.add
    for s in states:
        k = add()
        k.key = s.name
        if s.data is not None:
            k.data = s.data
        k.version = s.version
        k.time_ns = s.time_ns
        k.stamp = s.stamp
        k.origin = s.origin
    if head is not None:
        pb.head.stamp, pb.head.origin, pb.head.hash = head


def states_from_pb(pb: cluster_pb2.State) -> tuple[list[KeyState], Order | None]:
    states = [
        KeyState(
            k.key,
            k.data if k.HasField("data") else None,
            k.version,
            k.time_ns,
            k.stamp,
            k.origin,
        )
        for k in pb.keys
    ]
    head = order_from_pb(pb.head) if pb.HasField("head") and pb.head.hash else None
    return states, head


def sync_from_pb(pb: cluster_pb2.SyncEvent) -> Sync:
    return Sync(tuple(leaves_from_pb(pb.leaves)), pb.digest, pb.head)


def hello(node_id: str, boot: int) -> bytes:
    return cluster_pb2.PeerMessage(
        hello=cluster_pb2.Hello(node_id=node_id, boot=boot)
    ).SerializeToString()


def welcome(node_id: str, boot: int, leaves: Iterable[Leaf]) -> cluster_pb2.PeerMessage:
    return cluster_pb2.PeerMessage(
        welcome=cluster_pb2.Welcome(node_id=node_id, boot=boot, leaves=leaves_to_pb(leaves))
    )
