"""The middleware's settings: one frozen object, built at the entry point.

:class:`Settings` holds one section per part of the process (the listeners,
access, request limits, streams, the ESS, the store, the signals, the journal,
metrics, the cluster, the process itself); each part is handed the section it
uses. A section declares each of its settings once: its name, default, meaning
and checks.

Operators name settings flat (docs/operators.md): a setting's name is its
section's :attr:`Section.PREFIX` followed by its field's name, and it is the
same in every source. Sources, later ones winning: defaults, an optional TOML
file, ``VMW_*`` environment variables, command-line flags: ``event_budget`` is
``event_budget = 20000`` in TOML, ``VMW_EVENT_BUDGET`` in the environment and
``--event-budget`` on the command line.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD
from vehicle_middleware.ess import parse_expect_rule
from vehicle_middleware.server.loop import check_choice

__all__ = [
    "SETTINGS_BY_NAME",
    "AccessSettings",
    "ClusterSettings",
    "EssSettings",
    "JournalSettings",
    "MetricsSettings",
    "NetworkSettings",
    "ProcessSettings",
    "RequestLimits",
    "Section",
    "Setting",
    "Settings",
    "SignalSettings",
    "StoreSettings",
    "StreamSettings",
    "event_reserve",
    "flat_settings",
    "load_settings",
    "masked",
    "parse_peer",
    "replace_settings",
]


class Section:
    """What every section of :class:`Settings` shares: how its settings are named."""

    __slots__ = ()
    PREFIX: ClassVar[str] = ""
    """Put before a field's name, it makes the setting's name (flag, variable, TOML key)."""


def _at_least(section: Section, low: int, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if value < low:
            raise ValueError(f"{section.PREFIX}{name} must be >= {low}, got {value}")


def _above_zero(section: Section, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if value <= 0:
            raise ValueError(f"{section.PREFIX}{name} must be above 0, got {value}")


@dataclass(frozen=True, slots=True)
class NetworkSettings(Section):
    """Where the gRPC server listens, how (TLS), and how it finds dead peers
    (:mod:`vehicle_middleware.server.server`, :mod:`vehicle_middleware.server.tls`)."""

    listen: str = "127.0.0.1:50051"
    """TCP address to listen on; empty to listen on the Unix socket only. Port 0 picks one."""
    unix_socket: str = ""
    """Also listen on this Unix socket path (empty: no)."""
    unix_socket_mode: str = "0660"
    """File mode of the Unix socket (octal): who may connect to it (plaintext)."""
    tls_cert: str = ""
    """PEM certificate (chain) of the middleware: TLS on the TCP listener (empty: plaintext)."""
    tls_key: str = ""
    """PEM private key of ``tls_cert``."""
    keepalive_time_s: float = 10.0
    """Ping an idle client after this long, to find dead peers."""
    keepalive_timeout_s: float = 5.0
    """A client that does not answer a ping within this is gone."""
    max_pending_calls: int = 10_000
    """Calls arrived and not yet taken up by the middleware, all connections together
    (grpc-core's pending requests, with a hard limit of twice this): beyond, grpc-core
    cancels calls before the middleware sees them, with a bare CANCELLED. Below, a
    burst waits its turn."""
    max_concurrent_streams: int = 1_000
    """Calls (unary or streaming) in progress on one connection, at most (HTTP/2
    ``SETTINGS_MAX_CONCURRENT_STREAMS``; 0: not bounded): a gRPC client queues its
    calls beyond it until one ends; one sent beyond it anyway is refused
    (UNAVAILABLE) having run nothing."""

    def __post_init__(self) -> None:
        _at_least(self, 0, "keepalive_time_s", "keepalive_timeout_s")
        _at_least(self, 0, "max_concurrent_streams")
        _at_least(self, 1, "max_pending_calls")
        if not self.listen and not self.unix_socket:
            raise ValueError("listen and unix_socket are both empty: nothing to listen on")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        if self.tls_cert and not self.listen:
            raise ValueError("tls_cert is for the TCP listener, but listen is empty")
        if not 0 <= self.unix_socket_file_mode <= 0o777:
            raise ValueError(
                f"unix_socket_mode must be an octal file mode such as 0660, "
                f"got {self.unix_socket_mode!r}"
            )

    @property
    def unix_socket_file_mode(self) -> int:
        """``unix_socket_mode`` as a number (-1 where it is no octal number)."""
        try:
            return int(self.unix_socket_mode, 8)
        except ValueError:
            return -1


@dataclass(frozen=True, slots=True)
class AccessSettings(Section):
    """Identity, rate limits and claims (:mod:`vehicle_middleware.server.auth`)."""

    auth_mode: str = "open"
    """``open``: the app-id header is trusted, everything allowed (development).
    ``token``: every call carries ``authorization: Bearer <JWT>``."""
    token_public_key: str = ""
    """PEM file of the RS256/ES256 public key that verifies tokens (token mode)."""
    token_audience: str = ""
    """Required ``aud`` of tokens (empty: not checked)."""
    token_leeway_s: float = 5.0
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""
    tls_client_ca: str = ""
    """PEM CA certificate(s): mutual TLS, every TCP client shows a certificate they
    signed, and its subject CN (or a SAN) is the app's identity."""
    rate_limit_rps: float = 500.0
    """Requests (calls and stream opens) per second per app, refilled continuously."""
    rate_limit_burst: int = 1_000
    publish_messages_per_s: float = 5_000.0
    """Messages per second on one Publish stream."""
    publish_burst: int = 10_000
    claim_grace_s: float = 5.0
    """A key claimed by an app with no open stream is released after this long."""
    max_publish_streams_per_app: int = 4

    def __post_init__(self) -> None:
        _at_least(
            self,
            1,
            "max_publish_streams_per_app",
            "rate_limit_rps",
            "rate_limit_burst",
            "publish_messages_per_s",
            "publish_burst",
        )
        _at_least(self, 0, "claim_grace_s", "token_leeway_s")
        if self.auth_mode not in ("open", "token"):
            raise ValueError(f"auth_mode must be 'open' or 'token', got {self.auth_mode!r}")
        if self.auth_mode == "token" and not self.token_public_key:
            raise ValueError("auth_mode 'token' needs token_public_key (a PEM file)")


@dataclass(frozen=True, slots=True)
class RequestLimits(Section):
    """What every servicer checks a request against."""

    max_keys_per_request: int = 1_000
    """Most keys, names or updates in one request (and in one Publish batch)."""
    max_message_bytes: int = 4 * 1024 * 1024
    """Largest gRPC message accepted or sent."""
    max_subscriptions_per_app: int = 10_000
    """Subscriptions one app holds, at most."""
    stream_window: int = 32
    """Messages (batches) an app's ``Events`` stream keeps sent and not yet
    acknowledged, at most, when the app does not ask for another window: what it
    can lag behind beyond its queues. Wide enough that with many apps writing
    often, the acknowledgements (one per half window) and the waits for them do
    not hold events in the apps' queues."""
    max_stream_window: int = 64
    """Largest window an app may ask for."""

    def __post_init__(self) -> None:
        _at_least(
            self,
            1,
            "max_keys_per_request",
            "max_message_bytes",
            "max_subscriptions_per_app",
            "stream_window",
            "max_stream_window",
        )
        if self.stream_window > self.max_stream_window:
            raise ValueError(
                f"stream_window ({self.stream_window}) exceeds max_stream_window "
                f"({self.max_stream_window})"
            )


@dataclass(frozen=True, slots=True)
class StreamSettings(Section):
    """The subscriber streams (:mod:`vehicle_middleware.server.session`)."""

    max_apps: int = 128
    """Apps with an open event stream at once."""
    max_streams_per_app: int = 16
    """Event streams one app holds at once: its own (``Events``/``GetEvents``) and
    each of its KUKSA subscriptions (v1 and v2) (:mod:`vehicle_middleware.server.session`)."""
    event_budget_per_app: int = 128
    """An app's share of the event budget: the ``min_length`` values its streams
    reserve, all together (a KUKSA subscription reserves its queue 0's). The
    middleware holds ``max_apps`` shares of ``event_budget`` back for them, so an
    app within its share is admitted however the others use theirs."""
    grace_period_s: float = 0.0
    """How long an app's subscriptions outlive its stream (0: removed at once)."""
    batch_max: int = 500
    """Most events in one EventBatch."""
    stream_writes_per_s: int = 5_000
    """Stream writes a second, at most, all apps together (0: no budget): beyond,
    a write waits its turn and its app's queues collect more for it
    (:mod:`vehicle_middleware.server.pacing`). A quarter of a core's worth of writes: under it no
    write waits; where it binds (many apps, each written often), fewer and fuller
    batches keep the tail latency down."""

    def __post_init__(self) -> None:
        _at_least(self, 1, "max_apps", "batch_max", "max_streams_per_app", "event_budget_per_app")
        _at_least(self, 0, "grace_period_s", "stream_writes_per_s")


@dataclass(frozen=True, slots=True)
class EssSettings(Section):
    """The event subsystem's queues (:mod:`vehicle_middleware.ess`,
    :mod:`vehicle_middleware.server.slow_apps`)."""

    event_budget: int = 20_000
    """Most data events queued for all apps together."""
    lifecycle_capacity: int = 1_000
    """Per-app buffer of key_added/key_removed events before a resync is forced."""
    slow_app_report_s: float = 10.0
    """While an app's queues keep dropping events, a warning with running counts this often."""

    def __post_init__(self) -> None:
        _above_zero(self, "slow_app_report_s")
        _at_least(self, 1, "event_budget", "lifecycle_capacity")


@dataclass(frozen=True, slots=True)
class StoreSettings(Section):
    """The V-Store's bounds (:mod:`vehicle_middleware.vstore`)."""

    max_value_size: int = 64 * 1024
    """Largest value accepted, in bytes."""
    max_keys: int = 100_000
    """Most keys in the store."""

    def __post_init__(self) -> None:
        _at_least(self, 1, "max_keys")
        _at_least(self, 0, "max_value_size")


@dataclass(frozen=True, slots=True)
class SignalSettings(Section):
    """The vehicle's signals: their catalogs, how long each may go unwritten, and
    how long an actuation waits (:mod:`vehicle_middleware.server.signals`,
    :mod:`vehicle_middleware.server.health`, :mod:`vehicle_middleware.server.actuation`)."""

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
    demand_interval_s: float = 0.1
    """Providers that follow their keys' demand (``WatchDemand``, KUKSA
    ``OpenProviderStream`` filters) are told its changes at most this often, batched
    (:mod:`vehicle_middleware.server.demand`)."""

    def __post_init__(self) -> None:
        _at_least(self, 0, "actuation_timeout_s")
        _above_zero(self, "demand_interval_s")
        for rule in self.expect:
            parse_expect_rule(rule)  # raises ValueError naming the rule


@dataclass(frozen=True, slots=True)
class JournalSettings(Section):
    """The telemetry journal and the history its consumers read
    (:mod:`vehicle_middleware.server.journal`). Each setting's name starts with ``journal_``."""

    PREFIX: ClassVar[str] = "journal_"

    dir: str = ""
    """Directory of the telemetry journal (empty: no journal)."""
    level: str = "drops"
    """``lifecycle``, ``drops`` or ``full`` (see vehicle_middleware.contract.journal.records)."""
    segment_bytes: int = 8 * 1024 * 1024
    max_bytes: int = 256 * 1024 * 1024
    """Retention: the oldest segments go when the journal is bigger."""
    gzip: bool = False
    buffer: int = 100_000
    """Records waiting for the writer; beyond it they are dropped and counted."""
    history_records: int = 100_000
    """Newest journal records kept in memory for consumers (JournalService);
    older ones are read from the segments on disk."""
    history_bytes: int = 16 * 1024 * 1024
    """Bytes of those records (their lines), at most."""
    consumer_max_lag_bytes: int = 512 * 1024 * 1024
    """Bytes on disk a registered journal consumer may leave unacknowledged before
    retention removes them anyway (and cuts it loose); retention keeps up to this
    much beyond journal_max_bytes for a consumer that lags."""
    max_consumers: int = 16
    """Registered journal consumers, at most (all apps together)."""
    max_consumers_per_app: int = 4
    """Registered journal consumers one app may hold: its share. The default
    registry holds 4 apps at their full share (16 = 4 x 4)."""
    offset_start: int = -1
    """The first journal offset of a boot: -1 (random, as the offsets scheme asks);
    0..2^32-1 for tests (e.g. near 2^32, to see the wrap)."""

    def __post_init__(self) -> None:
        _at_least(
            self,
            1,
            "segment_bytes",
            "max_bytes",
            "buffer",
            "history_records",
            "history_bytes",
            "consumer_max_lag_bytes",
            "max_consumers",
            "max_consumers_per_app",
        )
        if not -1 <= self.offset_start < OFFSET_MOD:
            raise ValueError(
                f"journal_offset_start must be -1 (random) or 0..{OFFSET_MOD - 1}, "
                f"got {self.offset_start}"
            )
        if self.level not in ("lifecycle", "drops", "full"):
            raise ValueError(f"journal_level must be lifecycle, drops or full, got {self.level!r}")


@dataclass(frozen=True, slots=True)
class MetricsSettings(Section):
    """The Prometheus endpoint (:mod:`vehicle_middleware.server.metrics`). Each setting's name
    starts with ``metrics_``."""

    PREFIX: ClassVar[str] = "metrics_"

    listen: str = ""
    """Serve Prometheus text at ``http://ADDRESS/metrics`` (empty: no). Port 0 picks one."""
    remote: bool = False
    """Allow ``metrics_listen`` on an address other than loopback. The endpoint is
    plain HTTP with no authentication (app and key names, drops): off unless the
    vehicle network around it is trusted; ``GetStats`` (TLS, the admin scope) is
    the protected way."""
    top_keys: int = 20
    """Keys in the per-key series (the busiest by writes per second; 0 to 1000)."""

    def __post_init__(self) -> None:
        if self.listen:
            _host, sep, port = self.listen.rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise ValueError(
                    f"metrics_listen {self.listen!r}: use HOST:PORT, e.g. 127.0.0.1:9464"
                )
            host = _host.strip("[]")
            if host not in ("127.0.0.1", "::1", "localhost") and not self.remote:
                raise ValueError(
                    f"metrics_listen {self.listen!r} is not a loopback address: the "
                    "metrics endpoint has no authentication; listen on 127.0.0.1 (a local "
                    "scraper or agent), use GetStats (TLS, the admin scope), or set "
                    "metrics_remote = true on a trusted network"
                )
        if not 0 <= self.top_keys <= 1000:
            raise ValueError(f"metrics_top_keys must be 0 to 1000, got {self.top_keys}")


_NODE_ID: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}", re.ASCII)


