"""The KUKSA.val services over raw stubs: typed values, metadata, errors, subscriptions.

A real middleware on 127.0.0.1:0 with the test catalog (``kuksa_catalog.json``);
the real ``kuksa-client`` is driven in ``test_kuksa_client.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from vehicle_middleware.contract.values import Failure, FailureCode, decode, encode
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2 as v1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2_grpc as v1_grpc
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.proto.vehicle.value.v1.value_pb2 import Value
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, Sub
from vehicle_middleware.server.server import RunningServer

from tests.conftest import fails
from tests.integration.conftest import PublishReader

CATALOG = Path(__file__).with_name("kuksa_catalog.json")


pytestmark = pytest.mark.settings(vss=(str(CATALOG),))


@pytest.fixture
async def channel(server: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.address) as ch:
        yield ch


def path(p: str) -> t2.SignalID:
    return t2.SignalID(path=p)


async def test_every_catalog_signal_exists_from_the_start_with_no_value(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    response = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle"))
    assert len(response.metadata) == 14
    speed = next(m for m in response.metadata if m.path == "Vehicle.Speed")
    assert speed.data_type == t2.DATA_TYPE_FLOAT
    assert speed.entry_type == t2.ENTRY_TYPE_SENSOR
    assert speed.unit == "km/h"
    assert speed.description == "Vehicle speed."
    assert speed.min.float == 0.0
    assert speed.max.float == 300.0
    source = await stub.ListMetadata(
        v2.ListMetadataRequest(root="Vehicle.Cabin.Infotainment.Source")
    )
    assert list(source.metadata[0].allowed_values.string_array.values) == [
        "RADIO",
        "USB",
        "BLUETOOTH",
    ]
    point = (await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))).data_point
    assert not point.HasField("value")


async def test_a_published_value_reads_back_typed_by_path_and_by_id(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    await stub.PublishValue(
        v2.PublishValueRequest(
            signal_id=path("Vehicle.Speed"), data_point=t2.Datapoint(value=t2.Value(float=88.5))
        )
    )
    md = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.Speed"))
    key_id = md.metadata[0].id
    by_id = await stub.GetValue(v2.GetValueRequest(signal_id=t2.SignalID(id=key_id)))
    assert by_id.data_point.value.float == 88.5
    assert by_id.data_point.timestamp.seconds > 0
    both = await stub.GetValues(
        v2.GetValuesRequest(signal_ids=[path("Vehicle.Speed"), t2.SignalID(id=key_id)])
    )
    assert [p.value.float for p in both.data_points] == [88.5, 88.5]


async def test_a_value_outside_the_rule_is_invalid_argument_naming_key_value_and_rule(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    assert await fails(
        stub.PublishValue(
            v2.PublishValueRequest(
                signal_id=path("Vehicle.Cabin.Infotainment.Volume"),
                data_point=t2.Datapoint(value=t2.Value(uint32=101)),
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    ) == (
        "value for 'Vehicle.Cabin.Infotainment.Volume' refused: "
        "value 101 is above the max 100 percent"
    )
    await fails(
        stub.PublishValue(
            v2.PublishValueRequest(
                signal_id=path("Vehicle.Cabin.Infotainment.Source"),
                data_point=t2.Datapoint(value=t2.Value(string="CD")),
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "'CD' is not one of the allowed values ['RADIO', 'USB', 'BLUETOOTH']",
    )
    await fails(
        stub.PublishValue(
            v2.PublishValueRequest(
                signal_id=path("Vehicle.Speed"),
                data_point=t2.Datapoint(value=t2.Value(string="fast")),
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "value 'fast' (str) is not a float",
    )


async def test_the_projects_own_set_is_checked_against_the_same_metadata(
    channel: grpc.aio.Channel,
) -> None:
    stub = vstore_pb2_grpc.VStoreStub(channel)
    md = (("app-id", "tool"),)
    bad = vstore_pb2.Update(name="Vehicle.Cabin.HVAC.TargetTemperature", data=encode(45))
    assert await fails(
        stub.Set(vstore_pb2.SetRequest(updates=[bad]), metadata=md),
        grpc.StatusCode.INVALID_ARGUMENT,
    ) == (
        "updates[0]: value for 'Vehicle.Cabin.HVAC.TargetTemperature' refused: "
        "value 45 is above the max 30 celsius"
    )
    opaque = vstore_pb2.Update(name="Vehicle.Speed", data=b"\xff\xff")
    await fails(
        stub.Set(vstore_pb2.SetRequest(updates=[opaque]), metadata=md),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    ok = vstore_pb2.Update(name="Vehicle.Cabin.HVAC.TargetTemperature", data=encode(21))
    await stub.Set(vstore_pb2.SetRequest(updates=[ok]), metadata=md)
    value = await v2_grpc.VALStub(channel).GetValue(
        v2.GetValueRequest(signal_id=path("Vehicle.Cabin.HVAC.TargetTemperature"))
    )
    assert value.data_point.value.int32 == 21


async def test_an_unknown_path_is_not_found(channel: grpc.aio.Channel) -> None:
    stub = v2_grpc.VALStub(channel)
    assert (
        await fails(
            stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Nope"))),
            grpc.StatusCode.NOT_FOUND,
        )
        == "key 'Vehicle.Nope' does not exist"
    )
    await fails(
        stub.GetValue(v2.GetValueRequest(signal_id=t2.SignalID(id=9999))), grpc.StatusCode.NOT_FOUND
    )
    await fails(
        stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.Nope")), grpc.StatusCode.NOT_FOUND
    )


async def test_calls_not_served_are_unimplemented_saying_what_to_use(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    details = await fails(
        stub.ActuateStream(iter([v2.ActuateRequest(signal_id=path("Vehicle.Speed"))])),
        grpc.StatusCode.UNIMPLEMENTED,
    )
    assert details == (
        "kuksa.val.v2.VAL/ActuateStream is not served by this middleware; "
        "actuate with Actuate or BatchActuate"
    )
    v1_call = v1_grpc.VALStub(channel).StreamedUpdate()
    details = await fails(v1_call.read(), grpc.StatusCode.UNIMPLEMENTED)
    assert details == (
        "kuksa.val.v1.VAL/StreamedUpdate is not served by this middleware; write with Set"
    )


@pytest.mark.usefixtures("each_codecs")
async def test_a_v2_subscription_gets_current_values_then_writes_of_the_projects_provider(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    stub = v2_grpc.VALStub(channel)
    await stub.PublishValue(
        v2.PublishValueRequest(
            signal_id=path("Vehicle.Speed"), data_point=t2.Datapoint(value=t2.Value(float=10.0))
        )
    )
    call = stub.Subscribe(
        v2.SubscribeRequest(
            signal_paths=["Vehicle.Speed", "Vehicle.CurrentLocation.Latitude"], buffer_size=5
        )
    )
    first = await asyncio.wait_for(call.read(), 5)
    assert dict(first.entries)["Vehicle.Speed"].value.float == 10.0
    # Listed at once, as the databroker does, without a value (none written yet).
    assert set(first.entries) == {"Vehicle.Speed", "Vehicle.CurrentLocation.Latitude"}
    latitude = first.entries["Vehicle.CurrentLocation.Latitude"]
    assert not latitude.HasField("value")
    assert not latitude.HasField("timestamp")
    subs = [a for a in server.runtime.ess.apps() if "/kuksa-sub-" in a]
    assert len(subs) == 1
    assert server.runtime.ess.subscriptions(subs[0])[0].queue == 0
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.CurrentLocation.Latitude"])
        await provider.publish({"Vehicle.CurrentLocation.Latitude": encode(48.1)})
        await provider.flush()
    update = await asyncio.wait_for(call.read(), 5)
    assert update.entries["Vehicle.CurrentLocation.Latitude"].value.double == 48.1
    call.cancel()


@pytest.mark.usefixtures("each_codecs")
async def test_a_write_of_the_same_value_again_reaches_v2_and_v1_subscribers_with_its_value(
    channel: grpc.aio.Channel,
) -> None:
    """A KUKSA subscriber gets the value with every write, also one that stores the
    value it already had (a heartbeat): with the new write's time."""
    stub, old = v2_grpc.VALStub(channel), v1_grpc.VALStub(channel)
    speed = "Vehicle.Speed"
    v2_call = stub.Subscribe(v2.SubscribeRequest(signal_paths=[speed]))
    v1_call = old.Subscribe(
        v1.SubscribeRequest(entries=[v1.SubscribeEntry(path=speed, view=t1.VIEW_CURRENT_VALUE)])
    )
    assert not (await asyncio.wait_for(v2_call.read(), 5)).entries[speed].HasField("value")
    seen_v1 = 0
    for seconds in (1_764_000_001, 1_764_000_002, 1_764_000_003):
        await stub.PublishValue(
            v2.PublishValueRequest(
                signal_id=path(speed),
                data_point=t2.Datapoint(
                    timestamp=Timestamp(seconds=seconds), value=t2.Value(float=42.5)
                ),
            )
        )
        point = (await asyncio.wait_for(v2_call.read(), 5)).entries[speed]
        assert (point.value.float, point.timestamp.seconds) == (42.5, seconds)
        while seen_v1 < seconds - 1_764_000_000:  # v1 may first answer with no value
            entry = (await asyncio.wait_for(v1_call.read(), 5)).updates[0].entry
            if entry.value.HasField("timestamp"):
                assert (entry.value.float, entry.value.timestamp.seconds) == (42.5, seconds)
                seen_v1 += 1
    v2_call.cancel()
    v1_call.cancel()


