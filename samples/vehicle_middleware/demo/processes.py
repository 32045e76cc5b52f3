"""Child processes the demo starts, and always stops.

Each child runs in its own session (so a Ctrl-C at the terminal reaches the
demo only, which then stops the children in order), with its output in a log
file. :meth:`Supervisor.stop_all` ends every child still running, in the
order given (producers before consumers before the server): SIGINT, then
SIGTERM, then SIGKILL, each after a deadline.
Only the processes started here are ever signalled, by their own pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["Child", "DemoError", "Supervisor", "last_json"]


class DemoError(RuntimeError):
    """Something the demo started failed; the message says what and where its log is."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen[str]
    log: Path
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    last_line: str = ""
    """The newest line of its output (e.g. a progress line)."""
    pump: threading.Thread | None = None
    """Copies its output into the log; ends at the output's end."""

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait (blocked, not lost) until the block ends.

    Never around starting a child: it would inherit the mask.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _pump(stream: IO[str], log: IO[str], child: Child) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        child.lines.put(line)
        child.last_line = line
    log.close()


def last_json(text: str) -> dict[str, Any]:
    """The last line of ``text`` that is a JSON object (a command's summary), or {}."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    return {}


class Supervisor:
    """Starts named children, waits for them, stops them all."""

    def __init__(self, logs: Path, env: Mapping[str, str]) -> None:
        self._logs = logs
        self._env = dict(env)
        self.children: dict[str, Child] = {}

    def start(self, name: str, argv: Sequence[str]) -> Child:
        """Start ``argv`` as ``name``; stdout and stderr go to ``LOGS/name.log``."""
        log_path = self._logs / f"{name}.log"
        log = log_path.open("w", encoding="utf-8")
        # Not with signals blocked: a child would inherit the blocked mask and
        # never see the SIGINT that stops it.
        process = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self._env,
            start_new_session=True,
        )
        child = Child(name, process, log_path)
        assert process.stdout is not None
        child.pump = threading.Thread(target=_pump, args=(process.stdout, log, child), daemon=True)
        child.pump.start()
        self.children[name] = child
        return child

    def wait_for_line(self, name: str, pattern: str, timeout: float) -> re.Match[str]:
        """The first output line of ``name`` matching ``pattern``.

        Raises:
            DemoError: the child exited, or ``timeout`` passed, first.
        """
        child = self.children[name]
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            try:
                line = child.lines.get(timeout=0.1)
            except queue.Empty:
                if child.process.poll() is not None:
                    self._died(child)
                continue
            m = regex.search(line)
            if m:
                return m
        raise DemoError(f"{name} did not print {pattern!r} within {timeout:.0f} s; see {child.log}")

    def check_running(self) -> None:
        """Raises DemoError if a child has exited."""
        for child in self.children.values():
            if child.process.poll() is not None:
                self._died(child)

    def _died(self, child: Child) -> None:
        raise DemoError(
            f"{child.name} exited with status {child.process.returncode}; "
            f"the end of {child.log}:\n{child.tail()}"
        )

    def stop(self, name: str, timeout: float = 10.0) -> int:
        """Stop ``name`` (SIGINT, then SIGTERM, then SIGKILL); returns its exit status.

        The child stays tracked until it has exited, so an interruption in
        here leaves it for :meth:`stop_all`.
        """
        child = self.children[name]
        p = child.process
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if p.poll() is not None:
                break
            os.kill(p.pid, sig)  # our own child, by its pid
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        status = p.wait()
        if child.pump is not None:
            # Its last lines are in its log once it returns (a grandchild that
            # kept the pipe open does not hold the demo up for long).
            child.pump.join(5.0)
        del self.children[name]
        return status

    def run(
        self,
        name: str,
        argv: Sequence[str],
        timeout: float,
        on_line: Callable[[str], None] | None = None,
    ) -> str:
        """Run ``argv`` to its end (stopped like the others if interrupted); its stdout.

        Its stderr goes to ``LOGS/name.log``, its stdout to ``LOGS/name.out``;
        ``on_line`` is called (on this thread) with each line of its stdout
        (without the newline) as it comes, e.g. to show its progress.

        Raises:
            DemoError: it failed, or took longer than ``timeout``.
        """
        log_path = self._logs / f"{name}.log"
        out_path = self._logs / f"{name}.out"
        out = out_path.open("w", encoding="utf-8")  # the pump closes it
        with log_path.open("w", encoding="utf-8") as log:
            process = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                env=self._env,
                start_new_session=True,
            )
        child = Child(name, process, log_path)
        assert process.stdout is not None
        child.pump = threading.Thread(target=_pump, args=(process.stdout, out, child), daemon=True)
        child.pump.start()
        self.children[name] = child
        deadline = time.monotonic() + timeout
        while process.poll() is None:
            if time.monotonic() > deadline:
                self.stop(name)
                raise DemoError(f"{name} took longer than {timeout:.0f} s; see {log_path}")
            try:
                line = child.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if on_line is not None:
                on_line(line.rstrip("\n"))
        # Its last lines (a grandchild that kept the pipe open does not hold
        # the demo up for long).
        child.pump.join(5.0)
        while on_line is not None and not child.lines.empty():
            on_line(child.lines.get_nowait().rstrip("\n"))
        del self.children[name]
        if process.returncode != 0:
            self._died(child)
        return out_path.read_text(encoding="utf-8")

    def stop_all(self, order: Sequence[str] = ()) -> None:
        """Stop every child still running: those named in ``order`` first, in
        that order, then the rest, last started first."""
        names = [n for n in order if n in self.children]
        names += [n for n in reversed(list(self.children)) if n not in names]
        # A second Ctrl-C must not cut this short: the children live in their
        # own sessions, so whatever is not stopped here would run on.
        with _signals_held():
            for name in names:
                try:
                    self.stop(name, timeout=5.0)
                except OSError:
                    self.children.pop(name, None)  # already gone
