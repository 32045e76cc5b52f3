"""The replicated model of one node: the protocol's rules, without the wire. Pure.

The network protocol and the ordered writes (docs/design.md, "Several nodes" and
"Ordered writes"), adapted:

* Every write request accepted on a node becomes an event of the node's
  chain (:meth:`Model.record_local`); the node has applied it already (a
  node's own apps never wait for the network). Guarded writes
  (:meth:`Model.propose`) wait for the node's own verdict.
* Peers are told of events and confirm them with cumulative ``Inv`` leaves
  ("I hold chain C up to seq S"), which every node sends to every peer.
* A node applies another node's event once ``need`` nodes other than the
  event's origin and itself confirmed it (``max_confirms``), and once every
  earlier event of its chain was applied: per origin, in order. The conflict
  rule (:mod:`vehicle_middleware.replica.keys`) decides what a write changes.
* An event is refused and counted, changing nothing, when its hash is not
  its content's, its stamp is outside the validity window, or its chain
  position is held already (:class:`vehicle_middleware.replica.messages.Refusal`).
* A guarded event names the head its writer saw (``seen``); it wins iff no
  event comes between that head and it in the cluster's order (stamp,
  origin, hash). Only its origin decides, once every node confirmed it and
  it holds every event any node confirmed holding (then it knows every event
  ordered before it: each node sends its own events before its
  confirmations, and stamps follow causality), and it says so in
  a ``VERDICT`` event; an origin that cannot decide within ``guard_timeout``
  decides *lost*, which is always safe. So two guarded writes against one
  head are never both applied.
* Every ``sync_interval`` a node sends its leaves; a peer pushes what the
  sender lacks. What retention already forgot travels as key states and a
  horizon. Messages are composed on demand for each peer
  (:meth:`Model.next_message`): a peer that stops reading holds nothing here
  but its cursors, and costs the others nothing.

Bounded: retention (count, bytes, age) for settled events, ``max_pending``
for received events waiting for confirmations (beyond it new ones are left
for a later resend), ``max_guards`` for undecided guarded writes; chains
whose last event left the window are forgotten.

Not thread-safe: one event loop drives it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from vehicle_middleware.replica.chains import Chain, Retention
from vehicle_middleware.replica.events import (
    ChainId,
    Event,
    HybridClock,
    Kind,
    Order,
    Write,
    make_event,
)
from vehicle_middleware.replica.keys import KeyState, KeyStates
from vehicle_middleware.replica.messages import (
    GetData,
    Horizon,
    Leaf,
    Outgoing,
    Refusal,
    Refused,
    Sync,
)
from vehicle_middleware.vstore import InvalidKeyNameError, check_key_name

__all__ = ["ALL_CONFIRMS", "GuardRefusal", "Model", "ModelStatus", "PeerStatus", "Sink"]

ALL_CONFIRMS: Final = -1
"""``max_confirms`` meaning every node."""
_NO_ORDER: Final[Order] = (0, "", b"")
_MAX_ORIGIN: Final = 64


class Sink(Protocol):
    """Where the model's decisions land (the node's V-Store and its callers)."""

    def apply(self, origin: str, writes: Sequence[Write]) -> None:
        """Apply writes that won the conflict rule (``data`` None: add the key)."""

    def decided(self, event: Event, won: bool) -> None:
        """This node decided one of its guarded events."""


class GuardRefusal(Exception):
    """A guarded write refused at once; ``head`` is the head to read and retry from."""

    def __init__(self, head: bytes, reason: str) -> None:
        self.head = head
        self.reason = reason
        super().__init__(reason)


@dataclass(slots=True)
class _Guard:
    """One of this node's guarded events, until its verdict."""

    event: Event
    head: Order
    """The order of the head it was made against."""
    pred: Order
    """The latest counted event known to come before it in the order."""
    at: float


