"""A stream's write that raced the middleware ending the call.

A middleware that refuses a stream (a token it does not accept, an app id that
is not the token's) ends the call as soon as it starts. A client that writes
its first message at that moment has the write fail inside gRPC, and grpc.aio
then reports its own ``INTERNAL`` ("Internal error from Core", a failed
``execute_batch`` of a ``SendMessageOperation``) as the call's status: the
middleware's answer is lost. It is rare, but a loopback connection hits it
(through :class:`~vehicle_middleware.sdk.AppClient` and on a bare stream). The SDK then asks
again, so that the refusal arrives with its own code and words: the event
stream and the actuator stream open again, up to :data:`ATTEMPTS` times in
all; a provider's ``Publish`` stream counts as broken and reconnects (its keys
are added again first, and a middleware refusing the provider refuses that),
where reconnecting is on.
"""

from __future__ import annotations

from typing import Final

import grpc

__all__ = ["ATTEMPTS", "write_raced_end"]

ATTEMPTS: Final = 8
"""Tries at opening a stream whose writes keep racing its end: each try races
again, so the odds of losing every one fall with each, and a middleware that
refuses answers at once. Enough that a heavily loaded machine (``make test``
beside a valgrind run) does not lose them all."""


def write_raced_end(error: grpc.aio.AioRpcError) -> bool:
    """Whether ``error`` is grpc's own INTERNAL for an operation of the call (a write,
    mostly) that raced the call's end: a failed ``execute_batch``, never a status a
    server sends."""
    return error.code() is grpc.StatusCode.INTERNAL and "execute_batch" in (
        error.debug_error_string() or ""
    )