@dataclass(frozen=True, slots=True)
class ClusterSettings(Section):
    """Several nodes (:mod:`vehicle_middleware.server.cluster`; docs/operators.md "Several
    nodes")."""

    node_id: str = ""
    """This node's id among the vehicle's middleware nodes (needed with peers)."""
    peers: tuple[str, ...] = ()
    """The other nodes, ``NAME=ADDRESS`` (NAME is the peer's node_id). Flag
    ``--peer`` (repeatable), TOML a list, ``VMW_PEERS`` comma-separated. None:
    a single node."""
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
        _at_least(self, 1, "cluster_max_events", "cluster_max_bytes", "cluster_max_pending")
        _above_zero(
            self,
            "sync_interval_s",
            "send_unread_interval_s",
            "event_max_age_s",
            "event_max_ahead_s",
            "guard_timeout_s",
        )
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
        for name in ("peer_tls_ca", "peer_tls_cert", "peer_tls_key", "peer_token_file"):
            if getattr(self, name) and not Path(getattr(self, name)).is_file():
                raise ValueError(f"{name} {getattr(self, name)}: no such file")

    @property
    def peer_addresses(self) -> dict[str, str]:
        """Every other node's address by its name, in the order of ``peers``
        (each entry checked when the section was built)."""
        return dict(parse_peer(entry) for entry in self.peers)

    @property
    def confirms_needed(self) -> int | None:
        """``max_confirms`` as a count; None for ``all`` (every other node's)."""
        return None if self.max_confirms == "all" else int(self.max_confirms)