@dataclass(slots=True)
class _Peer:
    """What this node knows of one peer, and what it owes it."""

    name: str
    boot: int | None = None
    up: bool = False
    """The link to it is up: messages can be composed for it."""
    acked: dict[ChainId, int] = field(default_factory=dict)
    """Per chain, how far the peer holds it (its Inv, Sync and Welcome leaves)."""
    cursor: dict[ChainId, int] = field(default_factory=dict)
    """Per chain, how far it was sent on the current link (or the peer holds it)."""
    ready: set[ChainId] = field(default_factory=set)
    push: set[ChainId] = field(default_factory=set)
    """Chains to send now, however recent their events (asked for, or catching up)."""
    inv: set[ChainId] = field(default_factory=set)
    """Chains whose leaf the peer has not been told."""
    get_data: dict[ChainId, GetData] = field(default_factory=dict)
    horizons: dict[ChainId, Horizon] = field(default_factory=dict)
    state_due: bool = False
    state_queue: list[KeyState] | None = None
    """A snapshot of the key states being sent, a budget per message."""
    state_pos: int = 0
    sync_due: bool = False
    last_sync: dict[ChainId, int] = field(default_factory=dict)
    unread_mark: dict[ChainId, int] = field(default_factory=dict)
    """Per chain, its confirmations at the previous unread check."""
    inv_sent_at: float = float("-inf")
    sent: int = 0
    received: int = 0
    last_sent: Event | None = None
    last_received: Event | None = None
    refused: Counter[Refusal] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class PeerStatus:
    name: str
    up: bool
    boot: int | None
    sent: int
    received: int
    last_sent: Event | None
    last_received: Event | None
    unconfirmed: int
    """Events this node holds that the peer has not confirmed."""
    refused: dict[str, int]


@dataclass(frozen=True, slots=True)
class ModelStatus:
    node_id: str
    boot: int
    head: bytes
    digest: bytes
    keys: int
    chains: int
    retained: int
    retained_bytes: int
    pending: int
    """Received events waiting for confirmations."""
    guards: int
    """This node's guarded writes waiting for their verdict."""
    applied: int
    superseded: int
    refused: dict[str, int]
    gaps: int
    deferred: int
    peers: tuple[PeerStatus, ...]


