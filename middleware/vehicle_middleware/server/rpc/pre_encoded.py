"""Methods whose responses a servicer writes as bytes it encoded itself, or whose
requests it reads from their bytes.

A stream that writes many messages a second can put their bytes together
faster than protobuf builds them from Python field by field
(:mod:`vehicle_middleware.server.rpc.batches`, :mod:`vehicle_middleware.server.kuksa.entries`). gRPC
allows a handler without a ``response_serializer``: it then writes what the
servicer gives it, as it is. Likewise a handler's ``request_deserializer`` may
be any function of the request's bytes (:mod:`vehicle_middleware.server.kuksa.ingest`).
:class:`PreEncodedServer` registers a generated servicer so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc

__all__ = ["PreEncodedServer"]


class PreEncodedServer:
    """``server`` as a generated ``add_*Servicer_to_server`` sees it, where the
    handlers of ``methods`` write their responses as given: bytes the servicer
    encoded itself (a handler's ``response_serializer`` None); and the handlers
    named in ``decoders`` read their requests with the function given.

    The generated function builds the method handlers, then registers them
    twice, as a generic handler and as registered methods (which win); both are
    built here from the one changed table.
    """

    def __init__(
        self,
        server: grpc.aio.Server,
        methods: frozenset[str],
        decoders: Mapping[str, Callable[[bytes], Any]] | None = None,
    ) -> None:
        self._server = server
        self._methods = methods
        self._decoders = dict(decoders or {})

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        pass  # built from the registered table, below

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        missing = (self._methods | self._decoders.keys()) - handlers.keys()
        if missing:
            raise ValueError(f"{service} has no method {sorted(missing)}")
        table = {}
        for name, handler in handlers.items():
            if name in self._methods:
                handler = handler._replace(response_serializer=None)
            if name in self._decoders:
                handler = handler._replace(request_deserializer=self._decoders[name])
            table[name] = handler
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, table),)
        )
        self._server.add_registered_method_handlers(service, table)
