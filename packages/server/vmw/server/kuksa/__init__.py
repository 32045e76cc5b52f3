"""KUKSA.val compatibility: ``kuksa.val.v1.VAL`` and ``kuksa.val.v2.VAL`` over the V-Store and ESS.

An unmodified KUKSA client (``kuksa-client`` and its command line) works
against the middleware: paths are key names, values are typed on the wire
and stored in the project's ``vehicle.value.v1`` encoding, metadata comes from
the VSS catalogs (``serve --vss``), subscriptions are ESS subscriptions.
Modules: :mod:`~vmw.server.kuksa.convert` (the one place of message
translation), :mod:`~vmw.server.kuksa.entries` (v2 subscription responses
written as bytes; its reference twin :mod:`~vmw.server.kuksa.entries_reference`,
behind :mod:`vmw.server.codecs`), :mod:`~vmw.server.kuksa.common` (identity, paths),
:mod:`~vmw.server.kuksa.subscriptions` (a subscription as an ESS app),
:mod:`~vmw.server.kuksa.v1` and :mod:`~vmw.server.kuksa.v2` (the servicers).
Actuation shares its core with the project's own API
(:mod:`vmw.server.actuation`): a KUKSA request reaches a provider of either
API, and so does a request of the project's SDK.

Owns the KUKSA wire mapping. Imports the runtime, the cores and the shared
adapters (identity, actuation); must not import the project's own servicers.
"""

from __future__ import annotations

from typing import Final

import grpc
from vmw.proto.kuksa.val.v1 import val_pb2 as val_v1
from vmw.proto.kuksa.val.v1 import val_pb2_grpc as val_v1_grpc
from vmw.proto.kuksa.val.v2 import val_pb2 as val_v2
from vmw.proto.kuksa.val.v2 import val_pb2_grpc as val_v2_grpc
from vmw.server.kuksa.v1 import KuksaV1
from vmw.server.kuksa.v2 import PRE_ENCODED, KuksaV2
from vmw.server.rpc.pre_encoded import PassingBytes

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
    val_v2_grpc.add_VALServicer_to_server(v2, PassingBytes(server, PRE_ENCODED, v2.decoders()))
