"""``python -m vehicle_middleware.apps dashboard|logger|slow``: sample in-car apps.

    python -m vehicle_middleware.apps dashboard --prefix Vehicle.Cabin.
    python -m vehicle_middleware.apps logger --out drive.jsonl
    python -m vehicle_middleware.apps slow

Each subscribes to the keys under ``--prefix`` (default ``Vehicle.``, also
keys added later) and any ``--key``; with ``--token`` its app id is the
token's subject unless ``--app-id`` says otherwise. A refusal by the
middleware (a bad token, a missing scope) is one line and exit status 1.
SIGINT or SIGTERM stop it: it reads what is still queued for it (for 2 s at
most), writes its ``--status`` file and exits 0. A middleware restart is
survived: the app reconnects and subscribes again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from vehicle_middleware.apps.dashboard import DashboardView
from vehicle_middleware.apps.harness import AppOptions, AppStats, run_app
from vehicle_middleware.apps.logger import EventLogger
from vehicle_middleware.sdk import ClientEvent
from vehicle_middleware.sdk.cli import (
    REFUSED_EXIT,
    TlsOptionsError,
    TokenFormatError,
    add_tls_arguments,
    app_id_for,
    refusal,
    tls_from_args,
)
from vehicle_middleware.sdk.status_file import status_path

__all__ = ["main"]

log = logging.getLogger("vehicle_middleware.apps")


def _queue_length(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(lo), int(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use MIN:MAX, e.g. 10:50") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.apps", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, app_id: str, *, on_update: bool = True) -> None:
        p.add_argument("--target", default="127.0.0.1:50051", help="middleware address")
        p.add_argument(
            "--app-id",
            default=None,
            help=f"app identity (default: the --token's subject, else {app_id})",
        )
        p.set_defaults(default_app_id=app_id)
        p.add_argument("--token", default=None, help="a JWT, for a middleware in token mode")
        p.add_argument(
            "--prefix",
            action="append",
            default=None,
            help="subscribe to keys starting with this (repeatable; default 'Vehicle.')",
        )
        p.add_argument("--key", action="append", default=[], help="subscribe to this key")
        p.add_argument("--queue", type=int, default=0, choices=(0, 1, 2))
        p.add_argument("--queue-length", type=_queue_length, default=None, metavar="MIN:MAX")
        p.add_argument(
            "--on-change",
            dest="on_update",
            action="store_false",
            default=on_update,
            help="events only when a value changes (default: on every write)",
        )
        p.add_argument("--duration", type=float, default=None, help="stop after this many s")
        p.add_argument(
            "--status", type=status_path, default=None, help="write counters here (JSON)"
        )
        p.add_argument("-v", "--verbose", action="store_true")
        add_tls_arguments(p)

    dash = sub.add_parser("dashboard", help="a live terminal view of the keys")
    common(dash, "dashboard")
    dash.add_argument("--refresh", type=float, default=0.5, help="seconds between redraws")
    logger = sub.add_parser("logger", help="write every event as a JSON line")
    common(logger, "logger")
    logger.set_defaults(queue_length=(10, 200))
    logger.add_argument("--out", default="events.jsonl", help="file ('-' for stdout)")
    slow = sub.add_parser("slow", help="read one batch per second: the drop rule at work")
    common(slow, "slow")
    slow.add_argument("--period", type=float, default=1.0, help="seconds between batches")
    slow.set_defaults(queue_length=(10, 20))
    return parser


def _options(args: argparse.Namespace, app_id: str) -> AppOptions:
    return AppOptions(
        target=args.target,
        app_id=app_id,
        prefixes=tuple(args.prefix if args.prefix is not None else ["Vehicle."]),
        keys=tuple(args.key),
        queue=args.queue,
        queue_length=args.queue_length,
        on_update=args.on_update,
        token=args.token,
        tls=tls_from_args(args),
        status=args.status,
        duration=args.duration,
    )


async def _dashboard(options: AppOptions, refresh: float) -> AppStats:
    view = DashboardView(f"dashboard @ {options.target}")
    tty = sys.stdout.isatty()

    async def consume(batch: Sequence[ClientEvent]) -> None:
        view.update(batch)

    async def redraw() -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(refresh)
            view.tick(loop.time())
            size = shutil.get_terminal_size()
            if tty:
                sys.stdout.write("\x1b[H\x1b[J" + view.render(size.columns, size.lines))
            else:  # piped: one summary line per redraw, with the health when not all is well
                health = view.health()
                head = view.render(size.columns, 1).split("\n")[0]
                sys.stdout.write(head + (f" | {health}" if health else "") + "\n")
            sys.stdout.flush()

    painter = asyncio.create_task(redraw())
    try:
        # Current values when subscribing: a key written unchanged since would
        # otherwise show no value until it changes.
        return await run_app(
            dataclasses.replace(options, want_current=True),
            consume,
            ready=lambda client: view.connected(client.boot_id or ""),
            on_current=view.seed,
        )
    finally:
        painter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await painter
        if tty:
            sys.stdout.write("\n")


async def _logger(options: AppOptions, out: str) -> AppStats:
    stream: IO[str]
    with contextlib.ExitStack() as stack:
        if out == "-":
            stream = sys.stdout
        else:
            stream = stack.enter_context(Path(out).open("w", encoding="utf-8"))
        write = EventLogger(stream)
        options = dataclasses.replace(options, want_current=True)
        stats = await run_app(options, write, on_current=write.seed)
        log.info("%d lines written to %s", write.lines, out)
        return stats


async def _noop(batch: Sequence[ClientEvent]) -> None:
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    me = f"python -m vehicle_middleware.apps {args.command}"
    try:
        app_id = app_id_for(args.app_id, args.token, args.default_app_id, certificate=args.tls_cert)
        options = _options(args, app_id)
    except TokenFormatError as e:
        print(f"{me}: --token: {e}", file=sys.stderr)
        return 2
    except TlsOptionsError as e:
        print(f"{me}: {e}", file=sys.stderr)
        return 2
    if args.command == "dashboard" and sys.stdout.isatty():
        logging.getLogger().setLevel(logging.WARNING)  # INFO lines would scribble on the view
    try:
        if args.command == "dashboard":
            stats = asyncio.run(_dashboard(options, args.refresh))
        elif args.command == "logger":
            stats = asyncio.run(_logger(options, args.out))
        else:
            # A slow reader whose receive window stays at 64 KiB (no BDP growth):
            # back-pressure reaches the middleware's queues within seconds, not
            # after gRPC has buffered megabytes for it.
            options = dataclasses.replace(options, channel_options=(("grpc.http2.bdp_probe", 0),))
            stats = asyncio.run(run_app(options, _noop, pace=args.period))
    except Exception as e:
        why = refusal(e)
        if why is None:
            raise
        print(f"{me}: app {app_id!r}: {why}", file=sys.stderr)
        return REFUSED_EXIT
    log.info(
        "%s: %d events received, %d missed (seq gaps)", options.app_id, stats.received, stats.missed
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
