"""The seam between the streams and the code that writes and reads their hottest messages.

Three steps run for every value the middleware carries, and each has two
implementations behind one of the small interfaces below:

* an app stream's ``EventBatch`` messages (:class:`BatchEncoder`):
  :class:`vehicle_middleware.server.rpc.batches.EventBytes` (fast) and
  :class:`vehicle_middleware.server.rpc.batches_reference.EventMessages` (reference);
* a KUKSA v2 subscription's responses, its drained events cut into them
  (:class:`Cut`) and each encoded (:class:`EntryEncoder`):
  :mod:`vehicle_middleware.server.kuksa.response_cuts` and
  :class:`vehicle_middleware.server.kuksa.entries.Entries`
  (fast), :mod:`vehicle_middleware.server.kuksa.entries_reference` (reference);
* a KUKSA v2 provider's publish of floats read into the store's rows
  (:class:`PublishReader`): :class:`vehicle_middleware.server.kuksa.ingest.FloatRows` (fast)
  and :class:`vehicle_middleware.server.kuksa.ingest_reference.PublishMessages` (reference).

The reference implementations are written as a Python developer expects:
messages built and parsed by the generated code (``vehicle_middleware.proto.*_pb2``). The
fast ones put the bytes together by hand, and the build with ``VMW_MYPYC=1``
compiles them (``middleware/setup.py``). Both produce what the generated
code parses to the same messages; the same tests run over both, and tests
generated from the ``.proto`` descriptors hold both to the contract.

Which one runs is chosen once per process by the entry point: :func:`select`
before serving (``python -m vehicle_middleware.server serve`` reads ``VMW_REFERENCE_CODECS``),
the fast one unless told. The streams read :func:`selected` when they open,
and the servicers when they are built. This module imports neither
implementation: their packages import it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol, TypeVar

from google.protobuf.message import Message
from vehicle_middleware.ess import DataRow, Event, RawEvent
from vehicle_middleware.vss import Signal
from vehicle_middleware.vstore import UpdateRow

__all__ = [
    "BatchEncoder",
    "Codecs",
    "Cut",
    "EntryEncoder",
    "EntryEncoderFactory",
    "Publish",
    "PublishReader",
    "PublishReaderFactory",
    "select",
    "selected",
]


class Codecs(enum.Enum):
    """The two implementations of the seam."""

    FAST = "fast"
    """Hand-assembled bytes (compiled by mypyc in the compiled build): the default."""
    REFERENCE = "reference"
    """Messages built and parsed by the generated protobuf code."""


class BatchEncoder(Protocol):
    """The messages of one app stream (one encoder per stream: it may keep what it
    learnt of a key from one batch to the next)."""

    def messages(self, events: Sequence[Event | RawEvent], max_bytes: int) -> list[bytes]:
        """``events`` as one serialized ``EventBatch``, or as several where one would
        exceed ``max_bytes`` (cut between two events; an event bigger than that alone
        in its own). ``events`` as a drain hands them out: its lifecycle and health
        events first, then its data events, each a ``DataUpdated`` or the plain tuple
        of its fields. No events: one empty message."""
        ...


class Cut(Protocol):
    """A KUKSA subscription's drained events cut into its responses' updates."""

    def __call__(self, events: Sequence[Event | RawEvent]) -> list[Sequence[DataRow]]:
        """The data events of ``events`` in delivery order, each key at most once in
        one response, in as few responses as that allows; no response without one."""
        ...


class EntryEncoder(Protocol):
    """The responses of one KUKSA v2 subscription stream."""

    def encode(self, batch: Iterable[DataRow]) -> bytes:
        """One serialized response: an entry per update, keyed as the stream's
        response type keys them (each key at most once; a key whose id names no key
        when first seen is left out)."""
        ...


class EntryEncoderFactory(Protocol):
    """How a KUKSA v2 subscription builds its :class:`EntryEncoder`."""

    def __call__(
        self,
        response: type[Message],
        *,
        by_name: bool,
        name_of: Callable[[int], str | None],
        signal_of: Callable[[str], Signal | None],
    ) -> EntryEncoder:
        """``response``: ``SubscribeResponse`` or ``SubscribeByIdResponse``;
        ``by_name``: whether its map is keyed by path (else by id); ``name_of`` and
        ``signal_of`` look a key up by id and its signal by name."""
        ...


class Publish(Protocol):
    """A provider's publish as a :class:`PublishReader` read it."""

    @property
    def raw(self) -> bytes:
        """The ``OpenProviderStreamRequest``'s bytes, for the general way."""
        ...

    @property
    def points(self) -> Collection[int]:
        """Its datapoints, one per signal id (a mapping by signal id: iterated, its ids)."""
        ...


P = TypeVar("P", bound=Publish)


class PublishReader(Protocol[P]):
    """A KUKSA v2 provider's publishes read into the store's rows where that needs no
    judgement; everything else goes the general way
    (:meth:`vehicle_middleware.server.kuksa.v2.KuksaV2.OpenProviderStream`), which holds every
    refusal."""

    def parse(self, raw: bytes) -> P | None:
        """``raw`` (an ``OpenProviderStreamRequest``) read as a publish, or None where
        it is another action or is left to the general way."""
        ...

    def rows(self, published: P) -> list[UpdateRow] | None:
        """The rows to write, or None where a value needs the general way: every
        value a float or double its key takes at a glance (a known key of a float or
        double signal with a range, in the signal's own width; an opaque key, any
        number but a NaN). The range itself is the V-Store's value check's to judge."""
        ...


PublishReaderFactory = Callable[
    [Callable[[int], str | None], Callable[[str], Signal | None], Callable[[], int]],
    PublishReader[P],
]
"""A reader from ``name_of`` (a key id's name), ``signal_of`` (a name's signal) and
``generation`` (changes whenever an id may name another key)."""

_selected = Codecs.FAST


def select(name: str) -> Codecs:
    """Run the implementation named ``name`` (``fast`` or ``reference``) from now on;
    streams and servicers opened before keep theirs. Called by the entry point
    before serving.

    Raises:
        ValueError: another name, saying which are known.
    """
    global _selected
    try:
        _selected = Codecs(name)
    except ValueError:
        known = ", ".join(c.value for c in Codecs)
        raise ValueError(f"codecs {name!r}: known are {known}") from None
    return _selected


def selected() -> Codecs:
    """The implementation a stream or servicer opened now runs."""
    return _selected