async def test_v1_get_reads_values_and_metadata_and_reports_unknown_paths(
    channel: grpc.aio.Channel,
) -> None:
    stub = v1_grpc.VALStub(channel)
    await stub.Set(
        v1.SetRequest(
            updates=[
                v1.EntryUpdate(
                    entry=t1.DataEntry(
                        path="Vehicle.OBD.DTCList",
                        value=t1.Datapoint(string_array=t1.StringArray(values=["P0300", "P0171"])),
                    ),
                    fields=[t1.FIELD_VALUE],
                )
            ]
        )
    )
    response = await stub.Get(
        v1.GetRequest(
            entries=[
                v1.EntryRequest(path="Vehicle.OBD.DTCList", view=t1.VIEW_ALL),
                v1.EntryRequest(path="Vehicle.Cabin.Infotainment.Volume", view=t1.VIEW_METADATA),
                v1.EntryRequest(path="Vehicle.Nope", view=t1.VIEW_CURRENT_VALUE),
            ]
        )
    )
    dtc, volume = response.entries
    assert list(dtc.value.string_array.values) == ["P0300", "P0171"]
    assert dtc.metadata.data_type == t1.DATA_TYPE_STRING_ARRAY
    assert volume.metadata.entry_type == t1.ENTRY_TYPE_ACTUATOR
    assert volume.metadata.value_restriction.unsigned.max == 100
    assert [e.path for e in response.errors] == ["Vehicle.Nope"]
    assert response.errors[0].error.code == 404
    assert response.error.code == 404


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([99], "updates[1].fields: unknown field 99; a Set writes FIELD_VALUE (2)"),
        ([t1.FIELD_VALUE, 42], "updates[1].fields: unknown field 42"),
        ([t1.FIELD_PATH], "updates[1].fields: FIELD_PATH names nothing to write"),
    ],
)
async def test_v1_set_with_fields_that_write_nothing_is_refused_naming_the_field(
    server: RunningServer, channel: grpc.aio.Channel, fields: list[int], expected: str
) -> None:
    """A Set update whose ``fields`` hold a value the enum lacks, or name nothing a Set
    writes, is refused as a whole (INVALID_ARGUMENT naming the field), writing nothing;
    it was answered OK, having written nothing."""
    stub = v1_grpc.VALStub(channel)
    volume = "Vehicle.Cabin.Infotainment.Volume"
    good = v1.EntryUpdate(
        entry=t1.DataEntry(path=volume, value=t1.Datapoint(uint32=50)), fields=[t1.FIELD_VALUE]
    )
    bad = v1.EntryUpdate(
        entry=t1.DataEntry(path=volume, value=t1.Datapoint(uint32=60)), fields=fields
    )
    await fails(
        stub.Set(v1.SetRequest(updates=[good, bad])), grpc.StatusCode.INVALID_ARGUMENT, expected
    )
    assert server.runtime.store.get(volume).data is None


