"""The unmodified kuksa-client (PyPI, pinned in tests/kuksa-client.txt) against a real middleware.

The client lives in its own virtualenv, ``.venv-kuksa`` (``make kuksa-venv``;
``make test`` sets it up; this module creates it if it is missing), and runs in
subprocesses: its Python API through ``kuksa_driver.py``, and its command line.
The middleware serves the test catalog (``kuksa_catalog.json``) on 127.0.0.1:0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.contract.values import FailureCode, decode_value, encode
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, eventually_async, fails
from tests.integration.conftest import NewServer

ROOT = Path(__file__).resolve().parents[2]
KUKSA_VENV = ROOT / ".venv-kuksa"
KUKSA_PYTHON = KUKSA_VENV / "bin" / "python"
KUKSA_CLI = KUKSA_VENV / "bin" / "kuksa-client"
DRIVER = Path(__file__).with_name("kuksa_driver.py")
CATALOG = Path(__file__).with_name("kuksa_catalog.json")
DEADLINE_S = 60.0


@pytest.fixture(scope="session")
def kuksa_venv() -> Path:
    """The kuksa-client virtualenv, as the Makefile makes it (made here if missing)."""
    if not (KUKSA_VENV / ".installed").exists():
        if not KUKSA_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(KUKSA_VENV)], check=True)
        subprocess.run(
            [
                str(KUKSA_PYTHON),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                str(ROOT / "tests" / "kuksa-client.txt"),
            ],
            check=True,
        )
        (KUKSA_VENV / ".installed").touch()
    return KUKSA_VENV


pytestmark = [
    pytest.mark.settings(vss=(str(CATALOG),)),
    pytest.mark.usefixtures("kuksa_venv"),
]


async def run_driver(
    scenario: str, server: RunningServer, *args: str
) -> asyncio.subprocess.Process:
    """A driver scenario against ``server``, started in the kuksa-client virtualenv."""
    return await asyncio.create_subprocess_exec(
        str(KUKSA_PYTHON),
        str(DRIVER),
        scenario,
        "127.0.0.1",
        str(server.port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def drive(server: RunningServer, scenario: str, *args: str) -> list[Any]:
    """Run a driver scenario to its end; its JSON lines."""
    proc = await run_driver(scenario, server, *args)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


async def test_typed_values_set_and_read_back_with_their_metadata(server: RunningServer) -> None:
    got, metadata = await drive(server, "values")
    assert got == {
        "Vehicle.Speed": 42.5,
        "Vehicle.TraveledDistance": 2**63 + 7,
        "Vehicle.CurrentLocation.Latitude": 48.137154,
        "Vehicle.Cabin.Door.Row1.DriverSide.IsOpen": True,
        "Vehicle.Cabin.Infotainment.Volume": 35,
        "Vehicle.Cabin.Infotainment.Source": "USB",
        "Vehicle.Cabin.HVAC.TargetTemperature": 21,
        "Vehicle.OBD.DTCList": ["P0300", "P0171"],
        "Vehicle.OBD.O2Voltages": [0.5, 1.25],
    }
    # Stored as the project's typed values: the project's SDK reads them.
    store = server.runtime.store
    assert decode_value(store.get("Vehicle.OBD.DTCList").data or b"") == ["P0300", "P0171"]
    assert decode_value(store.get("Vehicle.TraveledDistance").data or b"") == 2**63 + 7
    assert metadata["Vehicle.Speed"] == {
        "data_type": "FLOAT",
        "entry_type": "SENSOR",
        "unit": "km/h",
        "description": "Vehicle speed.",
        "min": 0.0,
        "max": 300.0,
        "allowed": None,
    }
    assert metadata["Vehicle.Cabin.Infotainment.Source"]["allowed"] == ["RADIO", "USB", "BLUETOOTH"]
    assert metadata["Vehicle.Cabin.Infotainment.Volume"]["entry_type"] == "ACTUATOR"
    assert metadata["Vehicle.Cabin.HVAC.TargetTemperature"]["data_type"] == "INT8"
    assert metadata["Vehicle.OBD.DTCList"]["data_type"] == "STRING_ARRAY"


async def kuksa_subscriber(
    server: RunningServer, path: str, count: int
) -> asyncio.subprocess.Process:
    """The real kuksa-client subscribed to ``path``: a JSON line per update, ``count`` of them."""
    return await run_driver("subscribe", server, path, str(count))


async def test_a_subscription_receives_what_the_projects_provider_publishes(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.Speed"])
        await provider.publish({"Vehicle.Speed": encode(10.0, datatype="float")})
        await provider.flush()
        proc = await kuksa_subscriber(server, "Vehicle.Speed", 5)
        assert proc.stdout is not None
        seen: list[Any] = []
        try:
            first = await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
            seen.append(json.loads(first))  # the current value: subscribed
            for speed in (20.0, 30.5, 40.0):
                await provider.publish({"Vehicle.Speed": encode(speed)})
                await provider.flush()
                seen.append(json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)))
            # A failure: to a KUKSA client, a datapoint with its time and no value.
            await provider.fail(
                "Vehicle.Speed", FailureCode.SENSOR_FAULT, time_ns=1_764_000_000 * 10**9
            )
            await provider.flush()
            seen.append(json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)))
            assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert seen == [
        *({"path": "Vehicle.Speed", "value": v} for v in (10.0, 20.0, 30.5, 40.0)),
        {"path": "Vehicle.Speed", "value": None, "timestamp": 1_764_000_000.0},
    ]


async def test_set_target_values_reaches_the_kuksa_client_providing_the_actuator(
    server: RunningServer,
) -> None:
    volume = "Vehicle.Cabin.Infotainment.Volume"
    [unavailable] = await drive(server, "actuate", volume, "40")
    assert unavailable["error"]["code"] == 503
    assert unavailable["error"]["message"] == (
        f"cannot actuate '{volume}': no provider provides this actuator"
    )
    proc = await run_driver("provide", server, volume, "1")
    assert proc.stdout is not None
    try:
        assert json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)) == {
            "providing": volume
        }

        # Its claim arrives on its stream after that line: ask until it is there.
        async def actuate() -> Any:
            [result] = await drive(server, "actuate", volume, "40")
            return result

        await eventually_async(actuate, {"ok": True, "target": 40}, DEADLINE_S)
        got = json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S))
        assert got == {"path": volume, "target": 40}
        assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_errors_unknown_path_and_value_out_of_range(server: RunningServer) -> None:
    unknown, out_of_range, unknown_set = await drive(server, "errors")
    assert unknown["error"]["code"] == 404
    assert unknown["error"]["message"] == "key 'Vehicle.Nope' does not exist"
    assert out_of_range["error"]["code"] == 3  # INVALID_ARGUMENT (over v2)
    assert out_of_range["error"]["message"] == (
        "value for 'Vehicle.Cabin.Infotainment.Volume' refused: "
        "value 101 is above the max 100 percent"
    )
    assert unknown_set["error"]["code"] == 404  # its datatype is asked for first (v1 Get)


async def test_a_token_without_the_scope_is_denied_and_a_forged_one_unauthenticated(
    new_server: NewServer, tmp_path: Path
) -> None:
    private, public = generate_key_pair("ES256")
    (tmp_path / "k.pub").write_bytes(public)
    running = await new_server(auth_mode="token", token_public_key=str(tmp_path / "k.pub"))
    token = mint(private, subject="dash", scope="read:Vehicle.Speed", ttl_s=600)
    allowed, denied_read, denied_write = await drive(running, "denied", f"token={token}")
    assert allowed == {"ok": True, "values": {}}
    assert denied_read["errors"][0]["error"]["code"] == 403
    assert denied_read["errors"][0]["error"]["message"] == (
        "entries[0]: app 'dash' may not read key 'Vehicle.Cabin.Infotainment.Volume' "
        "(no read: scope matches it)"
    )
    assert denied_write["error"]["code"] == 7  # PERMISSION_DENIED
    assert "may not write key 'Vehicle.Speed'" in denied_write["error"]["message"]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    results = await drive(running, "denied", f"token={forged}")
    assert {r["error"]["code"] for r in results} == {16}  # UNAUTHENTICATED


async def test_the_command_line_gets_and_sets(server: RunningServer, tmp_path: Path) -> None:
    commands = "setValue Vehicle.Cabin.Infotainment.Volume 42\ngetValue Vehicle.Speed\nquit\n"
    server.runtime.store.set("Vehicle.Speed", encode(77.5, datatype="float"))
    proc = await asyncio.create_subprocess_exec(
        str(KUKSA_CLI),
        f"grpc://127.0.0.1:{server.port}",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,  # its history file goes there
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(commands.encode()), DEADLINE_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = _plain(out.decode())
    assert proc.returncode == 0, text
    assert '"value": 77.5' in text
    assert (
        decode_value(server.runtime.store.get("Vehicle.Cabin.Infotainment.Volume").data or b"")
        == 42
    )


def _plain(text: str) -> str:
    """``text`` without the terminal colours the client prints."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


