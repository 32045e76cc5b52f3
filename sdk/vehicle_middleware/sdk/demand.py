"""Following the demand of a provider's keys (``VStore.WatchDemand``).

:func:`follow_demand` yields, for the keys named, whether any app watches each
and the shortest interval its subscribers ask: first every key, then the keys
whose demand changed. It is a hint: a provider may sample what nobody watches
as it did, only at a cost nobody gains from.

After a lost connection it reconnects with backoff and yields every key again
(the demand may have changed meanwhile). A middleware without ``WatchDemand``
(UNIMPLEMENTED) wants everything: every key is yielded once as watched, every
write wanted, and the iteration ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc
from vehicle_middleware.contract.channel import RETRYABLE, Backoff
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

__all__ = ["KeyDemand", "follow_demand"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeyDemand:
    """What the apps ask of one key a provider provides.

    Attributes:
        name: the key.
        watched: some app subscribes to it; False: a value written now reaches nobody.
        min_interval_s: the shortest interval between two events any subscriber
            asks, in seconds; 0: some subscriber wants every write (always 0
            when not watched). Sampling faster than this is wasted.
    """

    name: str
    watched: bool
    min_interval_s: float = 0.0


async def follow_demand(
    stub: vstore_pb2_grpc.VStoreStub,
    metadata: tuple[tuple[str, str], ...],
    names: Sequence[str],
    *,
    reconnect: bool = True,
    before_reopen: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[dict[str, KeyDemand]]:
    """Yield name -> demand: every key first (and after each reconnection),
    then the keys whose demand changed, one dict per message of the middleware.

    ``before_reopen`` is awaited before the stream is opened again after a lost
    connection (the provider adds its keys again: a restarted middleware has
    none of them).

    Raises:
        grpc.aio.AioRpcError: the middleware refused: INVALID_ARGUMENT (no keys,
            too many, a bad name, a key named twice), NOT_FOUND (a key not added
            yet, named), PERMISSION_DENIED (no provide scope for a key, named),
            RESOURCE_EXHAUSTED (too many provider streams); with ``reconnect``
            False also a lost connection.
    """
    request = vstore_pb2.WatchDemandRequest(names=list(names))
    backoff = Backoff()
    reopening = False
    while True:
        if reopening and before_reopen is not None:
            try:
                await before_reopen()
            except grpc.aio.AioRpcError as e:
                if e.code() not in RETRYABLE and e.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise
                await asyncio.sleep(backoff.delay())
                continue
        reopening = True
        call = stub.WatchDemand(request, metadata=metadata, wait_for_ready=True)
        try:
            async for update in call:
                backoff = Backoff()
                yield {
                    k.name: KeyDemand(k.name, k.watched, k.min_interval_ms / 1000)
                    for k in update.keys
                }
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code is grpc.StatusCode.UNIMPLEMENTED:
                log.info("the middleware does not tell demand: every key is wanted")
                yield {name: KeyDemand(name, True, 0.0) for name in names}
                return
            if code not in RETRYABLE or not reconnect:
                raise
            log.info("demand stream lost (%s); reconnecting", code.name)
        finally:
            call.cancel()
        await asyncio.sleep(backoff.delay())
