"""What nodes say to each other, as plain values (the wire form is the adapter's). Pure.

A message between two nodes has sections, processed in this order by the
receiver: ``state`` (key states), ``horizons``, ``events``, ``invs``,
``get_data``, ``sync``. The order matters: a horizon may only follow the
state that summarizes what it skips, and a node's confirmations (``invs``)
follow every event it made before them, which is what lets the origin of a
guarded write know, once every node confirmed it, every event ordered
before it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from vehicle_middleware.replica.events import ChainId, Event, Order
from vehicle_middleware.replica.keys import KeyState

__all__ = ["GetData", "Horizon", "Leaf", "Outgoing", "Refusal", "Refused", "Sync"]


@dataclass(frozen=True, slots=True)
class Leaf:
    """A chain's last event a node holds. As an ``Inv``: "I hold this chain up to
    ``seq``" (cumulative: it confirms every earlier event of the chain too)."""

    origin: str
    boot: int
    seq: int
    hash: bytes

    @property
    def chain(self) -> ChainId:
        return (self.origin, self.boot)


@dataclass(frozen=True, slots=True)
class Horizon:
    """The sender no longer has a chain's events up to ``seq``: the receiver takes
    them as summarized by the state sent just before, and goes on from ``seq``."""

    origin: str
    boot: int
    seq: int
    hash: bytes
    stamp: int

    @property
    def chain(self) -> ChainId:
        return (self.origin, self.boot)


@dataclass(frozen=True, slots=True)
class GetData:
    """Send me chain (origin, boot) from ``seq`` on: asked when an event arrives
    whose predecessor the receiver does not hold."""

    origin: str
    boot: int
    seq: int

    @property
    def chain(self) -> ChainId:
        return (self.origin, self.boot)


@dataclass(frozen=True, slots=True)
class Sync:
    """Sent every sync interval: the leaves of the sender's model, its digest and head."""

    leaves: tuple[Leaf, ...]
    digest: bytes
    head: bytes


@dataclass(slots=True)
class Outgoing:
    """One message for one peer."""

    state: tuple[KeyState, ...] | None = None
    state_head: Order | None = None
    horizons: list[Horizon] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    invs: list[Leaf] = field(default_factory=list)
    get_data: list[GetData] = field(default_factory=list)
    sync: Sync | None = None

    def empty(self) -> bool:
        return (
            self.state is None
            and not self.horizons
            and not self.events
            and not self.invs
            and not self.get_data
            and self.sync is None
        )


class Refusal(enum.Enum):
    """Why a received event changed nothing (each is counted)."""

    TAMPERED = "tampered"
    """Its hash is not the hash of its content."""
    TOO_OLD = "too old"
    """Its stamp is further in the past than the validity window allows."""
    TOO_NEW = "in the future"
    """Its stamp is further in the future than the validity window allows."""
    DUPLICATE = "already held"
    """Its chain position is held already (a replay, or a copy that crossed another)."""
    BROKEN_LINK = "broken link"
    """Its ``prev`` is not the hash of the chain's previous event (a forged chain)."""
    MALFORMED = "malformed"
    """A bad key name, a version that contradicts its value, a verdict with writes, ..."""


@dataclass(frozen=True, slots=True)
class Refused:
    """One refused event, for the journal and the log."""

    reason: Refusal
    event: Event
    detail: str = ""
