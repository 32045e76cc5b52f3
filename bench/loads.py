"""The loads the end-to-end benchmarks share (``bench.e2e``, ``bench.kuksa``, and
what imports them through ``bench.e2e``).

- processes: :func:`spawn` a server module (``python -m ...`` printing
  ``listening on HOST:PORT``; each server here listens on ``127.0.0.1:0``),
  :func:`middleware`, :func:`stop` one by its pid, read its RSS
  (:func:`rss_kib`) and its CPU seconds (:func:`cpu_seconds`);
- the pacing of a provider (:func:`paced`): as fast as it can, or on a 1 ms
  tick sending what is due in messages of at most ``batch_max`` updates; the
  own API's provider (:func:`provider_main`, run as ``python -m bench.e2e
  provider``, started by :func:`start_provider`) and the KUKSA one
  (``bench.kuksa``) both use it;
- the own API's apps (:func:`app_reader`: one ``Events`` stream each,
  ``ON_UPDATE`` on the :data:`KEYS`) and one measured window
  (:func:`measure`, :func:`timed_window`): warm-up, then a count into a
  :class:`Tally` of events, batches and per-event latency (receive time minus
  the event's ``time_ns``, the provider's clock at publish). A latency run's
  apps keep each message's bytes and its arrival time, and decode them after
  the window (:meth:`Tally.settle`): the receive time is taken before any
  decoding, and the apps' Python decoding does not compete for the machine's
  two cores with the server and the provider while it is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from vehicle_middleware.contract.values import FLOAT32_TAG
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc

KEYS = [f"Vehicle.Bench.Signal{i}" for i in range(100)]
BATCH = 64
"""The providers' messages at full speed (and the ceilings' batches): updates per message."""
TICK_S = 0.001
"""A paced provider's tick: it samples at 1 kHz."""
_FLOAT32 = struct.Struct("<Bf")

# -- processes ---------------------------------------------------------------------


SERVER_PYTHON: dict[str, str] = {}
"""The interpreter of a module's processes, by module (default: this one's): e.g.
``{"vehicle_middleware.server": ".venv-compiled/bin/python"}`` runs the middleware with the
compiled cores (``--compiled``)."""


def spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m ARGS``; return it and the address from its 'listening on' line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [SERVER_PYTHON.get(args[0], sys.executable), "-m", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{args[0]} did not start: {line!r}")
    if (
        args[0] == "vehicle_middleware.server"
        and "vehicle_middleware.server" in SERVER_PYTHON
        and not _compiled(proc.pid)
    ):
        stop(proc)
        raise RuntimeError(
            "the middleware runs without its compiled modules (a PYTHONPATH that names "
            "middleware puts the sources before the compiled install?)"
        )
    return proc, line.split()[-1]


def _compiled(pid: int) -> bool:
    """Whether process ``pid`` has loaded vehicle-middleware-server's compiled modules."""
    with open(f"/proc/{pid}/maps") as maps:
        return any("__mypyc" in line for line in maps)


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop one process that :func:`spawn` started: SIGTERM to its pid, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def middleware(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """A fresh middleware on ``127.0.0.1:0`` (event budget 100,000), with ``extra`` flags."""
    return spawn(
        "vehicle_middleware.server",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--log-level",
        "WARNING",
        "--event-budget",
        "100000",
        *extra,
    )


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, user + system (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def pct(values: list[int], q: float) -> float:
    """The ``q`` quantile of ``values`` (ns), in ms."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


# -- the providers (their own processes) ------------------------------------------------


async def paced(rate: float, seconds: float, batch_max: int) -> AsyncIterator[list[int]]:
    """The sizes of the messages a provider sends now, for ``seconds``.

    ``rate`` 0: one message of ``batch_max``, as fast as the caller takes them.
    Otherwise a provider sampling at 1 kHz: on each tick, what is due by the
    tick's scheduled time (``rate`` x the ticks so far, less what was sent) goes
    at once, in messages of at most ``batch_max`` (84,000/s in messages of 84:
    one message of 84 per tick). A tick that comes late is not skipped: the
    ticks behind run back to back.
    """
    start = time.perf_counter()
    sent = 0
    ticks = 0
    while time.perf_counter() - start < seconds:
        if rate <= 0:
            yield [batch_max]
            continue
        ticks += 1
        await asyncio.sleep(max(0.0, start + ticks * TICK_S - time.perf_counter()))
        due = int(rate * ticks * TICK_S) - sent
        if due <= 0:
            continue
        whole, rest = divmod(due, batch_max)
        yield [batch_max] * whole + ([rest] if rest else [])
        sent += due


def _float(n: int) -> bytes:
    """``n`` as a stored ``float`` value (vehicle.value.v1: its tag and 4 bytes), as
    the KUKSA provider of ``bench.kuksa`` sends its numbers: a middleware with the
    benchmark's catalog (``bench.kuksa.catalog``) checks it as a ``float`` signal's."""
    return _FLOAT32.pack(FLOAT32_TAG, n)


async def provider_main(address: str, rate: float, seconds: float, batch_max: int) -> None:
    """The own API's provider: ``AddKeys`` the :data:`KEYS`, then ``Publish``
    :class:`IdUpdate` messages paced by :func:`paced`, each value a ``float``
    (:func:`_float`), ``time_ns`` the clock at send."""
    md = (("app-id", "bench-provider"),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        reply = await stub.AddKeys(vstore_pb2.AddKeysRequest(names=KEYS), metadata=md)
        ids = [k.id for k in reply.keys]
        call = stub.Publish(metadata=md)
        n = 0
        async for sizes in paced(rate, seconds, batch_max):
            now = time.time_ns()
            for size in sizes:
                updates = []
                for _ in range(size):
                    n += 1
                    updates.append(
                        vstore_pb2.IdUpdate(id=ids[n % len(ids)], data=_float(n), time_ns=now)
                    )
                await call.write(vstore_pb2.PublishRequest(updates=updates))
        await call.done_writing()
        summary = await call
        print(f"published {summary.updates}", flush=True)


async def start_provider(
    address: str,
    rate: float,
    seconds: float,
    batch_max: int = BATCH,
    module: str = "bench.e2e",
) -> asyncio.subprocess.Process:
    """A provider process (``python -m MODULE provider``): the own API's
    (``bench.e2e``) or the KUKSA one (``bench.kuksa``)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        "provider",
        "--address",
        address,
        "--rate",
        str(rate),
        "--seconds",
        str(seconds),
        "--batch-max",
        str(batch_max),
        stdout=asyncio.subprocess.PIPE,
    )


async def finish(provider: asyncio.subprocess.Process) -> str:
    """What a provider process printed once it is done; killed (by its pid) if it
    is still running after 30 s."""
    try:
        out, _ = await asyncio.wait_for(provider.communicate(), 30)
    except (TimeoutError, asyncio.CancelledError):
        if provider.returncode is None:
            provider.kill()
            await provider.wait()
        raise
    return out.decode().strip()


async def ended(provider: asyncio.subprocess.Process | None) -> None:
    """On an error: the provider killed by its pid if it still runs."""
    if provider is not None and provider.returncode is None:
        provider.kill()
        await provider.wait()


# -- the own API's apps (the benchmark's own process) --------------------------------


@dataclass
class Tally:
    measuring: bool = False
    events: int = 0
    batches: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    """Per event: receive time minus the event's time_ns."""
    elapsed_s: float = 0.0
    """The measured window's length (set by :func:`timed_window`)."""
    cpu_s: float = float("nan")
    """The CPU seconds of the process :func:`timed_window` was given, over the window."""
    arrivals: list[tuple[int, bytes]] = field(default_factory=list)
    """Latency runs: each message received in the window, as (receive time, bytes),
    until :meth:`settle` decodes them."""
    sent_times: Callable[[bytes], list[int]] | None = None
    """The send times (ns) of a message's events, from its bytes: set by the reader
    that fills :attr:`arrivals`."""

    def settle(self) -> None:
        """Count what :attr:`arrivals` holds into the events, batches and latencies."""
        times = self.sent_times
        if times is None:
            return
        record = self.latencies_ns.append
        for now, raw in self.arrivals:
            sent = times(raw)
            self.batches += 1
            self.events += len(sent)
            for t in sent:
                record(now - t)
        self.arrivals.clear()


@dataclass
class Figure:
    """What one window measured: delivered events/s (all apps), per-event latency
    p50/p99 (ms), events per message, and the server's CPU seconds (nan: not read)."""

    rate: float
    p50: float
    p99: float
    per_message: float
    cpu_s: float = float("nan")


def figure(tally: Tally, rate: float) -> Figure:
    return Figure(
        rate,
        pct(tally.latencies_ns, 0.5),
        pct(tally.latencies_ns, 0.99),
        tally.events / max(1, tally.batches),
        tally.cpu_s,
    )


async def app_reader(
    address: str,
    name: str,
    tally: Tally,
    *,
    subscribe: bool,
    latency: bool,
    ready: asyncio.Event,
    read: bool = True,
    pause_s: float = 0.0,
    window: int = 0,
    max_length: int = 200,
) -> None:
    """One app on the ``Events`` stream: acknowledges the batches it read every half
    window (as the SDK does), ``window`` 0 taking the middleware's default."""
    md = (("app-id", name),)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = ess_pb2_grpc.EventServiceStub(channel)
        # The stream's messages as bytes: decoded here, or after the window (latency).
        call = channel.stream_stream(
            EVENTS_METHOD, request_serializer=ess_pb2.EventsRequest.SerializeToString
        )(metadata=md)
        queue = ess_pb2.QueueConfig(queue=0, min_length=min(50, max_length), max_length=max_length)
        await call.write(
            ess_pb2.EventsRequest(open=ess_pb2.OpenEvents(queues=[queue], window=window))
        )
        started = ess_pb2.EventBatch.FromString(await call.read())
        ack_every = max(1, started.events[0].started.window // 2)
        unacked = 0
        if subscribe:
            await stub.Register(
                ess_pb2.RegisterRequest(
                    subscriptions=[
                        ess_pb2.Subscription(key=k, trigger=ess_pb2.TRIGGER_ON_UPDATE) for k in KEYS
                    ]
                ),
                metadata=md,
            )
        ready.set()
        if not read:
            await asyncio.Event().wait()  # a stuck app: never reads again
        if latency:
            tally.sent_times = event_times
        keep = tally.arrivals.append
        while True:
            if unacked >= ack_every:
                await call.write(ess_pb2.EventsRequest(read=unacked))
                unacked = 0
            raw = await call.read()
            if raw is grpc.aio.EOF:
                return
            unacked += 1
            if pause_s:
                await asyncio.sleep(pause_s)  # a slow app: one batch per pause
            if not tally.measuring:
                continue
            if latency:
                keep((time.time_ns(), raw))
            else:
                tally.batches += 1
                tally.events += len(ess_pb2.EventBatch.FromString(raw).events)


EVENTS_METHOD = f"/{ess_pb2.DESCRIPTOR.services_by_name['EventService'].full_name}/Events"


def event_times(raw: bytes) -> list[int]:
    """An ``EventBatch``'s events' ``time_ns``, from its bytes."""
    return [e.data_updated.time_ns for e in ess_pb2.EventBatch.FromString(raw).events]


async def timed_window(
    tally: Tally, seconds: float, warmup: float = 1.0, cpu_pid: int | None = None
) -> float:
    """``warmup`` seconds not measured, then count into ``tally`` for ``seconds``
    (settled after it: :meth:`Tally.settle`); the seconds measured. With
    ``cpu_pid``, that process's CPU seconds over exactly the measured window go to
    ``tally.cpu_s``."""
    await asyncio.sleep(warmup)
    cpu0 = cpu_seconds(cpu_pid) if cpu_pid is not None else 0.0
    tally.measuring = True
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    tally.measuring = False
    tally.elapsed_s = time.perf_counter() - t0
    if cpu_pid is not None:
        tally.cpu_s = cpu_seconds(cpu_pid) - cpu0
    tally.settle()
    return tally.elapsed_s


async def add_keys(address: str) -> None:
    """The benchmark's keys, added before any app subscribes."""
    async with grpc.aio.insecure_channel(address) as channel:
        await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "bench-setup"),)
        )