async def test_v1_set_of_a_bad_value_writes_nothing(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    stub = v1_grpc.VALStub(channel)

    def update(p: str, dp: t1.Datapoint) -> v1.EntryUpdate:
        return v1.EntryUpdate(entry=t1.DataEntry(path=p, value=dp), fields=[t1.FIELD_VALUE])

    response = await stub.Set(
        v1.SetRequest(
            updates=[
                update("Vehicle.Cabin.Infotainment.Volume", t1.Datapoint(uint32=50)),
                update(
                    "Vehicle.OBD.O2Voltages", t1.Datapoint(float_array=t1.FloatArray(values=[1, 9]))
                ),
            ]
        )
    )
    assert response.error.code == 400
    assert response.errors[0].path == "Vehicle.OBD.O2Voltages"
    assert "element [1]: value 9.0 is above the max 5 V" in response.errors[0].error.message
    assert server.runtime.store.get("Vehicle.Cabin.Infotainment.Volume").data is None
    await stub.Set(
        v1.SetRequest(
            updates=[update("Vehicle.Cabin.Infotainment.Volume", t1.Datapoint(uint32=50))]
        )
    )
    stored = server.runtime.store.get("Vehicle.Cabin.Infotainment.Volume").data
    assert stored is not None
    assert decode(stored) == 50


class Provider:
    """A raw OpenProviderStream: requests in through a queue, responses read by the test."""

    def __init__(self, stub: v2_grpc.VALStub) -> None:
        self.requests: asyncio.Queue[v2.OpenProviderStreamRequest | None] = asyncio.Queue()
        self.call = stub.OpenProviderStream(self._requests())

    async def _requests(self) -> AsyncIterator[v2.OpenProviderStreamRequest]:
        while (r := await self.requests.get()) is not None:
            yield r

    async def claim(self, *paths: str) -> None:
        await self.requests.put(
            v2.OpenProviderStreamRequest(
                provide_actuation_request=v2.ProvideActuationRequest(
                    actuator_identifiers=[path(p) for p in paths]
                )
            )
        )
        response = await asyncio.wait_for(self.call.read(), 5)
        assert response.HasField("provide_actuation_response")


VOLUME = "Vehicle.Cabin.Infotainment.Volume"


@pytest.mark.usefixtures("publish_reader")
async def test_an_actuation_goes_to_the_provider_that_claimed_it_and_returns_its_answer(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    provider = Provider(stub)
    await provider.claim(VOLUME)
    actuate = asyncio.ensure_future(
        stub.Actuate(v2.ActuateRequest(signal_id=path(VOLUME), value=t2.Value(uint32=30)))
    )
    request = await asyncio.wait_for(provider.call.read(), 5)
    [asked] = request.batch_actuate_stream_request.actuate_requests
    assert asked.value.uint32 == 30
    await asyncio.wait_for(actuate, 5)  # a provider that never answered: taken at delivery
    # Once it answers, its answers count: a refusal is the caller's error.
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            batch_actuate_stream_response=v2.BatchActuateStreamResponse(signal_id=asked.signal_id)
        )
    )
    # The stream's messages are taken in order: once this is answered, so was that
    # (a publish is answered only when a signal fails: no key has the id 9999).
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            publish_values_request=v2.PublishValuesRequest(
                request_id=1, data_points={9999: t2.Datapoint(value=t2.Value(float=1.0))}
            )
        )
    )
    published = await asyncio.wait_for(provider.call.read(), 5)
    assert published.publish_values_response.request_id == 1
    actuate = asyncio.ensure_future(
        stub.Actuate(v2.ActuateRequest(signal_id=path(VOLUME), value=t2.Value(uint32=90)))
    )
    request = await asyncio.wait_for(provider.call.read(), 5)
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            batch_actuate_stream_response=v2.BatchActuateStreamResponse(
                signal_id=request.batch_actuate_stream_request.actuate_requests[0].signal_id,
                error=t2.Error(code=t2.ERROR_CODE_INVALID_ARGUMENT, message="too loud now"),
            )
        )
    )
    assert await fails(asyncio.wait_for(actuate, 5), grpc.StatusCode.INVALID_ARGUMENT) == (
        f"value for '{VOLUME}' refused: the provider refused it: too loud now"
    )
    await provider.requests.put(None)
    provider.call.cancel()


