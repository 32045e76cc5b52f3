"""Write what the job found: Parquet tables, ``summary.json``, a Markdown report with plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

__all__ = ["write_report", "write_table"]


def write_table(df: DataFrame, path: str, *, partition_by: list[str] | None = None) -> None:
    writer = df.write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(path)


def _plot_drops(rates: list[dict[str, Any]], out: Path) -> str | None:
    if not rates:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    series: dict[str, list[tuple[float, int]]] = {}
    for r in rates:
        series.setdefault(f"{r['vehicle_id']} / {r['app']} / q{r['queue']}", []).append(
            (r["window_start_ns"] / 1e9, r["dropped"])
        )
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=label)
    ax.set_xlabel("time (s since epoch)")
    ax.set_ylabel("events dropped per window")
    ax.set_title("Drops over time")
    if len(series) <= 12:
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / "drops.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _plot_staleness(stale: list[dict[str, Any]], out: Path) -> str | None:
    if not stale:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    keys = sorted({str(s["key"]) for s in stale})[:20]
    for i, key in enumerate(keys):
        for s in (s for s in stale if str(s["key"]) == key):
            ax.plot([s["from_ns"] / 1e9, s["to_ns"] / 1e9], [i, i], linewidth=4)
    ax.set_yticks(range(len(keys)), keys, fontsize="x-small")
    ax.set_xlabel("time (s since epoch)")
    ax.set_title("Stale intervals (longer than the key's threshold)")
    fig.tight_layout()
    path = out / "staleness.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def write_report(
    out: Path, summary: dict[str, Any], tables: dict[str, list[dict[str, Any]]]
) -> None:
    """``summary.json`` and ``report.md`` (with PNG plots) into the local directory ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    drops_png = _plot_drops(tables.get("drop_rates", []), out)
    stale_png = _plot_staleness(tables.get("stale", []), out)
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
        for b in tables.get("chain", []):
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
