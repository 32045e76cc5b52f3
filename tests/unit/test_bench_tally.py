"""The end-to-end benchmark's count of a window (``bench.loads.Tally``): what the
apps kept as they received it (the receive time and the message's bytes) is
decoded after the window into events, batches and per-event latencies, for the
own API's ``EventBatch`` and for a KUKSA ``SubscribeResponse``."""

from __future__ import annotations

from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2

from bench.kuksa import SUBSCRIBE_METHOD, point_times
from bench.loads import EVENTS_METHOD, Tally, event_times


def _batch(*times: int) -> bytes:
    batch = ess_pb2.EventBatch()
    for i, t in enumerate(times):
        batch.events.add().data_updated.CopyFrom(
            ess_pb2.DataUpdated(key=i + 1, seq=1, time_ns=t, data=b"\x00")
        )
    return batch.SerializeToString()


def _response(times: dict[str, int]) -> bytes:
    response = v2.SubscribeResponse()
    for path, t in times.items():
        point = response.entries[path]
        point.value.float = 1.5
        point.timestamp.seconds, point.timestamp.nanos = divmod(t, 1_000_000_000)
    return response.SerializeToString()


def test_a_window_of_event_batches_settles_into_events_batches_and_latencies() -> None:
    tally = Tally(sent_times=event_times)
    tally.arrivals += [(1_000_500, _batch(1_000_000, 1_000_100)), (2_000_000, _batch(1_999_000))]
    tally.settle()
    assert (tally.batches, tally.events) == (2, 3)
    assert tally.latencies_ns == [500, 400, 1_000]
    assert tally.arrivals == []
    tally.settle()  # nothing more arrived: nothing counted twice
    assert (tally.batches, tally.events, len(tally.latencies_ns)) == (2, 3, 3)


def test_a_kuksa_response_gives_each_datapoints_timestamp_in_ns() -> None:
    sent = {"Vehicle.A": 1_700_000_000_123_456_789, "Vehicle.B": 1_700_000_001_000_000_001}
    assert sorted(point_times(_response(sent))) == sorted(sent.values())
    tally = Tally(sent_times=point_times)
    tally.arrivals.append((1_700_000_002_000_000_000, _response(sent)))
    tally.settle()
    assert (tally.batches, tally.events) == (1, 2)
    assert sorted(tally.latencies_ns) == [999_999_999, 1_876_543_211]


def test_a_tally_without_a_reader_of_latencies_keeps_its_counts() -> None:
    tally = Tally(events=64, batches=1)  # a throughput row counts as it reads
    tally.settle()
    assert (tally.batches, tally.events, tally.latencies_ns) == (1, 64, [])


def test_the_raw_calls_name_the_methods_the_generated_stubs_call() -> None:
    ess = ess_pb2.DESCRIPTOR.services_by_name["EventService"].methods_by_name["Events"]
    kuksa = v2.DESCRIPTOR.services_by_name["VAL"].methods_by_name["Subscribe"]
    assert (
        EVENTS_METHOD
        == "/vehicle.ess.v1.EventService/Events"
        == f"/{ess.containing_service.full_name}/{ess.name}"
    )
    assert (
        SUBSCRIBE_METHOD
        == "/kuksa.val.v2.VAL/Subscribe"
        == f"/{kuksa.containing_service.full_name}/{kuksa.name}"
    )
