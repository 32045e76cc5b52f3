"""``python -m vehicle_middleware.server tls dev-certs``: the certificates it writes serve real TLS.

The command runs as a process; a real middleware process serves with what it
wrote (``serve --tls-cert/--tls-key``, and ``--tls-client-ca`` for mutual
TLS), and real SDK clients dial it with :class:`vehicle_middleware.sdk.Tls`. With mutual TLS
the app is the one the client certificate names. Existing files are never
replaced without ``--force``, and a refused run writes nothing.
"""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.contract import values
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, Sub, Tls

from tests.integration.test_process import start, stop

SET: tuple[str, ...] = ("ca.pem", "ca.key", "server.pem", "server.key")


def dev_certs(out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "vehicle_middleware.server",
            "tls",
            "dev-certs",
            "--out",
            str(out),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Each file's bytes and mode."""
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in directory.iterdir()}


async def first_value(app: AppClient) -> bytes | None:
    async for event in app.events():
        if isinstance(event, DataEvent):
            return event.data
    raise AssertionError("the event stream ended")


async def round_trip(
    address: str, provider_tls: Tls, app_tls: Tls, *, app: str = "dash", value: float = 42.5
) -> None:
    """A provider publishes ``value`` (a new one: events come on change), an app
    subscribed to it receives it."""
    async with (
        ProviderClient(address, "sensor", tls=provider_tls, reconnect=False) as provider,
        AppClient(address, app, tls=app_tls, reconnect=False) as dash,
    ):
        await asyncio.wait_for(provider.add_keys(["Vehicle.Speed"]), 10)
        [result] = await asyncio.wait_for(dash.subscribe([Sub("Vehicle.Speed")]), 10)
        assert result.ok, result
        await asyncio.wait_for(provider.publish({"Vehicle.Speed": values.encode(value)}), 10)
        data = await asyncio.wait_for(first_value(dash), 10)
        assert data is not None
        assert values.decode(data) == value


async def test_a_server_with_dev_certs_serves_tls_to_clients_that_trust_its_ca(
    tmp_path: Path,
) -> None:
    out = tmp_path / "certs"
    made = dev_certs(out)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(SET)
    for name in SET:
        assert f"wrote {out / name}" in made.stdout
        mode = stat.S_IMODE((out / name).stat().st_mode)
        assert mode == (0o600 if name.endswith(".key") else 0o644), (name, oct(mode))
    proc, address = start(
        "--listen", "127.0.0.1:0",
        "--tls-cert", str(out / "server.pem"), "--tls-key", str(out / "server.key"),
    )  # fmt: skip
    try:
        trusting = Tls(ca=out / "ca.pem")
        await round_trip(address, trusting, trusting)
        # The certificate names localhost too.
        port = address.rsplit(":", 1)[1]
        await round_trip(f"localhost:{port}", trusting, trusting, value=43.0)
        # A client that trusts only the system's roots does not trust it.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async with ProviderClient(address, "sensor", tls=Tls(), reconnect=False) as p:
                await asyncio.wait_for(p.get(["Vehicle.Speed"]), 10)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        code, err = stop(proc)
    assert code == 0, err


