"""The analysis' report: ``summary.json`` and ``report.md``, a Markdown account of
what the job found (findings, the journals' integrity, what the collector could
not collect, vehicles, boots, drops and gaps, filtered writes, staleness and,
apart from it, failures), with the settings it
ran under and the plots of :mod:`vehicle_middleware.telemetry_export.plots`.

Plain Python over rows the job already collected: no Spark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

__all__ = ["TABLE_ROWS", "ReportTables", "Settings", "duration", "write_report"]

TABLE_ROWS: Final = 200
"""Rows of each table report.md lists, at most (the Parquet tables have all)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The analysis' settings, said in the report beside what they found."""

    thresholds: tuple[tuple[str, int], ...] = ()
    """Staleness thresholds (ns) per key prefix; the longest prefix wins."""
    default_stale_ns: int = 5_000_000_000
    window_ns: int = 1_000_000_000
    """The drop-rate window."""


@dataclass(frozen=True, slots=True)
class ReportTables:
    """The rows report.md lists (dicts, or anything read as ``row[name]``)."""

    boots: list[dict[str, Any]] = field(default_factory=list)
    """Per boot: the ``boot_integrity`` and ``boots`` columns, ``delivered`` and
    ``dropped``."""
    vehicle_apps: list[dict[str, Any]] = field(default_factory=list)
    """Per vehicle and app: ``delivered``, ``dropped`` (``evicted`` + ``lost``),
    the seq totals, and the ``batches`` read in ``reading_ns``."""
    queue_lengths: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Per app, its queues' ``[min, max]`` lengths in events (from its latest stream)."""
    gap_keys: list[dict[str, Any]] = field(default_factory=list)
    """Per app and key name over the fleet: the seq totals and ``vehicles``."""
    stale_keys: list[dict[str, Any]] = field(default_factory=list)
    """Per key name, ``what``, ``app`` and ``threshold_ns``: ``intervals``,
    ``vehicles`` and ``longest_ns``."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Failure intervals, per vehicle and key: ``vehicle_id``, ``key``, ``code``,
    ``from_ns``, ``to_ns`` (None: still failed at the journal's end) and
    ``duration_ns``."""
    filtered_keys: list[dict[str, Any]] = field(default_factory=list)
    """Per app and key name over the fleet where a filter held writes back:
    ``delivered``, ``delivered_writes``, ``dropped``, ``dropped_writes``,
    ``filtered``, ``vehicles`` and the ``filters`` (JSON text) its subscriptions had."""
    not_collected: list[dict[str, Any]] = field(default_factory=list)
    """Per vehicle and boot the collector lost records of or followed a restart
    into: ``gaps``, ``records`` not collected, ``reasons`` and
    ``restarted_from`` (boot ids)."""


_FINDINGS: Final = {
    "dropped": "dropped (evicted + lost)",
    "evicted": "evicted: a newer event of the same key replaced it in a full queue",
    "lost": "lost: it met a full queue holding no event of its key",
    "failure_intervals": "failure intervals (the providers said a key failed)",
    "open_failure_intervals": "failure intervals still open at the journal's end",
    "filtered_writes": "writes a subscription's filter held back (not drops)",
}
"""Findings whose name alone does not say what they count."""


def duration(ns: int | float | None) -> str:
    """``ns`` for people: 250 ms, 30 s, 2.5 min, 3.1 h."""
    if ns is None:
        return "?"
    s = ns / 1e9
    if s < 1:
        return f"{s * 1000:g} ms"
    if s < 120:
        return f"{s:.3g} s" if s != int(s) else f"{int(s)} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    return f"{s / 3600:.3g} h"


