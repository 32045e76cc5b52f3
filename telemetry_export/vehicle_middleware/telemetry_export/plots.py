"""The report's plots: drops over time and stale intervals, as PNG files beside
``report.md``.

Each plot takes the rows the job collected (a few hundred at most) and draws
them on its own ``matplotlib`` figure, without pyplot's global state, so the job
may draw them from several threads at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from vehicle_middleware.telemetry_export.report import duration

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["KEY_ROWS", "LANES", "plot_drops", "plot_staleness", "stale_lanes"]


def plot_drops(rates: list[dict[str, Any]], out: Path, *, window_ns: int) -> str | None:
    """``drops.png`` in ``out`` from rows of :func:`transforms.drops_over_time`
    (``app``, ``queue``, ``window_start_ns``, ``dropped``): per app and queue,
    the drops of each ``window_ns`` window as a step, nothing drawn across
    windows without events. Its name, or None without rows. Safe to call from
    any thread (no pyplot state)."""
    if not rates:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    series: dict[str, list[tuple[int, int]]] = {}
    for r in rates:
        series.setdefault(f"{r['app']} / queue {r['queue']}", []).append(
            (int(r["window_start_ns"]), int(r["dropped"]))
        )
    for label, points in sorted(series.items()):
        xs, ys = _steps(sorted(points), window_ns)
        total = sum(y for _, y in points)
        ax.plot(
            _utc(xs),
            ys,
            drawstyle="steps-post",
            linewidth=1.5,
            label=f"{label}: {total:,} dropped" if total else f"{label}: none dropped",
        )
    starts = [int(r["window_start_ns"]) for r in rates]
    _time_axis(ax, min(starts), max(starts) + window_ns)
    # Zero a little above the x axis: an app that dropped nothing is a line
    # that can be seen, not one hidden under the axis.
    top = max((int(r["dropped"]) for r in rates), default=0) or 1
    ax.set_ylim(-0.04 * top, 1.08 * top)
    window = duration(window_ns)
    ax.set_ylabel(f"events dropped per {window}")
    ax.set_title(f"Drops per {window} window, all vehicles added up")
    if len(series) <= 12:
        ax.legend(fontsize="small", title="app / queue", title_fontsize="small")
    return _save(fig, out / "drops.png")


def _steps(points: list[tuple[int, int]], width: int) -> tuple[list[int], list[float]]:
    """Windows as steps: each run of adjacent windows closed at its last one's
    end, runs apart separated by a break (NaN), so no line crosses a gap."""
    xs: list[int] = []
    ys: list[float] = []
    for i, (t, y) in enumerate(points):
        if i and t > points[i - 1][0] + width:
            end = points[i - 1][0] + width
            xs += [end, end]
            ys += [points[i - 1][1], math.nan]
        xs.append(t)
        ys.append(y)
    xs.append(points[-1][0] + width)
    ys.append(points[-1][1])
    return xs, ys


KEY_ROWS: Final = 12
"""Rows of the staleness plot (what went quiet: a key's writes or deliveries), at most."""
LANES: Final = 6
"""Vehicles shown per row of the staleness plot, at most: those quiet longest."""


def stale_lanes(stale: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """The staleness plot's lanes: per row (what went quiet: :func:`_quiet_label`,
    at most :data:`KEY_ROWS`, those with the most intervals first), the vehicles
    quiet longest in it (at most :data:`LANES`, longest first), each with its
    intervals: ``(row, vehicle, intervals)``."""
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for s in stale:
        rows.setdefault(_quiet_label(s), {}).setdefault(s["vehicle_id"], []).append(s)

    def quiet_ns(spans: list[dict[str, Any]]) -> int:
        return sum(int(s["to_ns"]) - int(s["from_ns"]) for s in spans)

    ordered = sorted(rows, key=lambda r: (-sum(len(v) for v in rows[r].values()), r))
    lanes = []
    for row in ordered[:KEY_ROWS]:
        vehicles = sorted(rows[row], key=lambda v: (-quiet_ns(rows[row][v]), v))
        lanes += [(row, v, rows[row][v]) for v in vehicles[:LANES]]
    return lanes


def plot_staleness(stale: list[dict[str, Any]], out: Path) -> str | None:
    """``staleness.png`` in ``out`` from rows of the ``stale`` table: a bar per
    interval, on a labelled lane per vehicle, grouped by what went quiet (a key's
    writes, or its deliveries to an app; labelled with the threshold), the
    vehicles quiet longest first (:func:`stale_lanes`: a fleet of any size stays
    readable). Its name, or None without rows. Safe to call from any thread (no
    pyplot state)."""
    if not stale:
        return None
    from matplotlib.figure import Figure

    lanes = stale_lanes(stale)
    totals: dict[str, tuple[int, set[str]]] = {}
    for s in stale:
        n, vehicles = totals.get(_quiet_label(s), (0, set()))
        totals[_quiet_label(s)] = (n + 1, vehicles | {s["vehicle_id"]})
    groups = list(dict.fromkeys(row for row, _, _ in lanes))
    height = 1.2 + 0.24 * len(lanes) + 0.32 * len(groups)
    fig = Figure(figsize=(10, height))
    ax = fig.subplots()
    y, ticks, names = 0.0, [], []
    for i, group in enumerate(groups):
        n, vehicles = totals[group]
        shown = [(v, spans) for row, v, spans in lanes if row == group]
        more = f"; the {len(shown)} quiet longest shown" if len(vehicles) > len(shown) else ""
        ax.text(
            0.005,
            y,
            f"{group}: {n} intervals, {len(vehicles)} vehicle{'s' if len(vehicles) != 1 else ''}"
            + more,
            transform=ax.get_yaxis_transform(),
            fontsize="small",
            fontweight="bold",
            va="center",
        )
        y += 1
        for vehicle, spans in shown:
            # One collection per lane: a line per interval costs a few ms each.
            ax.hlines(
                [y] * len(spans),
                _utc([s["from_ns"] for s in spans]),
                _utc([s["to_ns"] for s in spans]),
                linewidth=6,
                color=f"C{i % 10}",
            )
            ticks.append(y)
            names.append(vehicle)
            y += 1
        y += 0.4
    ax.set_yticks(ticks, names, fontsize="x-small")
    ax.set_ylim(-0.7, y - 0.4)
    ax.invert_yaxis()
    shown_spans = [s for _, _, spans in lanes for s in spans]
    _time_axis(ax, min(s["from_ns"] for s in shown_spans), max(s["to_ns"] for s in shown_spans))
    more_rows = (
        f" (the {len(groups)} with most intervals of {len(totals)})"
        if (len(totals) > len(groups))
        else ""
    )
    vehicles_all = {s["vehicle_id"] for s in stale}
    ax.set_title(
        f"Stale intervals: quiet longer than the key's threshold, {len(vehicles_all)} "
        f"vehicle{'s' if len(vehicles_all) != 1 else ''}, a lane per vehicle{more_rows}",
        fontsize="medium",
    )
    return _save(fig, out / "staleness.png")


def _quiet_label(s: Any) -> str:
    what = "writes" if s["what"] == "write" else f"deliveries to {s['app']}"
    return f"{s['key'] or 'key ' + str(s['key_id'])}: {what} (> {duration(s['threshold_ns'])})"


def _time_axis(ax: Axes, start_ns: int, end_ns: int) -> None:
    """A UTC time axis over ``start_ns`` .. ``end_ns`` (a little margin), with
    ticks that suit that span (seconds to days), not matplotlib's default years
    around a single point."""
    import matplotlib.dates as mdates

    margin = max((end_ns - start_ns) // 40, 1_000_000_000)
    ax.set_xlim(*_utc([start_ns - margin, end_ns + margin]))
    locator = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    formatter = mdates.ConciseDateFormatter(locator, tz=UTC)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlabel("time (UTC)")
    ax.grid(True, axis="x", alpha=0.3)


def _utc(times_ns: Sequence[int]) -> Any:
    """Times in ns since the epoch as dates (UTC) for matplotlib (``Any``: its
    stubs do not say it takes them)."""
    return [datetime.fromtimestamp(t / 1e9, tz=UTC) for t in times_ns]


def _save(fig: Figure, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path.name
