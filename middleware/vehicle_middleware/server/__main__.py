"""``python -m vehicle_middleware.server serve``: run the middleware process.

Settings come from defaults, ``--config FILE`` (TOML), ``VMW_*`` environment
variables, then flags, later ones winning. SIGINT or SIGTERM stop it
gracefully: health turns NOT_SERVING, streams get ``--stop-grace`` seconds.
``VMW_REFERENCE_CODECS=1`` runs the reference implementations of the hot
encoders and readers instead of the fast ones (:mod:`vehicle_middleware.server.codecs`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vehicle_middleware.server import codecs, core_log, dev_certs, health_probe
from vehicle_middleware.server.config import (
    SETTINGS_BY_NAME,
    Setting,
    Settings,
    load_settings,
    masked,
)
from vehicle_middleware.server.loop import loop_factory
from vehicle_middleware.server.rpc import batches
from vehicle_middleware.vss import CatalogError

if TYPE_CHECKING:
    from vehicle_middleware.server.journal.reader import BootReport

log = logging.getLogger("vehicle_middleware.server")

REFERENCE_CODECS = "VMW_REFERENCE_CODECS"
"""The environment variable that, set to 1, selects the reference codecs."""


def _select_codecs(value: str) -> codecs.Codecs:
    """The codecs ``VMW_REFERENCE_CODECS`` asks for, selected: 1 the reference, 0 or
    unset the fast ones.

    Raises:
        ValueError: any other value.
    """
    wanted = value.strip()
    if wanted not in ("", "0", "1"):
        raise ValueError(
            f"{REFERENCE_CODECS}={value!r}: 1 runs the reference codecs, 0 or unset the fast ones"
        )
    return codecs.select("reference" if wanted == "1" else "fast")


def parser() -> argparse.ArgumentParser:
    """The command line: ``serve`` takes a flag per setting (:data:`SETTINGS_BY_NAME`)."""
    top = argparse.ArgumentParser(
        prog="python -m vehicle_middleware.server", description=__doc__.split("\n\n")[0]
    )
    sub = top.add_subparsers(dest="command", required=True)
    token = sub.add_parser("token", help="development key pairs and tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    keygen = token_sub.add_parser("keygen", help="write a key pair: NAME.key (private), NAME.pub")
    keygen.add_argument("--out", type=Path, default=Path("."), help="directory (default .)")
    keygen.add_argument("--name", default="vmw-dev", help="file name stem (default vmw-dev)")
    keygen.add_argument("--alg", choices=("ES256", "RS256"), default="ES256")
    mint = token_sub.add_parser("mint", help="print a signed token")
    mint.add_argument("--key", type=Path, required=True, help="private key PEM (from keygen)")
    mint.add_argument("--sub", required=True, help="the app id the token is for")
    mint.add_argument(
        "--scope", required=True, help="space-separated read:GLOB provide:GLOB create:GLOB"
    )
    mint.add_argument("--aud", default=None, help="audience (the middleware's token_audience)")
    mint.add_argument("--ttl", type=float, default=3600.0, help="seconds until it expires")
    journal = sub.add_parser("journal", help="check a telemetry journal")
    journal_sub = journal.add_subparsers(dest="journal_command", required=True)
    verify_p = journal_sub.add_parser(
        "verify",
        help="offsets, restarts, dropped records, torn lines and the hash chain; exits 1 on "
        "a broken chain or a loss no record reports",
    )
    verify_p.add_argument("paths", type=Path, nargs="+", help="journal directories or segments")
    tls = sub.add_parser("tls", help="development certificates")
    tls_sub = tls.add_subparsers(dest="tls_command", required=True)
    dev_certs.add_arguments(
        tls_sub.add_parser(
            "dev-certs",
            help="write a throwaway CA, a server certificate and client certificates "
            "(for development only)",
        )
    )
    health_probe.add_arguments(
        sub.add_parser(
            "health",
            help="ask a running middleware whether it serves, and list its services "
            "(gRPC health and reflection)",
        )
    )
    serve = sub.add_parser("serve", help="run the middleware")
    serve.add_argument("--config", type=Path, help="TOML settings file")
    serve.add_argument(
        "--stop-grace",
        type=float,
        default=2.0,
        help="seconds streams get to finish on shutdown (default 2)",
    )
    for section, settings in _by_section().items():
        group = serve.add_argument_group(f"{section} settings")
        for setting in settings:
            if setting.kind is tuple:  # a list setting: the flag is repeated
                group.add_argument(
                    setting.flag,
                    *(("--peer",) if setting.name == "peers" else ()),
                    dest=setting.name,
                    action="append",
                    default=None,
                    help=f"(repeatable; env {setting.env}, comma-separated)",
                )
                continue
            group.add_argument(
                setting.flag,
                dest=setting.name,
                type=str if setting.kind is bool else setting.kind,  # load_settings parses bools
                default=None,
                help=f"(default {setting.default!r}; env {setting.env})",
            )
    return top


def _by_section() -> dict[str, list[Setting]]:
    """The settings, grouped by their section of :class:`Settings` (for ``--help``)."""
    out: dict[str, list[Setting]] = {}
    for setting in SETTINGS_BY_NAME.values():
        out.setdefault(setting.section, []).append(setting)
    return out


async def _serve(settings: Settings, stop_grace: float) -> None:
    from vehicle_middleware.server.server import start_server  # imports grpc: see main()

    running = await start_server(settings)
    # What start-up made (modules, descriptors, catalogs, grpc) lives as long as
    # the process: frozen, out of the collector's sight, so that a full
    # collection scans only what came after. Without it the first full
    # collection under load stalls each node for a pause every app and peer
    # waits out (seen with three nodes at 1,000 writes/s).
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before the line below: whoever reads it may signal at once, and must get a clean stop.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Tools and tests read this first line to find the port when listening on port 0.
    print(f"listening on {running.address}", flush=True)
    for more in running.addresses[1:]:  # e.g. the Unix socket beside TCP
        print(f"also listening on {more}", flush=True)
    if running.metrics is not None:
        print(f"metrics on http://{running.metrics.address}/metrics", flush=True)
    await stop.wait()
    log.info("stopping on signal")
    await running.stop(stop_grace)


def _token(args: argparse.Namespace) -> int:
    from vehicle_middleware.server.auth.scopes import ScopeError
    from vehicle_middleware.server.auth.tokens import generate_key_pair, mint

    if args.token_command == "keygen":
        private, public = generate_key_pair(args.alg)
        args.out.mkdir(parents=True, exist_ok=True)
        key_path = args.out / f"{args.name}.key"
        dev_certs.write_private_key(key_path, private)
        (args.out / f"{args.name}.pub").write_bytes(public)
        print(
            f"wrote {key_path} (private, keep it secret) and {args.out / (args.name + '.pub')} "
            "(give it to the middleware: --token-public-key)"
        )
        return 0
    try:
        print(
            mint(
                args.key.read_bytes(),
                subject=args.sub,
                scope=args.scope,
                ttl_s=args.ttl,
                audience=args.aud,
            )
        )
    except (ScopeError, ValueError, OSError) as e:
        print(f"middleware token mint: {e}", file=sys.stderr)
        return 2
    return 0


def _journal(args: argparse.Namespace) -> int:
    from vehicle_middleware.server.journal import JournalReport, read_journal, verify
    from vehicle_middleware.server.journal.reader import BootEnd, BootReport
    from vehicle_middleware.server.journal.reserve import MARKER_NAME, LossMarker

    report = JournalReport()
    records = read_journal(args.paths, report)
    # A boot that died leaves what it had not written in its marker; the next boot
    # reports it (journal_dropped with lost_boot_id). Until then, say it here. The
    # marker also names where the newest boot ended: its records are held to it.
    reported_later = {r.get("lost_boot_id") for r in records if r.get("lost_boot_id")}
    pending: dict[str, tuple[int, int]] = {}
    ends: dict[str, BootEnd] = {}
    ended: set[str] = set()  # stopped cleanly, by their markers
    for path in args.paths:
        marker = LossMarker(path).read() if path.is_dir() else None
        if marker and not marker.stopped and marker.boot_id not in reported_later:
            pending[marker.boot_id] = (marker.unreported, marker.pending)
        if marker and marker.ended:
            ended.add(marker.boot_id)
        if marker and marker.chained:
            ends[marker.boot_id] = BootEnd(
                marker.last_offset, marker.last_hash, marker.stopped, f"its {MARKER_NAME} file"
            )
    verify(records, report, ends=ends)
    for boot_id in pending:  # a boot none of whose records reached disk: its marker tells
        report.boots.setdefault(boot_id, BootReport(boot_id))
    print(f"{len(records)} records, {len(report.boots)} boots, {len(report.torn_lines)} torn lines")
    for line in report.torn_lines:
        print(f"  torn line skipped: {line}")
    for boot in report.boots.values():
        for line in _boot_lines(boot, pending.get(boot.boot_id, (0, 0)), boot.boot_id in ended):
            print(line)
    unreported_failures = any(failed for failed, _ in pending.values())
    whole = report.intact and report.complete and report.whole
    return 0 if whole and not unreported_failures else 1


def _boot_lines(boot: BootReport, marked: tuple[int, int], ended: bool) -> list[str]:
    """What ``journal verify`` prints of one boot: its figures, then each finding.

    ``marked``: what its marker says failed to reach disk and was not yet written
    (a boot no later boot reported); ``ended``: its marker says it stopped cleanly.
    """
    head = f"  boot {boot.boot_id}: "
    if boot.removed:
        assert boot.end is not None
        return [
            f"{head}BOOT MISSING: none of its records is left, and no journal_trimmed "
            f"record says retention removed them ({boot.end.by} says it ended at offset "
            f"{boot.end.offset}" + (" with its stop record)" if boot.end.stopped else ")")
        ]
    failed, waiting = marked
    wrote_none = boot.end is not None and boot.end.offset is None  # as what followed says
    if boot.records == 0 and not (failed or waiting or wrote_none):
        return [
            f"{head}no records left (at least {boot.trimmed_files} segments removed by "
            f"retention, {boot.reported_dropped} records reported lost)"
        ]
    if boot.records == 0:
        lines = [f"{head}none of its records reached disk (the disk was full from its start)"]
    else:
        link = (
            "chain intact"
            if boot.first_broken_link is None
            else f"CHAIN BROKEN at offset {boot.first_broken_link}: {boot.broken_reason}"
        )
        lines = [
            f"{head}{boot.records} records, {boot.offset_gaps} missing by offset "
            f"({boot.reported_dropped} reported dropped), {link}"
        ]
    if boot.trimmed_files:
        lines.append(
            f"    retention removed its oldest segments (at least {boot.trimmed_files}, "
            f"{boot.trimmed_bytes:,} bytes): the chain starts at its oldest kept record"
        )
    if boot.removed_with_directory:
        lines.append(
            f"    DIRECTORY REMOVED while it ran: {boot.removed_with_directory} of its records "
            "went with it (its journal_dropped record says so; what is left starts after)"
        )
    if boot.unreported:
        lines.append(
            f"    LOSS NOT REPORTED: {boot.unreported} records missing that no record reports"
        )
    if boot.tail_missing:
        lines.append(f"    TAIL MISSING: {boot.tail_missing}")
    if not boot.stopped and (ended or boot.stop_unwritten):
        lines.append(
            "    STOP NOT WRITTEN: it stopped cleanly, but its stop record did not reach "
            "disk (a full disk)"
        )
    elif not boot.stopped and not (boot.tail_missing and boot.end and boot.end.stopped):
        lines.append("    UNCLEAN STOP: no stop record (killed, crashed, or still running)")
    if failed:
        lines.append(
            f"    LOSS NOT REPORTED: its marker says {failed} records failed to reach disk "
            "(the next boot of this directory reports them)"
        )
    if waiting:
        lines.append(
            f"    its marker says {waiting} records were not yet written when it last "
            "checked: lost if the process is gone (the next boot reports them)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "token":
        return _token(args)
    if args.command == "journal":
        return _journal(args)
    if args.command == "tls":
        return dev_certs.main(args)
    if args.command == "health":
        return health_probe.main(args)
    overrides = {name: getattr(args, name) for name in SETTINGS_BY_NAME}
    try:
        settings = load_settings(toml_path=args.config, env=os.environ, overrides=overrides)
        chosen = _select_codecs(os.environ.get(REFERENCE_CODECS, ""))
    except (ValueError, OSError) as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 2
    # grpc-core logs each failed TLS handshake itself: unless the operator asked
    # for grpc's own logging, its stderr is read and those lines counted per peer
    # (vehicle_middleware.server.core_log). grpc reads GRPC_TRACE when imported:
    # this comes first, and the modules that import grpc are imported after it.
    last_counts = None
    if core_log.wants_filter(os.environ) and "grpc" not in sys.modules:
        last_counts = core_log.install(os.environ)
    logging.basicConfig(
        level=settings.process.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log.info(
        "settings: %s", " ".join(f"{name}={value!r}" for name, value in masked(settings).items())
    )
    mutual_tls = bool(settings.access.tls_client_ca)
    if settings.access.auth_mode == "open" and mutual_tls:
        log.warning(
            "AUTH MODE IS OPEN with mutual TLS: TCP callers are the apps their client "
            "certificates name, and every app may read, write, add and remove every key "
            "(Unix socket callers may claim any app id). Use --auth-mode token to limit what "
            "each app may do."
        )
    elif settings.access.auth_mode == "open":
        log.warning(
            "AUTH MODE IS OPEN: any caller may claim any app id and read, write, add and remove "
            "every key. For development only; use --auth-mode token in a vehicle."
        )
    if settings.network.listen and not settings.network.listen.startswith(
        ("127.", "localhost", "[::1]", "unix:")
    ):
        log.warning(
            "listening on %s: reachable beyond this machine%s%s",
            settings.network.listen,
            " BY ANYONE (auth mode open)"
            if settings.access.auth_mode == "open" and not mutual_tls
            else "",
            ""
            if settings.network.tls_cert
            else "; in plaintext: tokens and values can be read on the "
            "network (use --tls-cert and --tls-key)",
        )
    if settings.metrics.listen and not settings.metrics.listen.startswith(
        ("127.", "localhost", "[::1]")
    ):
        log.warning(
            "metrics on %s: reachable beyond this machine, in plaintext and to anyone; "
            "they name every app and the busiest keys",
            settings.metrics.listen,
        )
    try:
        loop_name, new_loop = loop_factory(settings.process.event_loop)
    except RuntimeError as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 2
    log.info("event loop: %s", loop_name)
    log.info(
        "codecs: %s%s",
        chosen.value,
        " (compiled)"
        if chosen is codecs.Codecs.FAST and not (batches.__file__ or "").endswith(".py")
        else "",
    )
    from vehicle_middleware.server.tls import TlsConfigError

    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(_serve(settings, args.stop_grace))
    except CatalogError as e:
        print(f"middleware: --vss: {e}", file=sys.stderr)
        return 2
    except TlsConfigError as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"middleware: {e}", file=sys.stderr)
        return 1
    finally:
        if last_counts is not None:
            last_counts()
    return 0


if __name__ == "__main__":
    sys.exit(main())
