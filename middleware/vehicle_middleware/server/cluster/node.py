"""A middleware node with peers: the replicated model wired to the V-Store, the links, the journal.

:class:`ClusterNode` owns the node's :class:`replica.Model`. It turns this
node's writes into events (through :class:`~vehicle_middleware.server.cluster.tap.ClusterTap`),
applies what the model decides to the V-Store by key name (adding keys it
does not know: ``key_added`` reaches the apps that may read them, then
``data_updated`` with the original write time, through the normal ESS path),
hands guarded writes to the model and waits for their verdict, feeds the
model what peers send, and drives its clock: a tick for retention, relays
and guard timeouts, a ``SyncEvent`` to every peer each ``sync_interval_s``.

Refused events are journaled (``cluster_refused``, one record per peer and
reason per tick with the count and the first event) and logged; each peer
link's state changes are logged once and journaled (``peer_up``,
``peer_down``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.contract.channel import Tls, metadata
from vehicle_middleware.contract.journal.records import Kind
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2
from vehicle_middleware.replica import ALL_CONFIRMS, Event, Model, Refusal, Refused, Write
from vehicle_middleware.server.cluster import convert
from vehicle_middleware.server.cluster.links import PeerLink
from vehicle_middleware.server.cluster.tap import ClusterTap
from vehicle_middleware.server.config import ClusterSettings
from vehicle_middleware.server.journal.taps import PublishTap
from vehicle_middleware.vstore import KeyCapacityError, StoreListener, VStore

__all__ = ["ClusterNode", "PeerCredentials"]

log = logging.getLogger(__name__)

_QUIET: Final = frozenset({Refusal.DUPLICATE})
"""Refusals that happen in normal operation (copies crossing): logged at DEBUG."""


@dataclass(slots=True)
class _RefusalEpisode:
    count: int
    first: Refused


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """How this node proves itself to its peers (read at start-up by the server)."""

    token: str | None = None
    """The token its links present (token mode), or None."""
    tls: Tls | None = None
    """TLS to dial peers with, or None (plaintext)."""


class ClusterNode:
    """The replication of one middleware process with peers.

    Built from explicit parts: its settings section, the boot, the V-Store and
    the listener its writes reach today (the node's :attr:`tap` wraps it: the
    server installs the tap as the store's listener), the journal's publish
    tap and record function, the peer credentials, and the largest message a
    link may send (``max_message_bytes``; an event: up to a quarter of it).
    """

    def __init__(
        self,
        settings: ClusterSettings,
        boot_id: str,
        store: VStore,
        listener: StoreListener,
        publish_tap: PublishTap | None,
        record: Callable[..., None],
        credentials: PeerCredentials,
        *,
        max_message_bytes: int,
    ) -> None:
        s = settings
        self._settings = s
        self._store = store
        self._publish_tap = publish_tap
        self._record = record
        self.node_id = s.node_id
        self.addresses = s.peer_addresses
        self.boot = int(boot_id[:16], 16) & (2**63 - 1)
        self.model = Model(
            s.node_id,
            self.boot,
            list(self.addresses),
            self,
            max_confirms=ALL_CONFIRMS if s.confirms_needed is None else s.confirms_needed,
            max_events=s.cluster_max_events,
            max_bytes=s.cluster_max_bytes,
            max_age_s=s.event_max_age_s,
            max_ahead_s=s.event_max_ahead_s,
            max_pending=s.cluster_max_pending,
            send_unread_interval_s=s.send_unread_interval_s,
            guard_timeout_s=s.guard_timeout_s,
            wall=time.time_ns,
            monotonic=time.monotonic,
        )
        self.tap = ClusterTap(
            listener,
            store,
            self._local,
            self.model.forget_key,
            max_event_bytes=max(1024, max_message_bytes // 4),
        )
        """This node's writes become events here; install it as the store's listener."""
        self.encoder = convert.EventBytes()
        self.links = {
            name: PeerLink(
                self.model,
                self.encoder,
                convert.hello(self.node_id, self.boot),
                self.link_changed,
                name,
                address,
                metadata(self.node_id, credentials.token),
                max_message_bytes,
                credentials.tls,
            )
            for name, address in self.addresses.items()
        }
        self.inbound: Counter[str] = Counter()
        """Open links from each peer to this node."""
        self._waiting: dict[bytes, asyncio.Future[bool]] = {}
        self._decided_now: tuple[bytes, bool] | None = None
        self._refusals: dict[tuple[str, Refusal], _RefusalEpisode] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._inbound_tasks: set[asyncio.Task[object]] = set()
        self.stopping = False
        self.dropped_writes = 0
        """Replicated writes this node could not apply (its key limit)."""

    @property
    def head(self) -> str:
        """The hash (hex) of the newest event applied here."""
        return self.model.head.hex()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Dial every peer and start the clock. Returns at once."""
        s = self._settings
        log.info(
            "node %s: %d peers (%s), max_confirms %s (%d confirmations), sync every %.1f s",
            self.node_id,
            len(self.links),
            ", ".join(f"{n}={a}" for n, a in self.addresses.items()),
            s.max_confirms,
            self.model.need,
            s.sync_interval_s,
        )
        for link in self.links.values():
            self._tasks.append(asyncio.create_task(link.run(), name=f"peer-link-{link.name}"))
        self._tasks.append(asyncio.create_task(self._ticker(), name="cluster-ticker"))

    async def stop(self) -> None:
        """Stop the links and the clock; end the links peers opened to this node."""
        self.stopping = True
        for task in self._inbound_tasks:
            task.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._flush_refusals()

    async def _ticker(self) -> None:
        s = self._settings
        period = min(0.2, s.sync_interval_s / 4, s.send_unread_interval_s / 2)
        next_sync = time.monotonic() + s.sync_interval_s
        next_unread = time.monotonic() + s.send_unread_interval_s
        while True:
            await asyncio.sleep(period)
            try:
                self.model.tick()
                now = time.monotonic()
                if now >= next_unread:
                    self.model.resend_unread()
                    next_unread = now + s.send_unread_interval_s
                if now >= next_sync:
                    self.model.want_sync()
                    next_sync = now + s.sync_interval_s
                self._flush_refusals()
            except Exception:  # a bug must not stop the clock for good
                log.exception("node %s: cluster tick failed", self.node_id)
            self.wake()

    def wake(self) -> None:
        """Tell every link there may be something to send."""
        for link in self.links.values():
            link.wake.set()

    # -- this node's writes ------------------------------------------------------------

    def _local(self, writes: list[Write]) -> None:
        self.model.record_local(writes)
        self.wake()

    async def propose(self, writes: Sequence[Write], if_head: bytes) -> bool:
        """A guarded write; whether it won (was applied everywhere).

        Raises:
            replica.GuardRefusal: refused at once (the head moved on).
            TimeoutError: undecided long after the guard timeout (should not happen).
        """
        self._decided_now = None
        event = self.model.propose(writes, if_head)
        self.wake()
        if self._decided_now is not None and self._decided_now[0] == event.hash:
            return self._decided_now[1]
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[event.hash] = future
        try:
            return await asyncio.wait_for(future, self._settings.guard_timeout_s + 5)
        finally:
            self._waiting.pop(event.hash, None)

    # -- replica.Sink ------------------------------------------------------------------

    def apply(self, origin: str, writes: Sequence[Write]) -> None:
        """Writes the model decided to apply: by name, adding unknown keys."""
        store = self._store
        writer = f"peer:{origin}"
        publish_tap = self._publish_tap
        self.tap.applying = True
        if publish_tap is not None:
            publish_tap.begin(writer)
        try:
            for w in writes:
                key_id = store.id_of(w.key)
                if key_id is None:
                    try:
                        key_id = store.add_key(w.key)
                    except KeyCapacityError:
                        self.dropped_writes += 1
                        if self.dropped_writes == 1 or self.dropped_writes % 1000 == 0:
                            log.warning(
                                "node %s: %d replicated writes not applied: the store holds its "
                                "maximum of %d keys (e.g. %r from %s)",
                                self.node_id,
                                self.dropped_writes,
                                store.max_keys,
                                w.key,
                                origin,
                            )
                        continue
                    self._record(Kind.KEY_ADDED, app=writer, key=w.key, key_id=key_id)
                if w.data is not None:
                    try:
                        store.apply(key_id, w.data, version=w.version, time_ns=w.time_ns)
                    except ValueError as e:  # the store's version ran ahead (should not happen)
                        self.dropped_writes += 1
                        log.warning(
                            "node %s: write of %r from %s: %s", self.node_id, w.key, origin, e
                        )
        finally:
            if publish_tap is not None:
                publish_tap.end()
            self.tap.applying = False

    def decided(self, event: Event, won: bool) -> None:
        future = self._waiting.get(event.hash)
        if future is not None and not future.done():
            future.set_result(won)
        else:
            self._decided_now = (event.hash, won)

    # -- what peers send ---------------------------------------------------------------

    def receive(self, peer: str, msg: cluster_pb2.PeerMessage) -> None:
        """One message from ``peer``: its sections, in the protocol's order."""
        model = self.model
        if msg.HasField("state"):
            states, head = convert.states_from_pb(msg.state)
            model.receive_state(peer, states, head)
        if msg.horizons:
            model.receive_horizons(peer, convert.horizon_from_pb(msg.horizons))
        if msg.events:
            events = [convert.event_from_pb(e) for e in msg.events]
            refused = model.receive_events(peer, events)
            for r in refused:
                self._note_refusal(peer, r)
        if msg.HasField("inv"):
            model.receive_invs(peer, convert.leaves_from_pb(msg.inv.leaves))
        if msg.get_data:
            model.receive_get_data(peer, convert.get_data_from_pb(msg.get_data))
        if msg.HasField("sync"):
            model.receive_sync(peer, convert.sync_from_pb(msg.sync))
        self.wake()

    def inbound_changed(self, peer: str, opened: bool) -> None:
        """A peer's link to this node opened or ended (called by its handler's task)."""
        self.inbound[peer] += 1 if opened else -1
        task = asyncio.current_task()
        if task is not None:
            if opened:
                self._inbound_tasks.add(task)
            else:
                self._inbound_tasks.discard(task)

    def link_changed(self, link: PeerLink, boot: int | None) -> None:
        """A link's state changed (the link logged it): journal it."""
        if link.state == "up":
            self._record(Kind.PEER_UP, peer=link.name, address=link.address, boot=boot)
        elif link.state == "down":
            self._record(Kind.PEER_DOWN, peer=link.name, address=link.address, error=link.error)

    def _note_refusal(self, peer: str, refused: Refused) -> None:
        key = (peer, refused.reason)
        episode = self._refusals.get(key)
        if episode is None:
            self._refusals[key] = _RefusalEpisode(1, refused)
        else:
            episode.count += 1

    def _flush_refusals(self) -> None:
        for (peer, reason), episode in self._refusals.items():
            e = episode.first.event
            self._record(
                Kind.CLUSTER_REFUSED,
                peer=peer,
                reason=reason.value,
                count=episode.count,
                origin=e.origin,
                seq=e.seq,
                event_hash=e.hash.hex(),
                detail=episode.first.detail,
            )
            log.log(
                logging.DEBUG if reason in _QUIET else logging.WARNING,
                "node %s: %d event(s) from peer %s refused (%s), e.g. %s#%d %s%s",
                self.node_id,
                episode.count,
                peer,
                reason.value,
                e.origin,
                e.seq,
                e.hash.hex()[:16],
                f": {episode.first.detail}" if episode.first.detail else "",
            )
        self._refusals.clear()

    # -- status -------------------------------------------------------------------------

    def status(self) -> cluster_pb2.StatusResponse:
        st = self.model.status()
        now = time.monotonic()
        peers = []
        for p in st.peers:
            link = self.links[p.name]
            peers.append(
                cluster_pb2.PeerStatus(
                    name=p.name,
                    address=link.address,
                    link=link.state,
                    since_s=now - link.since,
                    inbound=self.inbound[p.name] > 0,
                    sent=p.sent,
                    received=p.received,
                    last_sent=_ref(p.last_sent),
                    last_received=_ref(p.last_received),
                    unconfirmed=p.unconfirmed,
                    refused=p.refused,
                    boot=p.boot or 0,
                    error=link.error,
                )
            )
        return cluster_pb2.StatusResponse(
            node_id=st.node_id,
            boot=st.boot,
            head=st.head.hex(),
            digest=st.digest.hex(),
            keys=st.keys,
            peers=peers,
            max_confirms=self.model.need,
            pending=st.pending,
            guards=st.guards,
            retained=st.retained,
            retained_bytes=st.retained_bytes,
            applied=st.applied,
            superseded=st.superseded,
            refused=st.refused,
            gaps=st.gaps,
            deferred=st.deferred,
            chains=st.chains,
        )


def _ref(event: Event | None) -> cluster_pb2.EventRef | None:
    if event is None:
        return None
    return cluster_pb2.EventRef(
        origin=event.origin, seq=event.seq, stamp=event.stamp, hash=event.hash.hex()
    )