@pytest.mark.usefixtures("publish_reader")
async def test_actuation_refusals_unavailable_already_exists_and_bad_values(
    channel: grpc.aio.Channel,
) -> None:
    stub = v2_grpc.VALStub(channel)
    assert (
        await fails(
            stub.Actuate(v2.ActuateRequest(signal_id=path(VOLUME), value=t2.Value(uint32=3))),
            grpc.StatusCode.UNAVAILABLE,
        )
        == f"cannot actuate '{VOLUME}': no provider provides this actuator"
    )
    await fails(
        stub.Actuate(v2.ActuateRequest(signal_id=path(VOLUME), value=t2.Value(uint32=300))),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await fails(
        stub.Actuate(v2.ActuateRequest(signal_id=path("Vehicle.Speed"), value=t2.Value(float=1.0))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "'Vehicle.Speed' is a sensor, not an actuator",
    )
    first = Provider(stub)
    await first.claim(VOLUME)
    second = Provider(stub)
    await second.requests.put(
        v2.OpenProviderStreamRequest(
            provide_actuation_request=v2.ProvideActuationRequest(
                actuator_identifiers=[path(VOLUME)]
            )
        )
    )
    assert (
        await fails(asyncio.wait_for(second.call.read(), 5), grpc.StatusCode.ALREADY_EXISTS)
        == f"actuator '{VOLUME}' is already provided by 'kuksa-client'"
    )
    await first.requests.put(None)
    first.call.cancel()


async def _publish_floats(provider: Provider, request_id: int, values: dict[int, float]) -> None:
    """One PublishValuesRequest on ``provider``'s stream: a float per signal id."""
    points = {i: t2.Datapoint(value=t2.Value(float=v)) for i, v in values.items()}
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            publish_values_request=v2.PublishValuesRequest(
                request_id=request_id, data_points=points
            )
        )
    )


