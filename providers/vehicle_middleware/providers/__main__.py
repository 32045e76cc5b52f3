"""``python -m vehicle_middleware.providers sim|replay|catalog``: providers for a running
middleware.

    python -m vehicle_middleware.providers sim                      # the simulated car, ~270 keys
    python -m vehicle_middleware.providers sim --ignore-demand      # ... watched or not
    python -m vehicle_middleware.providers replay drive.jsonl --speed 4
    python -m vehicle_middleware.providers catalog                  # what sim would publish

SIGINT or SIGTERM stop a provider cleanly: it flushes what it wrote, writes
its status file one last time and exits 0. With ``--token`` its app id is the
token's subject unless ``--app-id`` says otherwise (with ``--tls-cert``, for a
middleware with mutual TLS, the certificate's subject CN); a refusal by the
middleware (a bad token, a missing scope) is one line and exit status 1. A
middleware restart is survived: the provider waits for it, adds its keys
again and goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
from vehicle_middleware.providers.catalog import DEFAULT_CATALOG, CatalogError, Signal, load_catalog
from vehicle_middleware.providers.recording import RecordingError, read_recording
from vehicle_middleware.providers.runner import ProviderStatus, replay, simulate
from vehicle_middleware.providers.simulation import Simulation, Stall, extra_signals
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.sdk.cli import (
    REFUSED_EXIT,
    TlsOptionsError,
    TokenFormatError,
    add_tls_arguments,
    app_id_for,
    refusal,
    tls_from_args,
)
from vehicle_middleware.sdk.status_file import status_path, write_periodically

__all__ = ["main"]

log = logging.getLogger("vehicle_middleware.providers")


def _stall(text: str) -> Stall:
    prefix, sep, window = text.partition("=")
    start, sep2, seconds = window.partition(":")
    try:
        if not (sep and sep2 and prefix):
            raise ValueError
        return Stall(prefix, float(start), float(seconds))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use PREFIX=START:SECONDS, e.g. Vehicle.Cabin.HVAC.Zone=5:10"
        ) from None


def _at_least(limit: float, *, strict: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < limit or (strict and value == limit):
            raise argparse.ArgumentTypeError(
                f"{value:g} must be {'above' if strict else 'at least'} {limit:g}"
            )
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.providers", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, app_id: str) -> None:
        p.add_argument("--target", default="127.0.0.1:50051", help="middleware address")
        p.add_argument(
            "--app-id",
            default=None,
            help=f"provider identity (default: the --token's subject, else {app_id})",
        )
        p.set_defaults(default_app_id=app_id)
        p.add_argument("--token", default=None, help="a JWT, for a middleware in token mode")
        p.add_argument(
            "--status", type=status_path, default=None, help="write counters here (JSON)"
        )
        p.add_argument("-v", "--verbose", action="store_true")
        p.add_argument(
            "--claim",
            action="store_true",
            help="claim the keys: nobody else may write them while this provider runs, "
            "and their subscribers are told when it goes (ProviderGone) and comes back",
        )
        add_tls_arguments(p)

    def catalog_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--catalog",
            type=Path,
            default=DEFAULT_CATALOG,
            help="a VSS JSON file (vss-tools' export); default: the project's own",
        )
        p.add_argument(
            "--extra-keys",
            type=lambda t: int(_at_least(0)(t)),
            default=0,
            help="this many more synthetic keys",
        )

    sim = sub.add_parser("sim", help="a simulated car: a drive cycle and its signals")
    common(sim, "vehicle-sim")
    catalog_options(sim)
    sim.add_argument(
        "--rate-scale", type=_at_least(0, strict=True), default=1.0, help="every rate times this"
    )
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--duration", type=_at_least(0, strict=True), default=None, help="stop after this long (s)"
    )
    sim.add_argument(
        "--stall",
        type=_stall,
        action="append",
        default=[],
        metavar="PREFIX=START:SECONDS",
        help="a fault: keys under PREFIX go quiet at START for SECONDS (repeatable)",
    )
    sim.add_argument(
        "--ignore-demand",
        action="store_true",
        help="publish every signal at its own rate, watched or not (default: only what "
        "apps watch, no faster than they ask)",
    )
    rep = sub.add_parser("replay", help="replay a recorded signal file (CSV or JSON lines)")
    common(rep, "replay")
    rep.add_argument("recording", type=Path)
    rep.add_argument(
        "--speed",
        type=_at_least(0),
        default=1.0,
        help="1 is real time, 4 four times faster, 0 no waits",
    )
    rep.add_argument(
        "--source-time",
        action="store_true",
        help="publish each sample with its recorded time (default: the middleware's clock)",
    )
    cat = sub.add_parser("catalog", help="list the signals a catalog gives the simulation")
    catalog_options(cat)
    cat.add_argument("--json", action="store_true", help="one JSON object per signal")
    return parser


def _signals(args: argparse.Namespace) -> list[Signal]:
    return load_catalog(args.catalog) + extra_signals(args.extra_keys)


async def _run(
    args: argparse.Namespace,
    work: Callable[[ProviderClient, ProviderStatus, asyncio.Event], Coroutine[Any, Any, None]],
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    status = ProviderStatus(args.app_id)
    finished = asyncio.Event()  # the status writer's own stop: after the final state is set
    writer = asyncio.create_task(write_periodically(args.status, status.snapshot, finished))
    client = ProviderClient(args.target, args.app_id, token=args.token, tls=args.tls)
    try:
        try:
            worker = asyncio.create_task(work(client, status, stop))
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not worker.done():
                # Stop asked for: let the loop end between two batches (a write
                # blocked on an absent middleware is cancelled instead).
                try:
                    await asyncio.wait_for(asyncio.shield(worker), 2.0)
                except TimeoutError:
                    worker.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await worker
            if not worker.cancelled():
                worker.result()  # raises what the loop raised
        finally:
            try:  # confirm what was written; a middleware that is gone cannot
                await asyncio.wait_for(client.close(), 5.0)
            except (grpc.aio.AioRpcError, TimeoutError) as e:
                log.warning("the last writes were not confirmed: %s", e)
    finally:
        if status.state == "publishing":
            status.state = "stopped"
        finished.set()
        await writer
    log.info(
        "%s: %d updates published, %d reconnects", status.state, status.published, status.reconnects
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    me = f"python -m vehicle_middleware.providers {args.command}"
    if args.command != "catalog":
        try:
            args.tls = tls_from_args(args)
            args.app_id = app_id_for(
                args.app_id, args.token, args.default_app_id, certificate=args.tls_cert
            )
        except TokenFormatError as e:
            print(f"{me}: --token: {e}", file=sys.stderr)
            return 2
        except TlsOptionsError as e:
            print(f"{me}: {e}", file=sys.stderr)
            return 2
    try:
        if args.command == "catalog":
            return _catalog(args)
        if args.command == "sim":
            sim = Simulation(
                _signals(args), seed=args.seed, rate_scale=args.rate_scale, stalls=args.stall
            )
            for reason in sim.skipped:
                log.warning("not simulated: %s", reason)

            async def run_sim(c: ProviderClient, s: ProviderStatus, stop: asyncio.Event) -> None:
                await simulate(
                    c,
                    sim,
                    s,
                    stop,
                    duration=args.duration,
                    claim=args.claim,
                    follow_demand=not args.ignore_demand,
                )

            asyncio.run(_run(args, run_sim))
        else:
            samples = read_recording(args.recording)

            async def run_replay(c: ProviderClient, s: ProviderStatus, stop: asyncio.Event) -> None:
                await replay(
                    c,
                    samples,
                    s,
                    stop,
                    speed=args.speed,
                    source_time=args.source_time,
                    claim=args.claim,
                )

            asyncio.run(_run(args, run_replay))
    except (CatalogError, RecordingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        why = refusal(e)
        if why is None:
            raise
        print(f"{me}: provider {args.app_id!r}: {why}", file=sys.stderr)
        return REFUSED_EXIT
    return 0


def _catalog(args: argparse.Namespace) -> int:
    signals = _signals(args)
    sim = Simulation(signals)
    driven = set(sim.names)
    for s in signals:
        if args.json:
            print(
                json.dumps(
                    {
                        **{
                            k: getattr(s, k)
                            for k in ("name", "type", "datatype", "unit", "min", "max")
                        },
                        "allowed": list(s.allowed),
                        "hz": s.sim.get("hz"),
                        "simulated": s.name in driven,
                    }
                )
            )
        else:
            hz = s.sim.get("hz", 0.1 if s.type == "attribute" else 1.0)
            print(f"{s.name:<62} {s.datatype:<8} {s.unit or '':<9} {hz:>5} Hz")
    for reason in sim.skipped:
        print(f"not simulated: {reason}", file=sys.stderr)
    print(
        f"{len(signals)} signals, {len(driven)} simulated, about {sim.rate:.0f} updates/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
