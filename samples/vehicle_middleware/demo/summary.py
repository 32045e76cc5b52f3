"""The demo's verdict: what the apps saw against what the journal's analysis found. Pure.

Inputs are the status files of the provider and the apps (their own counts,
written when they stopped) and the ``summary.json`` of the Spark analysis of
the middleware's journal. The demo is OK when, for every app, the seq gaps
it saw are exactly the gaps the analysis found in the journal, every one of
them explained by a drop record, and the journal itself is intact. Beside
that it shows what the apps were told live about the signals' health (stale
keys, a provider gone), next to what the analysis found stale afterwards; and
whether the export (collector -> landing area -> ingest -> dataset) holds
every record the journal wrote, none twice (:mod:`vehicle_middleware.demo.export`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vehicle_middleware.demo.export import ExportCheck

__all__ = ["AppVerdict", "Verdict", "judge", "render"]


@dataclass(frozen=True, slots=True)
class AppVerdict:
    app: str
    received: int
    """Data events the app read (its own count)."""
    missed: int
    """Events the app saw missing (seq gaps, its own count)."""
    delivered: int
    """Deliveries to the app in the journal."""
    dropped: dict[str, int]
    """Drops of the app's events in the journal, per queue."""
    journal_gaps: int
    """Missing seqs the analysis found in the app's deliveries."""
    unexplained: int
    """...of which no drop record accounts for."""
    unseen: int
    """Drops after the app's last delivery of the key: no later event showed them to it."""
    evicted: int = 0
    """...of the drops: a newer event of the same key replaced it in a full queue."""
    lost: int = 0
    """...of the drops: it met a full queue holding no event of its key."""
    queues: dict[str, list[int]] = field(default_factory=dict)
    """The app's queues' ``[min, max]`` lengths in events, per queue (empty: unknown)."""
    batches_read_per_s: float | None = None
    """How fast the app read: batches delivered per second (None: unknown)."""

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def matches(self) -> bool:
        """The app and the journal agree: same deliveries, same gaps, all explained."""
        return (
            self.received == self.delivered
            and self.missed == self.journal_gaps
            and self.unexplained == 0
            and self.dropped_total == self.journal_gaps + self.unseen
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    published: int
    keys: int
    apps: dict[str, AppVerdict]
    analysis: Mapping[str, Any]
    problems: list[str] = field(default_factory=list)
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per app, the health events it was told while it ran (from its status file)."""
    export: ExportCheck | None = None
    """The journal against the landing area and the dataset (None: not checked)."""
    published_per_s: float | None = None
    """Updates the simulated car published per second, following the apps' demand."""
    own_rate: float | None = None
    """Updates per second it would publish without the demand: every signal at its rate."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "published": self.published,
            "published_per_s": self.published_per_s,
            "published_per_s_without_demand": self.own_rate,
            "keys": self.keys,
            "apps": {
                name: {
                    "received": a.received,
                    "missed": a.missed,
                    "delivered": a.delivered,
                    "dropped": a.dropped,
                    "evicted": a.evicted,
                    "lost": a.lost,
                    "queue_min_max_events": a.queues,
                    "batches_read_per_s": a.batches_read_per_s,
                    "journal_gaps": a.journal_gaps,
                    "unexplained": a.unexplained,
                    "unseen": a.unseen,
                    "matches": a.matches,
                }
                for name, a in self.apps.items()
            },
            "analysis": dict(self.analysis),
            "live": self.live,
            "export": None if self.export is None else self.export.as_dict(),
        }


def _live(status: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "went_stale": list(status.get("went_stale", [])),
        "stale_events": int(status.get("stale_events", 0)),
        "fresh_events": int(status.get("fresh_events", 0)),
        "providers_gone": dict(status.get("providers_gone", {})),
    }


def _names(names: list[str]) -> str:
    """``A.B.x, A.B.y`` as ``A.B.*`` when they share a branch; else the first few."""
    if len(names) > 1:
        common = names[0].split(".")
        for n in names[1:]:
            parts = n.split(".")
            while common and parts[: len(common)] != common:
                common.pop()
        if common:
            return ".".join(common) + ".*"
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def _render_live(verdict: Verdict) -> list[str]:
    lines = []
    for i, (app, live) in enumerate(verdict.live.items()):
        went = live["went_stale"]
        said = (
            f"told {len(went)} key(s) went stale ({_names(went)}; {live['stale_events']} "
            f"KeyStale, {live['fresh_events']} KeyFresh)"
            if went
            else "told of no stale key"
        )
        gone = live["providers_gone"]
        if gone:
            said += "; provider gone: " + ", ".join(
                f"{p} ({n} keys)" for p, n in sorted(gone.items())
            )
        lines.append(f"{'live' if i == 0 else '':<11} {app + ':':<7} {said}")
    found = set(verdict.analysis.get("stale_keys_longest_ns", {}))
    told = {k for live in verdict.live.values() for k in live["went_stale"]}
    if found - told:
        lines.append(
            f"{'':<11} (the analysis found {len(found - told)} stale key(s) no app was told of "
            f"live: {_names(sorted(found - told))})"
        )
    return lines


_REQUIRED: tuple[str, ...] = (
    "records",
    "boots",
    "restarts",
    "broken_chains",
    "missing_journal_records",
    "bad_lines",
    "unexplained_seqs",
    "apps",
)


def judge(
    provider: Mapping[str, Any],
    apps: Mapping[str, Mapping[str, Any]],
    analysis: Mapping[str, Any] | None,
    export: ExportCheck | None = None,
) -> Verdict:
    """Compare each app's own counts with the analysis of the journal
    (``None``: the analysis was skipped; only the run itself is judged), and
    take the export check's problems (``export``, if given).

    Raises:
        KeyError: the analysis summary lacks a field the verdict needs.
    """
    problems: list[str] = []
    if int(provider.get("published", 0)) == 0:
        problems.append("the provider published nothing")
    for name, status in apps.items():
        if status.get("state") != "stopped":
            problems.append(f"{name} did not stop cleanly (state {status.get('state')!r})")
        if not status.get("received"):
            problems.append(f"{name} received nothing")
    live = {name: _live(status) for name, status in apps.items()}
    if export is not None:
        problems += export.problems()
    if analysis is None:
        return Verdict(
            published=int(provider.get("published", 0)),
            keys=int(provider.get("keys", 0)),
            published_per_s=_rate(provider, "published_per_s"),
            own_rate=_rate(provider, "own_rate"),
            apps={},
            analysis={},
            problems=problems,
            live=live,
            export=export,
        )
    missing = [k for k in _REQUIRED if k not in analysis]
    if missing:
        raise KeyError(f"the analysis summary lacks {', '.join(missing)}")
    per_app: Mapping[str, Mapping[str, Any]] = analysis["apps"]
    verdicts: dict[str, AppVerdict] = {}
    for name, status in apps.items():
        found = per_app.get(name, {})
        v = AppVerdict(
            app=name,
            received=int(status.get("received", 0)),
            missed=int(status.get("missed", 0)),
            delivered=int(found.get("delivered", 0)),
            dropped={str(q): int(n) for q, n in found.get("dropped_per_queue", {}).items()},
            journal_gaps=int(found.get("missing_seqs", 0)),
            unexplained=int(found.get("unexplained_seqs", 0)),
            unseen=int(found.get("drops_after_last_delivery", 0)),
            evicted=int(found.get("evicted", 0)),
            lost=int(found.get("lost", 0)),
            queues={str(q): list(n) for q, n in found.get("queue_min_max_events", {}).items()},
            batches_read_per_s=found.get("batches_read_per_s"),
        )
        verdicts[name] = v
        if v.received != v.delivered:
            problems.append(
                f"{name} read {v.received} events but the journal shows {v.delivered} deliveries"
            )
        if v.missed != v.journal_gaps:
            problems.append(
                f"{name} saw {v.missed} events missing but the journal shows {v.journal_gaps}"
            )
        if v.unexplained:
            problems.append(f"{v.unexplained} of {name}'s missing events have no drop record")
        if v.evicted + v.lost != v.dropped_total:
            problems.append(
                f"{name}: {v.dropped_total} drop records, but {v.evicted} evicted + {v.lost} lost"
            )
        if v.dropped_total != v.journal_gaps + v.unseen:
            problems.append(
                f"{name}: {v.dropped_total} drop records, but {v.journal_gaps} gaps "
                f"+ {v.unseen} after the last delivery"
            )
    if analysis["broken_chains"]:
        problems.append("the journal's hash chain is broken")
    if analysis["missing_journal_records"]:
        problems.append(f"{analysis['missing_journal_records']} journal records are missing")
    if analysis["bad_lines"]:
        problems.append(f"{analysis['bad_lines']} journal lines could not be read")
    if analysis["restarts"]:
        problems.append(f"the middleware restarted {analysis['restarts']} time(s)")
    if analysis["unexplained_seqs"]:
        problems.append(f"{analysis['unexplained_seqs']} missing events are unexplained overall")
    return Verdict(
        published=int(provider.get("published", 0)),
        keys=int(provider.get("keys", 0)),
        published_per_s=_rate(provider, "published_per_s"),
        own_rate=_rate(provider, "own_rate"),
        apps=verdicts,
        analysis=analysis,
        problems=problems,
        live=live,
        export=export,
    )


def _rate(provider: Mapping[str, Any], name: str) -> float | None:
    """A rate the simulated car's status file holds (``published_per_s``: what it
    published, following the demand; ``own_rate``: what it would without it)."""
    value = (provider.get("extra") or {}).get(name)
    return float(value) if value is not None else None


def _render_provider(verdict: Verdict) -> str:
    line = f"provider    {verdict.keys} keys, {verdict.published:,} updates published"
    if verdict.published_per_s is not None and verdict.own_rate is not None:
        line += (
            f": {verdict.published_per_s:,.0f}/s following what the apps watch; without it, "
            f"{verdict.own_rate:,.0f}/s (every signal at its own rate)"
        )
    return line


def _render_export(check: ExportCheck) -> list[str]:
    """``export: N of N journal records in the dataset, none duplicated`` and how they got there."""
    last = check.last
    where = "in the dataset" if check.dataset is not None else "landed (not ingested)"
    twice = "none duplicated" if not last.duplicated else f"{last.duplicated:,} DUPLICATED"
    changed = "none altered" if not last.altered else f"{last.altered:,} ALTERED"
    lines = [
        f"{'export':<11} {last.held:,} of {check.journal:,} journal records {where}, "
        f"{twice}, {changed}"
        + (f", {last.foreign:,} never written by the journal" if last.foreign else "")
    ]
    c = check.collected
    if c is not None:
        lines.append(f"{'':<11} collector: {c.landed:,} records landed in {c.files} files")
    return lines


def _why(v: AppVerdict) -> str:
    """``it reads 1 batch/s from queues of at most 20 events (q0 10..20)``."""
    if v.batches_read_per_s is None:
        pace = "its reading pace is unknown"
    else:
        rate = f"{v.batches_read_per_s:.2g}"
        pace = f"it reads {rate} {'batch' if rate == '1' else 'batches'}/s"
    if not v.queues:
        return f"{pace}; its queue lengths are unknown"
    used = {q: n for q, n in v.queues.items() if v.dropped.get(q)} or v.queues
    shown = ", ".join(f"q{q} {lo}..{hi}" for q, (lo, hi) in sorted(used.items()))
    return f"{pace} from queues of {shown} events"


def render(verdict: Verdict, *, report: str) -> str:
    """The summary a person reads at the end of ``make demo``."""
    a = verdict.analysis
    lines = [_render_provider(verdict), ""]
    if not a:
        lines += _render_live(verdict)
        if verdict.export is not None:
            lines += _render_export(verdict.export)
        lines.append("analysis    skipped: nothing to compare the apps' counts with")
        lines.append("demo OK (run only)" if verdict.ok else "demo FAILED:")
        lines += [f"  - {p}" for p in verdict.problems]
        return "\n".join(lines)
    lines += [
        "            what the app counted    what the journal says",
        f"{'app':<10} {'read':>8} {'gaps seen':>10}  {'delivered':>10} {'evicted':>8} "
        f"{'lost':>8} {'in gaps':>8} {'unseen':>7}  agree",
    ]
    for v in verdict.apps.values():
        lines.append(
            f"{v.app:<10} {v.received:>8,} {v.missed:>10,}  {v.delivered:>10,} {v.evicted:>8,} "
            f"{v.lost:>8,} {v.journal_gaps:>8,} {v.unseen:>7,}  {'yes' if v.matches else 'NO'}"
        )
    lines += [
        "(evicted: a newer value of the same key replaced it in the app's full queue; lost: it",
        " arrived at a full queue holding no value of its key; unseen: dropped after the app's",
        " last event of the key, so no seq gap shows them)",
    ]
    for v in verdict.apps.values():
        if v.dropped_total:
            lines.append(f"{'':<10} {v.app}: {_why(v)}")
    lines += [
        "",
        f"journal     {a.get('records', 0):,} records, {a.get('boots', 0)} boot(s), "
        f"{a.get('restarts', 0)} restart(s); hash chain "
        f"{'intact' if not a.get('broken_chains') else 'BROKEN'}; "
        f"{a.get('missing_journal_records', 0)} records missing by offset, "
        f"{a.get('reported_journal_drops', 0)} reported lost by the journal",
    ]
    stale = a.get("stale_keys_longest_ns", {})
    if stale:
        shown = ", ".join(
            f"{k} {ns / 1e9:.1f} s" for k, ns in sorted(stale.items(), key=lambda kv: -kv[1])[:4]
        )
        more = f" and {len(stale) - 4} more" if len(stale) > 4 else ""
        lines.append(f"stale       {len(stale)} key(s) went quiet: {shown}{more}")
    else:
        lines.append("stale       no key went quiet beyond its threshold")
    lines += _render_live(verdict)
    if verdict.export is not None:
        lines += _render_export(verdict.export)
    lines.append(f"report      {report}")
    lines.append("")
    if verdict.ok:
        lossy = {n: v for n, v in verdict.apps.items() if v.dropped_total}
        clean = [n for n, v in verdict.apps.items() if not v.dropped_total]
        said = (
            ", ".join(
                f"{n} lost {v.dropped_total:,} events ({v.evicted:,} evicted by a newer value "
                f"of their key, {v.lost:,} at a full queue; {v.missed:,} seen as seq gaps): "
                f"{_why(v)}"
                for n, v in lossy.items()
            )
            or "no app lost events"
        )
        exported = ""
        if verdict.export is not None:
            place = "dataset" if verdict.export.dataset is not None else "landing area"
            exported = f"; the {place} holds every journal record, once"
        lines.append(
            f"demo OK: {said}"
            + (f", {' and '.join(clean)} none" if clean and lossy else "")
            + f"; the journal explains every gap the apps saw{exported}."
        )
    else:
        lines.append("demo FAILED:")
        lines += [f"  - {p}" for p in verdict.problems]
    return "\n".join(lines)
