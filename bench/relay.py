"""A TCP relay that can be cut and healed: a network partition between processes.

    relay = Relay()
    await relay.start()                  # relay.address: give it to the others
    relay.target = ("127.0.0.1", 50052)  # where it forwards (before the first connection)
    relay.close()                        # a partition: connections cut, new ones refused
    relay.open()                         # healed

Real sockets, bytes forwarded as they come; for the cluster tests and
``bench.cluster``.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["Relay"]


class Relay:
    """Listens on 127.0.0.1 (a free port) and forwards each connection to :attr:`target`."""

    def __init__(self, target: tuple[str, int] | None = None) -> None:
        self.target = target
        """(host, port) to forward to; a connection before it is set is refused."""
        self._server: asyncio.Server | None = None
        self._open = True
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        """Cut every connection and refuse new ones until :meth:`open`."""
        self._open = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def open(self) -> None:
        self._open = True

    async def stop(self) -> None:
        self.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._relay(reader, writer)
        except asyncio.CancelledError:
            writer.transport.abort()  # the loop is closing: nothing left to forward

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._open or self.target is None:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.transport.abort()
