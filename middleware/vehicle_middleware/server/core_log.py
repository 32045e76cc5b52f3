"""What grpc-core writes to the process's stderr, as an operator can read it.

grpc-core (C++) logs a failed TLS handshake itself, one line per attempt and
without the peer (``ssl_transport_security.cc] Handshake failed with error
SSL_ERROR_SSL: ... WRONG_VERSION_NUMBER``): a plaintext client retrying
against a TLS listener fills the log. Python cannot hook grpc-core's logging,
so the ``serve`` entry point, when the operator has set neither
``GRPC_VERBOSITY`` nor ``GRPC_TRACE``, turns on grpc's ``handshaker`` trace
(whose failure line names the peer) before grpc is imported, and passes
file descriptor 2 through :class:`StderrFilter`: handshake lines become one
warning per peer when its failures begin and one line with the count per
interval while they go on (:class:`HandshakeFailures`); every other line
grpc-core writes passes unchanged. Python's own logging keeps writing to the
real stderr.

An operator who sets ``GRPC_VERBOSITY`` or ``GRPC_TRACE`` gets grpc-core's
own lines, untouched.
"""

from __future__ import annotations

import logging
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "REPORT_EVERY_S",
    "HandshakeFailures",
    "StderrFilter",
    "install",
    "wants_filter",
]

log = logging.getLogger(__name__)

REPORT_EVERY_S: Final = 10.0
"""While a peer's handshakes keep failing, one line per this many seconds."""

_TRACE_ENV: Final = "GRPC_TRACE"
_VERBOSITY_ENV: Final = "GRPC_VERBOSITY"

_HEADER: Final = re.compile(rb"^[IWEF]\d{4} [\d:.]+ +\d+ ([\w.]+):\d+\] ?(.*)$")
"""An absl log line's prefix: severity, date, time, thread, file:line]."""
_TRACE_FILES: Final = frozenset({b"handshaker.cc", b"channel_trace.h", b"trace.cc"})
"""Where the ``handshaker`` trace writes from: dropped, once read."""
_SSL_FILE: Final = b"ssl_transport_security.cc"
_FAILED: Final = re.compile(rb"CallNextHandshakerLocked: error=(?!OK\b)(.*)")
_PEER: Final = re.compile(rb"endpoint_peer_address=(?:ipv[46]:)?\[?([^\],}\s]+?)\]?:\d+[,}]")
_SSL_REASON: Final = re.compile(rb"error:[0-9a-fA-F]+:[^:]*:[^:]*:([A-Z0-9_]+)")
_PLAINTEXT_HINTS: Final = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST"})


def wants_filter(env: Mapping[str, str]) -> bool:
    """Whether to filter: the operator asked for none of grpc-core's own logging."""
    return _VERBOSITY_ENV not in env and _TRACE_ENV not in env


@dataclass(slots=True)
class _Episode:
    reason: str
    reported_at: float
    count: int = 0
    """Failures since the last line about this peer."""


class HandshakeFailures:
    """Failed handshakes per peer: the first said at once, then one line per
    ``every`` seconds with the count while they go on (pure; time passed in).

    A peer with no failure for a whole interval is forgotten: its next failure
    is said at once again.
    """

    __slots__ = ("_every", "_peers")

    def __init__(self, *, every: float = REPORT_EVERY_S) -> None:
        self._every = every
        self._peers: dict[str, _Episode] = {}

    def failed(self, peer: str, reason: str, now: float) -> str | None:
        """A handshake from ``peer`` failed: the line to log now, or None (counted)."""
        episode = self._peers.get(peer)
        if episode is None:
            self._peers[peer] = _Episode(reason, now)
            hint = (
                " (a client speaking plaintext to this TLS listener? it must dial with TLS)"
                if reason in _PLAINTEXT_HINTS
                else ""
            )
            return (
                f"TLS handshake failed from {peer}: {reason}{hint}; further failures "
                f"from it are counted, one line per {self._every:g} s"
            )
        episode.count += 1
        episode.reason = reason
        return None

    def due(self, now: float, *, final: bool = False) -> list[str]:
        """Lines for the peers whose interval ended (every peer if ``final``)."""
        lines = []
        for peer, episode in list(self._peers.items()):
            if not final and now - episode.reported_at < self._every:
                continue
            if episode.count == 0:
                del self._peers[peer]  # quiet for an interval: the episode is over
                continue
            lines.append(
                f"TLS handshake failed {episode.count} more "
                f"{'time' if episode.count == 1 else 'times'} from {peer} in the last "
                f"{now - episode.reported_at:.0f} s: {episode.reason}"
            )
            episode.count = 0
            episode.reported_at = now
        return lines

    def next_due(self) -> float | None:
        """When :meth:`due` next has something to do (None: no peer)."""
        if not self._peers:
            return None
        return min(e.reported_at for e in self._peers.values()) + self._every


