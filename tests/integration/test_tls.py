"""TLS and mutual TLS against real servers, with certificates made at run time.

A TLS listener serves clients that trust its CA and refuses plaintext ones and
ones that do not; with a client CA, a client certificate from another CA, an
expired one, or none is refused at the handshake, and the certificate's name
is the app's identity (a token's subject and an app-id must agree with it).
The Unix socket stays plaintext with its file mode; the CLI clients take
the --tls-* options.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, Sub, Tls
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.server import start_server
from vehicle_middleware.server.tls import TlsConfigError

from tests.conftest import eventually, fails
from tests.integration.conftest import TEST_SETTINGS, serving
from tests.integration.pki import Authority

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Pki:
    car: Authority
    rogue: Authority

    def __post_init__(self) -> None:
        self.server = self.car.server()


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(Authority(tmp_path, "car"), Authority(tmp_path, "rogue"))


def tls_settings(pki: Pki, *, mutual: bool = False) -> Settings:
    """A server with ``pki``'s server certificate; with ``mutual``, clients must show
    one from the car's CA."""
    return replace_settings(
        TEST_SETTINGS,
        tls_cert=str(pki.server.cert),
        tls_key=str(pki.server.key),
        tls_client_ca=str(pki.car.cert) if mutual else "",
    )


async def _add_keys(
    channel: grpc.aio.Channel, names: list[str], app: str | None, *, claim: bool = False
) -> vstore_pb2.AddKeysResponse:
    md = (("app-id", app),) if app else ()
    stub = vstore_pb2_grpc.VStoreStub(channel)
    response: vstore_pb2.AddKeysResponse = await stub.AddKeys(
        vstore_pb2.AddKeysRequest(names=names, claim=claim), metadata=md, timeout=5
    )
    return response


async def test_a_client_that_trusts_the_ca_gets_events_over_tls(pki: Pki) -> None:
    async with serving(tls_settings(pki)) as server:
        tls = Tls(ca=pki.car.cert)
        async with (
            ProviderClient(server.address, "sensor", tls=tls) as provider,
            AppClient(server.address, "dash", tls=tls) as app,
        ):
            await provider.add_keys(["Vehicle.Speed"])
            await app.subscribe([Sub("Vehicle.Speed")])
            await provider.set("Vehicle.Speed", b"\x2a")
            events = app.events()
            event = await asyncio.wait_for(anext(events), 5)
            while not isinstance(event, DataEvent):
                event = await asyncio.wait_for(anext(events), 5)
            assert (event.name, event.data) == ("Vehicle.Speed", b"\x2a")


async def test_plaintext_and_untrusting_clients_are_refused_by_a_tls_listener(pki: Pki) -> None:
    async with serving(tls_settings(pki)) as server:
        async with grpc.aio.insecure_channel(server.address) as plain:
            await fails(_add_keys(plain, ["A"], "a"), grpc.StatusCode.UNAVAILABLE)
        wrong = Tls(ca=pki.rogue.cert)  # the middleware's certificate is not from this CA
        async with grpc.aio.secure_channel(server.address, wrong.credentials()) as untrusting:
            await fails(_add_keys(untrusting, ["A"], "a"), grpc.StatusCode.UNAVAILABLE)
        assert len(server.runtime.store) == 0


async def test_mutual_tls_refuses_a_foreign_an_expired_and_a_missing_client_certificate(
    pki: Pki,
) -> None:
    foreign = pki.rogue.issue("foreign", "cabin")
    expired = pki.car.issue("expired", "cabin", expired=True)
    async with serving(tls_settings(pki, mutual=True)) as server:
        for what, tls in (
            ("another CA's certificate", Tls(ca=pki.car.cert, cert=foreign.cert, key=foreign.key)),
            ("an expired certificate", Tls(ca=pki.car.cert, cert=expired.cert, key=expired.key)),
            ("no certificate", Tls(ca=pki.car.cert)),
        ):
            async with grpc.aio.secure_channel(server.address, tls.credentials()) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await _add_keys(channel, ["A"], "cabin")
                assert refused.value.code() is grpc.StatusCode.UNAVAILABLE, what
        assert len(server.runtime.store) == 0


