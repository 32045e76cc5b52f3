"""``python -m vehicle_middleware.tools top``: a live view of a running middleware, like ``top``.

Every ``--interval`` seconds it calls ``Admin/GetStats`` and redraws: the
process (CPU, memory, apps, keys, the event budget, the journal), the apps
with their queues and drops (the ones dropping first), the busiest keys, and
the figures registered collectors add. Rates (events delivered and dropped
per second, bytes per second, CPU) come from two successive readings, so the
first frame shows ``-`` for them. Plain ANSI (clear and redraw) on a
terminal; ``--once`` prints one frame without escape codes and exits (for
scripts and tests), as does a non-terminal output, frame after frame.

:func:`render` is pure (a reading, the one before, a size -> lines); the loop
is :func:`run`.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Final, TextIO

import grpc
from vehicle_middleware.contract.channel import Tls, metadata, open_channel
from vehicle_middleware.proto.vehicle.admin.v1 import admin_pb2, admin_pb2_grpc
from vehicle_middleware.sdk.cli import unreachable

__all__ = ["TopOptions", "render", "run"]

_CLEAR: Final = "\x1b[H\x1b[2J"
_HIDE_CURSOR: Final = "\x1b[?25l"
_SHOW_CURSOR: Final = "\x1b[?25h"
_FINAL: Final = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Refusals that retrying will not change: said once, exit 1."""


@dataclass(frozen=True, slots=True)
class TopOptions:
    target: str
    app_id: str = "top"
    token: str | None = None
    tls: Tls | None = None
    interval: float = 2.0
    once: bool = False
    top_keys: int = 20
    keys: tuple[str, ...] = ()
    """Keys to show whatever their rate."""
    timeout: float = 5.0


def _count(n: float) -> str:
    return f"{int(n):,}"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _age(seconds: float) -> str:
    if seconds <= 0:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds:.0f}s"
    return f"{seconds / 3600:.1f}h"


