"""``python -m middleware serve``: run the middleware process.

Settings come from defaults, ``--config FILE`` (TOML), ``VMW_*`` environment
variables, then flags, later ones winning. SIGINT or SIGTERM stop it
gracefully: health turns NOT_SERVING, streams get ``--stop-grace`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from dataclasses import fields
from pathlib import Path

from middleware.config import Settings, load_settings
from middleware.server import start_server

log = logging.getLogger("middleware")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m middleware", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the middleware")
    serve.add_argument("--config", type=Path, help="TOML settings file")
    serve.add_argument(
        "--stop-grace",
        type=float,
        default=2.0,
        help="seconds streams get to finish on shutdown (default 2)",
    )
    for f in fields(Settings):
        kind = type(f.default)
        serve.add_argument(
            f"--{f.name.replace('_', '-')}",
            dest=f.name,
            type=kind,
            default=None,
            help=f"(default {f.default!r}; env VMW_{f.name.upper()})",
        )
    return parser


async def _serve(settings: Settings, stop_grace: float) -> None:
    running = await start_server(settings)
    # Tools and tests read this line to find the port when listening on port 0.
    print(f"listening on {running.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping on signal")
    await running.stop(stop_grace)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    overrides = {f.name: getattr(args, f.name) for f in fields(Settings)}
    try:
        settings = load_settings(toml_path=args.config, env=os.environ, overrides=overrides)
    except (ValueError, OSError) as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if settings.listen and not settings.listen.startswith(("127.", "localhost", "[::1]", "unix:")):
        log.warning(
            "listening on %s: reachable beyond this machine, with no access control yet",
            settings.listen,
        )
    try:
        asyncio.run(_serve(settings, args.stop_grace))
    except RuntimeError as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
