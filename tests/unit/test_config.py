"""Settings: defaults < TOML < VMW_* environment < flags, each validated."""

from __future__ import annotations

from pathlib import Path

import pytest
from vehicle_middleware.server.config import Settings, load_settings, parse_peer


def test_later_sources_win(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text("[middleware]\nevent_budget = 100\nbatch_max = 7\ngrace_period_s = 1\n")
    s = load_settings(
        toml_path=f,
        env={"VMW_EVENT_BUDGET": "200", "VMW_LISTEN": "127.0.0.1:9"},
        overrides={"event_budget": 300, "batch_max": None},
    )
    assert (s.event_budget, s.batch_max, s.grace_period_s, s.listen) == (300, 7, 1.0, "127.0.0.1:9")
    assert load_settings() == Settings()


def test_bad_values_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="VMW_EVENT_BUDGET: expected int"):
        load_settings(env={"VMW_EVENT_BUDGET": "lots"})
    with pytest.raises(ValueError, match="batch_max must be >= 1"):
        load_settings(overrides={"batch_max": 0})
    with pytest.raises(ValueError, match="stream_writes_per_s must be >= 0"):
        load_settings(overrides={"stream_writes_per_s": -1})
    f = tmp_path / "m.toml"
    f.write_text('event_budget = "x"\n')
    with pytest.raises(ValueError, match="setting event_budget: expected int"):
        load_settings(toml_path=f)
    with pytest.raises(ValueError, match="nothing to listen on"):
        load_settings(overrides={"listen": ""})


def test_expect_rules_come_from_every_source_and_a_bad_one_is_named(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('expect = ["Vehicle.Cabin=5", "Vehicle.Speed=1"]\n')
    assert load_settings(toml_path=f).expect == ("Vehicle.Cabin=5", "Vehicle.Speed=1")
    env = {"VMW_EXPECT": "Vehicle.Cabin=2,Vehicle=0"}
    assert load_settings(env=env).expect == ("Vehicle.Cabin=2", "Vehicle=0")
    assert load_settings(overrides={"expect": ["Vehicle=3"]}).expect == ("Vehicle=3",)
    with pytest.raises(ValueError, match=r"expect rule 'Vehicle\.Cabin': use PREFIX=SECONDS"):
        load_settings(env={"VMW_EXPECT": "Vehicle.Cabin"})


def test_peers_come_from_toml_env_and_flags_and_bad_ones_are_named(tmp_path: Path) -> None:
    config = tmp_path / "vehicle_middleware.toml"
    config.write_text('node_id = "front"\npeers = ["rear=127.0.0.1:50052"]\nmax_confirms = "all"\n')
    s = load_settings(toml_path=config)
    assert (s.node_id, s.peers, s.max_confirms) == ("front", ("rear=127.0.0.1:50052",), "all")
    s = load_settings(
        env={"VMW_NODE_ID": "front", "VMW_PEERS": "rear=10.0.0.2:1,central=10.0.0.3:1"}
    )
    assert [parse_peer(p) for p in s.peers] == [("rear", "10.0.0.2:1"), ("central", "10.0.0.3:1")]
    for bad, words in (
        ({"peers": ("rear=x:1",)}, "peers need node_id"),
        ({"node_id": "front", "peers": ("rear",)}, "'rear' is not NAME=ADDRESS"),
        ({"node_id": "front", "peers": ("front=x:1",)}, "is this node"),
        ({"node_id": "front", "peers": ("r=x:1", "r=y:1")}, "listed twice"),
        ({"node_id": "front", "max_confirms": "some"}, "max_confirms must be"),
        ({"node_id": "a b"}, "node_id 'a b'"),
        ({"sync_interval_s": 0.0}, "sync_interval_s must be above 0"),
    ):
        with pytest.raises(ValueError, match=words):
            load_settings(overrides=bad)


def test_the_unauthenticated_metrics_endpoint_stays_on_loopback_unless_told() -> None:
    for address in ("127.0.0.1:9464", "[::1]:9464", "localhost:0"):
        assert Settings(metrics_listen=address).metrics_listen == address
    for address in ("0.0.0.0:9464", ":9464", "192.168.1.20:9464"):
        with pytest.raises(ValueError, match=r"not a loopback address.*metrics_remote"):
            Settings(metrics_listen=address)
        assert Settings(metrics_listen=address, metrics_remote=True).metrics_remote
