"""``python -m vehicle_middleware.tools``: operators' command-line views of a running middleware.

``top`` redraws the middleware's figures (apps, queues, drops, busiest keys);
``cluster-status`` prints each peer link of a cluster node. Both are clients
like any app: they speak the public Admin and Cluster services.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from vehicle_middleware.sdk.cli import TlsOptionsError, add_tls_arguments, tls_from_args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.tools", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    top = sub.add_parser("top", help="a live view of a running middleware's figures")
    _top_arguments(top)
    status = sub.add_parser(
        "cluster-status",
        help="each peer's link, the last events exchanged, unconfirmed events, and the "
        "digest of the replicated state",
    )
    status.add_argument("--target", default="127.0.0.1:50051", help="middleware address")
    status.add_argument("--app-id", default="cluster-status", help="identity (open mode)")
    status.add_argument("--token", default=None, help="a JWT with the peer or admin scope")
    status.add_argument("--json", action="store_true", help="the status as JSON")
    add_tls_arguments(status)
    return parser


def _top_arguments(top: argparse.ArgumentParser) -> None:
    from vehicle_middleware.sdk.cli import add_tls_arguments

    top.add_argument("--target", default="127.0.0.1:50051", help="middleware address")
    top.add_argument("--interval", type=float, default=2.0, help="seconds between frames")
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.add_argument(
        "--keys",
        type=int,
        default=20,
        help="busiest keys shown (1 to 1000; 0: the middleware's default)",
    )
    top.add_argument("--key", action="append", default=[], help="also show this key")
    top.add_argument(
        "--app-id", default=None, help="identity (default: the token's or certificate's, else top)"
    )
    top.add_argument("--token", default=None, help="a JWT with the admin scope (token mode)")
    add_tls_arguments(top)


def _top(args: argparse.Namespace) -> int:
    from vehicle_middleware.sdk.cli import (
        TlsOptionsError,
        TokenFormatError,
        app_id_for,
        tls_from_args,
    )
    from vehicle_middleware.tools.top import TopOptions, run

    if args.interval <= 0 or not 0 <= args.keys <= 1000:
        print("middleware top: --interval must be above 0, --keys 0 to 1000", file=sys.stderr)
        return 2
    try:
        tls = tls_from_args(args)
        app_id = app_id_for(args.app_id, args.token, "top", certificate=args.tls_cert)
    except (TlsOptionsError, TokenFormatError) as e:
        print(f"middleware top: {e}", file=sys.stderr)
        return 2
    options = TopOptions(
        target=args.target,
        app_id=app_id,
        token=args.token,
        tls=tls,
        interval=args.interval,
        once=args.once,
        top_keys=args.keys,
        keys=tuple(args.key),
    )
    try:
        return asyncio.run(run(options))
    except KeyboardInterrupt:
        return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "cluster-status":
        from vehicle_middleware.tools.cluster_status import status_command

        try:
            tls = tls_from_args(args)
        except TlsOptionsError as e:
            print(f"vehicle_middleware.tools cluster-status: {e}", file=sys.stderr)
            return 2
        return status_command(args.target, args.app_id, args.token, as_json=args.json, tls=tls)
    return _top(args)


if __name__ == "__main__":
    sys.exit(main())
