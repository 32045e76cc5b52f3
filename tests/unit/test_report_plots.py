"""The report's plots at fleet size: a staleness lane per vehicle, labelled, the
vehicles quiet longest first; the drops plot's zero line above the axis."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from vehicle_middleware.telemetry_export import plots

S = 1_000_000_000


def _stale(vehicles: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for v in range(vehicles):
        for key in ("Vehicle.Cabin.Temp", "Vehicle.Speed"):
            rows.append(
                {
                    "vehicle_id": f"car-{v:04d}",
                    "key": key,
                    "key_id": 1,
                    "what": "write",
                    "app": None,
                    "threshold_ns": 5 * S,
                    "from_ns": 1_700_000_000 * S,
                    "to_ns": 1_700_000_000 * S + (v + 6) * S,  # car-0019 quiet longest
                }
            )
    return rows


def test_twenty_vehicles_stale_make_labelled_lanes_of_the_longest_quiet(tmp_path: Path) -> None:
    lanes = plots.stale_lanes(_stale(20))
    assert len(lanes) == 2 * plots.LANES
    first = [vehicle for row, vehicle, _ in lanes if row.startswith("Vehicle.Cabin.Temp")]
    assert first == [f"car-{v:04d}" for v in range(19, 19 - plots.LANES, -1)]
    assert plots.plot_staleness(_stale(20), tmp_path) == "staleness.png"
    assert (tmp_path / "staleness.png").stat().st_size > 0


def test_the_drops_plot_keeps_an_app_without_drops_visible_above_the_axis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rates = [
        {"app": app, "queue": 0, "window_start_ns": t * S, "dropped": n if app == "slow" else 0}
        for t, n in enumerate([3, 40, 12])
        for app in ("slow", "logger")
    ]
    seen = {}
    save = plots._save

    def keep(fig: object, path: Path) -> str:
        [ax] = fig.axes  # type: ignore[attr-defined]
        seen["ylim"] = ax.get_ylim()
        seen["labels"] = [line.get_label() for line in ax.get_lines()]
        return save(fig, path)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "_save", keep)
    assert plots.plot_drops(rates, tmp_path, window_ns=S) == "drops.png"
    low, high = seen["ylim"]
    assert low < 0 < 40 < high  # zero is a line above the x axis
    assert seen["labels"] == ["logger / queue 0: none dropped", "slow / queue 0: 55 dropped"]
