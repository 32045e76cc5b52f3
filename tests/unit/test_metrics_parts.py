"""The pure parts of the metrics, top and mutual-TLS identity: rates from versions,
the collectors registry, a top frame, how a certificate's names decide the app,
and the settings' checks."""

from __future__ import annotations

import pytest
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.config import AccessSettings, Settings, replace_settings
from vehicle_middleware.server.errors import UnauthenticatedError
from vehicle_middleware.server.metrics import Collectors, Figure
from vehicle_middleware.server.metrics.rates import KeyRates, RateSample
from vehicle_middleware.tools.top import render
from vehicle_middleware.vstore import VStore


def test_rates_come_from_versions_and_survive_new_and_reused_ids() -> None:
    # ids:            0   1   2   3
    before = [-1, 10, 5, 7]
    now = [-1, 30, 5, 2, 4]  # id 3 removed and reused (version restarted); id 4 is new
    sample = RateSample(now, before, 2.0)
    assert [sample.writes(i) for i in range(5)] == [0, 20, 0, 2, 4]
    assert sample.per_second(1) == 10.0
    assert sample.busiest(2) == [1, 4]
    assert sample.busiest(10) == [1, 4, 3]  # unwritten keys are left out
    assert sample.busiest(0) == []


def test_readings_within_a_second_share_one_sample() -> None:
    clock = [100.0]
    store = VStore()
    store.add_key("A")
    rates = KeyRates(store, clock=lambda: clock[0])
    for i in range(10):
        store.set("A", bytes([i]))
    clock[0] += 2.0
    first = rates.sample()
    assert (first.per_second(1), first.window_s) == (5.0, 2.0)
    store.set("A", b"x")
    clock[0] += 0.5
    assert rates.sample() is first  # a scrape and a top refresh do not shorten each other
    clock[0] += 0.5
    assert rates.sample().writes(1) == 1


def test_a_failing_collector_is_left_out_and_the_others_stay() -> None:
    collectors = Collectors()
    up = Figure("vmw_peer_up", "link up", "gauge", (("peer", "a"),), 1.0)
    collectors.register("peers", lambda: [up])

    def broken() -> list[Figure]:
        raise RuntimeError("bug")

    collectors.register("broken", broken)
    assert collectors.collect() == [up]
    collectors.unregister("broken")
    assert collectors.names() == ["peers"]
    with pytest.raises(ValueError, match="figure name"):
        Figure("bad name", "", "gauge", (), 0)


def _stats(delivered: int, evicted: int, time_s: float, cpu: float) -> admin_pb2.Stats:
    return admin_pb2.Stats(
        boot_id="b" * 32,
        time_ns=int(time_s * 1e9),
        process=admin_pb2.Process(apps=2, keys=3, cpu_seconds=cpu, rss_bytes=50 << 20),
        apps=[
            admin_pb2.AppStats(
                app="calm",
                queues=[admin_pb2.QueueStats(queue=0, depth=1, max_length=100, delivered=5)],
            ),
            admin_pb2.AppStats(
                app="slow",
                dropping=True,
                bytes_sent=delivered * 100,
                queues=[
                    admin_pb2.QueueStats(
                        queue=0, depth=20, high_water=20, max_length=20, delivered=delivered,
                        evicted=evicted, oldest_age_s=1.5,
                    ),
                    admin_pb2.QueueStats(queue=1, max_length=100),
                ],
            ),
        ],
        keys=[
            admin_pb2.KeyStats(name="Vehicle.Speed", writes_per_s=50.0, writes=500, subscribers=2)
        ],
        rate_window_s=1.0,
    )  # fmt: skip


def test_a_top_frame_puts_dropping_apps_first_with_rates_from_the_reading_before() -> None:
    before = _stats(delivered=100, evicted=10, time_s=1000.0, cpu=1.0)
    now = _stats(delivered=300, evicted=50, time_s=1002.0, cpu=1.5)
    lines = render(now, before, target="car:50051", width=140)
    assert "cpu 25.0%" in lines[1]
    rows = [line.split() for line in lines if line.startswith(("! slow", "calm"))]
    assert [r[:2] for r in rows] == [["!", "slow"], ["calm", "0"]]  # dropping first
    slow = rows[0]
    assert slow[2:7] == ["0", "20/20", "20", "1.5s", "100"]  # 200 delivered in 2 s
    assert slow[7] == "20"  # 40 evicted in 2 s
    assert "9.8 KiB/s" in next(line for line in lines if "! slow" in line)  # 20,000 B in 2 s
    assert any(line.startswith("Vehicle.Speed") for line in lines)
    first = render(now, None)
    assert "cpu -" in first[1]
    assert all(len(line) <= 60 for line in render(now, before, width=60))
    assert len(render(now, before, height=5)) == 5


def _access(mode: str = "open") -> Authenticator:
    access = AccessSettings(auth_mode=mode)
    return Authenticator.of(access, RateLimits.of(access))


def test_a_certificate_names_the_app_and_an_app_id_must_be_one_of_its_names() -> None:
    access = _access()
    assert access.authenticate((), certified=("cabin", "climate")).app == "cabin"
    assert access.authenticate((("app-id", "climate"),), certified=("cabin", "climate")).app == (
        "climate"
    )
    with pytest.raises(UnauthenticatedError, match="'dash' is not named by the client certificate"):
        access.authenticate((("app-id", "dash"),), certified=("cabin",))
    # A CN that is no app id is skipped for a SAN that is; none at all is refused.
    assert access.authenticate((), certified=("Cabin App", "cabin")).app == "cabin"
    with pytest.raises(UnauthenticatedError, match="the client certificate names no app"):
        access.authenticate((), certified=("Cabin App",))
    with pytest.raises(UnauthenticatedError, match="it names nothing"):
        access.authenticate((("app-id", "x"),), certified=())
    # No certificate (the Unix socket): the mode's own rule.
    with pytest.raises(UnauthenticatedError, match="missing 'app-id'"):
        access.authenticate((), certified=None)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tls_cert": "c.pem"}, "tls_cert and tls_key go together"),
        ({"tls_client_ca": "ca.pem"}, "needs tls_cert and tls_key"),
        ({"tls_cert": "c", "tls_key": "k", "listen": "", "unix_socket": "/s"}, "listen is empty"),
        ({"unix_socket_mode": "rw"}, "octal file mode"),
        ({"unix_socket_mode": "1777"}, "octal file mode"),
        ({"metrics_top_keys": 1001}, "metrics_top_keys must be 0 to 1000"),
        ({"metrics_listen": "9464"}, "use HOST:PORT"),
    ],
)
def test_bad_tls_and_metrics_settings_are_refused_naming_them(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        replace_settings(Settings(), **settings)
