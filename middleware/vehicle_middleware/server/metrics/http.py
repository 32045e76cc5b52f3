"""The Prometheus endpoint: ``GET /metrics`` over plain HTTP, on the event loop.

A few dozen lines of asyncio instead of prometheus-client's threaded server:
a scrape must run on the loop that drives the V-Store and the ESS (they are
not thread-safe), and the server must stop with the middleware. It answers
``GET`` and ``HEAD`` of ``/metrics`` in the text format (OpenMetrics when the
scraper asks for it), 404 for other paths, 405 for other methods; one request
per connection. A request head is read within 10 s and 16 KiB; at most 16
connections at once (more are closed at once): a scraper is one client, and
a stuck or hostile peer cannot hold the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["MetricsEndpoint", "MetricsListenError"]

log = logging.getLogger(__name__)

PATH: Final = "/metrics"
_HEAD_LIMIT: Final = 16 * 1024
_HEAD_TIMEOUT_S: Final = 10.0
_MAX_CONNECTIONS: Final = 16


class MetricsListenError(RuntimeError):
    """The metrics address cannot be listened on (in use, or not this machine's)."""


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) into host and port.

    Raises:
        ValueError: no port, or not a number from 0 to 65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"metrics_listen {address!r}: use HOST:PORT, e.g. 127.0.0.1:9464")
    return host.strip("[]") or "0.0.0.0", int(port)


class MetricsEndpoint:
    """Serves a registry's text at ``http://ADDRESS/metrics``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._server: asyncio.Server | None = None
        self._open = 0
        self.address = ""
        """Where it listens, ``host:port`` with the port bound (after :meth:`start`)."""

    async def start(self, address: str) -> str:
        """Listen on ``address``; returns it with the bound port (port 0 picks one).

        Raises:
            MetricsListenError: in use or not available; ValueError: malformed.
        """
        host, port = split_address(address)
        try:
            self._server = await asyncio.start_server(
                self._serve, host, port, limit=_HEAD_LIMIT, reuse_address=True
            )
        except OSError as e:
            why = "the address is in use" if e.errno == errno.EADDRINUSE else e.strerror
            raise MetricsListenError(f"cannot serve metrics on {address}: {why}") from e
        bound = self._server.sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.address = f"{shown}:{bound}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= _MAX_CONNECTIONS:
            writer.close()
            return
        self._open += 1
        try:
            await self._answer(reader, writer)
        except (
            ConnectionError,
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass
        finally:
            self._open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 2.0)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if len(parts) != 3:
            await _reply(writer, 400, "text/plain", b"bad request line\n")
            return
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            await _reply(writer, 405, "text/plain", b"use GET\n", extra="Allow: GET, HEAD\r\n")
            return
        if target.split("?", 1)[0] != PATH:
            await _reply(writer, 404, "text/plain", f"the metrics are at {PATH}\n".encode())
            return
        encode, content_type = choose_encoder(headers.get("accept", ""))
        try:
            body = encode(self._registry)
        except Exception:
            log.exception("metrics: a scrape failed")
            await _reply(writer, 500, "text/plain", b"the scrape failed (logged)\n")
            return
        await _reply(writer, 200, content_type, body, head_only=method == "HEAD")


_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


async def _reply(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    body: bytes,
    *,
    extra: str = "",
    head_only: bool = False,
) -> None:
    writer.write(
        (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        ).encode("latin-1")
    )
    if not head_only:
        writer.write(body)
    await asyncio.wait_for(writer.drain(), _HEAD_TIMEOUT_S)