class Model:
    """One node's replicated model."""

    def __init__(
        self,
        node_id: str,
        boot: int,
        peers: Sequence[str],
        sink: Sink,
        *,
        max_confirms: int = 0,
        max_events: int = 100_000,
        max_bytes: int = 64 * 1024 * 1024,
        max_age_s: float = 300.0,
        max_ahead_s: float = 5.0,
        max_pending: int = 100_000,
        max_guards: int = 1_000,
        send_unread_interval_s: float = 1.0,
        guard_timeout_s: float = 2.0,
        inv_delay_s: float = 0.05,
        inv_urgent_s: float = 0.002,
        wall: Callable[[], int],
        monotonic: Callable[[], float],
    ) -> None:
        """Args:
        node_id: this node's id (unique in the cluster).
        boot: this process start (a chain per boot).
        peers: the other nodes' ids (every node lists every other).
        max_confirms: confirmations by nodes other than an event's origin and
            this one before this one applies it; ALL_CONFIRMS: every other node.
        max_events, max_bytes, max_age_s: retention of settled events.
        max_ahead_s: how far in the future an event's stamp may be.
        max_pending: received events waiting for confirmations, at most.
        max_guards: this node's undecided guarded writes, at most.
        send_unread_interval_s: a peer is sent another node's event only when
            it has not confirmed it for this long (a relay, for lost links).
        guard_timeout_s: this node's guarded writes not decidable within it lose.
        inv_delay_s: confirmations that nothing waits for (no max_confirms, no
            guarded write) are sent with the next events, or after this long:
            one message per peer for many events instead of one per event.
        inv_urgent_s: the same when something waits for them.
        wall: ns since the epoch (stamps, the window); monotonic: seconds.
        """
        if not peers:
            raise ValueError("a model needs at least one peer")
        if node_id in peers or len(set(peers)) != len(peers):
            raise ValueError("peers must be distinct and not this node")
        self.node_id = node_id
        self.boot = boot
        self._sink = sink
        self._peers = {name: _Peer(name) for name in peers}
        others = len(peers) - 1  # besides an event's origin and this node
        if max_confirms == ALL_CONFIRMS:
            max_confirms = others
        if max_confirms < 0:
            raise ValueError(f"max_confirms must be >= 0 or all, got {max_confirms}")
        self.need = min(max_confirms, others)
        self._wall = wall
        self._mono = monotonic
        self._clock = HybridClock(wall)
        self._max_age_ns = int(max_age_s * 1e9)
        self._max_ahead_ns = int(max_ahead_s * 1e9)
        self._max_pending = max_pending
        self._max_guards = max_guards
        self._unread_s = send_unread_interval_s
        self._guard_timeout_s = guard_timeout_s
        self._inv_delay_s = inv_delay_s
        self._inv_urgent_s = inv_urgent_s
        self._retention = Retention(
            max_events=max_events, max_bytes=max_bytes, max_age_ns=self._max_age_ns
        )
        self._own = Chain((node_id, boot))
        self._chains: dict[ChainId, Chain] = {self._own.id: self._own}
        self._keys = KeyStates()
        self._head: Order = _NO_ORDER
        self._counted: Order = _NO_ORDER
        """The latest counted event held (writes, and guarded ones that won)."""
        self._guards: dict[bytes, _Guard] = {}
        self._foreign_guarded: dict[bytes, Event] = {}
        self._unsettled = 0
        self.applied = 0
        self.superseded = 0
        self.gaps = 0
        self.deferred = 0
        self.forks = 0
        self.refused: Counter[Refusal] = Counter()

    # -- what this node is ---------------------------------------------------------

    @property
    def head(self) -> bytes:
        """The hash of the newest event applied here (empty before any)."""
        return self._head[2]

    def digest(self) -> bytes:
        return self._keys.digest()

    def key_state(self, name: str) -> KeyState | None:
        return self._keys.get(name)

    def leaves(self) -> tuple[Leaf, ...]:
        """The last held event of every chain (the model's leaves)."""
        return tuple(
            Leaf(o, b, c.held, c.last_hash) for (o, b), c in self._chains.items() if c.held > 0
        )

    def sync(self) -> Sync:
        return Sync(self.leaves(), self.digest(), self.head)

    def peer_names(self) -> list[str]:
        return list(self._peers)

    # -- this node's writes --------------------------------------------------------

    def record_local(self, writes: Sequence[Write]) -> Event:
        """An event for writes this node has applied already (a request's writes,
        in order, with the versions the V-Store gave them). O(writes)."""
        own = self._own
        stamp = self._clock.now()
        event = make_event(
            self.node_id,
            self.boot,
            own.held + 1,
            own.last_hash,
            self.head,
            stamp,
            Kind.WRITE,
            writes,
        )
        self._hold(own, event)
        own.applied = own.held
        for w in writes:
            if w.data is None:
                self._keys.add(w.key)
            else:
                self._keys.put(KeyState(w.key, w.data, w.version, w.time_ns, stamp, self.node_id))
        self._note(event)
        self._advance_head(event)
        self.applied += 1
        return event

    def propose(self, writes: Sequence[Write], if_head: bytes) -> Event:
        """A guarded event: ``writes`` applied only if nothing comes between the
        head ``if_head`` and it; decided later (:meth:`Sink.decided`).

        Raises:
            GuardRefusal: ``if_head`` is not this node's head, a newer event is
                held but not yet applied here, or too many guarded writes wait.
        """
        if if_head != self.head:
            raise GuardRefusal(self.head, "the head moved on: read it again and resend")
        if self._counted != self._head:
            raise GuardRefusal(self.head, "a newer event is on its way here: read and resend")
        if len(self._guards) >= self._max_guards:
            raise GuardRefusal(
                self.head, f"{self._max_guards} guarded writes already wait for their verdict"
            )
        own = self._own
        event = make_event(
            self.node_id,
            self.boot,
            own.held + 1,
            own.last_hash,
            self.head,
            self._clock.now(),
            Kind.GUARDED,
            writes,
        )
        self._hold(own, event)
        own.applied = own.held
        self._guards[event.hash] = _Guard(event, self._head, self._counted, self._mono())
        self._try_decide()
        return event

    def forget_key(self, name: str) -> None:
        """The key was removed on this node (removals are node-local)."""
        self._keys.forget(name)

    # -- what peers say ------------------------------------------------------------

    def peer_up(self, peer: str, boot: int, leaves: Iterable[Leaf]) -> None:
        """The link to ``peer`` is up; ``leaves``: what it holds (its Welcome)."""
        p = self._peers[peer]
        if p.boot != boot:
            p.acked = {}
            p.last_sync = {}
        p.boot = boot
        p.up = True
        p.cursor = {}
        for leaf in leaves:
            p.acked[leaf.chain] = max(p.acked.get(leaf.chain, 0), leaf.seq)
            p.cursor[leaf.chain] = leaf.seq
        for cid, chain in self._chains.items():
            if cid != (peer, boot) and chain.held > p.cursor.get(cid, 0):
                self._rewind(p, cid, p.cursor.get(cid, 0) + 1)
        p.inv = set(self._chains)
        p.sync_due = True
        self._advance_all()

    def peer_down(self, peer: str) -> None:
        """The link to ``peer`` is down: nothing is composed for it until it is up."""
        p = self._peers[peer]
        p.up = False
        p.cursor.clear()
        p.ready.clear()
        p.push.clear()
        p.horizons.clear()
        p.get_data.clear()
        p.state_due = False
        p.state_queue = None

    def receive_events(self, peer: str, events: Sequence[Event]) -> list[Refused]:
        """Events from ``peer``: hold the good ones, apply what may be applied.

        Returns the refused ones (each also counted). O(events + writes).
        """
        p = self._peers[peer]
        refused: list[Refused] = []
        now = self._wall()
        for event in events:
            problem = self._check(event, now)
            if problem is not None:
                refused.append(self._refuse(p, event, *problem))
                continue
            cid = event.chain
            chain = self._chains.get(cid)
            if chain is None and event.seq == 1 and not event.prev:
                chain = self._chains[cid] = Chain(cid)
            if chain is None or event.seq > chain.held + 1:
                held = 0 if chain is None else chain.held
                p.get_data[cid] = GetData(event.origin, event.boot, held + 1)
                self.gaps += 1
                continue
            if event.seq <= chain.held:
                kept = chain.events.hash_of(event.seq)
                if kept is not None and kept != event.hash:
                    self.forks += 1
                    refused.append(
                        self._refuse(p, event, Refusal.BROKEN_LINK, "differs from the one held")
                    )
                else:
                    refused.append(self._refuse(p, event, Refusal.DUPLICATE))
                continue
            if event.prev != chain.last_hash:
                refused.append(self._refuse(p, event, Refusal.BROKEN_LINK))
                continue
            if self._unsettled >= self._max_pending:
                self.deferred += 1  # not held: it comes again (relay, sync)
                continue
            self._hold(chain, event)
            self._unsettled += 1
            if event.seq > p.acked.get(cid, 0):
                p.acked[cid] = event.seq
            if event.seq > p.cursor.get(cid, 0):
                p.cursor[cid] = event.seq
            p.received += 1
            p.last_received = event
            if event.kind is Kind.WRITE:
                self._note(event)
            elif event.kind is Kind.GUARDED:
                self._foreign_guarded[event.hash] = event
            self._advance(chain)
        self._try_decide()
        return refused

    def receive_invs(self, peer: str, leaves: Iterable[Leaf]) -> None:
        """``peer`` holds these chains up to these seqs. O(leaves)."""
        p = self._peers[peer]
        touched: list[Chain] = []
        for leaf in leaves:
            cid = leaf.chain
            if leaf.seq > p.acked.get(cid, 0):
                p.acked[cid] = leaf.seq
            if leaf.seq > p.cursor.get(cid, 0):
                p.cursor[cid] = leaf.seq
            chain = self._chains.get(cid)
            if chain is None:
                continue
            kept = chain.events.hash_of(leaf.seq)
            if kept is not None and kept != leaf.hash:
                self.forks += 1
            if chain is not self._own:
                touched.append(chain)
        for chain in touched:
            self._advance(chain)
        self._try_decide()

    def receive_sync(self, peer: str, sync: Sync) -> None:
        """``peer``'s leaves: confirmations, and what to push it that it lacks."""
        p = self._peers[peer]
        self.receive_invs(peer, sync.leaves)
        theirs = {leaf.chain: leaf.seq for leaf in sync.leaves}
        if p.up:
            for cid, chain in self._chains.items():
                if cid == (peer, p.boot):
                    continue
                seq = theirs.get(cid, 0)
                if chain.held > seq and (
                    p.cursor.get(cid, 0) <= seq or p.last_sync.get(cid, -1) == seq
                ):
                    # Nothing on its way, or no progress over a whole interval.
                    self._rewind(p, cid, seq + 1)
        p.last_sync = theirs

    def receive_get_data(self, peer: str, asks: Iterable[GetData]) -> None:
        p = self._peers[peer]
        for ask in asks:
            chain = self._chains.get(ask.chain)
            if chain is not None and p.up and 1 <= ask.seq <= chain.held:
                self._rewind(p, ask.chain, ask.seq)

    def receive_state(self, peer: str, states: Iterable[KeyState], head: Order | None) -> int:
        """Key states (a peer's summary of what it no longer has as events).

        Applied by the conflict rule; returns how many changed something.
        """
        changed = 0
        for s in states:
            try:
                check_key_name(s.name)
            except InvalidKeyNameError:
                self.refused[Refusal.MALFORMED] += 1
                continue
            if s.data is None:
                if self._keys.add(s.name):
                    self._sink.apply(s.origin or peer, [Write(s.name, None, 0, 0)])
                    changed += 1
            elif s.version >= 1 and self._keys.wins(s.name, s.version, s.stamp, s.origin):
                self._keys.put(s)
                self._sink.apply(s.origin, [Write(s.name, s.data, s.version, s.time_ns)])
                changed += 1
        if head is not None and head > self._head:
            self._head = head
            self._counted = max(self._counted, head)
        return changed

    def receive_horizons(self, peer: str, horizons: Iterable[Horizon]) -> None:
        """Chains to go on from a later point (after the state that summarizes them)."""
        oldest = self._wall() - self._max_age_ns
        for h in horizons:
            if h.chain == self._own.id or h.stamp < oldest or h.seq < 1:
                continue
            chain = self._chains.get(h.chain)
            if chain is None:
                chain = self._chains[h.chain] = Chain(h.chain)
            if h.seq <= chain.held:
                continue
            self._retention.forget_chain(chain)
            self._unsettled -= chain.held - chain.applied
            for digest, event in list(self._foreign_guarded.items()):
                if event.chain == h.chain and event.seq <= h.seq:
                    del self._foreign_guarded[digest]
            chain.jump(h.seq, h.hash, h.stamp)
            for p in self._peers.values():
                p.inv.add(h.chain)
                if p.name != peer:
                    p.ready.add(h.chain)

    # -- what to send ----------------------------------------------------------------

    def next_message(self, peer: str, budget: int) -> Outgoing | None:
        """The next message for ``peer`` (about ``budget`` bytes of events at
        most, at least one event if any is due), or None if nothing is due."""
        p = self._peers[peer]
        if not p.up:
            return None
        out = Outgoing()
        if p.state_due:
            p.state_queue = list(self._keys)
            p.state_pos = 0
            p.state_due = False
        if p.state_queue is not None:
            queue, pos, used = p.state_queue, p.state_pos, 0
            chunk: list[KeyState] = []
            while pos < len(queue) and (used < budget or not chunk):
                state = queue[pos]
                chunk.append(state)
                used += 48 + len(state.name) + len(state.data or b"")
                pos += 1
            out.state = tuple(chunk)
            out.state_head = self._head
            if pos < len(queue):
                p.state_pos = pos
                return out  # the rest of the state before anything that relies on it
            p.state_queue = None
        if p.horizons:
            out.horizons = list(p.horizons.values())
            p.horizons.clear()
        own_id = self._own.id
        order = [own_id] if own_id in p.ready else []
        order += [cid for cid in p.ready if cid != own_id]
        used = 0
        own_complete = True
        now = self._mono()
        for cid in order:
            chain = self._chains.get(cid)
            if chain is None:
                p.ready.discard(cid)
                p.push.discard(cid)
                continue
            cur = p.cursor.get(cid, 0)
            if cur < chain.first - 1:
                # Forgotten under the cursor: state and a horizon first (next message).
                self._rewind(p, cid, cur + 1)
                if cid == own_id:
                    own_complete = False
                continue
            now_or_aged = cid == own_id or cid in p.push
            while cur < chain.held and used < budget:
                held = chain.events[cur + 1]
                if not now_or_aged and now - held.at < self._unread_s:
                    break
                out.events.append(held.event)
                used += held.event.size
                cur += 1
            p.cursor[cid] = cur
            if cur >= chain.held:
                p.ready.discard(cid)
                p.push.discard(cid)
            elif cid == own_id:
                own_complete = False
            if used >= budget:
                break
        if own_complete and p.inv and (out.events or self._invs_due(p, now)):
            p.inv_sent_at = now
            for cid in p.inv:
                chain = self._chains.get(cid)
                if chain is not None and chain.held > 0:
                    out.invs.append(Leaf(cid[0], cid[1], chain.held, chain.last_hash))
            p.inv.clear()
        if p.get_data:
            out.get_data = list(p.get_data.values())
            p.get_data.clear()
        if p.sync_due:
            out.sync = self.sync()
            p.sync_due = False
        if out.empty():
            return None
        if out.events:
            p.sent += len(out.events)
            p.last_sent = out.events[-1]
        return out

    def _inv_delay(self) -> float:
        """How long confirmations may wait for company: briefly when something
        waits for them (max_confirms, a guarded write), else longer."""
        urgent = self.need > 0 or bool(self._foreign_guarded) or bool(self._guards)
        return self._inv_urgent_s if urgent else self._inv_delay_s

    def _invs_due(self, p: _Peer, now: float) -> bool:
        """Whether confirmations go now, alone (not with events)."""
        return now - p.inv_sent_at >= self._inv_delay()

    def wait_hint(self, peer: str) -> float | None:
        """Seconds until held-back confirmations for ``peer`` are due (None: none)."""
        p = self._peers[peer]
        if not p.up or not p.inv:
            return None
        return max(0.0, p.inv_sent_at + self._inv_delay() - self._mono())

    def resend_unread(self) -> None:
        """Call every send_unread_interval: what a peer was sent and has not
        confirmed since the previous call is sent again (it was lost on its
        way, or left for later by a peer that was full)."""
        for p in self._peers.values():
            if not p.up:
                continue
            marks = {}
            for cid, sent in p.cursor.items():
                acked = p.acked.get(cid, 0)
                if acked < sent and cid in self._chains:
                    if p.unread_mark.get(cid) == acked:
                        self._rewind(p, cid, acked + 1)
                    marks[cid] = acked
            p.unread_mark = marks

    def want_sync(self) -> None:
        """Every peer gets a Sync in its next message (call every sync interval)."""
        for p in self._peers.values():
            p.sync_due = True

    def pending_for(self, peer: str) -> bool:
        """Whether something may be due for ``peer`` (a cheap hint for the link)."""
        p = self._peers[peer]
        return p.up and bool(
            p.ready
            or p.inv
            or p.get_data
            or p.horizons
            or p.state_due
            or p.state_queue is not None
            or p.sync_due
        )

    # -- time ------------------------------------------------------------------------

    def tick(self) -> int:
        """Retention, forgotten chains, guarded writes past their timeout.

        Call a few times per second. Returns how many events retention forgot.
        """
        now_ns = self._wall()
        gone = self._retention.trim(now_ns, self._chains)
        oldest = now_ns - self._max_age_ns
        for cid, chain in list(self._chains.items()):
            if (
                chain is not self._own
                and not chain.events
                and chain.applied == chain.held
                and chain.last_stamp < oldest
            ):
                del self._chains[cid]
                for p in self._peers.values():
                    for table in (p.acked, p.cursor, p.last_sync):
                        table.pop(cid, None)
                    p.ready.discard(cid)
                    p.push.discard(cid)
                    p.inv.discard(cid)
        for digest, event in list(self._foreign_guarded.items()):
            if event.stamp < oldest:
                del self._foreign_guarded[digest]
        now = self._mono()
        for guard in list(self._guards.values()):
            if now - guard.at >= self._guard_timeout_s:
                self._verdict(guard, won=False)
        self._try_decide()
        return gone

    # -- status ------------------------------------------------------------------------

    def status(self) -> ModelStatus:
        peers = []
        for p in self._peers.values():
            unconfirmed = sum(
                max(0, chain.held - p.acked.get(cid, 0))
                for cid, chain in self._chains.items()
                if cid[0] != p.name
            )
            peers.append(
                PeerStatus(
                    p.name,
                    p.up,
                    p.boot,
                    p.sent,
                    p.received,
                    p.last_sent,
                    p.last_received,
                    unconfirmed,
                    {r.value: n for r, n in p.refused.items()},
                )
            )
        return ModelStatus(
            self.node_id,
            self.boot,
            self.head,
            self.digest(),
            len(self._keys),
            len(self._chains),
            len(self._retention),
            self._retention.bytes,
            self._unsettled,
            len(self._guards),
            self.applied,
            self.superseded,
            {r.value: n for r, n in self.refused.items()},
            self.gaps,
            self.deferred,
            tuple(peers),
        )

    def check(self) -> None:
        """Assert the invariants (for tests)."""
        for chain in self._chains.values():
            chain.check()
        self._keys.check()
        unsettled = sum(c.held - c.applied for c in self._chains.values())
        assert unsettled == self._unsettled, (unsettled, self._unsettled)
        assert self._head <= self._counted or self._counted == _NO_ORDER

    # -- internals ---------------------------------------------------------------------

    def _check(self, event: Event, now: int) -> tuple[Refusal, str] | None:
        if not event.intact():
            return Refusal.TAMPERED, ""
        if event.stamp < now - self._max_age_ns:
            return Refusal.TOO_OLD, f"{(now - event.stamp) / 1e9:.1f} s old"
        if event.stamp > now + self._max_ahead_ns:
            return Refusal.TOO_NEW, f"{(event.stamp - now) / 1e9:.1f} s ahead"
        if not event.origin or len(event.origin) > _MAX_ORIGIN or event.seq < 1:
            return Refusal.MALFORMED, "origin or seq"
        if event.chain == self._own.id:
            return Refusal.DUPLICATE if event.seq <= self._own.held else Refusal.MALFORMED, (
                "an event of this node's own chain"
            )
        if (event.kind is Kind.VERDICT) != bool(event.ref) or (
            event.kind is Kind.VERDICT and event.writes
        ):
            return Refusal.MALFORMED, "a verdict names one event and writes nothing"
        for w in event.writes:
            try:
                check_key_name(w.key)
            except InvalidKeyNameError:
                return Refusal.MALFORMED, f"key name {w.key[:80]!r}"
            if (w.data is None) != (w.version == 0):
                return Refusal.MALFORMED, f"version {w.version} of {w.key!r}"
        return None

    def _refuse(self, p: _Peer, event: Event, reason: Refusal, detail: str = "") -> Refused:
        self.refused[reason] += 1
        p.refused[reason] += 1
        return Refused(reason, event, detail)

    def _hold(self, chain: Chain, event: Event) -> None:
        chain.hold(event, self._mono())
        retention = self._retention
        retention.add(chain, event)
        if len(retention) > retention.max_events or retention.bytes > retention.max_bytes:
            retention.trim(self._wall(), self._chains)
        self._clock.observe(event.stamp)
        cid = chain.id
        for p in self._peers.values():
            p.inv.add(cid)
            if p.name != event.origin:
                p.ready.add(cid)

    def _note(self, event: Event) -> None:
        """A counted event (a write, or a guarded one that won) is known here."""
        order = event.order
        if order > self._counted:
            self._counted = order
        for guard in self._guards.values():
            if guard.pred < order < guard.event.order:
                guard.pred = order

    def _advance_head(self, event: Event) -> None:
        if event.order > self._head:
            self._head = event.order

    def _confirms(self, event: Event) -> int:
        cid = event.chain
        return sum(
            1
            for p in self._peers.values()
            if p.name != event.origin and p.acked.get(cid, 0) >= event.seq
        )

    def _advance(self, chain: Chain) -> None:
        """Settle the chain's next events while they may be (in order)."""
        need = self.need
        while chain.applied < chain.held:
            event = chain.events[chain.applied + 1].event
            if event.kind is not Kind.GUARDED and need and self._confirms(event) < need:
                break
            if event.kind is Kind.WRITE:
                self._apply(event)
            elif event.kind is Kind.VERDICT:
                guarded = self._foreign_guarded.pop(event.ref, None)
                if guarded is not None and event.won:
                    self._note(guarded)
                    self._apply(guarded)
            chain.applied += 1
            self._unsettled -= 1

    def _advance_all(self) -> None:
        for chain in list(self._chains.values()):
            if chain is not self._own:
                self._advance(chain)
        self._try_decide()

    def _apply(self, event: Event) -> None:
        """Apply an event's writes by the conflict rule."""
        keys = self._keys
        won: list[Write] = []
        for w in event.writes:
            if w.data is None:
                if keys.add(w.key):
                    won.append(w)
            elif keys.wins(w.key, w.version, event.stamp, event.origin):
                keys.put(KeyState(w.key, w.data, w.version, w.time_ns, event.stamp, event.origin))
                won.append(w)
            else:
                self.superseded += 1
        if won:
            self._sink.apply(event.origin, won)
        self._advance_head(event)
        self.applied += 1

    def _try_decide(self) -> None:
        """Decide this node's guarded events that can be, oldest first."""
        while self._guards:
            guard = next(iter(self._guards.values()))
            seq = guard.event.seq
            own = self._own.id
            if any(p.acked.get(own, 0) < seq for p in self._peers.values()):
                return
            if not self._holds_what_peers_hold():
                return  # an event a peer confirmed may come before it
            low, high = guard.head, guard.event.order
            if any(low < e.order < high for e in self._foreign_guarded.values()):
                return  # one before it still waits for its verdict
            self._verdict(guard, won=guard.pred == guard.head)

    def _holds_what_peers_hold(self) -> bool:
        """Whether this node holds every event any peer has confirmed holding.

        With every node's confirmation of a guarded event in, this is what
        makes its origin know every event ordered before it: a node confirms
        after sending its own events, and what it relays or this node left
        for later is covered by its confirmations of those chains.
        """
        chains = self._chains
        for p in self._peers.values():
            for cid, seq in p.acked.items():
                chain = chains.get(cid)
                if chain is None or chain.held < seq:
                    return False
        return True

    def _verdict(self, guard: _Guard, *, won: bool) -> None:
        del self._guards[guard.event.hash]
        own = self._own
        verdict = make_event(
            self.node_id,
            self.boot,
            own.held + 1,
            own.last_hash,
            self.head,
            self._clock.now(),
            Kind.VERDICT,
            ref=guard.event.hash,
            won=won,
        )
        self._hold(own, verdict)
        own.applied = own.held
        if won:
            self._note(guard.event)
            self._apply(guard.event)
        self._sink.decided(guard.event, won)

    def _rewind(self, p: _Peer, cid: ChainId, seq: int) -> None:
        """Send ``p`` chain ``cid`` from ``seq`` on (with a horizon if it is forgotten)."""
        chain = self._chains[cid]
        if seq < chain.first:
            if chain.first > 1:
                retained = chain.first in chain.events
                stamp = chain.events.meta(chain.first)[1] if retained else chain.last_stamp
                p.horizons[cid] = Horizon(cid[0], cid[1], chain.first - 1, chain.base_hash, stamp)
                p.state_due = True
            p.cursor[cid] = chain.first - 1
        else:
            p.cursor[cid] = seq - 1
        p.ready.add(cid)
        p.push.add(cid)
