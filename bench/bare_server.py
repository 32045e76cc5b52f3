"""The ceilings of the end-to-end benchmark: a bare grpc.aio EventService.

It streams batches of the same ``EventBatch``/``DataUpdated`` messages as fast
as each client's stream takes them, with no V-Store, no ESS and no providers.
``Register`` answers OK so the benchmark's app code runs unchanged against it.
How each batch is made (``--build``):

- ``add`` (the default, the strongest way to build fresh messages in Python
  protobuf): one ``EventBatch`` per batch, ``events.add()`` and field
  assignment per event, with a fresh seq and time per event;
- ``bytes``: the batch's bytes put together by hand, as protobuf would write
  them (a repeated field is its elements' bytes one after the other): per
  event the key's field (from a table), the seq's varint and the batch's
  shared time and value fields, all joined once (:mod:`bench.hand_bytes`).
  Faster than ``add`` in Python, and faster again compiled by mypyc
  (``--compiled-from DIR``: the copy ``bench.e2e`` compiles into DIR);
  ``bench.e2e`` takes the fastest of the three as its ceiling;
- ``ctor``: one ``Event(data_updated=DataUpdated(...))`` constructor call per
  event (the plain protobuf way; kept to compare);
- ``raw``: the raw limit of the transport: one batch serialized once at start
  and written again and again as bytes (no serializer on the stream), so only
  gRPC's own per-message work remains;
- ``relay``: the floor of the delivery path. A bare relay of a real provider's
  writes: it serves ``VStore.AddKeys``/``Publish`` and ``Events``; it decodes
  each ``Publish`` message, builds one ``EventBatch`` of its updates
  (``events.add()``, field assignment), serializes it once and puts the same
  bytes on every connected app's list; each app's stream writes what its list
  holds as soon as it can (several messages joined into one write while they
  hold at most ``--batch`` events), with no store, no subscriptions, no
  queues, no drop rule, no window, no journal. The fastest way to put a
  provider's writes on the apps' streams in grpc.aio, so the middleware's
  latency, delivery and CPU are read beside it.

The aio servers run on the loop the middleware runs on by default (``--event-loop
auto``: uvloop where installed; :mod:`vehicle_middleware.server.loop`): a floor is allowed what
the middleware is.

Run by ``bench.e2e``: ``python -m bench.bare_server --batch 64 --keys 100``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import importlib
import importlib.machinery
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.server.loop import LOOPS, loop_factory

from bench import hand_bytes

_Event = ess_pb2.Event
_Data = ess_pb2.DataUpdated


def _batch_ctor(seq: int, n: int, keys: int, value: bytes) -> ess_pb2.EventBatch:
    """``n`` events after ``seq``, one constructor call per event."""
    now = time.time_ns()
    return ess_pb2.EventBatch(
        events=[
            _Event(data_updated=_Data(key=1 + (s % keys), seq=s, time_ns=now, data=value, queue=0))
            for s in range(seq + 1, seq + n + 1)
        ]
    )


def _batch_add(seq: int, n: int, keys: int, value: bytes) -> ess_pb2.EventBatch:
    """``n`` events after ``seq``, each by ``events.add()`` and field assignment."""
    now = time.time_ns()
    batch = ess_pb2.EventBatch()
    add = batch.events.add
    for s in range(seq + 1, seq + n + 1):
        d = add().data_updated
        d.key = 1 + (s % keys)
        d.seq = s
        d.time_ns = now
        d.data = value
    return batch


_BUILDERS: dict[str, Callable[[int, int, int, bytes], Any]] = {
    "add": _batch_add,
    "bytes": hand_bytes.batch_bytes,
    "ctor": _batch_ctor,
}


def _compiled_builder(directory: str) -> Callable[[int, int, int, bytes], bytes]:
    """``batch_bytes`` of the compiled copy of :mod:`bench.hand_bytes` in ``directory``."""
    sys.path.insert(0, directory)
    try:
        compiled = importlib.import_module("hand_bytes")
    except ImportError as e:
        raise SystemExit(f"--compiled-from {directory}: no hand_bytes there ({e})") from None
    where = compiled.__file__ or ""
    if not where.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        raise SystemExit(f"--compiled-from {directory}: hand_bytes is not compiled there ({where})")
    builder: Callable[[int, int, int, bytes], bytes] = compiled.batch_bytes
    return builder


def _started(window: int = 0) -> ess_pb2.EventBatch:
    started = ess_pb2.StreamStarted(boot_id="bare", window=window)
    return ess_pb2.EventBatch(events=[_Event(started=started)])


WINDOW = 4
"""The window ``Events`` announces (the middleware's default), so the apps
acknowledge as they do against the middleware; the ceiling then ignores the
acknowledgements and never waits for one: a stronger ceiling than honouring them."""


async def _ignore(requests: Any) -> None:
    async for _ in requests:
        pass


class BareEventService(ess_pb2_grpc.EventServiceServicer):
    def __init__(self, batch: int, keys: int, value_size: int, build: str = "add") -> None:
        self._batch = batch
        self._keys = keys
        self._value = bytes(value_size)
        self._build = build

    async def GetEvents(self, request: Any, context: Any) -> None:
        await self._stream(context, _started())

    async def Events(self, requests: Any, context: Any) -> None:
        await anext(aiter(requests))  # the open request
        acks = asyncio.create_task(_ignore(requests))
        try:
            await self._stream(context, _started(WINDOW))
        finally:
            acks.cancel()

    async def _stream(self, context: Any, started: ess_pb2.EventBatch) -> None:
        if self._build == "raw":
            # Prebuilt bytes: the stream's serializer passes bytes through (see _main).
            await context.write(started.SerializeToString())
            raw = _batch_add(0, self._batch, self._keys, self._value).SerializeToString()
            while True:
                await context.write(raw)
        build = _BUILDERS[self._build]
        await context.write(started.SerializeToString() if self._build == "bytes" else started)
        seq = 0
        while True:
            await context.write(build(seq, self._batch, self._keys, self._value))
            seq += self._batch

    async def Register(self, request: Any, context: Any) -> Any:
        return ess_pb2.RegisterResponse(
            results=[
                ess_pb2.SubscriptionResult(key=s.key, key_id=i + 1, status=ess_pb2.STATUS_OK)
                for i, s in enumerate(request.subscriptions)
            ]
        )


class Relay(ess_pb2_grpc.EventServiceServicer, vstore_pb2_grpc.VStoreServicer):
    """``--build relay``: a provider's writes fanned out to every app's stream.

    Each ``Publish`` message, decoded, becomes one ``EventBatch`` (``events.add()``
    and field assignment per update), serialized once; the same bytes go on every
    connected app's list. Each app's stream writes what its list holds as soon as
    it can (its ``Events`` has no response serializer): one message, or several
    joined into one write (serialized ``EventBatch`` messages concatenated are one
    ``EventBatch`` with all their events) while they hold at most ``batch_max``
    events together.
    """

    def __init__(self, batch_max: int) -> None:
        self._batch_max = batch_max
        self._apps: list[tuple[list[tuple[bytes, int]], asyncio.Event]] = []
        self._ids: dict[str, int] = {}
        self._seq = 0

    async def AddKeys(self, request: Any, context: Any) -> Any:
        keys = []
        for name in request.names:
            key_id = self._ids.setdefault(name, len(self._ids) + 1)
            keys.append(vstore_pb2.KeyId(name=name, id=key_id))
        return vstore_pb2.AddKeysResponse(keys=keys)

    async def Publish(self, requests: Any, context: Any) -> Any:
        n = 0
        async for request in requests:
            batch = ess_pb2.EventBatch()
            add = batch.events.add
            seq = self._seq
            for u in request.updates:
                d = add().data_updated
                d.key = u.id
                seq += 1
                d.seq = seq
                d.time_ns = u.time_ns
                d.data = u.data
            size = seq - self._seq
            self._seq = seq
            n += size
            raw = batch.SerializeToString()
            for pending, bell in self._apps:
                pending.append((raw, size))
                bell.set()
        return vstore_pb2.PublishSummary(updates=n)

    async def Events(self, requests: Any, context: Any) -> None:
        await anext(aiter(requests))
        acks = asyncio.create_task(_ignore(requests))
        pending: list[tuple[bytes, int]] = []
        bell = asyncio.Event()
        entry = (pending, bell)
        self._apps.append(entry)
        try:
            await context.write(_started(WINDOW).SerializeToString())
            while True:
                await bell.wait()
                bell.clear()
                while pending:
                    take, events = 1, pending[0][1]
                    while take < len(pending) and events + pending[take][1] <= self._batch_max:
                        events += pending[take][1]
                        take += 1
                    raw = pending[0][0] if take == 1 else b"".join(r for r, _ in pending[:take])
                    del pending[:take]
                    await context.write(raw)
        finally:
            self._apps.remove(entry)
            acks.cancel()

    Register = BareEventService.Register


class SyncBareEventService(ess_pb2_grpc.EventServiceServicer):
    """The same ceiling on the thread-pool (sync) gRPC server, for the aio-vs-sync record
    (``GetEvents``, and ``Events``, which the benchmark's apps open)."""

    def __init__(self, batch: int, keys: int, value_size: int) -> None:
        self._batch = batch
        self._keys = keys
        self._value = bytes(value_size)

    def GetEvents(self, request: Any, context: Any) -> Any:
        yield ess_pb2.EventBatch(events=[_Event(started=ess_pb2.StreamStarted(boot_id="bare"))])
        seq = 0
        while context.is_active():
            yield _batch_add(seq, self._batch, self._keys, self._value)
            seq += self._batch

    def Events(self, requests: Any, context: Any) -> Any:
        next(requests)  # the open request
        # The acknowledgements, read and ignored on a thread of their own.
        threading.Thread(target=collections.deque, args=(requests, 0), daemon=True).start()
        yield _started(WINDOW)
        seq = 0
        while context.is_active():
            yield _batch_add(seq, self._batch, self._keys, self._value)
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


def _bytes_handler(service: Any, methods: tuple[str, ...]) -> grpc.GenericRpcHandler:
    """EventService with ``methods`` (of GetEvents and Events) writing bytes as they
    are (no response serializer), and Register."""
    handlers: dict[str, Callable[[], grpc.RpcMethodHandler[Any, Any]]] = {
        "GetEvents": lambda: grpc.unary_stream_rpc_method_handler(
            service.GetEvents,
            request_deserializer=ess_pb2.GetEventsRequest.FromString,
            response_serializer=None,
        ),
        "Events": lambda: grpc.stream_stream_rpc_method_handler(
            service.Events,
            request_deserializer=ess_pb2.EventsRequest.FromString,
            response_serializer=None,
        ),
    }
    return grpc.method_handlers_generic_handler(
        "vehicle.ess.v1.EventService",
        {
            **{name: handlers[name]() for name in methods},
            "Register": grpc.unary_unary_rpc_method_handler(
                service.Register,
                request_deserializer=ess_pb2.RegisterRequest.FromString,
                response_serializer=ess_pb2.RegisterResponse.SerializeToString,
            ),
        },
    )


async def _main(args: argparse.Namespace) -> None:
    server = grpc.aio.server()
    service = BareEventService(args.batch, args.keys, args.value_size, args.build)
    if args.build == "relay":
        relay = Relay(args.batch)
        server.add_generic_rpc_handlers((_bytes_handler(relay, ("Events",)),))
        vstore_pb2_grpc.add_VStoreServicer_to_server(relay, server)
    elif args.build in ("raw", "bytes"):
        if args.build == "bytes" and args.value_size > 64:
            raise SystemExit("--build bytes: --value-size at most 64 (its lengths are one byte)")
        server.add_generic_rpc_handlers((_bytes_handler(service, ("GetEvents", "Events")),))
    else:
        ess_pb2_grpc.add_EventServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    # As the middleware does (``serve``): start-up's objects out of the collector's sight.
    gc.collect()
    gc.freeze()
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
    parser.add_argument("--build", choices=("add", "bytes", "ctor", "raw", "relay"), default="add")
    parser.add_argument("--sync", action="store_true", help="thread-pool server instead of aio")
    parser.add_argument(
        "--event-loop",
        choices=LOOPS,
        default="auto",
        help="the aio server's loop, as the middleware's event_loop setting (default auto: "
        "uvloop where installed, as the middleware runs by default)",
    )
    parser.add_argument(
        "--compiled-from",
        metavar="DIR",
        help="--build bytes with the hand_bytes module compiled into DIR "
        "(bench.e2e.compile_ceiling)",
    )
    args = parser.parse_args()
    if args.sync and args.build != "add":
        parser.error("--sync streams the add build only")
    if args.compiled_from:
        if args.build != "bytes":
            parser.error("--compiled-from is for --build bytes")
        _BUILDERS["bytes"] = _compiled_builder(args.compiled_from)
    if args.sync:
        _main_sync(args)
    else:
        with asyncio.Runner(loop_factory=loop_factory(args.event_loop)[1]) as runner:
            runner.run(_main(args))


if __name__ == "__main__":
    main()
