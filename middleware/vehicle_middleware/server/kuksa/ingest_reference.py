"""A KUKSA v2 provider's publish of floats, read by the generated protobuf code.

The reference twin of :mod:`vehicle_middleware.server.kuksa.ingest` behind
:class:`vehicle_middleware.server.codecs.PublishReader`: the request is decoded as
``OpenProviderStreamRequest``, and each datapoint converted by the general
code's own functions (:func:`vehicle_middleware.server.kuksa.convert.to_store`,
:func:`~vehicle_middleware.server.kuksa.convert.source_time`). It answers where the fast
reader does (a float or double to a key that takes it at a glance) and leaves
everything else to the general way, which holds every refusal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2, val_pb2
from vehicle_middleware.server.errors import InvalidRequestError
from vehicle_middleware.server.kuksa import convert
from vehicle_middleware.vss import Signal, float_bounds
from vehicle_middleware.vstore import InvalidValueError, UpdateRow

__all__ = ["PublishMessages", "PublishedValues"]

_FLOATS = ("float", "double")
"""The ``Value`` fields read here (the datatypes of the signals that take them)."""


@dataclass(frozen=True, slots=True)
class PublishedValues:
    """A publish as :meth:`PublishMessages.parse` read it: its request's bytes (for
    the general way), its id, and each signal id's ``Datapoint``."""

    raw: bytes
    request_id: int
    points: Mapping[int, types_pb2.Datapoint]


class PublishMessages:
    """The store's rows of a provider's publishes. ``name_of`` gives a key id's name
    and ``signal_of`` a name's signal, looked up for every value; ``generation``
    (which says when an id may name another key) is taken for the interface's sake:
    nothing is kept from one publish to the next."""

    def __init__(
        self,
        name_of: Callable[[int], str | None],
        signal_of: Callable[[str], Signal | None],
        generation: Callable[[], int],
    ) -> None:
        self._name_of = name_of
        self._signal_of = signal_of

    def parse(self, raw: bytes) -> PublishedValues | None:
        """``raw`` (an ``OpenProviderStreamRequest``) read as a publish, or None where
        it is another action or does not decode (the general way says why)."""
        try:
            request = val_pb2.OpenProviderStreamRequest.FromString(raw)
        except (DecodeError, UnicodeDecodeError, ValueError):
            return None
        if request.WhichOneof("action") != "publish_values_request":
            return None
        publish = request.publish_values_request
        return PublishedValues(raw, publish.request_id, publish.data_points)

    def rows(self, published: PublishedValues) -> list[UpdateRow] | None:
        """The rows to write, or None where a value needs the general way."""
        out: list[UpdateRow] = []
        for key_id, point in published.points.items():
            row = self._row(key_id, point)
            if row is None:
                return None
            out.append(row)
        return out

    def _row(self, key_id: int, point: types_pb2.Datapoint) -> UpdateRow | None:
        """One datapoint's row, where it is a float or double its key takes at a glance:
        a known key of a signal of that datatype with a range
        (:func:`vehicle_middleware.vss.float_bounds`), or an opaque key and a number but a NaN."""
        name = self._name_of(key_id) if key_id > 0 else None
        kind = point.value.WhichOneof("typed_value")
        if name is None or kind not in _FLOATS:
            return None
        signal = self._signal_of(name)
        if signal is None:
            if math.isnan(getattr(point.value, kind)):
                return None
        elif signal.datatype != kind or float_bounds(signal) is None:
            return None
        try:
            data = convert.to_store(name, signal, point.value, "typed_value")
            time_ns = convert.source_time(point, "data_point")
        except (InvalidValueError, InvalidRequestError):
            return None
        return (key_id, data, None, time_ns)