async def measure(
    address: str,
    apps: int,
    *,
    provider_rate: float | None,
    seconds: float,
    latency: bool,
    subscribe: bool,
    batch_max: int = BATCH,
    warmup: float = 1.0,
    cpu_pid: int | None = None,
) -> tuple[Tally, float]:
    """``apps`` apps on the server at ``address``, the own API's provider at
    ``provider_rate`` (0: as fast as it can; None: no provider, the server makes
    the events) in messages of at most ``batch_max``; ``warmup`` s, then
    ``seconds`` measured. The tally and the delivered events/s (all apps)."""
    tally = Tally()
    if subscribe:  # the keys must exist before the apps subscribe to them
        await add_keys(address)
    readies = [asyncio.Event() for _ in range(apps)]
    tasks = [
        asyncio.create_task(
            app_reader(
                address,
                f"bench-app-{i}",
                tally,
                subscribe=subscribe,
                latency=latency,
                ready=readies[i],
            )
        )
        for i in range(apps)
    ]
    provider = None
    try:
        await started(readies, tasks)
        if provider_rate is not None:
            # Runs through the warm-up and the window, and half a second more.
            provider = await start_provider(
                address, provider_rate, warmup + seconds + 0.5, batch_max
            )
        elapsed = await timed_window(tally, seconds, warmup, cpu_pid)
        await cancel(tasks)
        if provider is not None:
            await finish(provider)
    finally:
        await cancel(tasks)
        await ended(provider)
    return tally, tally.events / elapsed


async def started(
    readies: list[asyncio.Event], tasks: list[asyncio.Task[None]], timeout: float = 60.0
) -> None:
    """Wait until every app (or subscriber) is ready; raise at once what one of them
    raised before it was (a refused stream, a limit), or TimeoutError."""
    waiter: asyncio.Future[Any] = asyncio.ensure_future(
        asyncio.gather(*(r.wait() for r in readies))
    )
    pending: list[asyncio.Future[Any]] = [waiter, *tasks]
    done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if waiter in done:
        return
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    for task in done:
        task.result()  # raises what the app raised
        raise RuntimeError("an app's stream ended before it was ready")
    raise TimeoutError(f"the apps were not ready in {timeout:g} s")


async def cancel(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