async def test_a_subscription_to_a_signal_with_no_value_is_answered_at_once(
    server: RunningServer,
) -> None:
    """The databroker answers Subscribe at once, listing every signal, with no value
    where none was written; a client that waits for that first message (as a
    benchmark harness may) must not wait for the first write."""
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.Speed"])  # added, never written
        proc = await kuksa_subscriber(server, "Vehicle.Speed", 2)
        assert proc.stdout is not None
        try:
            first = await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
            assert json.loads(first) == {"path": "Vehicle.Speed", "value": None}
            await provider.publish({"Vehicle.Speed": encode(12.5, datatype="float")})
            await provider.flush()
            second = await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S)
            assert json.loads(second) == {"path": "Vehicle.Speed", "value": 12.5}
            assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


# -- a KUKSA provider told its signals' filters -------------------------------------


class FilteredProvider:
    """A raw KUKSA v2 provider (the generated stubs, as a databroker provider is
    written): declares its signals, then keeps every UpdateFilterRequest it is sent."""

    def __init__(self, server: RunningServer, channel: grpc.aio.Channel) -> None:
        self.requests: asyncio.Queue[v2.OpenProviderStreamRequest] = asyncio.Queue()
        self.call = v2_grpc.VALStub(channel).OpenProviderStream(self._requests())
        self.filters: list[v2.UpdateFilterRequest] = []
        self.latest: dict[int, t2.Filter] = {}
        self._server = server

    async def _requests(self) -> AsyncIterator[v2.OpenProviderStreamRequest]:
        while True:
            yield await self.requests.get()

    async def provide(self, intervals: dict[int, int]) -> None:
        signals = {i: t2.SampleInterval(interval_ms=ms) for i, ms in intervals.items()}
        await self.requests.put(
            v2.OpenProviderStreamRequest(
                provide_signal_request=v2.ProvideSignalRequest(signals_sample_intervals=signals)
            )
        )
        first = await asyncio.wait_for(self.call.read(), DEADLINE_S)
        assert first.HasField("provide_signal_response"), first

    async def read_filters(self) -> None:
        while (response := await self.call.read()) is not grpc.aio.EOF:
            assert isinstance(response, v2.OpenProviderStreamResponse)
            assert response.HasField("update_filter_request"), response
            update = response.update_filter_request
            self.filters.append(update)
            self.latest.update(update.filters_update)
            await self.requests.put(
                v2.OpenProviderStreamRequest(
                    update_filter_response=v2.UpdateFilterResponse(request_id=update.request_id)
                )
            )

    def interval(self, key: int) -> int | None:
        """The interval last told for ``key``; None: not told, or told nobody watches it."""
        told = self.latest.get(key)
        if told is None or not told.HasField("min_sample_interval"):
            return None
        return told.min_sample_interval.interval_ms


