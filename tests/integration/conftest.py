"""Real middleware servers on 127.0.0.1:0 and raw stubs to call them: the ``server``
fixture (one per test, settings from its ``settings`` markers), :func:`serving` (a
server for a block), and ``secure`` (a token-mode server) with the ``keys`` that sign
its tokens."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2_grpc
from vehicle_middleware.server import codecs
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.kuksa import v2 as kuksa_v2
from vehicle_middleware.server.server import RunningServer, start_server

TEST_SETTINGS = replace_settings(
    Settings(), listen="127.0.0.1:0", keepalive_time_s=1.0, keepalive_timeout_s=1.0
)
AUD: Final = "vmw-test"
"""The audience of the tokens that ``secure`` servers accept."""
NewServer = Callable[..., Awaitable[RunningServer]]
"""The type of the ``new_server`` fixture: ``await new_server(**overrides)``."""


async def start_ready(code: str, *args: str) -> asyncio.subprocess.Process:
    """A Python process running ``code`` with ``args``, once it printed ``ready``
    (killed if it does not within 30 s). Started asynchronously: the servers of
    these tests run on the test's own event loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, *args, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"ready", line
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc


def settings_for(request: pytest.FixtureRequest, **overrides: Any) -> Settings:
    """:data:`TEST_SETTINGS`, then the test's ``settings`` markers (the module's, the
    class's, then its own: the nearest wins), then ``overrides``; each names
    settings as operators do (``journal_dir=...``, :func:`replace_settings`)."""
    kw: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("settings"))):
        kw.update(marker.kwargs)
    kw.update(overrides)
    return replace_settings(TEST_SETTINGS, **kw)


@pytest.fixture
async def new_server(request: pytest.FixtureRequest) -> AsyncIterator[NewServer]:
    """Start a real middleware on 127.0.0.1:0: ``await new_server(**overrides)`` with
    :func:`settings_for`'s settings. Each is stopped when the test ends (a test may
    stop one before, e.g. to restart it on its port)."""
    started: list[RunningServer] = []

    async def start(**overrides: Any) -> RunningServer:
        running = await start_server(settings_for(request, **overrides))
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in reversed(started):
            await running.stop(0)


@contextlib.asynccontextmanager
async def serving(
    settings: Settings = TEST_SETTINGS, /, **overrides: Any
) -> AsyncIterator[RunningServer]:
    """A real middleware with ``settings`` and ``overrides`` for the ``async with`` block,
    stopped when it ends: for a test whose servers' settings depend on what it made
    (certificates, a journal directory), or that runs servers one after another."""
    running = await start_server(replace_settings(settings, **overrides))
    try:
        yield running
    finally:
        await running.stop(0)


@dataclasses.dataclass(frozen=True)
class Keys:
    """The keys that sign the tests' tokens (ES256): ``private`` pairs with ``public``,
    the key ``secure`` servers trust; ``other_private`` signs tokens they must refuse."""

    private: bytes
    public: bytes
    other_private: bytes

    def token(self, subject: str, scope: str = "", **kw: Any) -> str:
        """A token for ``subject`` with ``scope``, signed by ``private`` (or ``key=``),
        for :data:`AUD` and valid for 600 s unless ``audience=`` or ``ttl_s=`` say
        otherwise; other keywords go to :func:`vehicle_middleware.server.auth.tokens.mint`."""
        kw.setdefault("ttl_s", 600)
        kw.setdefault("audience", AUD)
        return mint(kw.pop("key", self.private), subject=subject, scope=scope, **kw)


@pytest.fixture(scope="session")
def keys() -> Keys:
    """One set of :class:`Keys` for the whole run: keys are never changed."""
    private, public = generate_key_pair("ES256")
    other_private, _ = generate_key_pair("ES256")
    return Keys(private, public, other_private)