def _uptime(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    clock = f"{hours}:{minutes:02d}:{s:02d}"
    return f"{days}d {clock}" if days else clock


def _per_s(now: float, before: float | None, seconds: float) -> float | None:
    if before is None or seconds <= 0:
        return None
    return max(0.0, now - before) / seconds


def _rate(now: float, before: float | None, seconds: float) -> str:
    per_s = _per_s(now, before, seconds)
    if per_s is None:
        return "-"
    return f"{per_s:,.0f}" if per_s >= 10 else f"{per_s:.1f}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "~"


def _drops(q: admin_pb2.QueueStats) -> int:
    return q.evicted + q.lost + q.discarded


def render(
    stats: admin_pb2.Stats,
    previous: admin_pb2.Stats | None = None,
    *,
    target: str = "",
    width: int = 120,
    height: int | None = None,
) -> list[str]:
    """One frame: lines of at most ``width`` characters (``height`` lines at most).

    ``previous`` is the reading before (same boot), for rates; None: no rates.
    """
    if previous is not None and previous.boot_id != stats.boot_id:
        previous = None  # the middleware restarted: its counters started again
    dt = (stats.time_ns - previous.time_ns) / 1e9 if previous is not None else 0.0
    p = stats.process
    cpu = (
        f"{100 * (p.cpu_seconds - previous.process.cpu_seconds) / dt:.1f}%"
        if previous is not None and dt > 0
        else "-"
    )
    when = time.strftime("%H:%M:%S", time.localtime(stats.time_ns / 1e9))
    lines = [
        f"top  {target}  boot {stats.boot_id[:8]}  up {_uptime(p.uptime_s)}  {when}",
        f"cpu {cpu}  rss {_bytes(p.rss_bytes)}  apps {p.apps}  publish streams "
        f"{p.publish_streams}  keys {_count(p.keys)} (watched {_count(p.watched_keys)})  "
        f"subscriptions {_count(p.subscriptions)}",
        f"event budget {_count(p.event_budget_used)}/{_count(p.event_budget_total)} used  "
        f"queued {_count(p.queued_events)}  "
        + (
            f"journal {_count(p.journal_records_written)} written, "
            f"{_count(p.journal_records_dropped)} dropped"
            if p.journal
            else "no journal"
        ),
        "",
    ]
    before_q: dict[tuple[str, int], admin_pb2.QueueStats] = {}
    before_sent: dict[str, int] = {}
    if previous is not None:
        for a in previous.apps:
            before_sent[a.app] = a.bytes_sent
            for q in a.queues:
                before_q[(a.app, q.queue)] = q
    header = (
        f"{'APP':<20} {'Q':>1} {'DEPTH':>11} {'PEAK':>6} {'OLDEST':>7} {'DELIV/s':>8} "
        f"{'DROP/s':>7} {'DELIVERED':>11} {'EVICTED':>9} {'LOST':>7} {'DISCARD':>8} "
        f"{'SENT/s':>10} {'SUBS':>6}"
    )
    lines.append(header)

    def trouble(a: admin_pb2.AppStats) -> tuple[bool, int, str]:
        return (not a.dropping, -sum(_drops(q) for q in a.queues), a.app)

    for a in sorted(stats.apps, key=trouble):
        first = True
        used = [q for q in a.queues if q.depth or q.delivered or _drops(q)] or list(a.queues[:1])
        for q in used:
            was = before_q.get((a.app, q.queue))
            name = (("! " if a.dropping else "") + a.app) if first else ""
            sent = ""
            if first:
                per_s = _per_s(a.bytes_sent, before_sent.get(a.app), dt)
                sent = "-" if per_s is None else _bytes(per_s) + "/s"
            lines.append(
                f"{_fit(name, 20):<20} {q.queue:>1} {f'{q.depth}/{q.max_length}':>11} "
                f"{q.high_water:>6} {_age(q.oldest_age_s):>7} "
                f"{_rate(q.delivered, was.delivered if was else None, dt):>8} "
                f"{_rate(_drops(q), _drops(was) if was else None, dt):>7} "
                f"{_count(q.delivered):>11} {_count(q.evicted):>9} {_count(q.lost):>7} "
                f"{_count(q.discarded):>8} {sent:>10} "
                f"{a.subscriptions if first else '':>6}"
            )
            first = False
    if not stats.apps:
        lines.append("(no app has an event stream open)")
    lines += ["", f"{'KEY':<60} {'WRITES/s':>10} {'WRITES':>12} {'SUBS':>6}"]
    for k in stats.keys:
        lines.append(
            f"{_fit(k.name, 60):<60} {k.writes_per_s:>10.1f} {_count(k.writes):>12} "
            f"{k.subscribers:>6}"
        )
    if not stats.keys:
        lines.append("(no key written lately)")
    lines.append(f"(writes/s over the last {stats.rate_window_s:.1f} s)")
    if stats.extra:
        lines.append("")
        for f in stats.extra:
            labels = ",".join(f"{k}={v!r}" for k, v in sorted(f.labels.items()))
            lines.append(f"{f.name}{{{labels}}} {f.value:g}")
    lines = [_fit(line, width) for line in lines]
    if height is not None and len(lines) > height:
        lines = [*lines[: max(0, height - 1)], _fit("... (a taller window shows more)", width)]
    return lines


async def run(options: TopOptions, out: TextIO = sys.stdout) -> int:
    """Show frames until Ctrl-C (or one with ``once``). Returns the exit status:
    0, or 1 when the middleware refuses (the reason printed to stderr) or, with
    ``once``, cannot be reached."""
    tty = out.isatty() and not options.once
    channel = open_channel(options.target, tls=options.tls)
    stub = admin_pb2_grpc.AdminStub(channel)
    md = metadata(options.app_id, options.token)
    request = admin_pb2.GetStatsRequest(top_keys=options.top_keys, keys=list(options.keys))
    previous: admin_pb2.Stats | None = None
    if tty:
        out.write(_HIDE_CURSOR)
    try:
        while True:
            try:
                stats = await stub.GetStats(
                    request, metadata=md, timeout=options.timeout, wait_for_ready=not options.once
                )
            except grpc.aio.AioRpcError as e:
                details = e.details() or ""
                if e.code() is grpc.StatusCode.UNAVAILABLE:
                    details = unreachable(details, tls=options.tls is not None)
                if e.code() in _FINAL or options.once:
                    print(
                        f"top: {options.target}: {e.code().name}: {details}",
                        file=sys.stderr,
                    )
                    return 1
                frame = [f"top  {options.target}: {e.code().name}: {details} (retrying)"]
            else:
                size = shutil.get_terminal_size()
                frame = render(
                    stats,
                    previous,
                    target=options.target,
                    width=size.columns if tty else 200,
                    height=size.lines if tty else None,
                )
                previous = stats
            out.write((_CLEAR if tty else "") + "\n".join(frame) + "\n")
            out.flush()
            if options.once:
                return 0
            await asyncio.sleep(options.interval)
    finally:
        if tty:
            out.write(_SHOW_CURSOR)
            out.flush()
        await channel.close()
