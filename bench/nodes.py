"""Middleware nodes as real processes, wired as one cluster: for ``bench.cluster`` and the tests.

    with Nodes(["a", "b", "c"], tmp, "--sync-interval-s", "0.5") as nodes:
        nodes["a"].address                     # 127.0.0.1:PORT
        nodes["b"].kill(); nodes["b"].start()  # SIGKILL, then the same node again
        await status(nodes["c"].address)       # vehicle.cluster.v1 StatusResponse

Every node lists every other; ``reach`` may give another address by which
the others reach a node (e.g. a :class:`bench.relay.Relay` in front of it).
Each node's stderr goes to ``DIR/NAME.log``. Every process is stopped on
exit (SIGTERM, then SIGKILL after 15 s).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import grpc
from vehicle_middleware.contract.wire import APP_ID_HEADER
from vehicle_middleware.proto.vehicle.cluster.v1 import cluster_pb2, cluster_pb2_grpc

__all__ = ["Node", "Nodes", "free_port", "free_ports", "status"]


def free_ports(count: int) -> list[int]:
    """``count`` different free ports on 127.0.0.1, each held until all are chosen:
    one at a time, the kernel may choose a port it has just chosen (two nodes of one
    test were once given the same port, and the second could not listen)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def free_port() -> int:
    return free_ports(1)[0]


class Node:
    """One middleware process with a fixed port (so it can restart where its peers expect it)."""

    def __init__(self, name: str, port: int, args: Sequence[str], log: Path) -> None:
        self.name = name
        self.port = port
        self.args = list(args)
        self.log = log
        self.proc: subprocess.Popen[str] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def launch(self) -> None:
        """Start the process; :meth:`ready` waits for it to serve."""
        with self.log.open("a") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "vehicle_middleware.server",
                    "serve",
                    "--listen",
                    self.address,
                    "--node-id",
                    self.name,
                    *self.args,
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def ready(self, timeout: float = 30.0) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError(f"node {self.name} did not start: {line!r}; see {self.log}")

    def start(self) -> None:
        self.launch()
        self.ready()

    def stop(self) -> int | None:
        """SIGTERM (SIGKILL after 15 s); the exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a paused node must be able to stop
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: the node dies with no goodbye."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()

    def pause(self) -> None:
        """SIGSTOP: the node stops doing anything, reading included."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


class Nodes:
    """A cluster of nodes, every one listing every other."""

    def __init__(
        self,
        names: Sequence[str],
        directory: Path,
        *args: str,
        reach: Mapping[str, str] | None = None,
        routes: Mapping[tuple[str, str], str] | None = None,
        extra: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Args:
        names: the node ids.
        directory: where the logs go.
        args: more ``serve`` flags for every node.
        reach: node -> the address the others dial it at (default: its own).
        routes: (from, to) -> the address ``from`` dials ``to`` at (before ``reach``).
        extra: node -> more flags for that node only.
        """
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        ports = self.ports
        self.nodes: dict[str, Node] = {}
        for n in names:
            peers = [
                "--peer={}={}".format(
                    m,
                    (routes or {}).get((n, m)) or (reach or {}).get(m) or f"127.0.0.1:{ports[m]}",
                )
                for m in names
                if m != n
            ]
            flags = [*args, *peers, *(extra or {}).get(n, ())]
            self.nodes[n] = Node(n, ports[n], flags, directory / f"{n}.log")

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __enter__(self) -> Nodes:
        try:
            for node in self:
                node.launch()
            for node in self:
                node.ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        for node in self:
            node.stop()


async def status(address: str, timeout: float = 10.0) -> cluster_pb2.StatusResponse:
    """The node's ``Peer.Status``."""
    async with grpc.aio.insecure_channel(address) as channel:
        reply: cluster_pb2.StatusResponse = await cluster_pb2_grpc.PeerStub(channel).Status(
            cluster_pb2.StatusRequest(),
            metadata=((APP_ID_HEADER, "cluster-test"),),
            timeout=timeout,
        )
        return reply
