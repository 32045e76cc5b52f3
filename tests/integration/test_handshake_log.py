"""What an operator sees in a TLS middleware's stderr when a plaintext client
keeps trying: one line when a peer's handshakes begin to fail and one line
with the count, not grpc-core's line per attempt."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
from vehicle_middleware.server.dev_certs import dev_cert_files, write_files

ATTEMPTS = 25
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What a plaintext HTTP/2 client sends first."""


def _plaintext_attempt(port: int) -> None:
    """One plaintext connection: the TLS listener reads the preface and hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(PREFACE)
        while s.recv(4096):
            pass


async def test_repeated_plaintext_handshakes_are_one_line_per_peer_with_a_count(
    tmp_path: Path,
) -> None:
    certs = tmp_path / "certs"
    write_files(certs, dev_cert_files(["127.0.0.1"], []))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GRPC_VERBOSITY", "GRPC_TRACE"))
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "vehicle_middleware.server", "serve", "--listen", "127.0.0.1:0",
         "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().decode() if ready else ""
        assert line.startswith("listening on "), line
        address = line.split()[-1]
        port = int(address.rsplit(":", 1)[1])
        for _ in range(ATTEMPTS):
            await asyncio.to_thread(_plaintext_attempt, port)
        # A client that speaks TLS is served, and its handshake leaves no line.
        ca = (certs / "ca.pem").read_bytes()
        async with grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(ca)) as ch:
            await asyncio.wait_for(ch.channel_ready(), 10)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == 0, text
    for noise in ("ssl_transport_security", "handshaker.cc", "Handshake failed"):
        assert noise not in text, text
    said = [s.split(": ", 1)[1] for s in text.splitlines() if "TLS handshake failed" in s]
    assert said == [
        "TLS handshake failed from 127.0.0.1: WRONG_VERSION_NUMBER (a client speaking "
        "plaintext to this TLS listener? it must dial with TLS); further failures from it "
        "are counted, one line per 10 s",
        said[1],
    ], text
    assert said[1].startswith(f"TLS handshake failed {ATTEMPTS - 1} more times from 127.0.0.1 ")