def _time(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _table(header: list[str], rows: list[list[Any]], *, right: int = 0) -> list[str]:
    """A Markdown table; the last ``right`` columns right-aligned."""
    align = ["---"] * (len(header) - right) + ["---:"] * right
    out = [f"| {' | '.join(header)} |", f"| {' | '.join(align)} |"]
    out += [f"| {' | '.join(str(c) for c in r)} |" for r in rows]
    return [*out, ""]


def _cut(rows: list[Any], what: str) -> tuple[list[Any], list[str]]:
    if len(rows) <= TABLE_ROWS:
        return rows, []
    return rows[:TABLE_ROWS], [f"(The first {TABLE_ROWS} of {len(rows):,}; all in `{what}`.)", ""]


def _ended(b: Any) -> str:
    if b["clean_stop"] is None:
        return "unknown (no record on disk)"
    if b["clean_stop"]:
        return "stop record (clean)"
    return "**no stop record: unclean** (killed, crashed, or still running)"


def _started(b: Any) -> str:
    if b["boot_number"] == 1:
        return "first boot"
    before = b["after_clean_stop"]
    if before is None:
        return "restart"
    return "restart after a clean stop" if before else "**restart after an unclean stop**"


def _chain(b: Any) -> str:
    chain, trimmed = b["chain"], ""
    if b["trimmed_files"]:
        trimmed = f"at least {b['trimmed_files']} files, {_bytes(b['trimmed_bytes'])}"
    if chain == "intact":
        return "intact"
    if chain == "not collected":
        if not b["records"]:
            return f"none of its records collected ({b['not_collected']:,} offsets)"
        return (
            f"intact where collected ({b['not_collected']:,} records not collected: "
            "the links across them not checked)"
        )
    if chain == "trimmed":
        if not b["records"]:
            return f"all its records removed by retention ({trimmed})"
        return f"intact, oldest records removed by retention ({trimmed})"
    if chain == "start missing":
        more = f"; {b['broken_links'] - 1} more broken links" if b["broken_links"] > 1 else ""
        return (
            f"**records missing before offset {b['first_broken_offset']}** "
            f"(no journal_trimmed record accounts for them){more}"
        )
    return (
        f"**broken at offset {b['first_broken_offset']}** (edited, reordered or deleted "
        f"records; {b['broken_links']} broken links)"
    )


def _rate(dropped: int, delivered: int) -> str:
    total = dropped + delivered
    return f"{dropped / total:.1%}" if total else "-"


def write_report(
    out: Path,
    summary: dict[str, Any],
    tables: ReportTables,
    settings: Settings,
    *,
    drops_png: str | None,
    stale_png: str | None,
) -> None:
    """``summary.json`` and ``report.md`` into the local directory ``out``:
    ``tables`` has the rows listed (per boot, per vehicle and app, per app and
    key, per stale key); the plots are those
    :func:`vehicle_middleware.telemetry_export.plots.plot_drops` and
    :func:`vehicle_middleware.telemetry_export.plots.plot_staleness` made there."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    boots = sorted(tables.boots, key=lambda b: (b["vehicle_id"], b["boot_number"]))
    unclean_restarts = sum(1 for b in boots if b["after_clean_stop"] is False)
    thresholds = ", ".join(
        f"{duration(ns)} for keys under `{p}`" for p, ns in sorted(settings.thresholds)
    )
    window = duration(settings.window_ns)
    lines = [
        "# Telemetry journal analysis",
        "",
        f"{summary['vehicles']} vehicles, {summary['boots']} boots ({summary['restarts']} "
        f"restarts, {unclean_restarts} of them after an unclean stop), "
        f"{summary['records']:,} records; {summary['bad_lines']} bad lines kept aside "
        "(`_bad` in the dataset).",
        "",
        f"Settings: a key is stale when quiet longer than "
        f"{duration(settings.default_stale_ns)}"
        + (f" ({thresholds}; the longest prefix wins)" if thresholds else "")
        + f"; drop rates per {window} window.",
        "",
        "## Findings",
        "",
        "| finding | count |",
        "|---|---:|",
    ]
    for key in (
        "delivered",
        "dropped",
        "evicted",
        "lost",
        "seq_gaps",
        "missing_seqs",
        "unexplained_seqs",
        "stale_intervals",
        "failure_intervals",
        "open_failure_intervals",
        "filtered_writes",
        "unclean_stops",
        "broken_chains",
        "trimmed_boots",
        "missing_journal_records",
        "reported_journal_drops",
        "unreported_journal_losses",
        "collect_gaps",
        "not_collected_records",
        "collector_restarts",
    ):
        figure = summary.get(key)
        cell = "not recorded" if figure is None else f"{figure:,}"
        lines.append(f"| {_FINDINGS.get(key, key.replace('_', ' '))} | {cell} |")
    recorded = summary.get("deliveries_recorded", True)
    if not recorded:
        levels = ", ".join(summary.get("journal_levels", [])) or "unknown"
        verdict = (
            f"**not possible: the journals' level ({levels}) does not record deliveries "
            "or writes**, so what each app received, its seq gaps and the keys' "
            "staleness are unknown (run the middleware with `--journal-level full` to "
            "know them); the drops below, by app, queue and key, are exact"
        )
    elif summary["unexplained_seqs"] == 0:
        verdict = "every seq gap is explained by a drop record"
    else:
        verdict = f"**{summary['unexplained_seqs']} missing seqs have no drop record**"
    lines += ["", f"Reconciliation: {verdict}.", ""]
    lines += _journal_verdicts(summary, boots)
    lines += _not_collected(tables.not_collected)
    lines += _vehicles(boots, tables.vehicle_apps, recorded=recorded)
    lines += _boots(boots)
    lines += _vehicle_apps(tables.vehicle_apps, window, tables.queue_lengths, recorded=recorded)
    lines += _gap_keys(tables.gap_keys)
    lines += _filtered(tables.filtered_keys)
    lines += ["## Staleness", ""]
    if tables.stale_keys:
        rows = sorted(
            tables.stale_keys,
            key=lambda r: (r["key"] or "", r["what"] != "write", r["app"] or ""),
        )
        shown, note = _cut(rows, "stale")
        lines += _table(
            ["key", "what went quiet", "threshold", "intervals", "vehicles", "longest"],
            [
                [
                    f"`{r['key']}`",
                    "its writes" if r["what"] == "write" else f"deliveries to {r['app']}",
                    duration(r["threshold_ns"]),
                    f"{r['intervals']:,}",
                    r["vehicles"],
                    duration(r["longest_ns"]),
                ]
                for r in shown
            ],
            right=3,
        )
        lines += note
    else:
        lines += ["No key was quiet longer than its threshold.", ""]
    if stale_png:
        lines += [f"![staleness]({stale_png})", ""]
    lines += _failures(tables.failures, recorded=recorded)
    if drops_png:
        lines += [
            "## Drops over time",
            "",
            f"Events dropped per {window} window, all vehicles added up, per app and queue.",
            "",
            f"![drops]({drops_png})",
            "",
        ]
    (out / "report.md").write_text("\n".join(lines))


def _journal_verdicts(summary: dict[str, Any], boots: list[Any]) -> list[str]:
    lines: list[str] = []

    def listing(title: str, which: list[Any], say: Any) -> None:
        if not which:
            return
        nonlocal lines
        lines += [title, ""]
        shown, note = _cut(which, "boot_integrity")
        lines += [
            f"- {b['vehicle_id']} boot {b['boot_number']} (`{b['boot_id']}`): {say(b)}"
            for b in shown
        ]
        lines += ["", *note]

    listing(
        "**Hash chain broken** (edited, reordered or deleted records):",
        [b for b in boots if b["chain"] in ("broken", "start missing")],
        _chain,
    )
    listing(
        "**Journal records lost that no `journal_dropped` record reports:**",
        [b for b in boots if b["unreported_lost"]],
        lambda b: (
            f"{b['unreported_lost']:,} of {b['missing_records']:,} missing by offset "
            f"({b['reported_dropped']:,} reported)"
        ),
    )
    listing(
        "Oldest records removed by the journal's retention (reported by `journal_trimmed` "
        "records; not tampering):",
        [b for b in boots if b["chain"] == "trimmed"],
        _chain,
    )
    listing(
        "**Boots that ended without a `stop` record** (killed, crashed, or still running):",
        [b for b in boots if b["clean_stop"] is False],
        lambda b: f"last record at {_time(b['last_ns'])} UTC",
    )
    if not lines:
        lines = ["Journal: every chain intact, every boot stopped cleanly, no loss unreported.", ""]
    return lines


def _not_collected(rows_in: list[Any]) -> list[str]:
    """What the collector could not collect (its ``collect_gap`` records) and the
    restarts it followed (``collect_restart``), by vehicle and boot: not the
    journal's losses, and no broken chain."""
    if not rows_in:
        return []
    rows = [
        [
            r["vehicle_id"],
            f"`{r['boot_id']}`",
            r["gaps"],
            f"**{r['records']:,}**" if r["records"] else "0",
            "; ".join(r["reasons"]) or "-",
            ", ".join(f"`{b}`" for b in r["restarted_from"]) or "-",
        ]
        for r in rows_in
    ]
    shown, note = _cut(rows, "collector")
    return [
        "## Not collected",
        "",
        "Records the middleware wrote that the collector could not collect "
        "(`collect_gap` records: the middleware no longer held them, or the "
        "collector was cut loose), and the restarts it followed into a new boot "
        "(`collect_restart`). Not the journal's own losses; the chain links across "
        "them cannot be checked, and are not counted as broken.",
        "",
        *_table(
            ["vehicle", "boot", "gaps", "records not collected", "why", "restart from boot"],
            shown,
            right=0,
        ),
        *note,
    ]


def _vehicles(boots: list[Any], vehicle_apps: list[Any], *, recorded: bool = True) -> list[str]:
    per: dict[str, dict[str, Any]] = {}
    for b in boots:
        v = per.setdefault(
            b["vehicle_id"],
            {"boots": 0, "unclean": 0, "records": 0, "delivered": 0, "dropped": 0, "chain": []},
        )
        v["boots"] += 1
        v["unclean"] += b["clean_stop"] is False
        v["records"] += b["records"]
        v["delivered"] += b["delivered"]
        v["dropped"] += b["dropped"]
        if b["chain"] in ("broken", "start missing"):
            v["chain"].append("**broken**")
        elif b["chain"] in ("trimmed", "not collected"):
            v["chain"].append(b["chain"])
    gaps: dict[str, list[int]] = {}
    for a in vehicle_apps:
        g = gaps.setdefault(a["vehicle_id"], [0, 0])
        g[0] += a["missing"]
        g[1] += a["unexplained"]
    rows = [
        [
            name,
            v["boots"],
            v["boots"] - 1,
            v["unclean"],
            f"{v['records']:,}",
            f"{v['delivered']:,}" if recorded else "not recorded",
            f"{v['dropped']:,}",
            f"{gaps.get(name, [0, 0])[0]:,}" if recorded else "not recorded",
            f"{gaps.get(name, [0, 0])[1]:,}" if recorded else "not recorded",
            ", ".join(sorted(set(v["chain"]))) or "intact",
        ]
        for name, v in sorted(per.items())
    ]
    shown, note = _cut(rows, "boots")
    return [
        "## Vehicles",
        "",
        *_table(
            [
                "vehicle",
                "boots",
                "restarts",
                "unclean stops",
                "records",
                "delivered",
                "dropped",
                "missing seqs",
                "unexplained",
                "journal",
            ],
            shown,
        ),
        *note,
    ]


def _boots(boots: list[Any]) -> list[str]:
    rows = [
        [
            b["vehicle_id"],
            b["boot_number"],
            f"`{b['boot_id']}`",
            _time(b["first_ns"]),
            _time(b["last_ns"]),
            duration(b["last_ns"] - b["first_ns"]) if b["first_ns"] is not None else "-",
            f"{b['records']:,}",
            _started(b),
            _ended(b),
            _chain(b),
            _journal_lost(b),
        ]
        for b in boots
    ]
    shown, note = _cut(rows, "boots")
    return [
        "## Boots and restarts",
        "",
        "Each middleware process is a boot; every boot of a vehicle after its first is a "
        "restart. A boot ended cleanly if its journal ends with a `stop` record. Journal "
        "records lost: *missing* counts the offsets absent between the boot's records on "
        "disk; *reported* what `journal_dropped` records say the boot lost (its own, and "
        "the next boot's report of what a crashed boot had accepted but not written); "
        "*unreported*: missing that no record reports. Records a crashed boot had not "
        "written yet come after its last record on disk, so no offset gap shows them: "
        "reported then exceeds missing by them (*after the last record*).",
        "",
        *_table(
            [
                "vehicle",
                "#",
                "boot",
                "first record (UTC)",
                "last record (UTC)",
                "span",
                "records",
                "started as",
                "ended with",
                "hash chain",
                "journal records lost",
            ],
            shown,
        ),
        *note,
    ]


def _journal_lost(b: Any) -> str:
    """``12 missing, 15 reported (3 after the last record), 0 unreported``."""
    missing, reported = int(b["missing_records"]), int(b["reported_dropped"])
    if not missing and not reported:
        return "none"
    tail = f" ({reported - missing:,} after the last record)" if reported > missing else ""
    unreported = f"**{b['unreported_lost']:,}**" if b["unreported_lost"] else "0"
    return f"{missing:,} missing, {reported:,} reported{tail}, {unreported} unreported"


def _lengths(queues: dict[str, list[int]] | None) -> str:
    """``q0 10..20`` for each queue that took events; ``?`` when unknown."""
    if not queues:
        return "?"
    return ", ".join(f"q{q} {lo}..{hi}" for q, (lo, hi) in sorted(queues.items()))


def _pace(batches: int, span_ns: int) -> str:
    """``2.5 batches/s``: how fast the app read; ``-`` without a span."""
    if not batches or span_ns <= 0:
        return "-"
    rate = f"{batches / (span_ns / 1e9):.3g}"
    return f"{rate} {'batch' if rate == '1' else 'batches'}/s"


def _vehicle_apps(
    rows_in: list[Any],
    window: str,
    queue_lengths: dict[str, dict[str, list[int]]] | None = None,
    *,
    recorded: bool = True,
) -> list[str]:
    if not rows_in:
        return [
            "## Drops and gaps per vehicle and app",
            "",
            "No event was delivered or dropped.",
            "",
        ]
    unknown = "not recorded"
    rows = [
        [
            a["vehicle_id"],
            a["app"],
            f"{a['delivered']:,}" if recorded else unknown,
            f"{a['dropped']:,}",
            f"{a.get('evicted', 0):,}",
            f"{a.get('lost', 0):,}",
            _rate(a["dropped"], a["delivered"]) if recorded else unknown,
            _lengths((queue_lengths or {}).get(a["app"])),
            _pace(a.get("batches", 0), a.get("reading_ns", 0)) if recorded else unknown,
            f"{a['missing']:,}" if recorded else unknown,
            f"{a['explained']:,}" if recorded else unknown,
            (f"**{a['unexplained']:,}**" if a["unexplained"] else "0") if recorded else unknown,
            f"{a['drops_after_last_delivery']:,}" if recorded else unknown,
        ]
        for a in rows_in
    ]
    shown, note = _cut(rows, "drop_rates")
    return [
        "## Drops and gaps per vehicle and app",
        "",
        "Dropped, by cause (the journal's `evicted` and `lost` records): *evicted*, a "
        "newer event of the same key replaced it in the app's full queue (the app gets "
        "the newer value); *lost*, it met a full queue holding no event of its key. "
        "Beside them what explains them: the app's queue lengths (min..max events, from "
        "its stream's `connect` record) and how fast it read (batches delivered per "
        "second between its first and last delivery). Missing seqs: never delivered to "
        "the app (`seq_gaps`); explained: a drop record accounts for the seq. Per "
        f"{window} window: the `drop_rates` table.",
        "",
        *_table(
            [
                "vehicle",
                "app",
                "delivered",
                "dropped",
                "evicted",
                "lost",
                "drop rate",
                "queues (events)",
                "read",
                "missing seqs",
                "explained",
                "unexplained",
                "dropped after last delivery",
            ],
            shown,
            right=11,
        ),
        *note,
    ]


def _gap_keys(rows_in: list[Any]) -> list[str]:
    if not rows_in:
        return []
    ordered = sorted(rows_in, key=lambda r: (-r["missing"], r["app"], r["key"] or ""))
    rows = [
        [
            r["app"],
            f"`{r['key']}`" if r["key"] else "(unnamed)",
            f"{r['missing']:,}",
            f"{r['explained']:,}",
            f"**{r['unexplained']:,}**" if r["unexplained"] else "0",
            f"{r['drops_after_last_delivery']:,}",
            r["vehicles"],
        ]
        for r in ordered
    ]
    shown, note = _cut(rows, "reconciliation")
    return [
        "## Gaps per app and key, all vehicles",
        "",
        *_table(
            [
                "app",
                "key",
                "missing seqs",
                "explained",
                "unexplained",
                "dropped after last delivery",
                "vehicles",
            ],
            shown,
            right=5,
        ),
        *note,
    ]


def _filtered(rows_in: list[Any]) -> list[str]:
    """Per app and key, the writes filters held back, beside the drops."""
    if not rows_in:
        return []
    rows = sorted(rows_in, key=lambda r: (r["app"], r["key"] or ""))
    shown, note = _cut(rows, "filtered")
    lines = [
        "## Filtered writes",
        "",
        "Writes a subscription's filter held back: its events stand for more writes "
        "than one. They are not drops and leave no seq gap.",
        "",
    ]
    lines += _table(
        [
            "app",
            "key",
            "filter",
            "events delivered",
            "writes they stood for",
            "filtered",
            "dropped",
            "vehicles",
        ],
        [
            [
                r["app"],
                f"`{r['key']}`",
                "; ".join(f"`{f}`" for f in r.get("filters") or []) or "-",
                f"{r['delivered']:,}",
                f"{r['delivered_writes']:,}",
                f"{r['filtered']:,}",
                f"{r['dropped']:,}",
                r["vehicles"],
            ]
            for r in shown
        ],
        right=5,
    )
    return lines + note


def _failures(rows: list[Any], *, recorded: bool) -> list[str]:
    """The failure intervals per vehicle and key: when a key's provider said it
    failed, until a value (or another failure) came; apart from staleness."""
    lines = [
        "## Failures",
        "",
        "When a key's provider said it failed (sensor fault, out of range, ...) "
        "instead of writing a value, until it wrote one again. A failed key is "
        "written, not quiet: this is not staleness.",
        "",
    ]
    if not recorded:
        return [*lines, "Not recorded (the journals' level does not record writes).", ""]
    if not rows:
        return [*lines, "No provider said a key failed.", ""]
    shown, note = _cut(rows, "failures")
    lines += _table(
        ["vehicle", "key", "code", "from", "to", "lasted"],
        [
            [
                r["vehicle_id"],
                f"`{r['key']}`",
                r["code"],
                _time(r["from_ns"]),
                "**open**" if r["to_ns"] is None else _time(r["to_ns"]),
                "-" if r["duration_ns"] is None else duration(r["duration_ns"]),
            ]
            for r in shown
        ],
        right=1,
    )
    return lines + note