async def test_the_client_certificate_names_the_app_and_an_app_id_must_agree(pki: Pki) -> None:
    cabin = pki.car.issue("cabin", "cabin-app", dns=("climate-app",))
    tls = Tls(ca=pki.car.cert, cert=cabin.cert, key=cabin.key)
    async with (
        serving(tls_settings(pki, mutual=True)) as server,
        grpc.aio.secure_channel(server.address, tls.credentials()) as channel,
    ):
        # No app-id at all: the certificate's CN is the app.
        await _add_keys(channel, ["Vehicle.Cabin.Temp"], None, claim=True)
        assert server.runtime.claims.claimed_by("Vehicle.Cabin.Temp") == "cabin-app"
        # A SAN of the certificate names another app it may be.
        await _add_keys(channel, ["Vehicle.Cabin.Fan"], "climate-app", claim=True)
        assert server.runtime.claims.claimed_by("Vehicle.Cabin.Fan") == "climate-app"
        await fails(
            _add_keys(channel, ["Vehicle.Speed"], "powertrain"),
            grpc.StatusCode.UNAUTHENTICATED,
            "'powertrain' is not named by the client certificate",
            "'cabin-app'",
        )
        # The SDK's app stream: the app is who the certificate says.
        async with AppClient(server.address, "cabin-app", tls=tls) as app:
            await app.subscribe([Sub("Vehicle.Cabin.Temp")])
            assert server.runtime.ess.apps() == ["cabin-app"]
        assert "Vehicle.Speed" not in server.runtime.store


async def test_with_tokens_and_mutual_tls_the_token_subject_must_be_the_certificates(
    pki: Pki, tmp_path: Path
) -> None:
    private, public = generate_key_pair("ES256")
    (tmp_path / "vehicle_middleware.pub").write_bytes(public)
    cabin = pki.car.issue("cabin", "cabin-app")
    tls = Tls(ca=pki.car.cert, cert=cabin.cert, key=cabin.key)
    good = mint(private, subject="cabin-app", scope="create:Vehicle.Cabin.**", ttl_s=60)
    other = mint(private, subject="powertrain", scope="create:**", ttl_s=60)
    async with (
        serving(
            tls_settings(pki, mutual=True),
            auth_mode="token",
            token_public_key=str(tmp_path / "vehicle_middleware.pub"),
        ) as server,
        grpc.aio.secure_channel(server.address, tls.credentials()) as channel,
    ):
        stub = vstore_pb2_grpc.VStoreStub(channel)
        await stub.AddKeys(
            vstore_pb2.AddKeysRequest(names=["Vehicle.Cabin.Temp"]),
            metadata=(("authorization", f"Bearer {good}"),),
            timeout=5,
        )
        await fails(
            stub.AddKeys(
                vstore_pb2.AddKeysRequest(names=["Vehicle.Speed"]),
                metadata=(("authorization", f"Bearer {other}"),),
                timeout=5,
            ),
            grpc.StatusCode.UNAUTHENTICATED,
            "token's subject 'powertrain' is not named by the client certificate",
        )
        # The token's scopes still decide what the certified app may do.
        await fails(
            stub.AddKeys(
                vstore_pb2.AddKeysRequest(names=["Vehicle.Speed"]),
                metadata=(("authorization", f"Bearer {good}"),),
                timeout=5,
            ),
            grpc.StatusCode.PERMISSION_DENIED,
        )
        assert list(k for k, _ in server.runtime.store.list_keys()) == ["Vehicle.Cabin.Temp"]