def token_mode(keys: Keys, tmp_path: Path) -> dict[str, Any]:
    """The settings of a token-mode server that trusts ``keys.public`` (written under
    ``tmp_path``) for tokens of :data:`AUD`."""
    pub = tmp_path / "vehicle_middleware.pub"
    pub.write_bytes(keys.public)
    return {"auth_mode": "token", "token_public_key": str(pub), "token_audience": AUD}


@pytest.fixture
def secure_settings() -> dict[str, Any]:
    """What a module's ``secure`` servers set beyond token mode: none here; a module
    overrides this fixture (e.g. a journal directory under ``tmp_path``)."""
    return {}


@pytest.fixture
async def secure(
    new_server: NewServer, keys: Keys, tmp_path: Path, secure_settings: dict[str, Any]
) -> RunningServer:
    """The test's token-mode middleware (:func:`token_mode`), with its module's
    ``secure_settings`` and its ``settings`` markers."""
    return await new_server(**token_mode(keys, tmp_path), **secure_settings)


@dataclasses.dataclass
class PublishReader:
    """Which way a test's KUKSA publishes were read, and the fast way's answers."""

    way: str
    taken: list[bool] = dataclasses.field(default_factory=list)
    """Per publish given to the reader: whether it wrote it (False: left to protobuf)."""


@pytest.fixture(params=["bytes", "reference", "protobuf"])
def publish_reader(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PublishReader]:
    """Every way a KUKSA provider's publishes are read, for the servers a test starts:
    without a message per value (``vehicle_middleware.server.kuksa.ingest``, the fast codecs'
    reader), by the reference codecs' reader (``vehicle_middleware.server.kuksa.ingest_reference``),
    and every request through ``PublishValuesRequest`` and the general code (the
    way both readers leave to it whatever needs judging)."""
    reader = PublishReader(str(request.param))
    before = codecs.selected()
    if reader.way == "reference":
        codecs.select("reference")
    elif reader.way == "protobuf":
        provider_request = kuksa_v2.provider_request

        def general_only(raw: bytes, *, read: Any) -> Any:
            return provider_request(raw, read=lambda _: None)

        monkeypatch.setattr(kuksa_v2, "provider_request", general_only)
    publish_floats = kuksa_v2.KuksaV2._publish_floats

    def watched(self: kuksa_v2.KuksaV2, who: Any, published: Any) -> bool:
        taken = publish_floats(self, who, published)
        reader.taken.append(taken)
        return taken

    monkeypatch.setattr(kuksa_v2.KuksaV2, "_publish_floats", watched)
    yield reader
    codecs.select(before.value)


@pytest.fixture(params=[c.value for c in codecs.Codecs])
def each_codecs(request: pytest.FixtureRequest) -> Iterator[codecs.Codecs]:
    """The servers a test starts run each implementation of the hot codecs in turn
    (:mod:`vehicle_middleware.server.codecs`): use it before the server, with ``usefixtures``."""
    before = codecs.selected()
    yield codecs.select(str(request.param))
    codecs.select(before.value)


@pytest.fixture
async def server(new_server: NewServer) -> RunningServer:
    """The test's middleware: settings from its ``settings`` markers."""
    return await new_server()


class Stubs:
    """Raw stubs on one channel, with an app id (or none)."""

    def __init__(self, channel: grpc.aio.Channel, app: str | None) -> None:
        self.channel = channel
        self.md: tuple[tuple[str, str], ...] = (("app-id", app),) if app else ()
        self.events = ess_pb2_grpc.EventServiceStub(channel)
        self.vstore = vstore_pb2_grpc.VStoreStub(channel)


@pytest.fixture
async def connect(server: RunningServer) -> AsyncIterator[Any]:
    channels: list[grpc.aio.Channel] = []

    def make(app: str | None = "test-app") -> Stubs:
        channel = grpc.aio.insecure_channel(server.address)
        channels.append(channel)
        return Stubs(channel, app)

    yield make
    for channel in channels:
        await channel.close()
