"""The server's own steps counted in machine instructions, not timed: for a noisy machine.

Run: ``make bench-instructions`` (the interpreted build, then the compiled one
from ``.venv-compiled``), or ``python -m bench.instructions [--python PATH]``.
Needs valgrind (``callgrind``).

Timings of a small change can swing by 2x between repeats of the same code
when the machine is busy or in a slow phase; the instructions a step executes
do not. Each scenario runs the server's own classes in one process, without
gRPC, twice under callgrind: once with only its set-up and warm-up, once with
``--rounds`` more rounds; the difference over the events of those rounds is
the count per event (``PYTHONHASHSEED=0``: the same dict layout each time).
Instructions are not time (a cache miss costs more than an addition), but a
change that takes out work shows here whatever the machine is doing.

Each figure is printed beside its floor, counted the same way in the same run:

* ``own``: a provider's publish of 64 floats written to the V-Store, fanned out
  to 10 apps subscribed to its 100 keys, drained and encoded as each app's
  ``EventBatch`` bytes (4b's load, with no gRPC), per event delivered; beside
  it the bare ceiling's builder of the same batches (``bench.hand_bytes``,
  as ``make bench-e2e``'s 4b ceiling builds them), per event;
* ``own-1``: the same with 1 app and publishes of 84 (target 1's load);
* ``own-1 api``: ``own-1`` from the ``PublishRequest``'s bytes (decoded as the
  servicer has them decoded) to ``float`` signals with their value checks
  (``serve --vss``); beside it ``own-1``;
* ``kuksa``: a KUKSA provider's publish of 84 floats read from its bytes
  (``vehicle_middleware.server.kuksa.ingest``), written with the same value checks, drained,
  cut and encoded as a ``SubscribeResponse`` for 1 subscriber, per value;
  beside it ``own-1 api``, the same load through the own API from its bytes,
  as target 3 compares them (both with the benchmark's catalog);
* ``own full``: ``own`` with the journal at ``full`` (target 5: the publish tap,
  a ``delivered_batch`` record per app and batch, and the writer's step: records
  linked, hashed and written), per event; beside it ``own``, the journal off
  (what ``drops`` costs while nothing is dropped). valgrind's CPU has no SHA
  extensions, so the hash counts in software there, several times what it
  costs on a CPU with them (BENCHMARKS.md, "Instructions per event");
* ``own ids``: ``own`` with 1,000 other keys added to the V-Store first, so that
  its keys' ids are 1,001-1,100, as in a car's catalog, where ``own``'s are
  1-100; beside it ``own``. The interpreter shares one object for each number
  up to 256, and compiled code that boxes a number anew allocates above it:
  this row shows what the ids cost the compiled build (docs/compiled-build.md,
  "Ints on the hot path").
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from vehicle_middleware.ess import EventSubSystem
    from vehicle_middleware.server.journal.taps import PublishTap
    from vehicle_middleware.server.journal.writer import Journal
    from vehicle_middleware.server.signals import Signals
    from vehicle_middleware.vstore import VStore

KEYS: Final = 100
_COLLECTED: Final = re.compile(r"Collected : (\d+)")

Step = Callable[[int], None]
"""One round of a scenario: its ``n``-th publish, through every step."""


def _float_rows(n: int, size: int, ids: list[int]) -> list[tuple[int, bytes, None, int]]:
    """The rows of the ``n``-th publish: ``size`` floats as the V-Store keeps them."""
    from vehicle_middleware.contract.values import FLOAT32_TAG

    pack = struct.Struct("<Bf").pack
    return [
        (ids[(n * size + j) % KEYS], pack(FLOAT32_TAG, n * size + j), None, 1_700_000 + n)
        for j in range(size)
    ]


def _float_signals(names: list[str]) -> Signals:
    """The keys as ``serve --vss`` wires ``bench.kuksa``'s catalog (with a range):
    every key a float signal, its value check in the V-Store once installed."""
    from vehicle_middleware.server.signals import Signals
    from vehicle_middleware.vss import Signal

    return Signals(
        Signal(name=name, type="sensor", datatype="float", min=-1e6, max=1e6) for name in names
    )


def own(
    apps: int,
    size: int,
    rounds: int,
    *,
    api: bool = False,
    journal: bool = False,
    other_keys: int = 0,
) -> tuple[Step, int]:
    """A publish of ``size`` floats to ``apps`` apps, as the own API's streams carry it.

    ``api``: from the ``PublishRequest``'s bytes, decoded as the servicer has them
    decoded (protobuf, then :func:`vehicle_middleware.server.rpc.convert.publish_rows`), to keys
    of ``float`` signals with their value checks (``serve --vss``): the own API's
    way of what the ``kuksa`` scenario counts.

    ``journal``: with the journal at ``full`` (target 5), as the server wires it:
    the publish tap on the V-Store, a ``delivered_batch`` record per app and batch,
    and the writer's step (records linked, hashed and written to a segment in a
    temporary directory) run after each round, where the server runs it on its
    writer thread.

    ``other_keys``: that many keys added to the V-Store first, so that the
    benchmark's keys have the ids after them (ids 1-100 by default; a car's
    catalog has hundreds or thousands of keys)."""
    from vehicle_middleware.ess import EventSubSystem, QueueConfig, SubscriptionRequest, Trigger
    from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
    from vehicle_middleware.server.journal.taps import record_delivered
    from vehicle_middleware.server.rpc.batches import EventBytes
    from vehicle_middleware.server.rpc.convert import publish_rows
    from vehicle_middleware.vstore import VStore

    store = VStore()
    ess = EventSubSystem(store, event_budget=100_000)
    store.set_listener(ess)
    full = _full_journal(store, ess) if journal else None
    for i in range(other_keys):  # added first: the benchmark's keys get the ids after them
        store.add_key(f"Vehicle.Other.K{i}")
    key_names = [f"Vehicle.Bench.S{i}" for i in range(KEYS)]
    if api:
        _float_signals(key_names).install(store)
    ids = [store.add_key(name) for name in key_names]
    names = [f"app{a}" for a in range(apps)]
    for app in names:
        ess.open_stream(app, [QueueConfig(0, 10, 100)])
        wanted = [
            SubscriptionRequest(f"Vehicle.Bench.S{i}", 0, Trigger.ON_UPDATE) for i in range(KEYS)
        ]
        ess.register(app, wanted)
        ess.drain(app, 1000)
    encoders = [EventBytes() for _ in names]
    publishes = [_float_rows(n, size, ids) for n in range(rounds)]
    raws = [  # the requests' bytes, for api
        vstore_pb2.PublishRequest(
            updates=[vstore_pb2.IdUpdate(id=k, data=d, time_ns=t) for k, d, _, t in rows]
        ).SerializeToString()
        for rows in (publishes if api else ())
    ]

    def step(n: int) -> None:
        if full is not None:
            full.tap.begin("provider")
        if api:
            store.write_many(publish_rows(vstore_pb2.PublishRequest.FromString(raws[n]).updates))
        else:
            store.write_many(publishes[n])
        if full is not None:
            full.tap.end()
        for app, encoder in zip(names, encoders, strict=True):
            events = ess.drain_raw(app, 500)
            encoder.messages(events, 4_000_000)
            if full is not None:
                record_delivered(full.journal, app, events, several=ess.multi_write_pushes(app) > 0)
        if full is not None:
            written = full.journal.written
            full.journal.write_buffered()
            # What is counted is what the server does: each app's batch and the publish
            # are records on disk (not dropped by a level, a bound or a failed write).
            assert full.journal.written == written + apps + 1, "the journal wrote no record"

    return step, apps * size


class _Full(NamedTuple):
    """The journal at ``full`` as the server wires it (``vehicle_middleware.server.runtime``)."""

    journal: Journal
    tap: PublishTap


def _full_journal(store: VStore, ess: EventSubSystem) -> _Full:
    """A journal at ``full`` in a temporary directory (removed at exit), its thread
    not started: the scenario runs the writer's step itself."""
    from vehicle_middleware.contract.journal.records import Level
    from vehicle_middleware.server.journal.taps import PublishTap
    from vehicle_middleware.server.journal.writer import Journal

    directory = tempfile.mkdtemp(prefix="vmw-bench-instructions-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    # A fixed boot id: the same bytes hashed in every run.
    journal = Journal(Path(directory), vehicle_id="bench", boot_id="0" * 32, level=Level.FULL)
    tap = PublishTap(journal, store, ess)
    store.set_listener(tap)
    return _Full(journal, tap)


def ceiling(apps: int, size: int, rounds: int) -> tuple[Step, int]:
    """The bare ceiling's builder: each app's batch of ``size`` put together by hand."""
    from bench.hand_bytes import batch_bytes

    value = bytes(5)

    def step(n: int) -> None:
        for _ in range(apps):
            batch_bytes(3000 + n * size, size, KEYS, value)

    return step, apps * size


def kuksa(rounds: int) -> tuple[Step, int]:
    """A KUKSA provider's publish of 84 floats to 1 subscriber on ``Subscribe``."""
    from vehicle_middleware.ess import EventSubSystem, QueueConfig
    from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
    from vehicle_middleware.server.kuksa import ingest
    from vehicle_middleware.server.kuksa.entries import Entries
    from vehicle_middleware.server.kuksa.response_cuts import cut
    from vehicle_middleware.server.kuksa.subscriptions import subscription_requests
    from vehicle_middleware.vstore import VStore

    size = 84
    store = VStore()
    ess = EventSubSystem(store, event_budget=100_000)
    store.set_listener(ess)
    names = [f"Vehicle.Bench.S{i}" for i in range(KEYS)]
    signals = _float_signals(names)
    signals.install(store)
    ids = store.add_keys(names)  # added by install: their ids
    ess.open_stream("kuksa", [QueueConfig(0, 10, 1000)])
    ess.register("kuksa", subscription_requests(names))
    ess.drain("kuksa", 1000)
    reader = ingest.FloatRows(store.name_of, signals.get, lambda: store.removals)
    entries = Entries(
        v2.SubscribeResponse, by_name=True, name_of=store.name_of, signal_of=signals.get
    )
    raws = []
    for n in range(rounds):
        request = v2.OpenProviderStreamRequest()
        points = request.publish_values_request.data_points
        for j in range(size):
            point = points[ids[(n * size + j) % KEYS]]
            point.value.float = float(n * size + j)
            point.timestamp.seconds, point.timestamp.nanos = 1_764_000_000, n
        raws.append(request.SerializeToString())

    def step(n: int) -> None:
        published = ingest.parse(raws[n])
        assert published is not None
        rows = reader.rows(published)
        assert rows is not None
        store.write_many(rows)
        for batch in cut(ess.drain_raw("kuksa", 500)):
            entries.encode(batch)

    return step, size


SCENARIOS: Final[dict[str, Callable[[int], tuple[Step, int]]]] = {
    "own": lambda rounds: own(10, 64, rounds),
    "own ceiling": lambda rounds: ceiling(10, 64, rounds),
    "own-1": lambda rounds: own(1, 84, rounds),
    "own-1 ceiling": lambda rounds: ceiling(1, 84, rounds),
    "own-1 api": lambda rounds: own(1, 84, rounds, api=True),
    "kuksa": kuksa,
    "own full": lambda rounds: own(10, 64, rounds, journal=True),
    "own ids": lambda rounds: own(10, 64, rounds, other_keys=1000),
}
WARMUP: Final = 20


def run(name: str, rounds: int, inputs: int) -> int:
    """(Under callgrind) set the scenario up with ``inputs`` publishes made ahead,
    warm it up, then run ``rounds`` more."""
    step, events = SCENARIOS[name](inputs)
    assert events == EVENTS[name]
    assert WARMUP + rounds <= inputs
    for n in range(WARMUP + rounds):
        step(n)
    return 0


def count(python: str, name: str, rounds: int, inputs: int) -> int:
    """The instructions one run of ``name`` executes, by callgrind."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            python,
            "-m",
            "bench.instructions",
            "--run",
            name,
            "--rounds",
            str(rounds),
            "--inputs",
            str(inputs),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{name}: valgrind failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


EVENTS: Final = {
    "own": 640,
    "own ceiling": 640,
    "own-1": 84,
    "own-1 ceiling": 84,
    "own-1 api": 84,
    "kuksa": 84,
    "own full": 640,
    "own ids": 640,
}
"""Events a round of each scenario delivers (values, for ``kuksa``)."""


def per_event(python: str, name: str, rounds: int, seen: dict[str, float]) -> float:
    """Instructions per event of ``name`` (kept in ``seen``: a floor may be a row too)."""
    if name not in seen:
        # Both runs make the same publishes ahead: only the rounds differ.
        inputs = WARMUP + rounds
        extra = count(python, name, rounds, inputs) - count(python, name, 0, inputs)
        seen[name] = extra / (rounds * EVENTS[name])
    return seen[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="publishes counted")
    parser.add_argument(
        "--python", default=sys.executable, help="the Python whose vehicle_middleware is counted"
    )
    parser.add_argument("--run", choices=sorted(SCENARIOS), help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        return run(args.run, args.rounds, args.inputs)
    if shutil.which("valgrind") is None:
        print("bench.instructions needs valgrind (callgrind): not found on PATH")
        return 1
    compiled = subprocess.run(
        [args.python, "-c", "import vehicle_middleware.server.rpc.batches as b; print(b.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"{args.python}: the encoder from {compiled}")
    print(f"{'scenario':<52} {'instructions':>12} {'floor':>8} {'ratio':>6}")
    rows = (
        ("own: 10 apps, publishes of 64, per event delivered", "own", "own ceiling", "ceiling"),
        ("own-1: 1 app, publishes of 84, per event", "own-1", "own-1 ceiling", "ceiling"),
        ("own-1 api: the same from its bytes, values checked", "own-1 api", "own-1", "own-1"),
        ("kuksa: 1 subscriber, publishes of 84, per value", "kuksa", "own-1 api", "own-1 api"),
        ("own full: own with the journal at full", "own full", "own", "own"),
        ("own ids: own with key ids above 1,000", "own ids", "own", "own"),
    )
    seen: dict[str, float] = {}
    for label, name, floor_name, floor_label in rows:
        mine = per_event(args.python, name, args.rounds, seen)
        floor = per_event(args.python, floor_name, args.rounds, seen)
        print(f"{label:<52} {mine:12,.0f} {floor:8,.0f} {mine / floor:6.2f}  ({floor_label})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
