"""The telemetry analysis written plainly in pandas: the single-machine
alternative ``bench.spark`` times beside the Spark job.

It does what ``vehicle_middleware.telemetry_export analyze`` does, on the same dataset and the
same columns, the way a pandas user would write it: sort, shift, group, merge.
Like the Spark job, it reads what ``ingest`` stored (the records, and the runs
of the hash chain in ``links``, linked here in position order), writes the
same six tables as Parquet, and the same ``summary.json`` and report (with the
job's own report writer), so the two can be timed and compared whole. Default
staleness threshold only; retention's trims and the collector's gaps are not
handled (the bench's fleet has none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal.chain import OFFSET_MOD
from vehicle_middleware.telemetry_export import job, plots, report, transforms
from vehicle_middleware.telemetry_export.transforms import ANALYSED, DROP_KINDS

BOOT = ["vehicle_id", "boot_id"]
KEY = [*BOOT, "app", "key_id"]
_INTEGRITY = transforms.INTEGRITY
_STALE = ["what", "app", "key", "key_id", "from_ns", "to_ns", "interval_ns", "threshold_ns"]


def analyze(dataset: str, output: str, *, window_ns: int, stale_ns: int) -> dict[str, Any]:
    """The tables, summary and report of ``dataset`` into ``output``; the summary."""
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(f"{dataset}/records", columns=ANALYSED)
    # Retention's trims are not handled here (the bench's fleet has none): the
    # chain is "trimmed" only where ingest accepted a trimmed start.
    # vehicle_id is categorical (a partition column): group by what occurs only.
    kind = df["kind"]
    ev = df[kind.isin(["delivered", *DROP_KINDS])].astype({"queue": "int64", "seq": "int64"})
    ev = ev.assign(window_start_ns=ev.time_ns - ev.time_ns % window_ns)

    # Per boot: records, first and last time, clean stop; the chain from its runs.
    per_boot = df.groupby(BOOT, observed=True).agg(
        records=("kind", "size"), first_ns=("time_ns", "min"), last_ns=("time_ns", "max")
    )

    def per(series):  # type: ignore[no-untyped-def]
        return series.reindex(per_boot.index, fill_value=0)

    chain = _chain(pd.read_parquet(f"{dataset}/links"))
    per_boot["missing_records"] = per(chain.missing_records)
    per_boot["broken_links"] = per(chain.broken_links)
    per_boot["first_broken_offset"] = chain.first_broken_offset.reindex(per_boot.index)
    # A journal_dropped record with lost_boot_id counts for that boot.
    dropped = df[kind == "journal_dropped"]
    lost_boot = dropped.lost_boot_id.astype(object).where(
        dropped.lost_boot_id.notna(), dropped.boot_id.astype(object)
    )
    per_boot["reported_dropped"] = per(
        dropped.assign(boot_id=lost_boot).groupby(BOOT, observed=True)["count"].sum()
    )
    per_boot["unreported_lost"] = (per_boot.missing_records - per_boot.reported_dropped).clip(
        lower=0
    )
    per_boot["chain"] = "intact"
    at_start = per(chain.first_broken_pos.eq(0) & chain.late_start).astype(bool)
    per_boot.loc[per_boot.broken_links > 0, "chain"] = "broken"
    per_boot.loc[(per_boot.broken_links > 0) & at_start, "chain"] = "start missing"
    per_boot["trimmed_files"] = 0
    per_boot["trimmed_bytes"] = 0
    per_boot["collect_gaps"] = 0
    per_boot["not_collected"] = 0
    per_boot["delivered"] = per(df[kind == "delivered"].groupby(BOOT, observed=True).size())
    per_boot["dropped"] = per(df[kind.isin(DROP_KINDS)].groupby(BOOT, observed=True).size())
    per_boot["clean_stop"] = per(df[kind == "stop"].groupby(BOOT, observed=True).size()) > 0
    per_boot = per_boot.reset_index()
    boots = per_boot[[*BOOT, "first_ns", "last_ns", "records", "clean_stop"]].copy()
    boots = boots.sort_values([*BOOT, "first_ns"])
    boots["boot_number"] = (
        boots.groupby("vehicle_id", observed=True).first_ns.rank(method="first").astype(int)
    )
    boots["restart"] = boots.boot_number > 1
    boots = boots.sort_values(["vehicle_id", "boot_number"])
    boots["after_clean_stop"] = boots.groupby("vehicle_id", observed=True).clean_stop.shift()
    integrity = per_boot[[*BOOT, *_INTEGRITY]]

    # Seq gaps: each delivery whose seq jumps over the previous one's (seq 0 before all).
    d = ev[ev.kind == "delivered"].sort_values([*KEY, "seq", "time_ns"])
    prev = d.groupby(KEY, observed=True).seq.shift().fillna(0).astype("int64")
    jump = d.seq > prev + 1
    gaps = d[jump].assign(from_seq=prev[jump] + 1, to_seq=d.seq[jump] - 1)
    gaps["missing"] = gaps.to_seq - gaps.from_seq + 1
    gaps = gaps[[*KEY, "queue", "from_seq", "to_seq", "missing", "window_start_ns"]]

    # Reconciliation: every seq missing, listed, against the drop records.
    sizes = gaps.missing.to_numpy()
    missing = pd.DataFrame({c: np.repeat(gaps[c].to_numpy(), sizes) for c in KEY})
    missing["seq"] = np.concatenate(
        [np.arange(a, b + 1) for a, b in zip(gaps.from_seq, gaps.to_seq, strict=True)]
        or [np.array([], dtype="int64")]
    )
    drops = ev[ev.kind != "delivered"][[*KEY, "seq"]].drop_duplicates()
    last = d.groupby(KEY, observed=True).seq.max().rename("last").reset_index()
    drops = drops.merge(last, on=KEY, how="left")
    explained = missing.merge(drops[[*KEY, "seq"]], on=[*KEY, "seq"])
    recon = pd.DataFrame({"missing": missing.groupby(KEY, observed=True).size()})
    recon = recon.join(
        explained.groupby(KEY, observed=True).size().rename("explained"), how="outer"
    )
    after = drops[drops["last"].isna() | (drops.seq > drops["last"])]
    recon = recon.join(
        after.groupby(KEY, observed=True).size().rename("drops_after_last_delivery"), how="outer"
    )
    recon = recon.join(
        drops.groupby(KEY, observed=True).size().rename("_drops"), how="outer"
    ).fillna(0)
    recon = recon.astype("int64").reset_index()
    recon = recon[(recon.missing > 0) | (recon._drops > 0)].drop(columns="_drops")
    recon["unexplained"] = recon.missing - recon.explained

    # Staleness: consecutive writes of a key, and deliveries of a key to an app.
    names = df[kind == "publish"].groupby([*BOOT, "key_id"], observed=True).key.first()
    stale_parts = []
    for what, k, group in (("write", "publish", [*BOOT, "key_id"]), ("delivery", "delivered", KEY)):
        e = df[kind == k].sort_values([*group, "time_ns"])
        from_ns = e.groupby(group, observed=True).time_ns.shift(
            fill_value=-1
        )  # int64: ns need all 64 bits
        long = (from_ns >= 0) & ((e.time_ns - from_ns) > stale_ns)
        s = e[long].assign(what=what, from_ns=from_ns[long], to_ns=e.time_ns[long])
        stale_parts.append(s)
    stale = pd.concat(stale_parts)
    stale["app"] = stale.app.where(stale.what == "delivery", None)
    stale["key"] = stale.set_index([*BOOT, "key_id"]).index.map(names)
    stale["interval_ns"] = stale.to_ns - stale.from_ns
    stale["threshold_ns"] = stale_ns
    stale = stale[[*BOOT, *_STALE]]

    # Drop rates per app, queue and window.
    ev = ev.assign(is_drop=ev.kind != "delivered")
    rates = (
        ev.groupby([*BOOT, "app", "queue", "window_start_ns"], observed=True)
        .agg(events=("is_drop", "size"), dropped=("is_drop", "sum"))
        .reset_index()
    )
    rates["drop_rate"] = rates.dropped / rates.events
    over_time = (
        rates.groupby(["app", "queue", "window_start_ns"], observed=True)[["events", "dropped"]]
        .sum()
        .reset_index()
    )

    # Key names, as the job has them: from the records that carry them.
    named = df[df.key.notna() & df.key_id.notna()]
    key_names = named.groupby([*BOOT, "key_id"], observed=True).key.min()
    for t in (gaps, recon):
        t["key"] = t.set_index([*BOOT, "key_id"]).index.map(key_names)

    out = Path(output)
    tables = {
        "seq_gaps": gaps,
        "boot_integrity": integrity,
        "boots": boots,
        "reconciliation": recon,
        "stale": stale,
        "drop_rates": rates,
    }
    for name, table in tables.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        table.to_parquet(out / name / "part-0.parquet", index=False)

    ev = ev.assign(is_evicted=ev.kind == "evicted", is_lost=ev.kind == "lost")
    queues = ev.groupby(["vehicle_id", "app", "queue"], observed=True).agg(
        events=("is_drop", "size"),
        dropped=("is_drop", "sum"),
        evicted=("is_evicted", "sum"),
        lost=("is_lost", "sum"),
    )
    queues["delivered"] = queues.events - queues.dropped
    queue_rows = queues.reset_index().to_dict("records")
    gap_totals = recon.groupby(["vehicle_id", "app"], observed=True)[
        ["missing", "explained", "unexplained", "drops_after_last_delivery"]
    ].sum()
    gap_rows = gap_totals.reset_index().to_dict("records")
    apps = job.apps_summary(queue_rows, gap_rows)
    gap_keys = recon.groupby(["app", "key"], observed=True).agg(
        missing=("missing", "sum"),
        explained=("explained", "sum"),
        unexplained=("unexplained", "sum"),
        drops_after_last_delivery=("drops_after_last_delivery", "sum"),
        vehicles=("vehicle_id", "nunique"),
    )
    stale_keys = (
        stale.assign(app=stale.app.fillna(""))
        .groupby(["key", "what", "app", "threshold_ns"], observed=True)
        .agg(
            intervals=("interval_ns", "size"),
            vehicles=("vehicle_id", "nunique"),
            longest_ns=("interval_ns", "max"),
        )
        .reset_index()
    )
    stale_keys["app"] = stale_keys.app.replace("", None)
    stale_key_rows = stale_keys.to_dict("records")
    bad_files = list(Path(dataset, "_bad").glob("*.parquet"))
    bad = sum(len(pd.read_parquet(p, columns=["problem"])) for p in bad_files)
    summary: dict[str, Any] = {
        "records": len(df),
        "bad_lines": bad,
        "vehicles": int(per_boot.vehicle_id.nunique()),
        "boots": len(per_boot),
        "restarts": len(per_boot) - int(per_boot.vehicle_id.nunique()),
        "delivered": int((kind == "delivered").sum()),
        "dropped": int(kind.isin(DROP_KINDS).sum()),
        "seq_gaps": len(gaps),
        "missing_seqs": int(recon.missing.sum()),
        "unexplained_seqs": int(recon.unexplained.sum()),
        "stale_intervals": len(stale),
        "unclean_stops": int((~per_boot.clean_stop).sum()),
        "broken_chains": int((per_boot.broken_links > 0).sum()),
        "trimmed_boots": int((per_boot.chain == "trimmed").sum()),
        "missing_journal_records": int(per_boot.missing_records.sum()),
        "reported_journal_drops": int(per_boot.reported_dropped.sum()),
        "unreported_journal_losses": int(per_boot.unreported_lost.sum()),
        "collect_gaps": 0,
        "not_collected_records": 0,
        "collector_restarts": 0,
        "apps": apps,
        "stale_keys": job.stale_keys(stale_key_rows),
    }
    boot_rows = per_boot.merge(boots[[*BOOT, "boot_number", "after_clean_stop"]], on=BOOT)
    boot_rows = boot_rows.astype(object).where(boot_rows.notna(), None)
    report.write_report(
        out,
        summary,
        report.ReportTables(
            boots=boot_rows.to_dict("records"),
            vehicle_apps=job.vehicle_apps(queue_rows, gap_rows),
            gap_keys=gap_keys.reset_index().to_dict("records"),
            stale_keys=stale_key_rows,
        ),
        report.Settings(default_stale_ns=stale_ns, window_ns=window_ns),
        drops_png=plots.plot_drops(
            over_time.nsmallest(job.REPORT_ROWS, "window_start_ns").to_dict("records"),
            out,
            window_ns=window_ns,
        ),
        stale_png=plots.plot_staleness(stale.head(job.REPORT_ROWS).to_dict("records"), out),
    )
    return summary


def _chain(runs: Any) -> Any:
    """Per boot, from the runs of the hash chain ingest stored: the runs in
    position order, each run's first link against the run before it (or the
    boot's start), the offsets missing between them."""
    runs = runs.copy()
    starts = runs.groupby(BOOT, observed=True).start_offset.min()
    earliest = (
        runs.sort_values(["first_time_ns", "first_time_offset"])
        .groupby(BOOT, observed=True)
        .first_time_offset.first()
    )
    first = starts.where(starts.notna(), earliest).rename("_first").astype("int64")
    runs = runs.join(first, on=BOOT)
    runs["pos"] = (runs.first_offset - runs._first) % OFFSET_MOD
    runs["last_pos"] = (runs.last_offset - runs._first) % OFFSET_MOD
    runs = runs.sort_values([*BOOT, "pos", "last_pos", "last1", "last2"])
    by_boot = runs.groupby(BOOT, observed=True)
    prev1, prev2, prev_pos = by_boot.last1.shift(), by_boot.last2.shift(), by_boot.last_pos.shift()
    has_prev = prev_pos.notna()
    late = ~has_prev & (runs.pos == 0) & ~runs.first_starts_chain.astype(bool)
    linked = (runs.first_prev1 == prev1) & (runs.first_prev2 == prev2)
    head_broken = ~runs.first_hash_ok.astype(bool) | (has_prev & ~linked) | late
    runs["missing"] = (runs.pos - prev_pos - 1).clip(lower=0).where(has_prev, 0)
    runs["head_broken"] = head_broken
    runs["late"] = late
    inner_pos = (runs.first_broken_offset - runs._first) % OFFSET_MOD
    # The first broken record of each run, then of each boot, by position.
    runs["fb_pos"] = runs.pos.where(head_broken, inner_pos)
    runs["fb_offset"] = runs.first_offset.where(head_broken, runs.first_broken_offset)
    broken = runs[runs.fb_offset.notna()].sort_values([*BOOT, "fb_pos"])
    firsts = broken.groupby(BOOT, observed=True).first()
    out = runs.groupby(BOOT, observed=True).agg(
        missing_records=("missing", "sum"),
        inner=("broken", "sum"),
        heads=("head_broken", "sum"),
        late_start=("late", "any"),
    )
    out["broken_links"] = (out.inner + out.heads).astype("int64")
    out["missing_records"] = out.missing_records.astype("int64")
    out["first_broken_offset"] = firsts.fb_offset.astype("int64").reindex(out.index)
    out["first_broken_pos"] = firsts.fb_pos.reindex(out.index)
    return out