async def test_with_client_certificates_the_app_is_the_name_its_certificate_was_made_for(
    tmp_path: Path,
) -> None:
    out = tmp_path / "certs"
    made = dev_certs(out, "--client", "dash", "--client", "sensor", "--days", "2")
    assert made.returncode == 0, made.stderr
    for name in ("dash", "sensor"):
        assert stat.S_IMODE((out / f"{name}.key").stat().st_mode) == 0o600
        assert f"wrote {out / name}.pem" in made.stdout
    ca = out / "ca.pem"
    dash = Tls(ca=ca, cert=out / "dash.pem", key=out / "dash.key")
    sensor = Tls(ca=ca, cert=out / "sensor.pem", key=out / "sensor.key")
    proc, address = start(
        "--listen", "127.0.0.1:0",
        "--tls-cert", str(out / "server.pem"), "--tls-key", str(out / "server.key"),
        "--tls-client-ca", str(ca),
    )  # fmt: skip
    try:
        await round_trip(address, sensor, dash)
        # A certificate names one app: claiming to be another is refused, and
        # the refusal says which name the middleware read from it.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async with ProviderClient(address, "sensor", tls=dash, reconnect=False) as p:
                await asyncio.wait_for(p.get(["Vehicle.Speed"]), 10)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "'sensor' is not named by the client certificate (names: 'dash')" in (
            refused.value.details() or ""
        )
        # What a certified app claims, another certified app may not write.
        async with (
            ProviderClient(address, "dash", tls=dash, reconnect=False) as owner,
            ProviderClient(address, "sensor", tls=sensor, reconnect=False) as other,
        ):
            await asyncio.wait_for(owner.add_keys(["Vehicle.Cabin.Temp"], claim=True), 10)
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await asyncio.wait_for(other.set("Vehicle.Cabin.Temp", values.encode(1.0)), 10)
            assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
            assert "app 'sensor' may not write key 'Vehicle.Cabin.Temp' (claimed by 'dash')" in (
                denied.value.details() or ""
            )
        # No client certificate: refused at the handshake.
        with pytest.raises(grpc.aio.AioRpcError) as anonymous:
            async with ProviderClient(address, "dash", tls=Tls(ca=ca), reconnect=False) as p:
                await asyncio.wait_for(p.get(["Vehicle.Speed"]), 10)
        assert anonymous.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        code, err = stop(proc)
    assert code == 0, err


async def test_the_server_certificate_names_the_hosts_given(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    made = dev_certs(out, "--host", "vehicle_middleware.test", "--host", "::1")
    assert made.returncode == 0, made.stderr
    assert "server certificate for vehicle_middleware.test, ::1" in made.stdout
    proc, address = start(
        "--listen", "127.0.0.1:0",
        "--tls-cert", str(out / "server.pem"), "--tls-key", str(out / "server.key"),
    )  # fmt: skip
    try:
        ca = out / "ca.pem"
        # 127.0.0.1 is not among them any more ...
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async with ProviderClient(address, "sensor", tls=Tls(ca=ca), reconnect=False) as p:
                await asyncio.wait_for(p.get(["Vehicle.Speed"]), 10)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        # ... vehicle_middleware.test is.
        named = Tls(ca=ca, server_name="vehicle_middleware.test")
        await round_trip(address, named, named)
    finally:
        code, err = stop(proc)
    assert code == 0, err


def test_existing_files_are_not_replaced_without_force_and_a_refusal_writes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "certs"
    assert dev_certs(out, "--client", "dash").returncode == 0
    (out / "dash.key").chmod(0o644)  # someone loosened it
    before = snapshot(out)
    again = dev_certs(out, "--client", "dash", "--client", "new-app")
    assert again.returncode != 0
    assert "already exist" in again.stderr
    assert "--force" in again.stderr
    assert str(out / "ca.key") in again.stderr
    assert again.stdout == ""
    assert snapshot(out) == before  # new-app's files not written either
    # A bad name or host, or days below 1: refused before anything is written.
    for options, said in (
        (("--client", "../evil"), "--client '../evil': not an app id"),
        (("--client", "ca"), "--client 'ca': its files would be the CA's"),
        (("--host", "not a host"), "--host 'not a host': neither an IP address nor a DNS name"),
        (("--days", "0"), "--days must be 1 or more"),
    ):
        refused = dev_certs(tmp_path / "other", *options)
        assert refused.returncode != 0, options
        assert said in refused.stderr, (options, refused.stderr)
        assert not (tmp_path / "other").exists()
    # --force replaces every file, the loosened key made anew with mode 0600.
    forced = dev_certs(out, "--client", "dash", "--force")
    assert forced.returncode == 0, forced.stderr
    after = snapshot(out)
    assert after.keys() == before.keys()
    for name, (data, mode) in after.items():
        assert data != before[name][0], name
        assert mode == (0o600 if name.endswith(".key") else 0o644), (name, oct(mode))
