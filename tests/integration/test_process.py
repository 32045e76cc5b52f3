"""`python -m vehicle_middleware.server serve` as a real process: flags, env, TOML, signals, Unix
socket."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc


def start(
    *args: str,
    env: dict[str, str] | None = None,
    command: tuple[str, ...] = (sys.executable, "-m", "vehicle_middleware.server"),
) -> tuple[subprocess.Popen[str], str]:
    """``COMMAND serve ARGS`` (by default this checkout's middleware) started, with
    ``env`` over this process's environment; returns it and the address it serves."""
    proc = subprocess.Popen(
        [*command, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    # "listening on ADDRESS", printed once it serves; never wait for it forever.
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"no listening line: {line!r} {proc.communicate(timeout=10)}")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


async def add_key(address: str, name: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=[name]), metadata=(("app-id", "cli-test"),), timeout=10
        )
    return int(reply.keys[0].id)


async def test_serve_on_tcp_and_unix_socket_and_stop_on_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "vehicle_middleware.sock"
    config = tmp_path / "vehicle_middleware.toml"
    config.write_text('[middleware]\nmax_value_size = 1024\nlog_level = "DEBUG"\n')
    proc, address = start(
        "--listen",
        "127.0.0.1:0",
        "--unix-socket",
        str(sock),
        "--config",
        str(config),
        env={"VMW_MAX_VALUE_SIZE": "2048"},
    )
    try:
        assert address.startswith("127.0.0.1:")
        assert await add_key(address, "Vehicle.A") == 1
        assert await add_key(f"unix:{sock}", "Vehicle.B") == 2
        async with grpc.aio.insecure_channel(address) as channel:
            stub = vstore_pb2_grpc.VStoreStub(channel)
            md = (("app-id", "cli-test"),)
            # The environment (2048) overrides the file (1024).
            await stub.Set(
                vstore_pb2.SetRequest(updates=[vstore_pb2.Update(id=1, data=bytes(2048))]),
                metadata=md,
            )
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Set(
                    vstore_pb2.SetRequest(updates=[vstore_pb2.Update(id=1, data=bytes(2049))]),
                    metadata=md,
                )
            assert "limit is 2048 bytes" in (err.value.details() or "")
    finally:
        code, err_text = stop(proc)
    assert code == 0, err_text
    assert "stopping on signal" in err_text
    assert "middleware stopped" in err_text


def test_bad_settings_exit_with_a_message_naming_the_setting(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("event_budgett = 5\n")
    for flags, said in (
        (["--config", str(config)], "unknown setting 'event_budgett'"),
        (["--event-budget", "0"], "event_budget must be >= 1"),
        (["--event-loop", "tokio"], "event_loop must be one of auto, uvloop, asyncio, got 'tokio'"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "vehicle_middleware.server", "serve", *flags],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 2, flags
        assert said in result.stderr, flags