@pytest.mark.usefixtures("publish_reader")
async def test_a_provider_stream_publishes_values_by_id_answering_only_a_failed_publish(
    channel: grpc.aio.Channel,
) -> None:
    """A status per failed signal, the others written; as the KUKSA databroker, a
    PublishValuesResponse upon error and nothing upon success."""
    stub = v2_grpc.VALStub(channel)
    md = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.Speed"))
    speed = md.metadata[0].id
    provider = Provider(stub)
    await _publish_floats(provider, 1, {speed: 50.0})
    await _publish_floats(provider, 2, {speed: 52.0})
    await _publish_floats(provider, 3, {9999: 1.0})
    # Taken in order: the first answer is the third request's, the first that failed,
    # and both before it were written.
    failed = (await asyncio.wait_for(provider.call.read(), 5)).publish_values_response
    assert failed.request_id == 3
    value = await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))
    assert value.data_point.value.float == 52.0
    await _publish_floats(provider, 7, {speed: 55.0, 9999: 1.0})
    response = (await asyncio.wait_for(provider.call.read(), 5)).publish_values_response
    assert response.request_id == 7
    assert list(response.status) == [9999]
    assert response.status[9999].code == t2.ERROR_CODE_NOT_FOUND
    value = await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))
    assert value.data_point.value.float == 55.0
    await provider.requests.put(None)
    provider.call.cancel()


