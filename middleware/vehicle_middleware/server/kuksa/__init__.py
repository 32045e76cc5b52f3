"""KUKSA.val compatibility: ``kuksa.val.v1.VAL`` and ``kuksa.val.v2.VAL`` over the V-Store and ESS.

An unmodified KUKSA client (``kuksa-client`` and its command line) works
against the middleware: paths are key names, values are typed on the wire
and stored in the project's ``vehicle.value.v1`` encoding, metadata comes from
the VSS catalogs (``serve --vss``), subscriptions are ESS subscriptions.
Modules: :mod:`~vehicle_middleware.server.kuksa.convert` (the one place of message
translation), :mod:`~vehicle_middleware.server.kuksa.entries` (v2 subscription responses
written as bytes; its reference twin :mod:`~vehicle_middleware.server.kuksa.entries_reference`,
behind :mod:`vehicle_middleware.server.codecs`), :mod:`~vehicle_middleware.server.kuksa.common`
(identity, paths),
:mod:`~vehicle_middleware.server.kuksa.subscriptions` (a subscription as an ESS app),
:mod:`~vehicle_middleware.server.kuksa.v1` and :mod:`~vehicle_middleware.server.kuksa.v2` (the
servicers).
Actuation shares its core with the project's own API
(:mod:`vehicle_middleware.server.actuation`): a KUKSA request reaches a provider of either
API, and so does a request of the project's SDK.

Owns the KUKSA wire mapping. Imports the runtime, the cores and the shared
adapters (identity, actuation); must not import the project's own servicers.
"""

from __future__ import annotations

from typing import Final

import grpc
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2 as val_v1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2_grpc as val_v1_grpc
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as val_v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as val_v2_grpc
from vehicle_middleware.server.kuksa.v1 import KuksaV1
from vehicle_middleware.server.kuksa.v2 import PRE_ENCODED, KuksaV2
from vehicle_middleware.server.rpc.pre_encoded import PreEncodedServer

__all__ = ["KUKSA_SERVICES", "KuksaV1", "KuksaV2", "add_kuksa_services"]

KUKSA_SERVICES: Final = (
    val_v1.DESCRIPTOR.services_by_name["VAL"].full_name,
    val_v2.DESCRIPTOR.services_by_name["VAL"].full_name,
)
"""``kuksa.val.v1.VAL`` and ``kuksa.val.v2.VAL``."""


def add_kuksa_services(server: grpc.aio.Server, v1: KuksaV1, v2: KuksaV2) -> None:
    """Serve both KUKSA services on ``server`` (v2's subscriptions written as the
    bytes it encodes, its provider streams read by its own decoders)."""
    val_v1_grpc.add_VALServicer_to_server(v1, server)
    val_v2_grpc.add_VALServicer_to_server(v2, PreEncodedServer(server, PRE_ENCODED, v2.decoders()))