@pytest.mark.settings(demand_interval_s=0.1)
async def test_a_kuksa_provider_is_sent_filters_as_kuksa_subscribers_come_and_go(
    server: RunningServer,
) -> None:
    store = server.runtime.store
    speed, latitude = store.id_of("Vehicle.Speed"), store.id_of("Vehicle.CurrentLocation.Latitude")
    assert speed
    assert latitude
    first = await kuksa_subscriber(server, "Vehicle.Speed", 1_000)  # watched before
    async with grpc.aio.insecure_channel(server.address) as channel:
        provider = FilteredProvider(server, channel)
        try:
            await eventually(lambda: server.runtime.ess.is_watched(speed), timeout=DEADLINE_S)
            await provider.provide({speed: 50, latitude: 1000})
            reader = asyncio.create_task(provider.read_filters())
            # Its watched signal's filter, at once: no interval asked, so its own.
            await eventually(lambda: provider.interval(speed) == 50, timeout=DEADLINE_S)
            assert list(provider.filters[0].filters_update) == [speed]
            # A provider's error answer is logged and counted, and the stream goes on.
            await provider.requests.put(
                v2.OpenProviderStreamRequest(
                    update_filter_response=v2.UpdateFilterResponse(
                        request_id=1, filter_error=t2.FILTER_ERROR_CODE_UNKNOWN_SINGAL_ID
                    )
                )
            )
            await eventually(lambda: server.runtime.demand.filter_errors == 1)
            second = await kuksa_subscriber(server, "Vehicle.CurrentLocation.Latitude", 1_000)
            await eventually(lambda: provider.interval(latitude) == 1000, timeout=DEADLINE_S)
            for proc in (first, second):
                proc.kill()  # SIGKILL: its stream ends with its process
                await proc.wait()
            await eventually(
                lambda: speed in provider.latest and provider.interval(speed) is None,
                timeout=DEADLINE_S,
                what=lambda: f"filters {provider.filters}",
            )
            await eventually(lambda: provider.interval(latitude) is None, timeout=DEADLINE_S)
            assert not provider.latest[speed].HasField("min_sample_interval")
            ids = [f.request_id for f in provider.filters]
            assert ids == sorted(set(ids)), ids
        finally:
            for proc in (first,):
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            provider.call.cancel()
    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
        await reader