@dataclass(frozen=True, slots=True)
class ProcessSettings(Section):
    """The process around the parts: the vehicle it serves, its log and its event loop."""

    vehicle_id: str = "vehicle"
    """The vehicle this middleware serves: written in every journal record and in the figures."""
    log_level: str = "INFO"
    event_loop: str = "auto"
    """The process's asyncio loop: ``auto`` (uvloop where installed, else
    asyncio's own), ``uvloop`` (it or a start-up error) or ``asyncio``
    (:mod:`vehicle_middleware.server.loop`)."""

    def __post_init__(self) -> None:
        check_choice(self.event_loop)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the middleware process can be told, by section. Defaults are the
    documented ones; each section checks its own settings, this class the few
    rules that join two sections."""

    network: NetworkSettings = field(default_factory=NetworkSettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    limits: RequestLimits = field(default_factory=RequestLimits)
    streams: StreamSettings = field(default_factory=StreamSettings)
    ess: EssSettings = field(default_factory=EssSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    signals: SignalSettings = field(default_factory=SignalSettings)
    journal: JournalSettings = field(default_factory=JournalSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)

    def __post_init__(self) -> None:
        if self.access.tls_client_ca and not self.network.tls_cert:
            raise ValueError("tls_client_ca (mutual TLS) needs tls_cert and tls_key")
        if self.store.max_value_size + 1024 > self.limits.max_message_bytes:
            raise ValueError("max_message_bytes must exceed max_value_size by at least 1 KiB")
        if (
            self.cluster.peers
            and self.access.auth_mode == "token"
            and not self.cluster.peer_token_file
        ):
            raise ValueError(
                "auth_mode 'token' with peers needs peer_token_file (a token with the peer "
                "scope whose subject is node_id)"
            )


def event_reserve(settings: Settings) -> int:
    """Units of the event budget held back for the apps' reservations: every app's
    share (``max_apps`` x ``event_budget_per_app``), at most the whole budget."""
    shares = settings.streams.max_apps * settings.streams.event_budget_per_app
    return min(settings.ess.event_budget, shares)


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


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as operators name it: the TOML key ``name``, the flag
    ``--name`` (dashes for underscores), the variable ``VMW_NAME``."""

    name: str
    section: str
    """The attribute of :class:`Settings` that holds its section."""
    field_name: str
    """Its attribute in that section."""
    default: Any

    @property
    def kind(self) -> type:
        """The type its values are read as: that of its default (``tuple``: a list of strings)."""
        return type(self.default)

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    @property
    def env(self) -> str:
        return f"VMW_{self.name.upper()}"


