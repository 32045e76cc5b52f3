"""``python -m vehicle_middleware.telemetry_export collect``: the journals of a fleet, as they are
written,
into a landing area that Spark ingests.

One collector follows one or many middlewares (one per vehicle) as a reliable
consumer of their ``JournalService`` (``Follow``, or ``Poll`` with ``--poll``
or ``--once``) and writes what it receives into the landing area, a local
path or a Hadoop-filesystem URI, by the landing contract
(:mod:`vehicle_middleware.contract.journal.landing`):

- ``LANDING/vehicle=V/boot=B/part-<first offset:010d>-<n>.jsonl``: journal
  lines exactly as the middleware wrote them; each file appears atomically
  (written under ``_tmp/``, then renamed);
- ``LANDING/vehicle=V/collector-<name>-<unix ns>.jsonl``: ``collect_gap``
  (offsets the middleware wrote that could not be collected) and
  ``collect_restart`` (the collector followed a restarted middleware into its
  new boot) records;
- ``LANDING/_positions/vehicle=V.json``: where the collector stands per
  vehicle (boot, offset, the last record's hash, the files written, who holds
  it). Another collector can take a vehicle over from there.

This module is the command line: its arguments, the settings built from them,
the signals that stop the collector cleanly, and the summary it prints. The
parts: :mod:`vehicle_middleware.telemetry_export.collector` (the sources followed, reconnects,
acks),
:mod:`vehicle_middleware.telemetry_export.vehicle_state` (per vehicle: verification, buffering, a
flush), :mod:`vehicle_middleware.telemetry_export.positions` (position files, and how a flush
survives a
kill: no duplicate, no gap), :mod:`vehicle_middleware.telemetry_export.landing_area` (the storage).

Not a Spark job: plain Python, a process per collector; ``ingest --stream``
does the heavy work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import signal
import socket
import sys
from typing import Any

from vehicle_middleware.sdk.cli import (
    TlsOptionsError,
    TokenFormatError,
    add_tls_arguments,
    app_id_for,
    tls_from_args,
)
from vehicle_middleware.telemetry_export.collector import Collector, Options
from vehicle_middleware.telemetry_export.errors import CollectError
from vehicle_middleware.telemetry_export.landing_area import Landing

__all__ = ["add_collect_parser", "collect_main"]


def add_collect_parser(sub: Any) -> None:
    """The ``collect`` subcommand's arguments (``sub``: the subparsers of the CLI)."""
    p = sub.add_parser(
        "collect",
        help="follow middlewares' journals into a landing area (docs/fleet.md)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="ADDR",
        help="a middleware (HOST:PORT or unix:PATH); repeat for each vehicle",
    )
    p.add_argument("--to", required=True, metavar="LANDING", help="landing directory or URI")
    p.add_argument(
        "--component", default="collector", help="consumer component (default collector)"
    )
    p.add_argument("--name", default=None, help="collector name (default the component@host)")
    p.add_argument(
        "--app-id", default=None, help="the app id it calls as (default: the token's subject)"
    )
    p.add_argument("--token", default="", help="a JWT with the journal:read scope (token mode)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="collect what is there, then exit 0")
    mode.add_argument("--follow", action="store_true", help="keep following (the default)")
    p.add_argument("--poll", action="store_true", help="use Poll instead of Follow")
    p.add_argument("--max", type=int, default=1000, help="records per answer (1..1000)")
    p.add_argument("--window", type=int, default=64, help="Follow groups unacknowledged")
    p.add_argument("--flush-s", type=float, default=1.0, help="land at least this often")
    p.add_argument("--flush-records", type=int, default=100_000, help="or this many records")
    p.add_argument("--progress-s", type=float, default=5.0, help="a progress line this often")
    p.add_argument("--lease-s", type=float, default=30.0, help="another collector's hold")
    p.add_argument("--take-over", action="store_true", help="take vehicles another holds")
    p.add_argument("--log-level", default="WARNING")
    add_tls_arguments(p)


def _name(component: str, name: str | None) -> str:
    chosen = name or f"{component}@{socket.gethostname()}"
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", chosen)[:64]
    return cleaned or "collector"


def collect_main(args: argparse.Namespace) -> int:
    """Run ``collect``; its exit status."""
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s"
    )
    if not 1 <= args.max <= 1000:
        print(f"collect: --max must be in 1..1000, got {args.max}", file=sys.stderr)
        return 2
    if not 1 <= args.window <= 256:
        print(f"collect: --window must be in 1..256, got {args.window}", file=sys.stderr)
        return 2
    try:
        landing = Landing(args.to)
        tls = tls_from_args(args)
        app_id = app_id_for(args.app_id, args.token or None, "collector", certificate=args.tls_cert)
    except (CollectError, TlsOptionsError, TokenFormatError) as e:
        print(f"collect: {e}", file=sys.stderr)
        return 2
    options = Options(
        component=args.component,
        name=_name(args.component, args.name),
        app_id=app_id,
        token=args.token,
        tls=tls,
        once=args.once,
        poll=args.poll,
        max_records=args.max,
        window=args.window,
        flush_s=args.flush_s,
        flush_records=args.flush_records,
        progress_s=args.progress_s,
        lease_s=args.lease_s,
        take_over=args.take_over,
    )
    collector = Collector(args.sources, landing, options)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, collector.stop)
        return await collector.run()

    code = asyncio.run(main())
    print(json.dumps(collector.summary(), sort_keys=True))
    return code
