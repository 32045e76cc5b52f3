"""Write what the job found: Parquet tables, ``summary.json``, a Markdown report with plots."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_drops", "plot_staleness", "write_report", "write_table"]


def write_table(df: DataFrame, path: str, *, partition_by: list[str] | None = None) -> None:
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(path)


def plot_drops(rates: list[dict[str, Any]], out: Path) -> str | None:
    """``drops.png`` in ``out`` from rows of :func:`transforms.drops_over_time`
    (``app``, ``queue``, ``window_start_ns``, ``dropped``): one line per app and
    queue. Its name, or None without rows. Safe to call from any thread (no
    pyplot state)."""
    if not rates:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.5))
    ax = fig.subplots()
    series: dict[str, list[tuple[int, int]]] = {}
    for r in rates:
        series.setdefault(f"{r['app']} / q{r['queue']}", []).append(
            (r["window_start_ns"], r["dropped"])
        )
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot(_utc([p[0] for p in points]), [p[1] for p in points], marker=".", label=label)
    ax.xaxis_date(UTC)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("events dropped per window")
    ax.set_title("Drops over time, all vehicles")
    if len(series) <= 12:
        ax.legend(fontsize="small")
    return _save(fig, out / "drops.png")


def plot_staleness(stale: list[dict[str, Any]], out: Path) -> str | None:
    """``staleness.png`` in ``out`` from rows of the ``stale`` table; its name,
    or None without rows. Safe to call from any thread (no pyplot state)."""
    if not stale:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.5))
    ax = fig.subplots()
    keys = sorted({str(s["key"]) for s in stale})[:20]
    for i, key in enumerate(keys):
        spans = [s for s in stale if str(s["key"]) == key]
        # One collection per key: a line per interval costs a few ms each.
        ax.hlines(
            [i] * len(spans),
            _utc([s["from_ns"] for s in spans]),
            _utc([s["to_ns"] for s in spans]),
            linewidth=4,
            color=f"C{i % 10}",
        )
    ax.xaxis_date(UTC)
    ax.set_yticks(range(len(keys)), keys, fontsize="x-small")
    ax.set_xlabel("time (UTC)")
    ax.set_title("Stale intervals (longer than the key's threshold)")
    return _save(fig, out / "staleness.png")


def _utc(times_ns: list[int]) -> Any:
    """Times in ns since the epoch as dates (UTC) for matplotlib (``Any``: its
    stubs do not say it takes them)."""
    return [datetime.fromtimestamp(t / 1e9, tz=UTC) for t in times_ns]


def _save(fig: Figure, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path.name


def write_report(
    out: Path,
    summary: dict[str, Any],
    chain: list[dict[str, Any]],
    *,
    drops_png: str | None,
    stale_png: str | None,
) -> None:
    """``summary.json`` and ``report.md`` into the local directory ``out``:
    ``chain`` has the ``boot_integrity`` rows of broken chains; the plots are
    those :func:`plot_drops` and :func:`plot_staleness` made there."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    lines = [
        "# Telemetry journal analysis",
        "",
        f"{summary['records']:,} records from {summary['vehicles']} vehicles, "
        f"{summary['boots']} boots ({summary['restarts']} restarts); "
        f"{summary['bad_lines']} bad lines kept aside.",
        "",
        "## Findings",
        "",
        "| finding | count |",
        "|---|---:|",
    ]
    for key in (
        "delivered",
        "dropped",
        "seq_gaps",
        "missing_seqs",
        "unexplained_seqs",
        "stale_intervals",
        "broken_chains",
        "missing_journal_records",
        "reported_journal_drops",
    ):
        lines.append(f"| {key.replace('_', ' ')} | {summary[key]:,} |")
    verdict = (
        "every seq gap is explained by a drop record"
        if summary["unexplained_seqs"] == 0
        else f"**{summary['unexplained_seqs']} missing seqs have no drop record**"
    )
    lines += ["", f"Reconciliation: {verdict}.", ""]
    if summary["broken_chains"]:
        lines += ["**Hash chain broken** (edited, reordered or deleted records):", ""]
        for b in chain:
            if b["broken_links"]:
                lines.append(
                    f"- {b['vehicle_id']} boot {b['boot_id']}: first broken at offset "
                    f"{b['first_broken_offset']} ({b['broken_links']} links)"
                )
        lines.append("")
    if drops_png:
        lines += ["## Drops over time", "", f"![drops]({drops_png})", ""]
    if stale_png:
        lines += ["## Staleness", "", f"![staleness]({stale_png})", ""]
    (out / "report.md").write_text("\n".join(lines))