def _by_name() -> dict[str, Setting]:
    defaults = Settings()
    out: dict[str, Setting] = {}
    for s in fields(Settings):
        section = getattr(defaults, s.name)
        for f in fields(section):
            name: str = section.PREFIX + f.name
            if name in out:
                raise RuntimeError(f"setting {name!r} is named twice")  # a bug in this module
            out[name] = Setting(name, s.name, f.name, getattr(section, f.name))
    return out


SETTINGS_BY_NAME: Final[Mapping[str, Setting]] = MappingProxyType(_by_name())
"""Every setting by its name, in the order of the sections and their fields."""


def replace_settings(settings: Settings, /, **values: Any) -> Settings:
    """A copy of ``settings`` with the settings named (by their flat names, as
    :data:`SETTINGS_BY_NAME` has them) set to ``values``; each section changed is
    checked again, then the whole.

    Raises:
        ValueError: an unknown name, or a value out of range, naming the setting.
    """
    changes: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        setting = SETTINGS_BY_NAME.get(name)
        if setting is None:
            raise ValueError(f"unknown setting {name!r}")
        changes.setdefault(setting.section, {})[setting.field_name] = value
    return dataclasses.replace(
        settings,
        **{
            section: dataclasses.replace(getattr(settings, section), **kw)
            for section, kw in changes.items()
        },
    )


