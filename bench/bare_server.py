"""The ceiling of the end-to-end benchmark: a bare grpc.aio EventService.

It streams batches of the same ``EventBatch``/``DataUpdated`` messages, built
per event the way the middleware builds them, as fast as each client's stream
takes them, with no V-Store, no ESS and no providers. ``Register`` answers OK so
the benchmark's app code runs unchanged against it.

Run by ``bench.e2e``: ``python -m bench.bare_server --batch 120 --keys 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import threading
import time
from typing import Any

import grpc

from vehicle.ess.v1 import ess_pb2, ess_pb2_grpc

_Event = ess_pb2.Event
_Data = ess_pb2.DataUpdated


def _batch(seq: int, n: int, keys: int, value: bytes) -> ess_pb2.EventBatch:
    """``n`` events after ``seq``, built one by one as the middleware builds them."""
    now = time.time_ns()
    return ess_pb2.EventBatch(
        events=[
            _Event(data_updated=_Data(key=1 + (s % keys), seq=s, time_ns=now, data=value, queue=0))
            for s in range(seq + 1, seq + n + 1)
        ]
    )


class BareEventService(ess_pb2_grpc.EventServiceServicer):
    def __init__(self, batch: int, keys: int, value_size: int) -> None:
        self._batch = batch
        self._keys = keys
        self._value = bytes(value_size)

    async def GetEvents(self, request: Any, context: Any) -> None:
        started = ess_pb2.StreamStarted(boot_id="bare")
        await context.write(ess_pb2.EventBatch(events=[_Event(started=started)]))
        seq = 0
        while True:
            await context.write(_batch(seq, self._batch, self._keys, self._value))
            seq += self._batch

    async def Register(self, request: Any, context: Any) -> Any:
        return ess_pb2.RegisterResponse(
            results=[
                ess_pb2.SubscriptionResult(key=s.key, key_id=i + 1, status=ess_pb2.STATUS_OK)
                for i, s in enumerate(request.subscriptions)
            ]
        )


class SyncBareEventService(ess_pb2_grpc.EventServiceServicer):
    """The same ceiling on the thread-pool (sync) gRPC server, for the aio-vs-sync record."""

    def __init__(self, batch: int, keys: int, value_size: int) -> None:
        self._batch = batch
        self._keys = keys
        self._value = bytes(value_size)

    def GetEvents(self, request: Any, context: Any) -> Any:
        yield ess_pb2.EventBatch(events=[_Event(started=ess_pb2.StreamStarted(boot_id="bare"))])
        seq = 0
        while context.is_active():
            yield _batch(seq, self._batch, self._keys, self._value)
            seq += self._batch

    Register = BareEventService.Register  # type: ignore[assignment]


def _main_sync(args: argparse.Namespace) -> None:
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=128))
    ess_pb2_grpc.add_EventServiceServicer_to_server(
        SyncBareEventService(args.batch, args.keys, args.value_size), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


async def _main(args: argparse.Namespace) -> None:
    server = grpc.aio.server()
    ess_pb2_grpc.add_EventServiceServicer_to_server(
        BareEventService(args.batch, args.keys, args.value_size), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--value-size", type=int, default=8)
    parser.add_argument("--sync", action="store_true", help="thread-pool server instead of aio")
    args = parser.parse_args()
    if args.sync:
        _main_sync(args)
    else:
        asyncio.run(_main(args))


if __name__ == "__main__":
    main()