async def test_the_unix_socket_stays_plaintext_and_private_beside_mutual_tls(
    pki: Pki, tmp_path: Path
) -> None:
    sock = tmp_path / "vehicle_middleware.sock"
    async with serving(tls_settings(pki, mutual=True), unix_socket=str(sock)) as server:
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
        async with grpc.aio.insecure_channel(f"unix:{sock}") as channel:
            await _add_keys(channel, ["Vehicle.Speed"], "local-tool", claim=True)
        # No certificate there: the mode's own rule (open: the app-id) decides.
        assert server.runtime.claims.claimed_by("Vehicle.Speed") == "local-tool"
        # The SDK given TLS options dials a unix: target in plaintext.
        async with ProviderClient(f"unix:{sock}", "sensor", tls=Tls(ca=pki.car.cert)) as p:
            await p.add_keys(["Vehicle.Other"])
        assert "Vehicle.Other" in server.runtime.store


async def test_the_socket_mode_is_a_setting(pki: Pki, tmp_path: Path) -> None:
    sock = tmp_path / "own.sock"
    settings = replace_settings(TEST_SETTINGS, unix_socket=str(sock), unix_socket_mode="0600")
    running = await start_server(settings)
    try:
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    finally:
        await running.stop(0)


async def test_bad_tls_files_stop_the_server_before_it_listens(pki: Pki) -> None:
    other = pki.car.issue("other", "x", server=True)
    expired = pki.car.server("old", expired=True)
    for cert, key, expected in (
        (pki.server.cert, other.key, "is not the key of the certificate"),
        (expired.cert, expired.key, "the certificate expired on"),
        (pki.server.cert, Path("/nonexistent/key.pem"), "tls_key /nonexistent/key.pem: cannot"),
        (pki.server.key, pki.server.key, "not a PEM certificate"),
    ):
        settings = replace_settings(TEST_SETTINGS, tls_cert=str(cert), tls_key=str(key))
        with pytest.raises(TlsConfigError, match=expected):
            await start_server(settings)


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_serve_refuses_a_key_that_is_not_the_certificates(pki: Pki) -> None:
    other = pki.car.issue("other", "x", server=True)
    done = _run(
        "-m", "vehicle_middleware.server", "serve", "--listen", "127.0.0.1:0",
        "--tls-cert", str(pki.server.cert), "--tls-key", str(other.key),
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not the key of the certificate" in done.stderr
    done = _run("-m", "vehicle_middleware.server", "serve", "--tls-client-ca", str(pki.car.cert))
    assert done.returncode == 2
    assert "tls_client_ca (mutual TLS) needs tls_cert and tls_key" in done.stderr


async def test_the_cli_clients_take_the_tls_options(pki: Pki) -> None:
    cabin = pki.car.issue("cabin", "cabin-app")
    tls_args = ["--tls-ca", str(pki.car.cert), "--tls-cert", str(cabin.cert)]
    tls_args += ["--tls-key", str(cabin.key)]
    async with serving(tls_settings(pki, mutual=True)) as server:
        sim = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vehicle_middleware.providers", "sim", "--target", server.address,
            "--duration", "1", *tls_args,
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(sim.communicate(), 30)
        # Exit 0: it wrote as cabin-app, the certificate's CN (another id is refused).
        assert sim.returncode == 0, err.decode()
        keys = len(server.runtime.store)
        assert keys > 100
        logger = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vehicle_middleware.apps", "logger", "--target", server.address,
            "--duration", "0.5", "--out", "-", *tls_args,
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(logger.communicate(), 30)
        assert logger.returncode == 0, err.decode()
        top = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vehicle_middleware.tools", "top", "--target", server.address,
            "--once",
            *tls_args,
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(top.communicate(), 30)
        assert top.returncode == 0, err.decode()
        assert f"keys {keys:,} " in out.decode()
        plain = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vehicle_middleware.tools", "top", "--target", server.address,
            "--once",
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(plain.communicate(), 30)
        assert plain.returncode == 1
        assert "UNAVAILABLE" in err.decode()
        assert "may serve TLS: give --tls-ca" in err.decode(), err.decode()
        await eventually(lambda: server.runtime.stream_counts.publish_stream_count() == 0)
