"""Drives the real kuksa-client's Python API; run by the kuksa-client virtualenv's python.

Not a test module, and it imports nothing of the project: it is what a KUKSA
user's app would do. ``python kuksa_driver.py SCENARIO HOST PORT [ARG...]``
prints one JSON object per line (results, or errors as the client reports
them: ``{"error": {"code": ..., "message": ...}, "errors": [...]}``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kuksa_client.grpc import Datapoint, DataType, VSSClient, VSSClientError

TYPED = {
    "Vehicle.Speed": 42.5,
    "Vehicle.TraveledDistance": 2**63 + 7,
    "Vehicle.CurrentLocation.Latitude": 48.137154,
    "Vehicle.Cabin.Door.Row1.DriverSide.IsOpen": True,
    "Vehicle.Cabin.Infotainment.Volume": 35,
    "Vehicle.Cabin.Infotainment.Source": "USB",
    "Vehicle.Cabin.HVAC.TargetTemperature": 21,
    # The client takes arrays as text, as typed on its command line.
    "Vehicle.OBD.DTCList": "[P0300, 'P0171']",
    "Vehicle.OBD.O2Voltages": "[0.5, 1.25]",
}


def out(obj: Any) -> None:
    print(json.dumps(obj, default=plain), flush=True)


def plain(value: Any) -> Any:
    """An array as the client returns it (its protobuf message), as a list."""
    return list(value.values)


def error(e: VSSClientError) -> dict[str, Any]:
    return {"error": e.error, "errors": e.errors}


def values(client: VSSClient) -> None:
    client.set_current_values({p: Datapoint(v) for p, v in TYPED.items()})
    got = client.get_current_values(list(TYPED))
    out({p: dp.value for p, dp in got.items()})
    md = client.get_metadata(list(TYPED))
    out(
        {
            p: {
                "data_type": DataType(m.data_type).name,
                "entry_type": m.entry_type.name,
                "unit": m.unit,
                "description": m.description,
                "min": m.value_restriction.min if m.value_restriction else None,
                "max": m.value_restriction.max if m.value_restriction else None,
                "allowed": m.value_restriction.allowed_values if m.value_restriction else None,
            }
            for p, m in md.items()
        }
    )


def subscribe(client: VSSClient, path: str, count: str) -> None:
    n = int(count)
    for updates in client.subscribe_current_values([path]):
        for p, dp in updates.items():
            line = {"path": p, "value": dp.value if dp is not None else None}
            if dp is not None and dp.value is None and dp.timestamp is not None:
                line["timestamp"] = dp.timestamp.timestamp()  # a datapoint without a value
            out(line)
            n -= 1
        if n <= 0:
            return


def provide(client: VSSClient, path: str, count: str) -> None:
    """An actuator's provider: print the targets asked for."""
    n = int(count)
    out({"providing": path})
    for updates in client.subscribe_target_values([path]):
        for p, dp in updates.items():
            out({"path": p, "target": dp.value})
            n -= 1
        if n <= 0:
            return


def actuate(client: VSSClient, path: str, value: str) -> None:
    try:
        client.set_target_values({path: Datapoint(value)})
        out({"ok": True, "target": client.get_target_values([path])[path].value})
    except VSSClientError as e:
        out(error(e))


def errors(client: VSSClient) -> None:
    for call in (
        lambda: client.get_current_values(["Vehicle.Nope"]),
        lambda: client.set_current_values({"Vehicle.Cabin.Infotainment.Volume": Datapoint(101)}),
        lambda: client.set_current_values({"Vehicle.Nope": Datapoint(1)}),
    ):
        try:
            call()
            out({"ok": True})
        except VSSClientError as e:
            out(error(e))


def denied(client: VSSClient) -> None:
    for call in (
        lambda: client.get_current_values(["Vehicle.Speed"]),
        lambda: client.get_current_values(["Vehicle.Cabin.Infotainment.Volume"]),
        lambda: client.set_current_values({"Vehicle.Speed": Datapoint(1.0)}),
    ):
        try:
            got = call()
            out({"ok": True, "values": {p: d.value for p, d in (got or {}).items() if d}})
        except VSSClientError as e:
            out(error(e))


def subscribe_v2(host: str, port: str, path: str, interval_ms: str, duration_ms: str) -> None:
    """KUKSA v2 Subscribe with a filter, through the generated stubs the client ships
    (kuksa-client 0.6.0's API has no v2 subscription filter): a line per update, then
    how the call ended."""
    import grpc
    from kuksa.val.v2 import val_pb2, val_pb2_grpc

    request = val_pb2.SubscribeRequest(signal_paths=[path])
    if interval_ms != "-":
        request.filter.min_sample_interval.interval_ms = int(interval_ms)
    request.filter.duration_ms = int(duration_ms)
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            for response in val_pb2_grpc.VALStub(channel).Subscribe(request):
                for p, point in response.entries.items():
                    which = point.value.WhichOneof("typed_value")
                    value = getattr(point.value, which) if which else None
                    out({"path": p, "value": value})
            out({"end": "OK"})
        except grpc.RpcError as e:
            out({"end": e.code().name, "details": e.details()})


def main() -> None:
    if sys.argv[1] == "subscribe_v2":
        subscribe_v2(*sys.argv[2:])
        return
    scenario, host, port, *rest = sys.argv[1:]
    token = None
    if rest and rest[0].startswith("token="):
        token = rest.pop(0)[len("token=") :]
    with VSSClient(host, int(port), token=token) as client:
        {
            "values": values,
            "subscribe": subscribe,
            "provide": provide,
            "actuate": actuate,
            "errors": errors,
            "denied": denied,
        }[scenario](client, *rest)


if __name__ == "__main__":
    main()