def _reason(error: bytes) -> str:
    found = _SSL_REASON.search(error)
    if found:
        return found[1].decode()
    return error.split(b"\n", 1)[0][:160].decode(errors="replace")


class StderrFilter:
    """Reads what grpc-core writes: trace lines are dropped, handshake failures
    go to ``failed(peer, reason)``, and every other line to ``passthrough``.

    A message is a header line (severity, time, thread, file:line) and the lines
    after it that have none (grpc's multi-line errors).
    """

    __slots__ = ("_failed", "_message", "_passthrough", "_pending")

    def __init__(
        self, passthrough: Callable[[bytes], None], failed: Callable[[str, str], None]
    ) -> None:
        self._passthrough = passthrough
        self._failed = failed
        self._message: list[bytes] | None = None
        """The handled message being read (None: lines pass through)."""
        self._pending = b""

    def feed(self, data: bytes) -> None:
        """Take more of the stream; complete lines are handled now."""
        data = self._pending + data
        *lines, self._pending = data.split(b"\n")
        for line in lines:
            self._line(line + b"\n")

    def end_message(self) -> None:
        """What was read so far ends the message being read (grpc-core writes
        each message in one write, so a read ends with a whole one)."""
        self._end_message()

    def flush(self) -> None:
        """The stream ended: handle what was read."""
        if self._pending:
            line, self._pending = self._pending, b""
            self._line(line)
        self._end_message()

    def _line(self, line: bytes) -> None:
        header = _HEADER.match(line.rstrip(b"\n"))
        if header is None:
            if self._message is not None:
                self._message.append(line)
            else:
                self._passthrough(line)
            return
        self._end_message()
        if header[1] in _TRACE_FILES or (
            header[1] == _SSL_FILE and header[2].startswith(b"Handshake failed")
        ):
            self._message = [header[2] + b"\n"]
        else:
            self._passthrough(line)

    def _end_message(self) -> None:
        if self._message is None:
            return
        text = b"".join(self._message)
        self._message = None
        failed = _FAILED.match(text)
        if failed is None:
            return  # trace detail, or grpc's own handshake line: said by the failure
        peer = _PEER.search(text)
        self._failed(peer[1].decode() if peer else "an unknown peer", _reason(failed[1]))


def install(env: MutableMapping[str, str], *, every: float = REPORT_EVERY_S) -> Callable[[], None]:
    """Filter grpc-core's stderr (see the module's docstring); call before grpc
    is imported and before logging is configured.

    Sets ``GRPC_TRACE=handshaker`` in ``env`` (the process's environment),
    points fd 2 at a pipe read by a daemon thread, and gives Python a
    ``sys.stderr`` on the real one. Returns a function that says the last
    counts (at shutdown).
    """
    env[_TRACE_ENV] = "handshaker"
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr = os.fdopen(real, "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    failures = HandshakeFailures(every=every)
    lock = threading.Lock()

    def passthrough(line: bytes) -> None:
        os.write(real, line)

    def failed(peer: str, reason: str) -> None:
        with lock:
            line = failures.failed(peer, reason, time.monotonic())
        if line is not None:
            log.warning("%s", line)

    def report(*, final: bool = False) -> None:
        with lock:
            lines = failures.due(time.monotonic(), final=final)
        for line in lines:
            log.warning("%s", line)

    reader = StderrFilter(passthrough, failed)

    def run() -> None:
        try:
            follow()
        except Exception:
            # Never leave grpc-core writing into a pipe nobody reads: it would block.
            os.dup2(real, 2)
            log.exception("reading grpc-core's stderr failed; it goes to stderr unread")

    def follow() -> None:
        while True:
            due = failures.next_due()
            timeout = None if due is None else max(0.0, due - time.monotonic())
            ready, _, _ = select.select([read_end], [], [], timeout)
            if ready:
                data = os.read(read_end, 65536)
                if not data:
                    reader.flush()
                    return
                reader.feed(data)
                reader.end_message()
            report()

    threading.Thread(target=run, name="grpc-core stderr", daemon=True).start()
    return lambda: report(final=True)
