"""Settings: defaults < TOML < VMW_* environment < flags, each validated."""

from __future__ import annotations

from pathlib import Path

import pytest
from vehicle_middleware.server.__main__ import parser
from vehicle_middleware.server.config import (
    SETTINGS_BY_NAME,
    Settings,
    flat_settings,
    load_settings,
    parse_peer,
    replace_settings,
)


def test_later_sources_win(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text("[middleware]\nevent_budget = 100\nbatch_max = 7\ngrace_period_s = 1\n")
    s = load_settings(
        toml_path=f,
        env={"VMW_EVENT_BUDGET": "200", "VMW_LISTEN": "127.0.0.1:9"},
        overrides={"event_budget": 300, "batch_max": None},
    )
    assert (
        s.ess.event_budget,
        s.streams.batch_max,
        s.streams.grace_period_s,
        s.network.listen,
    ) == (300, 7, 1.0, "127.0.0.1:9")
    assert load_settings() == Settings()


def test_the_example_settings_file_loads() -> None:
    """examples/settings/middleware.toml, shown in docs/operators.md, is a valid file."""
    example = Path(__file__).parents[2] / "examples/settings/middleware.toml"
    s = load_settings(toml_path=example)
    assert (s.network.listen, s.ess.event_budget, s.journal.dir) == (
        "127.0.0.1:50051",
        50000,
        "/var/lib/vehicle_middleware/journal",
    )
    assert s.signals.expect == ("Vehicle.Cabin=5", "Vehicle.Speed=1")


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
    assert load_settings(toml_path=f).signals.expect == ("Vehicle.Cabin=5", "Vehicle.Speed=1")
    env = {"VMW_EXPECT": "Vehicle.Cabin=2,Vehicle=0"}
    assert load_settings(env=env).signals.expect == ("Vehicle.Cabin=2", "Vehicle=0")
    assert load_settings(overrides={"expect": ["Vehicle=3"]}).signals.expect == ("Vehicle=3",)
    with pytest.raises(ValueError, match=r"expect rule 'Vehicle\.Cabin': use PREFIX=SECONDS"):
        load_settings(env={"VMW_EXPECT": "Vehicle.Cabin"})


def test_peers_come_from_toml_env_and_flags_and_bad_ones_are_named(tmp_path: Path) -> None:
    config = tmp_path / "vehicle_middleware.toml"
    config.write_text('node_id = "front"\npeers = ["rear=127.0.0.1:50052"]\nmax_confirms = "all"\n')
    s = load_settings(toml_path=config)
    assert (s.cluster.node_id, s.cluster.peers, s.cluster.max_confirms) == (
        "front",
        ("rear=127.0.0.1:50052",),
        "all",
    )
    s = load_settings(
        env={"VMW_NODE_ID": "front", "VMW_PEERS": "rear=10.0.0.2:1,central=10.0.0.3:1"}
    )
    assert [parse_peer(p) for p in s.cluster.peers] == [
        ("rear", "10.0.0.2:1"),
        ("central", "10.0.0.3:1"),
    ]
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
        assert replace_settings(Settings(), metrics_listen=address).metrics.listen == address
    for address in ("0.0.0.0:9464", ":9464", "192.168.1.20:9464"):
        with pytest.raises(ValueError, match=r"not a loopback address.*metrics_remote"):
            replace_settings(Settings(), metrics_listen=address)
        assert replace_settings(
            Settings(), metrics_listen=address, metrics_remote=True
        ).metrics.remote


def test_every_setting_has_one_flat_name_that_finds_its_section() -> None:
    assert len(SETTINGS_BY_NAME) == len(
        {(s.section, s.field_name) for s in SETTINGS_BY_NAME.values()}
    )
    journal_dir = SETTINGS_BY_NAME["journal_dir"]
    assert (journal_dir.section, journal_dir.field_name) == ("journal", "dir")
    assert (journal_dir.flag, journal_dir.env) == ("--journal-dir", "VMW_JOURNAL_DIR")
    s = replace_settings(
        Settings(), journal_dir="/j", metrics_top_keys=5, stream_writes_per_s=7, peers=()
    )
    assert (s.journal.dir, s.metrics.top_keys, s.streams.stream_writes_per_s) == ("/j", 5, 7)
    assert replace_settings(Settings(), **flat_settings(s)) == s
    assert list(flat_settings(Settings())) == list(SETTINGS_BY_NAME)
    with pytest.raises(ValueError, match="unknown setting 'journal'"):
        replace_settings(Settings(), journal="/j")
    with pytest.raises(ValueError, match="journal_segment_bytes must be >= 1"):
        load_settings(env={"VMW_JOURNAL_SEGMENT_BYTES": "0"})
    with pytest.raises(ValueError, match="max_message_bytes must exceed max_value_size"):
        load_settings(overrides={"max_value_size": 4 * 1024 * 1024})


def test_flags_name_every_setting_flat_and_reach_its_section(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('journal_level = "full"\nmetrics_listen = "127.0.0.1:0"\n')
    flags = ("--journal-dir", "/j", "--metrics-remote", "true", "--node-id", "front")
    peers = ("--peer", "rear=x:1", "--peers", "mid=y:1")
    args = parser().parse_args(["serve", "--config", str(f), *flags, *peers])
    s = load_settings(
        toml_path=args.config,
        env={"VMW_MAX_APPS": "3"},
        overrides={name: getattr(args, name) for name in SETTINGS_BY_NAME},
    )
    assert (s.journal.dir, s.journal.level, s.metrics.listen) == ("/j", "full", "127.0.0.1:0")
    assert (s.metrics.remote, s.streams.max_apps, s.cluster.node_id) == (True, 3, "front")
    assert s.cluster.peer_addresses == {"rear": "x:1", "mid": "y:1"}
    assert s.cluster.confirms_needed == 0