async def test_a_kuksa_provider_declaring_an_unknown_signal_is_refused_naming_it(
    server: RunningServer,
) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        provider = FilteredProvider(server, channel)
        await provider.requests.put(
            v2.OpenProviderStreamRequest(
                provide_signal_request=v2.ProvideSignalRequest(
                    signals_sample_intervals={99_999: t2.SampleInterval(interval_ms=10)}
                )
            )
        )
        await fails(provider.call.read(), grpc.StatusCode.NOT_FOUND, "99999")


async def kuksa_v2_subscriber(
    server: RunningServer, path: str, interval_ms: int | None, duration_ms: int
) -> asyncio.subprocess.Process:
    """A KUKSA v2 Subscribe with a filter, by the stubs kuksa-client ships (its API has
    no v2 filter): a JSON line per update, then ``{"end": STATUS}``."""
    interval = "-" if interval_ms is None else str(interval_ms)
    return await run_driver("subscribe_v2", server, path, interval, str(duration_ms))


async def test_a_v2_subscription_with_an_interval_gets_the_latest_value_and_ends_after_its_duration(
    server: RunningServer,
) -> None:
    """A provider writes 500 values as fast as it can; the subscriber asks at most one
    update per 100 ms for 3 s: a few updates however fast or late the writes are
    handled (at most one per 100 ms of the call), the last one the last value written
    (held to the end of its interval), then the call ends with OK."""
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.Speed"])
        await provider.publish({"Vehicle.Speed": encode(0.0, datatype="float")})
        await provider.flush()
        proc = await kuksa_v2_subscriber(server, "Vehicle.Speed", 100, 3000)
        assert proc.stdout is not None
        try:
            first = json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S))
            assert first == {"path": "Vehicle.Speed", "value": 0.0}  # the current value
            n = 500
            for i in range(1, n + 1):
                speed = float(i % 300)  # the catalog's range: 0 to 300
                await provider.publish({"Vehicle.Speed": encode(speed, datatype="float")})
            await provider.flush()
            out, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert lines[-1] == {"end": "OK"}
    values = [line["value"] for line in lines[:-1]]
    assert values[-1] == float(n % 300)  # the latest value is never lost
    assert 2 <= len(values) <= 3.0 / 0.1 + 1, (n, values)  # of about 500 writes


async def test_a_v2_subscription_filter_outside_its_rules_is_invalid_argument(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys(["Vehicle.Speed"])
        await provider.flush()
    for interval, duration, field, rule in (
        (0, 0, "filter.min_sample_interval.interval_ms", "0 ms is outside the allowed 1 to"),
        (3_600_001, 0, "filter.min_sample_interval.interval_ms", "3600000 ms"),
        (None, 86_400_001, "filter.duration_ms", "above the allowed 86400000 ms"),
    ):
        proc = await kuksa_v2_subscriber(server, "Vehicle.Speed", interval, duration)
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S)
        assert proc.returncode == 0, err.decode()
        [end] = [json.loads(line) for line in out.decode().splitlines()]
        assert end["end"] == "INVALID_ARGUMENT"
        assert field in end["details"], end
        assert rule in end["details"], end