@pytest.mark.usefixtures("publish_reader")
async def test_a_provider_streams_ids_follow_a_removed_id_to_its_new_key(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """After a removal, the id's new key is the one written, under its own rule
    (here: none), not the old key's: a guard for any lookup a stream keeps."""
    stub = v2_grpc.VALStub(channel)
    md = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.CurrentLocation.Latitude"))
    latitude = md.metadata[0].id
    provider = Provider(stub)

    async def publish(request_id: int, value: float) -> list[int]:
        """The ids refused in a publish of ``value`` to latitude's id."""
        point = t2.Datapoint(value=t2.Value(double=value))
        await provider.requests.put(
            v2.OpenProviderStreamRequest(
                publish_values_request=v2.PublishValuesRequest(
                    request_id=request_id, data_points={latitude: point}
                )
            )
        )
        # A publish that fails is answered, in order: then the one before it was taken.
        await _publish_floats(provider, request_id + 1, {9999: 1.0})
        refused: list[int] = []
        while True:
            answer = (await asyncio.wait_for(provider.call.read(), 5)).publish_values_response
            if answer.request_id == request_id + 1:
                return refused
            assert answer.request_id == request_id
            refused = list(answer.status)

    assert await publish(1, 1000.0) == [latitude]  # beyond latitude's 90
    assert await publish(3, 45.0) == []
    async with ProviderClient(server.address, "sim") as owner:
        assert await owner.remove_keys(["Vehicle.CurrentLocation.Latitude"]) == []
        ids = await owner.add_keys(["Vehicle.Tmp.Height"])
    assert ids["Vehicle.Tmp.Height"] == latitude  # the lowest free id, handed on
    assert await publish(5, 1000.0) == []  # an opaque key: no range
    value = await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Tmp.Height")))
    assert value.data_point.value.double == 1000.0
    await provider.requests.put(None)
    provider.call.cancel()


@pytest.mark.settings(max_keys_per_request=3)
async def test_a_provider_streams_floats_keep_their_timestamps_and_the_entries_limit(
    publish_reader: PublishReader, channel: grpc.aio.Channel
) -> None:
    """Floats and doubles, as providers send most (and kuksa-perf does): each stored
    in its signal's width with the time the provider gave (none: the arrival's);
    a message over the entries limit ends the stream naming the field."""
    stub = v2_grpc.VALStub(channel)
    ids = {
        m.path: m.id
        for root in ("Vehicle.Speed", "Vehicle.CurrentLocation.Latitude")
        for m in (await stub.ListMetadata(v2.ListMetadataRequest(root=root))).metadata
    }
    speed, latitude = ids["Vehicle.Speed"], ids["Vehicle.CurrentLocation.Latitude"]
    provider = Provider(stub)
    given = t2.Datapoint(value=t2.Value(float=42.5))
    given.timestamp.seconds, given.timestamp.nanos = 1_700_000_000, 123_456_789
    points = {speed: given, latitude: t2.Datapoint(value=t2.Value(double=45.25))}
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            publish_values_request=v2.PublishValuesRequest(request_id=1, data_points=points)
        )
    )
    await _publish_floats(provider, 2, {9999: 1.0})  # answered: then the one before was taken
    answer = (await asyncio.wait_for(provider.call.read(), 5)).publish_values_response
    assert answer.request_id == 2
    values = await stub.GetValues(
        v2.GetValuesRequest(
            signal_ids=[path("Vehicle.Speed"), path("Vehicle.CurrentLocation.Latitude")]
        )
    )
    got_speed, got_latitude = values.data_points
    assert got_speed.value.float == 42.5
    assert (got_speed.timestamp.seconds, got_speed.timestamp.nanos) == (1_700_000_000, 123_456_789)
    assert got_latitude.value.double == 45.25
    assert got_latitude.timestamp.seconds > 1_700_000_000  # the arrival's time
    # Read by a reader (the first publish), or all through protobuf.
    assert publish_reader.taken == ([True, False] if publish_reader.way != "protobuf" else [])
    await _publish_floats(provider, 3, {speed: 1.0, latitude: 2.0, 9999: 3.0, 9998: 4.0})
    await fails(
        asyncio.wait_for(provider.call.read(), 5),
        grpc.StatusCode.INVALID_ARGUMENT,
        "publish_values_request.data_points",
        "at most 3",
    )
    value = await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))
    assert value.data_point.value.float == 42.5  # nothing of the refused message written
    provider.call.cancel()


