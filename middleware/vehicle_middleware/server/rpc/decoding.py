"""Requests that do not decode become INVALID_ARGUMENT, not UNKNOWN.

gRPC decodes a request before the servicer runs; a message with invalid UTF-8
in a string field or corrupt wire bytes makes the decoder raise, which grpc
reports as UNKNOWN. This interceptor wraps every method's decoder so a bad
message arrives at the servicer as a :class:`Malformed` marker, which
:func:`vehicle_middleware.server.rpc.status.maps_errors` (and the Publish loop) turn into
INVALID_ARGUMENT naming the message type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from vehicle_middleware.server.rpc.handlers import Continuation

__all__ = ["DecodeGuard", "Malformed"]


@dataclass(frozen=True)
class Malformed:
    """Stands in for a request that did not decode."""

    method: str
    reason: str


class DecodeGuard(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        decode = getattr(handler, "request_deserializer", None)
        if handler is None or decode is None:
            return handler
        method = handler_call_details.method

        def guarded(data: bytes) -> Any:
            try:
                return decode(data)
            except (DecodeError, UnicodeDecodeError, ValueError) as e:
                return Malformed(method, str(e) or type(e).__name__)

        return handler._replace(request_deserializer=guarded)  # type: ignore[attr-defined,no-any-return]
