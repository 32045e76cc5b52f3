"""The metrics against real servers: what a real provider and app did shows in the
Prometheus text, GetStats says the same, and ``top`` prints it."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from vehicle_middleware.ess import DEFAULT_MIN_LENGTH
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import replace_settings
from vehicle_middleware.server.metrics import SERIES, Figure, MetricsListenError
from vehicle_middleware.server.server import RunningServer, start_server

from tests.conftest import eventually, fails
from tests.integration.conftest import TEST_SETTINGS, serving

ROOT = Path(__file__).resolve().parents[2]
METERED = replace_settings(TEST_SETTINGS, metrics_listen="127.0.0.1:0", rate_limit_rps=10_000)
"""A server with its metrics served on 127.0.0.1:0."""
WRITES = 4_000
"""Of 2 KB each: the first few dozen fill the app's 64 KiB receive window."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def scrape(server: RunningServer) -> Samples:
    """The server's metrics, by (name, labels). The HTTP client runs in a thread:
    the scrape itself is served on this event loop."""
    assert server.metrics is not None
    status, text = await asyncio.to_thread(_get, f"http://{server.metrics.address}/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def q0(name: str, app: str = "slow") -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, (("app", app), ("queue", "0"))


async def get_stats(server: RunningServer, **kw: object) -> admin_pb2.Stats:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stats: admin_pb2.Stats = await admin_pb2_grpc.AdminStub(channel).GetStats(
            admin_pb2.GetStatsRequest(**kw),  # type: ignore[arg-type]
            metadata=(("app-id", "ops"),),
            timeout=5,
        )
        return stats


async def test_an_app_that_does_not_read_shows_a_full_queue_and_evictions(
    tmp_path: Path,
) -> None:
    async with (
        serving(METERED, journal_dir=str(tmp_path / "journal"), slow_app_report_s=0.5) as server,
        ProviderClient(server.address, "sensor") as provider,
        AppClient(
            server.address,
            "slow",
            queues=[QueueSpec(0, 1, 3)],
            # The app does not read: a 64 KiB receive window, so the queues fill soon.
            channel_options=(("grpc.http2.bdp_probe", 0),),
        ) as app,
    ):
        keys = ["Vehicle.A", "Vehicle.B"]
        await provider.add_keys(keys)
        await app.subscribe([Sub(k, on_update=True) for k in keys])
        for start in range(0, WRITES, 20):  # small batches: the app's stream drains between
            await provider.publish(
                [(keys[i % 2], i.to_bytes(2048, "big")) for i in range(start, start + 20)]
            )
        await provider.flush()

        def frozen() -> bool:
            stats = server.runtime.ess.app_stats("slow", 0)
            assert stats is not None
            q = stats.queues[0]
            return q.depth + q.delivered + q.evicted + q.lost == WRITES

        await eventually(frozen, timeout=10, what="every write queued, delivered or dropped")
        await eventually(lambda: server.runtime.slow_apps.in_episode("slow"), timeout=3)
        m = await scrape(server)
        depth, high = m[q0("vmw_app_queue_depth")], m[q0("vmw_app_queue_high_water")]
        assert depth == high == m[q0("vmw_app_queue_max_length")] == 3
        evicted, lost = m[q0("vmw_app_events_evicted_total")], m[q0("vmw_app_events_lost_total")]
        delivered = m[q0("vmw_app_events_delivered_total")]
        assert evicted > WRITES / 2  # the transport was full long before the end
        assert lost == 0  # two keys, a queue of three: a newer event always finds its key's
        assert delivered + depth + evicted + lost == WRITES
        assert m[q0("vmw_app_events_discarded_total")] == 0
        assert m[q0("vmw_app_queue_oldest_age_seconds")] > 0
        assert m[("vmw_app_bytes_sent_total", (("app", "slow"),))] > 0
        assert m[("vmw_app_dropping", (("app", "slow"),))] == 1
        assert m[("vmw_app_subscriptions", (("app", "slow"),))] == 2
        assert m[("vmw_key_writes_total", (("key", "Vehicle.A"),))] == WRITES / 2
        assert m[("vmw_key_subscribers", (("key", "Vehicle.B"),))] == 1
        assert m[("vmw_key_writes_per_second", (("key", "Vehicle.B"),))] > 0
        assert (m[("vmw_apps", ())], m[("vmw_keys", ())], m[("vmw_queued_events", ())]) == (1, 2, 3)
        # Reserved: queue 0's min of 1 and queues 1, 2's default mins; taken: 2 above queue 0's.
        assert m[("vmw_event_budget_used", ())] == 1 + 2 * DEFAULT_MIN_LENGTH + 2
        assert m[("process_resident_memory_bytes", ())] > 10_000_000
        await eventually(
            lambda: server.runtime.journal is not None and server.runtime.journal.written > 0
        )

        # GetStats says the same (nothing moves while the app does not read).
        stats = await get_stats(server, keys=["Vehicle.A"])
        [slow] = stats.apps
        got = slow.queues[0]
        assert (got.depth, got.high_water, got.max_length) == (3, 3, 3)
        assert (got.delivered, got.evicted, got.lost) == (delivered, evicted, lost)
        assert slow.dropping
        assert {k.name: k.writes for k in stats.keys} == {
            "Vehicle.A": WRITES // 2,
            "Vehicle.B": WRITES // 2,
        }
        assert stats.process.keys == 2
        assert stats.boot_id == server.runtime.boot_id
        assert stats.process.journal

        # top prints the app with its full queue, beside the keys asked for (the
        # busiest ones are those written within the rate window, which a slow
        # machine may have left behind by now).
        top = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vehicle_middleware.tools", "top", "--target", server.address,
            "--once", "--key", "Vehicle.A",
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(top.communicate(), 30)
        assert top.returncode == 0, err.decode()
        [row] = [line for line in out.decode().splitlines() if "slow" in line]
        assert row.split()[:4] == ["!", "slow", "0", "3/3"]
        assert f"{int(evicted):,}" in row
        assert "Vehicle.A" in out.decode()

        # The app reads what is left: the gaps it sees are exactly the evictions.
        seen = 0
        async for event in app.events():
            if isinstance(event, DataEvent):
                seen += 1
            if seen == delivered + depth:
                break
        assert app.missed_total == evicted


async def test_getstats_needs_the_admin_scope_and_checks_its_request(tmp_path: Path) -> None:
    private, public = generate_key_pair("ES256")
    (tmp_path / "vehicle_middleware.pub").write_bytes(public)
    reader = mint(private, subject="dash", scope="read", ttl_s=60)
    admin = mint(private, subject="ops", scope="admin", ttl_s=60)
    async with (
        serving(
            METERED, auth_mode="token", token_public_key=str(tmp_path / "vehicle_middleware.pub")
        ) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stub = admin_pb2_grpc.AdminStub(channel)

        async def call(token: str, **kw: object) -> admin_pb2.Stats:
            stats: admin_pb2.Stats = await stub.GetStats(
                admin_pb2.GetStatsRequest(**kw),  # type: ignore[arg-type]
                metadata=(("authorization", f"Bearer {token}"),),
                timeout=5,
            )
            return stats

        await fails(
            call(reader),
            grpc.StatusCode.PERMISSION_DENIED,
            "'dash' may not read the middleware's figures",
        )
        assert (await call(admin)).boot_id == server.runtime.boot_id
        assert (
            await fails(call(admin, top_keys=1001), grpc.StatusCode.INVALID_ARGUMENT)
            == "top_keys: at most 1000, got 1001"
        )
        assert (
            await fails(call(admin, keys=["Vehicle.Nothing"]), grpc.StatusCode.NOT_FOUND)
            == "keys[0]: key 'Vehicle.Nothing' does not exist"
        )


async def test_registered_collectors_add_figures_and_a_failing_one_breaks_nothing() -> None:
    async with serving(METERED) as server:
        server.runtime.collectors.register(
            "peers",
            lambda: [
                Figure("vmw_peer_up", "1 while the link is up", "gauge", (("peer", "n2"),), 1)
            ],
        )

        def broken() -> list[Figure]:
            raise RuntimeError("a bug in some part")

        server.runtime.collectors.register("broken", broken)
        m = await scrape(server)
        assert m[("vmw_peer_up", (("peer", "n2"),))] == 1
        assert m[("vmw_apps", ())] == 0
        stats = await get_stats(server)
        assert [(f.name, dict(f.labels), f.value) for f in stats.extra] == [
            ("vmw_demand_watches", {}, 0.0),  # the server's own
            ("vmw_demand_batches_total", {}, 0.0),
            ("vmw_provider_filter_errors_total", {}, 0.0),
            ("vmw_codecs_info", {"codecs": "fast"}, 1.0),
            ("vmw_peer_up", {"peer": "n2"}, 1.0),
        ]


async def test_the_endpoint_serves_only_metrics_and_is_off_by_default() -> None:
    async with serving(METERED) as server:
        assert server.metrics is not None
        status, body = await asyncio.to_thread(_get, f"http://{server.metrics.address}/other")
        assert (status, body) == (404, "the metrics are at /metrics\n")
    async with serving(METERED, metrics_listen="") as server:
        assert server.metrics is None


async def test_a_taken_metrics_port_stops_the_start_naming_it() -> None:
    async with serving(METERED) as first:
        assert first.metrics is not None
        with pytest.raises(MetricsListenError, match="the address is in use"):
            await start_server(
                replace_settings(
                    METERED, listen="127.0.0.1:0", metrics_listen=first.metrics.address
                )
            )


def test_every_series_is_in_the_readme() -> None:
    readme = (ROOT / "docs" / "operators.md").read_text()
    missing = [s.name for s in SERIES if f"`{s.name}`" not in readme]
    assert not missing, f"docs/operators.md does not list {missing}"


def test_serve_prints_the_metrics_address_and_serves_there() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vehicle_middleware.server", "serve", "--listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on 127.0.0.1:")
        line = proc.stdout.readline()
        match = re.fullmatch(r"metrics on (http://127\.0\.0\.1:\d+/metrics)\n", line)
        assert match, line
        status, text = _get(match.group(1))
        assert status == 200
        assert "vmw_apps 0.0" in text
        assert "process_cpu_seconds_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=10) == 0
        finally:
            proc.kill()