@pytest.mark.usefixtures("publish_reader")
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\xff\xff", id="not a message"),
        # A publish whose Datapoint's bytes are not a Datapoint (the reader leaves
        # the request to protobuf, which refuses it).
        pytest.param(b"\x12\x07\x12\x05\x08\x01\x12\x01\xff", id="a datapoint that is not one"),
    ],
)
async def test_a_provider_request_that_does_not_decode_is_invalid_argument(
    channel: grpc.aio.Channel, raw: bytes
) -> None:
    call = channel.stream_stream(
        "/kuksa.val.v2.VAL/OpenProviderStream",
        request_serializer=None,
        response_deserializer=v2.OpenProviderStreamResponse.FromString,
    )()
    await call.write(raw)
    await fails(
        asyncio.wait_for(call.read(), 5),
        grpc.StatusCode.INVALID_ARGUMENT,
        "not a valid message for /kuksa.val.v2.VAL/OpenProviderStream",
    )


@pytest.mark.usefixtures("publish_reader")
async def test_a_provider_error_fails_what_the_stream_published_read_as_datapoints_without_value(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """As the databroker: ``ProviderErrorIndication`` turns every signal the provider
    speaks for into a datapoint without a value (stored: a failure with the code
    mapped); a subscriber gets it with its time; keys it never wrote stay as they are."""
    stub = v2_grpc.VALStub(channel)
    md = await stub.ListMetadata(v2.ListMetadataRequest(root="Vehicle.Speed"))
    speed = md.metadata[0].id
    call = stub.Subscribe(v2.SubscribeRequest(signal_paths=["Vehicle.Speed"]))
    assert not (await asyncio.wait_for(call.read(), 5)).entries["Vehicle.Speed"].HasField("value")
    provider = Provider(stub)
    await _publish_floats(provider, 1, {speed: 50.0})
    assert (await asyncio.wait_for(call.read(), 5)).entries["Vehicle.Speed"].value.float == 50.0
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            provider_error_indication=v2.ProviderErrorIndication(provider_error=t2.CODE_OVERLOAD)
        )
    )
    point = (await asyncio.wait_for(call.read(), 5)).entries["Vehicle.Speed"]
    assert point.HasField("timestamp")
    assert not point.HasField("value")
    read = (await stub.GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))).data_point
    assert read.HasField("timestamp")
    assert not read.HasField("value")
    stored = server.runtime.store.get("Vehicle.Speed").data
    assert stored is not None
    assert decode(stored) == Failure(FailureCode.OVERLOAD)
    assert server.runtime.store.get("Vehicle.CurrentLocation.Latitude").data is None
    await _publish_floats(provider, 2, {speed: 51.0})  # back: a value again
    assert (await asyncio.wait_for(call.read(), 5)).entries["Vehicle.Speed"].value.float == 51.0
    # A datapoint without a value, among floats: "not available", the others written.
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            publish_values_request=v2.PublishValuesRequest(
                request_id=3, data_points={speed: t2.Datapoint()}
            )
        )
    )
    assert not (await asyncio.wait_for(call.read(), 5)).entries["Vehicle.Speed"].HasField("value")
    stored = server.runtime.store.get("Vehicle.Speed").data
    assert stored is not None
    assert decode(stored) == Failure(FailureCode.NOT_AVAILABLE)
    await provider.requests.put(None)
    provider.call.cancel()
    call.cancel()


