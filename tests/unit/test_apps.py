"""The sample apps' pure parts, and the demo's verdict."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from vehicle_middleware.apps.dashboard import DashboardView, format_value
from vehicle_middleware.apps.harness import AppStats
from vehicle_middleware.apps.logger import EventLogger
from vehicle_middleware.contract.values import encode
from vehicle_middleware.demo.summary import judge, render
from vehicle_middleware.sdk import (
    ClientEvent,
    DataEvent,
    KeyFreshEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderGoneEvent,
    ReconnectedEvent,
    SubscriptionResult,
)

SPEED = "Vehicle.Speed"


def data(seq: int, value: object | None, *, missed: int = 0, name: str = SPEED) -> DataEvent:
    raw = None if value is None else encode(value)  # type: ignore[arg-type]
    return DataEvent(1, name, seq, 1_000 + seq, raw, 0, missed)


def test_dashboard_shows_latest_values_rates_and_gaps_per_key() -> None:
    view = DashboardView("dash", clock=0.0)
    view.update([data(1, 12.345), data(2, None), data(5, 50.0, missed=2)])
    view.update([data(1, "ECO", name="Vehicle.Mode"), data(1, True, name="Vehicle.IsMoving")])
    view.tick(2.0)
    screen = view.render(100, 10)
    assert view.rate == 2.5  # 5 events over 2 s
    assert "2 missed" in screen.splitlines()[0]
    row = next(line for line in screen.splitlines() if line.startswith(SPEED))
    assert row.split()[1:] == ["50.00", "1.5", "2"]
    assert "ECO" in screen
    assert "true" in screen
    small = view.render(80, 5)
    assert len(small.splitlines()) <= 5
    assert "more keys" in small


def test_dashboard_forgets_values_when_the_middleware_restarts() -> None:
    view = DashboardView("dash")
    view.update([data(1, 3.0)])
    view.update([ReconnectedEvent("boot-2", True, ())])
    assert view.rows[SPEED].value == "?"
    assert view.boot_id == "boot-2"
    assert format_value(b"\xff\xff") == "<2 bytes>"


def test_the_logger_writes_unchanged_writes_with_the_last_value_and_skips_unknown_ones() -> None:
    out = io.StringIO()
    log = EventLogger(out)
    asyncio.run(log([data(1, None), data(2, 7), data(3, None), data(6, 8, missed=2)]))
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(x["seq"], x["value"], x["changed"], x["missed"]) for x in lines] == [
        (2, 7, True, 0),
        (3, 7, False, 0),
        (6, 8, True, 2),
    ]
    log.seed(SPEED, encode(1))
    asyncio.run(
        log(
            [
                ReconnectedEvent("b", True, (SubscriptionResult(SPEED, 1, True, "OK", encode(9)),)),
                data(7, None),
            ]
        )
    )
    assert json.loads(out.getvalue().splitlines()[-1])["value"] == 9
    asyncio.run(log([DataEvent(1, SPEED, 8, 0, b"\xff\xff", 0)]))
    assert json.loads(out.getvalue().splitlines()[-1])["raw"] == "ffff"
    assert log.undecodable == 1


def test_app_stats_count_per_key_and_queue() -> None:
    stats = AppStats("a")
    stats.count([data(1, 1), data(4, 2, missed=2), ReconnectedEvent("b", True, ())])
    snap = stats.snapshot()
    assert (snap["received"], snap["missed"], snap["reconnects"], snap["restarts"]) == (2, 2, 1, 1)
    assert snap["per_key"][SPEED] == {"received": 2, "missed": 2, "last_seq": 4}
    assert snap["per_queue"]["0"] == {"received": 2, "missed": 2}


def _analysis(**slow: int) -> dict[str, object]:
    return {
        "records": 100,
        "boots": 1,
        "restarts": 0,
        "broken_chains": 0,
        "missing_journal_records": 0,
        "bad_lines": 0,
        "unexplained_seqs": 0,
        "apps": {
            "logger": {"delivered": 50, "dropped_per_queue": {"0": 0}, "missing_seqs": 0},
            "slow": {
                "delivered": slow.get("delivered", 20),
                "dropped_per_queue": {"0": 30},
                "evicted": 18,
                "lost": 12,
                "queue_min_max_events": {"0": [10, 20], "1": [10, 100], "2": [10, 100]},
                "batches_read_per_s": 1.02,
                "missing_seqs": slow.get("missing", 10),
                "unexplained_seqs": slow.get("unexplained", 0),
                "drops_after_last_delivery": 20,
            },
        },
    }


_APPS = {
    "logger": {"state": "stopped", "received": 50, "missed": 0},
    "slow": {"state": "stopped", "received": 20, "missed": 10},
}


def test_the_verdict_holds_when_apps_and_journal_agree() -> None:
    verdict = judge({"published": 70, "keys": 3}, _APPS, _analysis())
    assert verdict.ok, verdict.problems
    text = render(verdict, report="r.md")
    assert (
        "demo OK: slow lost 30 events (18 evicted by a newer value of their key, 12 at a full "
        "queue; 10 seen as seq gaps): it reads 1 batch/s from queues of q0 10..20 events, "
        "logger none"
    ) in text
    assert "slow: it reads 1 batch/s from queues of q0 10..20 events" in text


def test_the_verdict_names_drops_whose_causes_do_not_add_up() -> None:
    analysis = _analysis()
    analysis["apps"]["slow"]["lost"] = 11  # type: ignore[index]
    verdict = judge({"published": 70, "keys": 3}, _APPS, analysis)
    assert verdict.problems == ["slow: 30 drop records, but 18 evicted + 11 lost"]


def test_the_verdict_names_every_disagreement() -> None:
    verdict = judge(
        {"published": 70},
        {**_APPS, "logger": {"state": "failed", "received": 49, "missed": 0}},
        {**_analysis(missing=9, unexplained=1), "broken_chains": 1},
    )
    assert not verdict.ok
    problems = "\n".join(verdict.problems)
    for expected in (
        "logger did not stop cleanly",
        "logger read 49 events but the journal shows 50",
        "slow saw 10 events missing but the journal shows 9",
        "1 of slow's missing events have no drop record",
        "slow: 30 drop records, but 9 gaps + 20 after the last delivery",
        "hash chain is broken",
    ):
        assert expected in problems
    assert "demo FAILED" in render(verdict, report="r.md")


def test_without_the_analysis_only_the_run_is_judged() -> None:
    assert judge({"published": 70}, _APPS, None).ok
    verdict = judge({"published": 0}, {"slow": {"state": "stopped", "received": 0}}, None)
    assert verdict.problems == ["the provider published nothing", "slow received nothing"]
    assert "analysis    skipped" in render(verdict, report="")


def test_an_analysis_summary_missing_a_field_is_an_error_not_a_zero() -> None:
    incomplete = _analysis()
    del incomplete["unexplained_seqs"]
    with pytest.raises(KeyError, match="unexplained_seqs"):
        judge({"published": 70}, _APPS, incomplete)


ZONE_L = "Vehicle.Cabin.HVAC.Zone.Row1.Left.Temperature"
ZONE_R = "Vehicle.Cabin.HVAC.Zone.Row1.Right.Temperature"


def _health_events() -> list[ClientEvent]:
    return [
        KeyStaleEvent(2, ZONE_L, 1_000, 2_000_000_000),
        KeyStaleEvent(3, ZONE_R, 1_000, 2_000_000_000),
        KeyFreshEvent(3, ZONE_R, 5_000),
        ProviderGoneEvent("sim", (1, 2), (SPEED, ZONE_L)),
    ]


def test_dashboard_shows_stale_keys_and_missing_providers_first() -> None:
    view = DashboardView("dash", clock=0.0)
    view.update([data(1, 1.0, name="Vehicle.Aaa"), data(1, 2.0)])
    assert "no stale key, no provider gone" in view.render(120, 10).splitlines()[1]
    view.update(_health_events())
    screen = view.render(120, 10).splitlines()
    assert screen[1] == f"1 stale: {ZONE_L} | provider gone: sim (2 keys)"
    rows = [line.split()[0] for line in screen[3:]]
    assert rows[:2] == sorted([SPEED, ZONE_L])  # unhealthy first
    assert next(line for line in screen if line.startswith(ZONE_L)).endswith("no provider")
    assert next(line for line in screen if line.startswith(ZONE_R)).rstrip().endswith("0")
    view.update([ProviderBackEvent("sim", (1, 2), (SPEED, ZONE_L))])
    assert view.health() == f"1 stale: {ZONE_L}"
    assert next(ln for ln in view.render(120, 10).splitlines() if ln.startswith(ZONE_L)).endswith(
        "stale"
    )


def test_app_stats_follow_the_health_events() -> None:
    stats = AppStats("a")
    stats.count(_health_events())
    snap = stats.snapshot()
    assert snap["stale"] == [ZONE_L]
    assert snap["went_stale"] == sorted([ZONE_L, ZONE_R])
    assert (snap["stale_events"], snap["fresh_events"]) == (2, 1)
    assert snap["no_provider"] == {SPEED: "sim", ZONE_L: "sim"}
    assert snap["providers_gone"] == {"sim": 2}
    stats.count([ProviderBackEvent("sim", (1,), (SPEED,))])
    assert stats.snapshot()["no_provider"] == {ZONE_L: "sim"}


def test_the_demo_summary_shows_what_the_apps_were_told_live() -> None:
    live = {
        "went_stale": [ZONE_L, ZONE_R],
        "stale_events": 2,
        "fresh_events": 2,
        "providers_gone": {"vehicle-sim": 270},
    }
    apps = {name: {**status, **live} for name, status in _APPS.items()}
    analysis = {
        **_analysis(),
        "stale_keys_longest_ns": {ZONE_L: 9_000_000_000, "Vehicle.Other": 1},
    }
    text = render(judge({"published": 70, "keys": 3}, apps, analysis), report="r.md")
    assert (
        "live        logger: told 2 key(s) went stale (Vehicle.Cabin.HVAC.Zone.Row1.*; "
        "2 KeyStale, 2 KeyFresh); provider gone: vehicle-sim (270 keys)"
    ) in text
    assert "(the analysis found 1 stale key(s) no app was told of live: Vehicle.Other)" in text
