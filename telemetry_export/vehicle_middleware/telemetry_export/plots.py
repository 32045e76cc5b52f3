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
from typing import TYPE_CHECKING, Any

from vehicle_middleware.telemetry_export.report import duration

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_drops", "plot_staleness"]


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
        ax.plot(_utc(xs), ys, drawstyle="steps-post", linewidth=1.5, label=label)
    starts = [int(r["window_start_ns"]) for r in rates]
    _time_axis(ax, min(starts), max(starts) + window_ns)
    ax.set_ylim(bottom=0)
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


def plot_staleness(stale: list[dict[str, Any]], out: Path) -> str | None:
    """``staleness.png`` in ``out`` from rows of the ``stale`` table: a bar per
    interval, a row per key and what went quiet (its writes, or its deliveries
    to an app), labelled with the threshold. Its name, or None without rows.
    Safe to call from any thread (no pyplot state)."""
    if not stale:
        return None
    from matplotlib.figure import Figure

    rows: dict[str, list[dict[str, Any]]] = {}
    for s in stale:
        rows.setdefault(_quiet_label(s), []).append(s)
    labels = sorted(rows)[:20]
    lanes = len({s["vehicle_id"] for s in stale})
    # A row high enough for a lane per vehicle (up to 40 lanes' worth).
    fig = Figure(figsize=(10, 1.4 + max(0.42, 0.06 * min(lanes, 40)) * len(labels)))
    ax = fig.subplots()
    vehicles = {s["vehicle_id"] for s in stale}
    # Each vehicle at its own height within a row, so that intervals of
    # several vehicles at the same time stay apart.
    lane = {v: i for i, v in enumerate(sorted(vehicles))}
    step = 0.7 / max(len(lane), 1)
    for i, label in enumerate(labels):
        spans = rows[label]
        # One collection per row: a line per interval costs a few ms each.
        ax.hlines(
            [i - 0.35 + step * (lane[s["vehicle_id"]] + 0.5) for s in spans],
            _utc([s["from_ns"] for s in spans]),
            _utc([s["to_ns"] for s in spans]),
            linewidth=max(1.0, min(6.0, 40 * step)),
            color=f"C{i % 10}",
        )
    ticks = []
    for label in labels:
        spans = rows[label]
        n = len({s["vehicle_id"] for s in spans})
        ticks.append(f"{label}\n{len(spans)} intervals, {n} vehicle{'s' if n != 1 else ''}")
    ax.set_yticks(range(len(labels)), ticks, fontsize="x-small")
    ax.set_ylim(-0.5, len(labels) - 0.5)
    ax.invert_yaxis()
    shown = [s for label in labels for s in rows[label]]
    _time_axis(ax, min(s["from_ns"] for s in shown), max(s["to_ns"] for s in shown))
    more = f" (first 20 of {len(rows)} rows)" if len(rows) > 20 else ""
    ax.set_title(
        f"Stale intervals: quiet longer than the key's threshold, {len(vehicles)} "
        f"vehicle{'s' if len(vehicles) != 1 else ''} (one lane each){more}",
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