async def test_a_provider_error_before_the_stream_provides_anything_ends_it_aborted(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """As the databroker: a ``ProviderErrorIndication`` on a stream that has neither
    provided nor published a signal ends it with ABORTED saying what to send first;
    nothing is written."""
    provider = Provider(v2_grpc.VALStub(channel))
    await provider.requests.put(
        v2.OpenProviderStreamRequest(
            provider_error_indication=v2.ProviderErrorIndication(provider_error=t2.CODE_OVERLOAD)
        )
    )
    await fails(
        provider.call.read(),
        grpc.StatusCode.ABORTED,
        "provider_error_indication",
        "send a ProvideSignalRequest (or publish) first",
    )
    assert server.runtime.store.get("Vehicle.Speed").data is None
    await provider.requests.put(None)


async def test_a_datapoint_published_without_a_value_is_not_available_on_v1_and_v2(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """A KUKSA datapoint without a value is the databroker's "not available": stored
    as that failure, read back without a value and with its timestamp."""
    stub, old = v2_grpc.VALStub(channel), v1_grpc.VALStub(channel)
    await stub.PublishValue(
        v2.PublishValueRequest(
            signal_id=path("Vehicle.Speed"),
            data_point=t2.Datapoint(timestamp=Timestamp(seconds=1_764_000_001)),
        )
    )
    stored = server.runtime.store.get("Vehicle.Speed").data
    assert stored is not None
    assert decode(stored) == Failure(FailureCode.NOT_AVAILABLE)
    await old.Set(
        v1.SetRequest(
            updates=[
                v1.EntryUpdate(
                    entry=t1.DataEntry(
                        path="Vehicle.CurrentLocation.Latitude",
                        value=t1.Datapoint(timestamp=Timestamp(seconds=1_764_000_002)),
                    ),
                    fields=[t1.FIELD_VALUE],
                )
            ]
        )
    )
    got = await old.Get(
        v1.GetRequest(
            entries=[
                v1.EntryRequest(path=p, view=t1.VIEW_CURRENT_VALUE)
                for p in ("Vehicle.Speed", "Vehicle.CurrentLocation.Latitude")
            ]
        )
    )
    for entry, seconds in zip(got.entries, (1_764_000_001, 1_764_000_002), strict=True):
        assert entry.value.timestamp.seconds == seconds
        assert entry.value.WhichOneof("value") is None


async def test_the_projects_provider_fails_a_typed_key_and_its_app_reads_the_failure(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """A failure through the own API: any datatype takes it, the subscriber's event
    carries it (with its seq), Get returns it, KUKSA reads no value; a detail over
    the limit is refused naming the field and the limit, and changes nothing."""
    app = AppClient(server.address, "dash")
    async with app, ProviderClient(server.address, "sim") as provider:
        await app.subscribe([Sub("Vehicle.Speed")])
        await provider.add_keys(["Vehicle.Speed"])
        await provider.fail("Vehicle.Speed", FailureCode.OUT_OF_RANGE, "above 300 km/h")
        event = await anext(e async for e in app.events() if isinstance(e, DataEvent))
        assert event.seq == 1
        assert event.failure == Failure(FailureCode.OUT_OF_RANGE, "above 300 km/h")
        got = await provider.get(["Vehicle.Speed"])
        assert decode(got["Vehicle.Speed"].data) == event.failure
        long = Value()
        long.failure.detail = "x" * 257
        await fails(
            provider.set("Vehicle.Speed", long.SerializeToString()),
            grpc.StatusCode.INVALID_ARGUMENT,
            "Vehicle.Speed",
            "failure.detail has 257 characters; at most 256",
        )
    stored = server.runtime.store.get("Vehicle.Speed").data
    assert stored is not None
    assert decode(stored) == Failure(FailureCode.OUT_OF_RANGE, "above 300 km/h")
    point = (
        await v2_grpc.VALStub(channel).GetValue(v2.GetValueRequest(signal_id=path("Vehicle.Speed")))
    ).data_point
    assert point.HasField("timestamp")
    assert not point.HasField("value")