def flat_settings(settings: Settings) -> dict[str, Any]:
    """Every setting by its name (as :data:`SETTINGS_BY_NAME` orders them), flat."""
    return {
        name: getattr(getattr(settings, s.section), s.field_name)
        for name, s in SETTINGS_BY_NAME.items()
    }


_SECRET_WORDS: Final = frozenset({"token", "key", "secret", "password", "private", "credential"})
"""A setting with one of these among the words of its name is masked when shown."""
MASK: Final = "***"


def masked(settings: Settings) -> dict[str, Any]:
    """Every setting by name, for a log line: token- and key-related text masked.

    A masked setting (a text setting with ``token``, ``key``, ``secret``, ...
    among the words of its name) shows ``***`` when set and ``''`` when empty,
    so the log says whether it is configured without saying what it is.
    """
    out = flat_settings(settings)
    for name, value in out.items():
        if isinstance(value, str) and _SECRET_WORDS & set(name.split("_")):
            out[name] = MASK if value else ""
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
    """Build the settings from a TOML file, ``VMW_*`` variables and overrides,
    each naming settings flat (:data:`SETTINGS_BY_NAME`).

    The TOML file is one flat table of settings, at its top level or under
    ``[middleware]``. An override of None is no override (a flag not given).

    Raises:
        ValueError: an unknown setting in the file, a value of the wrong type,
            or a value out of range, naming the setting.
    """
    values: dict[str, Any] = {}
    if toml_path is not None:
        with toml_path.open("rb") as fh:
            table = tomllib.load(fh)
        table = table.get("middleware", table)
        for name, raw in table.items():
            if name not in SETTINGS_BY_NAME:
                raise ValueError(f"{toml_path}: unknown setting {name!r}")
            values[name] = _coerce(name, raw, SETTINGS_BY_NAME[name].kind)
    for name, setting in SETTINGS_BY_NAME.items():
        raw_env = (env or {}).get(setting.env)
        if raw_env is not None:
            values[name] = _coerce(setting.env, raw_env, setting.kind)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            if name not in SETTINGS_BY_NAME:
                raise ValueError(f"unknown setting {name!r}")
            values[name] = _coerce(name, raw, SETTINGS_BY_NAME[name].kind)
    return replace_settings(Settings(), **values)
