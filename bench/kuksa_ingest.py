"""Micro-benchmark: a KUKSA provider's publish of floats, read two ways.

Run: ``make bench-kuksa-ingest`` (the interpreted build, then the compiled one
from ``.venv-compiled``), or ``python -m bench.kuksa_ingest`` with either
virtualenv's Python.

One ``OpenProviderStreamRequest`` of ``--signals`` (84) floats to the keys of a
V-Store, each with the same timestamp, as ``make bench-e2e``'s KUKSA provider
sends them. Per value, the fastest of several repeats of a timed batch:

* the floor: protobuf's decode of the request alone (``FromString``, in C), no
  value looked at;
* the general way: that decode, then each value read, checked and converted
  as the servicer's general code does (``convert.to_store``,
  ``convert.source_time``);
* the reader: ``vehicle_middleware.server.kuksa.ingest`` (``parse`` and ``FloatRows.rows``).

Nothing is written to the store: the write is the same either way, and with it
the V-Store's value check of each signal, which judges the range (the general
way's ``to_store`` judges it too; the reader leaves it to the check).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.server.kuksa import convert, ingest
from vehicle_middleware.vss import Signal
from vehicle_middleware.vstore import UpdateRow, VStore


def _best_ns(run: Callable[[], Any], per: int, repeats: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(rounds):
            run()
        best = min(best, (time.perf_counter() - t0) / rounds / per * 1e9)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", type=int, default=84)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args(argv)
    store = VStore()
    names = [f"Vehicle.Bench.Signal{i}" for i in range(args.signals)]
    ids = [store.add_key(name) for name in names]
    signal = Signal(name="Vehicle.Bench", type="sensor", datatype="float", min=-1e6, max=1e6)
    signals = dict.fromkeys(names, signal)
    now = time.time_ns()
    request = v2.OpenProviderStreamRequest()
    points = request.publish_values_request.data_points
    for n, key_id in enumerate(ids):
        point = points[key_id]
        point.value.float = float(n)
        point.timestamp.seconds, point.timestamp.nanos = divmod(now, 1_000_000_000)
    raw = request.SerializeToString()

    def floor() -> Any:
        return v2.OpenProviderStreamRequest.FromString(raw)

    def general() -> list[UpdateRow]:
        publish = v2.OpenProviderStreamRequest.FromString(raw).publish_values_request
        name_of, signal_of = store.name_of, signals.get
        to_store, source_time = convert.to_store, convert.source_time
        rows: list[UpdateRow] = []
        data_points = publish.data_points
        for key_id in data_points:
            point = data_points[key_id]
            name = name_of(key_id)
            assert name is not None
            data = to_store(name, signal_of(name), point.value, "typed_value")
            rows.append((key_id, data, None, source_time(point, "data_point")))
        return rows

    reader = ingest.FloatRows(store.name_of, signals.get, lambda: store.removals)

    def fast() -> list[UpdateRow] | None:
        published = ingest.parse(raw)
        return None if published is None else reader.rows(published)

    taken = fast()
    if taken is None or sorted(map(repr, taken)) != sorted(map(repr, general())):
        sys.exit("the reader does not write what the general way writes: no figure to give")
    build = "compiled" if not ingest.__file__.endswith(".py") else "interpreted"
    print(
        f"{args.signals} floats in one request, one timestamp; {build} "
        f"(vehicle_middleware.server.kuksa.ingest from {ingest.__file__.rsplit('/', 1)[-1]})"
    )
    figures = {
        "floor: protobuf's decode of the request alone": _best_ns(
            floor, args.signals, args.repeats, args.rounds
        ),
        "the general way: decode, then each value converted": _best_ns(
            general, args.signals, args.repeats, args.rounds
        ),
        "the reader (vehicle_middleware.server.kuksa.ingest)": _best_ns(
            fast, args.signals, args.repeats, args.rounds
        ),
    }
    base = figures["floor: protobuf's decode of the request alone"]
    for label, ns in figures.items():
        print(f"  {label:52s} {ns:7.0f} ns a value  {ns / base:5.1f}x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
