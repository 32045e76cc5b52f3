"""The middleware's settings: one frozen object, built at the entry point.

Sources, later ones winning: defaults, an optional TOML file, ``VMW_*``
environment variables, command-line flags. Every setting has the same name in
each: ``event_budget`` is ``event_budget = 20000`` in TOML, ``VMW_EVENT_BUDGET``
in the environment and ``--event-budget`` on the command line.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD
from vehicle_middleware.ess import parse_expect_rule
from vehicle_middleware.server.loop import check_choice

__all__ = [
    "AccessSettings",
    "ClusterSettings",
    "RequestLimits",
    "Settings",
    "StreamSettings",
    "load_settings",
    "masked",
    "parse_peer",
]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the middleware process can be told. Defaults are the documented ones."""

    listen: str = "127.0.0.1:50051"
    """TCP address to listen on; empty to listen on the Unix socket only. Port 0 picks one."""
    unix_socket: str = ""
    """Also listen on this Unix socket path (empty: no)."""
    event_budget: int = 20_000
    """Most data events queued for all apps together."""
    lifecycle_capacity: int = 1_000
    """Per-app buffer of key_added/key_removed events before a resync is forced."""
    batch_max: int = 500
    """Most events in one EventBatch."""
    stream_window: int = 32
    """Messages (batches) an app's ``Events`` stream keeps sent and not yet
    acknowledged, at most, when the app does not ask for another window: what it
    can lag behind beyond its queues. 32, not 4 (before): with 100 apps at 200
    writes/s the apps' acknowledgements (one per half window) and the waits for
    them held events in their queues (p99 0.5-1 s against 80-150 ms with 32)."""
    max_stream_window: int = 64
    """Largest window an app may ask for."""
    stream_writes_per_s: int = 5_000
    """Stream writes a second, at most, all apps together (0: no budget): beyond,
    a write waits its turn and its app's queues collect more for it
    (:mod:`vehicle_middleware.server.pacing`). A quarter of a core's worth of writes on the
    development machine; under it no write ever waits. 5,000 rather than
    10,000: with 10 apps at 1,000 messages a second it binds, and there the p99
    was 0.18x the bare relay's against 1.09x (make bench-e2e, three runs each)."""
    grace_period_s: float = 0.0
    """How long an app's subscriptions outlive its stream (0: removed at once)."""
    max_value_size: int = 64 * 1024
    """Largest value accepted, in bytes."""
    max_keys: int = 100_000
    """Most keys in the store."""
    max_keys_per_request: int = 1_000
    """Most keys, names or updates in one request (and in one Publish batch)."""
    max_message_bytes: int = 4 * 1024 * 1024
    """Largest gRPC message accepted or sent."""
    keepalive_time_s: float = 10.0
    """Ping an idle client after this long, to find dead peers."""
    keepalive_timeout_s: float = 5.0
    """A client that does not answer a ping within this is gone."""
    log_level: str = "INFO"
    event_loop: str = "auto"
    """The process's asyncio loop: ``auto`` (uvloop where installed, else
    asyncio's own), ``uvloop`` (it or a start-up error) or ``asyncio``
    (:mod:`vehicle_middleware.server.loop`)."""
    auth_mode: str = "open"
    """``open``: the app-id header is trusted, everything allowed (development).
    ``token``: every call carries ``authorization: Bearer <JWT>``."""
    token_public_key: str = ""
    """PEM file of the RS256/ES256 public key that verifies tokens (token mode)."""
    token_audience: str = ""
    """Required ``aud`` of tokens (empty: not checked)."""
    token_leeway_s: float = 5.0
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""
    max_apps: int = 256
    """Apps with an open event stream at once."""
    max_subscriptions_per_app: int = 10_000
    max_publish_streams_per_app: int = 4
    rate_limit_rps: float = 500.0
    """Requests (calls and stream opens) per second per app, refilled continuously."""
    rate_limit_burst: int = 1_000
    publish_messages_per_s: float = 5_000.0
    """Messages per second on one Publish stream."""
    publish_burst: int = 10_000
    claim_grace_s: float = 5.0
    """A key claimed by an app with no open stream is released after this long."""
    slow_app_report_s: float = 10.0
    """While an app's queues keep dropping events, a warning with running counts this often."""
    vehicle_id: str = "vehicle"
    """Written in every journal record."""
    journal_dir: str = ""
    """Directory of the telemetry journal (empty: no journal)."""
    journal_level: str = "drops"
    """``lifecycle``, ``drops`` or ``full`` (see vehicle_middleware.contract.journal.records)."""
    journal_segment_bytes: int = 8 * 1024 * 1024
    journal_max_bytes: int = 256 * 1024 * 1024
    """Retention: the oldest segments go when the journal is bigger."""
    journal_gzip: bool = False
    journal_buffer: int = 100_000
    """Records waiting for the writer; beyond it they are dropped and counted."""
    journal_history_records: int = 100_000
    """Newest journal records kept in memory for consumers (JournalService);
    older ones are read from the segments on disk."""
    journal_history_bytes: int = 16 * 1024 * 1024
    """Bytes of those records (their lines), at most."""
    journal_consumer_max_lag_bytes: int = 512 * 1024 * 1024
    """Bytes on disk a registered journal consumer may leave unacknowledged before
    retention removes them anyway (and cuts it loose); retention keeps up to this
    much beyond journal_max_bytes for a consumer that lags."""
    journal_max_consumers: int = 16
    """Registered journal consumers, at most."""
    journal_offset_start: int = -1
    """The first journal offset of a boot: -1 (random, as the offsets scheme asks);
    0..2^32-1 for tests (e.g. near 2^32, to see the wrap)."""
    vss: tuple[str, ...] = ()
    """VSS JSON catalogs: every signal is a key from the start, with its metadata
    (datatype, entry type, unit, min, max, allowed values) checked on every write.
    Flag ``--vss FILE`` (repeatable), TOML a list, ``VMW_VSS`` comma-separated."""
    expect: tuple[str, ...] = ()
    """``PREFIX=SECONDS`` rules: a watched key under PREFIX not written for longer
    is stale (its subscribers get KeyStale); the longest prefix wins, over the
    catalogs' periods; 0 turns expectations off for the branch. Flag ``--expect``
    (repeatable), TOML a list, ``VMW_EXPECT`` comma-separated."""
    actuation_timeout_s: float = 5.0
    """How long an actuation waits for its provider's answer (KUKSA Actuate)."""
    metrics_listen: str = ""
    """Serve Prometheus text at ``http://ADDRESS/metrics`` (empty: no). Port 0 picks one."""
    metrics_remote: bool = False
    """Allow ``metrics_listen`` on an address other than loopback. The endpoint is
    plain HTTP with no authentication (app and key names, drops): off unless the
    vehicle network around it is trusted; ``GetStats`` (TLS, the admin scope) is
    the protected way."""
    metrics_top_keys: int = 20
    """Keys in the per-key series (the busiest by writes per second; 0 to 1000)."""
    tls_cert: str = ""
    """PEM certificate (chain) of the middleware: TLS on the TCP listener (empty: plaintext)."""
    tls_key: str = ""
    """PEM private key of ``tls_cert``."""
    tls_client_ca: str = ""
    """PEM CA certificate(s): mutual TLS, every TCP client shows a certificate they
    signed, and its subject CN (or a SAN) is the app's identity."""
    unix_socket_mode: str = "0660"
    """File mode of the Unix socket (octal): who may connect to it (plaintext)."""
    # -- several nodes (vehicle_middleware.server.cluster; README "Several nodes") --
    node_id: str = ""
    """This node's id among the vehicle's middleware nodes (needed with peers)."""
    peers: tuple[str, ...] = ()
    """The other nodes, ``NAME=ADDRESS`` (NAME is the peer's node_id). Flag
    ``--peer`` (repeatable), TOML a list, ``VMW_PEERS`` comma-separated. None:
    a single node, exactly as without this feature."""
    max_confirms: str = "0"
    """Confirmations by nodes other than an event's origin and this node before
    this node applies it: 0 (on receipt), 1, ... or ``all`` (every other node)."""
    sync_interval_s: float = 2.0
    """How often a node sends its peers the leaves of its model (SyncEvent)."""
    send_unread_interval_s: float = 1.0
    """A peer that has not confirmed another node's event for this long is sent it by this node."""
    event_max_age_s: float = 300.0
    """Validity window: an event stamped longer ago is refused (and retention forgets)."""
    event_max_ahead_s: float = 5.0
    """Validity window: an event stamped further in the future is refused."""
    cluster_max_events: int = 100_000
    """Events kept for peers that may ask for them (beyond: key states and a horizon)."""
    cluster_max_bytes: int = 64 * 1024 * 1024
    """Bytes of those events, at most."""
    cluster_max_pending: int = 100_000
    """Received events waiting for their confirmations, at most (beyond: resent later)."""
    guard_timeout_s: float = 2.0
    """A guarded write (Set with if_head) not decided within this is refused."""
    peer_token_file: str = ""
    """Token mode: a file with this node's token (``peer`` scope, subject its node_id)."""
    peer_tls_ca: str = ""
    """PEM CA certificate(s) of the peers' listeners: the links dial with TLS
    (empty: plaintext, for peers without ``tls_cert``)."""
    peer_tls_cert: str = ""
    """This node's client certificate for peers with mutual TLS (its name: node_id)."""
    peer_tls_key: str = ""
    """The private key of ``peer_tls_cert``."""

    def __post_init__(self) -> None:
        positive = (
            "event_budget",
            "lifecycle_capacity",
            "batch_max",
            "stream_window",
            "max_stream_window",
            "max_keys",
            "max_keys_per_request",
            "max_message_bytes",
            "max_apps",
            "max_subscriptions_per_app",
            "max_publish_streams_per_app",
            "rate_limit_rps",
            "rate_limit_burst",
            "publish_messages_per_s",
            "publish_burst",
            "journal_segment_bytes",
            "journal_max_bytes",
            "journal_buffer",
            "journal_history_records",
            "journal_history_bytes",
            "journal_consumer_max_lag_bytes",
            "journal_max_consumers",
        )
        if self.slow_app_report_s <= 0:
            raise ValueError(f"slow_app_report_s must be above 0, got {self.slow_app_report_s}")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in (
            "grace_period_s",
            "stream_writes_per_s",
            "max_value_size",
            "keepalive_time_s",
            "keepalive_timeout_s",
            "claim_grace_s",
            "token_leeway_s",
            "actuation_timeout_s",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not -1 <= self.journal_offset_start < OFFSET_MOD:
            raise ValueError(
                f"journal_offset_start must be -1 (random) or 0..{OFFSET_MOD - 1}, "
                f"got {self.journal_offset_start}"
            )
        if self.journal_level not in ("lifecycle", "drops", "full"):
            raise ValueError(
                f"journal_level must be lifecycle, drops or full, got {self.journal_level!r}"
            )
        check_choice(self.event_loop)
        if self.auth_mode not in ("open", "token"):
            raise ValueError(f"auth_mode must be 'open' or 'token', got {self.auth_mode!r}")
        if self.auth_mode == "token" and not self.token_public_key:
            raise ValueError("auth_mode 'token' needs token_public_key (a PEM file)")
        if not self.listen and not self.unix_socket:
            raise ValueError("listen and unix_socket are both empty: nothing to listen on")
        if self.stream_window > self.max_stream_window:
            raise ValueError(
                f"stream_window ({self.stream_window}) exceeds max_stream_window "
                f"({self.max_stream_window})"
            )
        if self.metrics_listen:
            _host, sep, port = self.metrics_listen.rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise ValueError(
                    f"metrics_listen {self.metrics_listen!r}: use HOST:PORT, e.g. 127.0.0.1:9464"
                )
            host = _host.strip("[]")
            if host not in ("127.0.0.1", "::1", "localhost") and not self.metrics_remote:
                raise ValueError(
                    f"metrics_listen {self.metrics_listen!r} is not a loopback address: the "
                    "metrics endpoint has no authentication; listen on 127.0.0.1 (a local "
                    "scraper or agent), use GetStats (TLS, the admin scope), or set "
                    "metrics_remote = true on a trusted network"
                )
        if not 0 <= self.metrics_top_keys <= 1000:
            raise ValueError(f"metrics_top_keys must be 0 to 1000, got {self.metrics_top_keys}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        if self.tls_client_ca and not self.tls_cert:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_cert and tls_key")
        if self.tls_cert and not self.listen:
            raise ValueError("tls_cert is for the TCP listener, but listen is empty")
        try:
            mode = int(self.unix_socket_mode, 8)
        except ValueError:
            mode = -1
        if not 0 <= mode <= 0o777:
            raise ValueError(
                f"unix_socket_mode must be an octal file mode such as 0660, "
                f"got {self.unix_socket_mode!r}"
            )
        for rule in self.expect:
            parse_expect_rule(rule)  # raises ValueError naming the rule
        if self.max_value_size + 1024 > self.max_message_bytes:
            raise ValueError("max_message_bytes must exceed max_value_size by at least 1 KiB")
        self._check_cluster()

    def _check_cluster(self) -> None:
        for name in ("cluster_max_events", "cluster_max_bytes", "cluster_max_pending"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in (
            "sync_interval_s",
            "send_unread_interval_s",
            "event_max_age_s",
            "event_max_ahead_s",
            "guard_timeout_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be above 0, got {getattr(self, name)}")
        if self.max_confirms != "all" and not (
            self.max_confirms.isdigit() and int(self.max_confirms) < 1000
        ):
            raise ValueError(
                f"max_confirms must be a count (0, 1, ...) or 'all', got {self.max_confirms!r}"
            )
        if self.node_id and _NODE_ID.fullmatch(self.node_id) is None:
            raise ValueError(f"node_id {self.node_id!r}: 1 to 64 characters of [A-Za-z0-9_.-]")
        names = [parse_peer(entry)[0] for entry in self.peers]
        if names and not self.node_id:
            raise ValueError("peers need node_id: this node's id, as its peers list it")
        if self.node_id in names:
            raise ValueError(f"peers: {self.node_id!r} is this node (node_id), not a peer")
        if len(set(names)) != len(names):
            raise ValueError(f"peers: a node is listed twice ({', '.join(names)})")
        if bool(self.peer_tls_cert) != bool(self.peer_tls_key):
            raise ValueError("peer_tls_cert and peer_tls_key go together: give both or neither")
        if self.peer_tls_cert and not self.peer_tls_ca:
            raise ValueError("peer_tls_cert (mutual TLS to peers) needs peer_tls_ca")
        for name in ("peer_tls_ca", "peer_tls_cert", "peer_tls_key"):
            if getattr(self, name) and not Path(getattr(self, name)).is_file():
                raise ValueError(f"{name} {getattr(self, name)}: no such file")
        if self.peer_token_file and not Path(self.peer_token_file).is_file():
            raise ValueError(f"peer_token_file {self.peer_token_file}: no such file")
        if self.peers and self.auth_mode == "token" and not self.peer_token_file:
            raise ValueError(
                "auth_mode 'token' with peers needs peer_token_file (a token with the peer "
                "scope whose subject is node_id)"
            )


_NODE_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)


@dataclass(frozen=True, slots=True)
class AccessSettings:
    """The section of :class:`Settings` identity, rate limits and claims use
    (:mod:`vehicle_middleware.server.auth`)."""

    auth_mode: str
    token_public_key: str
    token_audience: str
    token_leeway_s: float
    tls_client_ca: str
    """Set: TCP callers show client certificates that name their app."""
    rate_limit_rps: float
    rate_limit_burst: int
    publish_messages_per_s: float
    publish_burst: int
    claim_grace_s: float
    max_publish_streams_per_app: int

    @classmethod
    def of(cls, s: Settings) -> AccessSettings:
        return cls(
            auth_mode=s.auth_mode,
            token_public_key=s.token_public_key,
            token_audience=s.token_audience,
            token_leeway_s=s.token_leeway_s,
            tls_client_ca=s.tls_client_ca,
            rate_limit_rps=s.rate_limit_rps,
            rate_limit_burst=s.rate_limit_burst,
            publish_messages_per_s=s.publish_messages_per_s,
            publish_burst=s.publish_burst,
            claim_grace_s=s.claim_grace_s,
            max_publish_streams_per_app=s.max_publish_streams_per_app,
        )


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The section of :class:`Settings` every servicer checks a request against."""

    max_keys_per_request: int
    """Entries of one request (keys, updates, subscriptions), at most."""
    max_message_bytes: int
    """The most bytes of one message, either way."""
    max_subscriptions_per_app: int
    """Subscriptions one app holds, at most."""
    stream_window: int
    """An ``Events`` stream's window when its app asks for none."""
    max_stream_window: int
    """The largest window an app may ask for."""

    @classmethod
    def of(cls, s: Settings) -> RequestLimits:
        return cls(
            max_keys_per_request=s.max_keys_per_request,
            max_message_bytes=s.max_message_bytes,
            max_subscriptions_per_app=s.max_subscriptions_per_app,
            stream_window=s.stream_window,
            max_stream_window=s.max_stream_window,
        )


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """The section of :class:`Settings` the subscriber streams use
    (:mod:`vehicle_middleware.server.session`)."""

    max_apps: int
    """Apps with an open stream, at most."""
    grace_period_s: float
    """How long an app's state outlives its stream (0: removed at once)."""
    batch_max: int
    """Events drained into one batch, at most."""
    writes_per_s: int
    """Stream writes a second, at most, all apps together (0: no budget)."""

    @classmethod
    def of(cls, s: Settings) -> StreamSettings:
        return cls(
            max_apps=s.max_apps,
            grace_period_s=s.grace_period_s,
            batch_max=s.batch_max,
            writes_per_s=s.stream_writes_per_s,
        )


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """The section of :class:`Settings` a cluster node uses
    (:mod:`vehicle_middleware.server.cluster`)."""

    node_id: str
    peers: tuple[tuple[str, str], ...]
    """``(name, address)`` of every other node."""
    max_confirms: int | None
    """Confirmations an event needs (None: every peer's)."""
    max_events: int
    max_bytes: int
    event_max_age_s: float
    event_max_ahead_s: float
    max_pending: int
    send_unread_interval_s: float
    sync_interval_s: float
    guard_timeout_s: float
    max_message_bytes: int
    """The most bytes of one message (a link's send limit; events up to a quarter)."""

    @classmethod
    def of(cls, s: Settings) -> ClusterSettings:
        return cls(
            node_id=s.node_id,
            peers=tuple(parse_peer(entry) for entry in s.peers),
            max_confirms=None if s.max_confirms == "all" else int(s.max_confirms),
            max_events=s.cluster_max_events,
            max_bytes=s.cluster_max_bytes,
            event_max_age_s=s.event_max_age_s,
            event_max_ahead_s=s.event_max_ahead_s,
            max_pending=s.cluster_max_pending,
            send_unread_interval_s=s.send_unread_interval_s,
            sync_interval_s=s.sync_interval_s,
            guard_timeout_s=s.guard_timeout_s,
            max_message_bytes=s.max_message_bytes,
        )


def parse_peer(entry: str) -> tuple[str, str]:
    """``NAME=ADDRESS`` -> (name, address).

    Raises:
        ValueError: no ``=``, a bad name or an empty address, naming the entry.
    """
    name, sep, address = entry.partition("=")
    if not sep or _NODE_ID.fullmatch(name) is None or not address.strip():
        raise ValueError(
            f"peers: {entry!r} is not NAME=ADDRESS (NAME: the peer's node_id, 1 to 64 "
            "characters of [A-Za-z0-9_.-]; ADDRESS: host:port), e.g. zone-rear=127.0.0.1:50052"
        )
    return name, address.strip()


_SECRET_WORDS: Final = frozenset({"token", "key", "secret", "password", "private", "credential"})
"""A setting with one of these among the words of its name is masked when shown."""
MASK: Final = "***"


def masked(settings: Settings) -> dict[str, Any]:
    """Every setting by name, for a log line: token- and key-related text masked.

    A masked setting (a text setting with ``token``, ``key``, ``secret``, ...
    among the words of its name) shows ``***`` when set and ``''`` when empty,
    so the log says whether it is configured without saying what it is.
    """
    out: dict[str, Any] = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, str) and _SECRET_WORDS & set(f.name.split("_")):
            value = MASK if value else ""
        out[f.name] = value
    return out


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _coerce(name: str, raw: Any, kind: type) -> Any:
    if kind is tuple:  # a list of strings: TOML list, flags repeated, env comma-separated
        if isinstance(raw, str):
            return tuple(part for part in raw.split(",") if part)
        if isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
            return tuple(raw)
        raise ValueError(f"setting {name}: expected a list of strings, got {raw!r}")
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ValueError(f"setting {name}: expected true or false, got {raw!r}")
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    if isinstance(raw, str):
        try:
            return kind(raw)
        except ValueError:
            pass
    if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    raise ValueError(f"setting {name}: expected {kind.__name__}, got {raw!r}")


def load_settings(
    *,
    toml_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings from a TOML file, ``VMW_*`` variables and overrides.

    Raises:
        ValueError: an unknown setting in the file, a value of the wrong type,
            or a value out of range, naming the setting.
    """
    kinds = {f.name: type(f.default) for f in fields(Settings)}
    values: dict[str, Any] = {}
    if toml_path is not None:
        with toml_path.open("rb") as fh:
            table = tomllib.load(fh)
        table = table.get("middleware", table)
        for name, raw in table.items():
            if name not in kinds:
                raise ValueError(f"{toml_path}: unknown setting {name!r}")
            values[name] = _coerce(name, raw, kinds[name])
    for name, kind in kinds.items():
        raw_env = (env or {}).get(f"VMW_{name.upper()}")
        if raw_env is not None:
            values[name] = _coerce(f"VMW_{name.upper()}", raw_env, kind)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw, kinds[name])
    return dataclasses.replace(Settings(), **values)
