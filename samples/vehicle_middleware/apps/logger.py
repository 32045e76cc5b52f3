"""The logger app: every data event it receives, as a JSON line.

One line per data event: ``time_ns`` (the write's time), ``key``, ``value``
(decoded from the ``vehicle.value.v1`` encoding), ``seq``, ``missed`` (events
of that key lost just before this one), ``queue`` and ``changed``; a key its
provider set to a failure has ``failure`` (the code: ``sensor_fault``, ...) and
``detail`` in place of ``value``. An event
of an unchanged write carries no bytes: its value is the key's last one. The
file is a recording the replay provider reads as it is
(``python -m vehicle_middleware.providers replay FILE``), failure lines aside:
a recording holds values.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import IO, Any

from vehicle_middleware.contract.values import Failure, Scalar, ValueEncodingError, decode
from vehicle_middleware.sdk import ClientEvent, DataEvent, ReconnectedEvent

__all__ = ["EventLogger"]

log = logging.getLogger(__name__)


class EventLogger:
    """Turns batches into lines on ``out``; counts what it could not decode."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._latest: dict[str, Scalar | Failure] = {}
        self.lines = 0
        self.undecodable = 0

    async def __call__(self, batch: Sequence[ClientEvent]) -> None:
        for e in batch:
            if isinstance(e, DataEvent):
                line = self.line(e)
                if line is not None:
                    self._out.write(json.dumps(line, separators=(",", ":")) + "\n")
                    self.lines += 1
            elif isinstance(e, ReconnectedEvent):
                if e.middleware_restarted:
                    self._latest.clear()  # every value is unknown after a restart
                for r in e.results:
                    if r.ok and r.current is not None:
                        self.seed(r.key, r.current)
        self._out.flush()

    def seed(self, name: str, data: bytes) -> None:
        """A key's current value, known without an event (from subscribing)."""
        try:
            self._latest[name] = decode(data)
        except ValueEncodingError:
            self._latest.pop(name, None)

    def line(self, e: DataEvent) -> dict[str, Any] | None:
        """The line of one event, or None if its value is unknown (and not logged)."""
        name = e.name or f"#{e.key}"
        line: dict[str, Any] = {"time_ns": e.time_ns, "key": name}
        if e.data is not None:
            try:
                self._latest[name] = decode(e.data)
            except ValueEncodingError as err:
                self.undecodable += 1
                self._latest.pop(name, None)
                if self.undecodable == 1:
                    log.warning("%s: %s (logging raw bytes)", name, err)
                line["raw"] = e.data.hex()
        if "raw" not in line:
            if name not in self._latest:
                return None
            latest = self._latest[name]
            if isinstance(latest, Failure):  # the provider's word: no value, and why
                line["failure"] = latest.code.label
                line["detail"] = latest.detail
            else:
                line["value"] = latest
        line.update(seq=e.seq, missed=e.missed, queue=e.queue, changed=e.data is not None)
        return line
