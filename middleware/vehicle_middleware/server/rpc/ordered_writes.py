"""Ordered writes (docs/design.md): a ``Set`` with ``if_head`` is applied only on the newest head.

On a node without peers the head is checked and the batch written in one
step of the event loop (nothing can come between). On a node with peers the
batch becomes one guarded event: checked and versioned here (compare-and-set
per key as usual), not applied until its origin's verdict (see
:mod:`vehicle_middleware.replica.model`), which this waits for: every update is then applied,
or every update refused with ``head_conflict`` and the newest head.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Final

from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.replica import GuardRefusal, Write
from vehicle_middleware.server.cluster.node import ClusterNode
from vehicle_middleware.server.errors import InvalidRequestError, UnavailableError
from vehicle_middleware.server.rpc import convert
from vehicle_middleware.server.write_path import WritePath
from vehicle_middleware.vstore import CheckedRow, SetResult, Update, VStore

__all__ = ["guarded_set"]

_HEAD: Final = re.compile(r"(?:[0-9a-f]{64})?")


def _parse_head(text: str) -> bytes:
    if _HEAD.fullmatch(text) is None:
        raise InvalidRequestError(
            "if_head",
            f"{text[:80]!r} is not a head: give one as responses carry it (64 lowercase hex "
            "digits, or empty before the first write)",
        )
    return bytes.fromhex(text)


async def guarded_set(
    store: VStore,
    write_path: WritePath,
    node: ClusterNode | None,
    app: str,
    updates: list[Update],
    if_head: str,
) -> vstore_pb2.SetResponse:
    """Apply ``updates`` (already authorized) only if ``if_head`` is the newest head.

    Raises:
        InvalidRequestError: ``if_head`` is not a head.
        UnknownKeyError, ValueTooLargeError, InvalidValueError: a malformed
            batch (nothing written), as ``Set``.
        UnavailableError: no verdict came (should not happen: the origin
            decides within its guard timeout).
    """
    wanted = _parse_head(if_head)
    checked = store.check_many(updates)  # a malformed batch fails before anything
    if node is None:
        if if_head != write_path.head():
            return convert.head_conflict_response(_current(store, checked), write_path.head())
        with write_path.writing(app):
            written = store.set_many(updates)
        return convert.set_response(written, head=write_path.head())
    writes: list[Write] = []
    results: list[SetResult] = []
    versions: dict[int, int] = {}
    now = time.time_ns()
    for key_id, data, if_version, time_ns in checked:
        version = versions.get(key_id, store.version_of(key_id))
        if if_version is not None and if_version != version:
            results.append(SetResult(key_id, version, conflict=True))
            continue
        versions[key_id] = version + 1
        name = store.name_of(key_id)
        assert name is not None
        writes.append(Write(name, data, version + 1, now if time_ns is None else time_ns))
        results.append(SetResult(key_id, version + 1))
    if not writes:
        return convert.set_response(results, head=write_path.head())
    try:
        won = await node.propose(writes, wanted)
    except GuardRefusal as refusal:
        return convert.head_conflict_response(_current(store, checked), refusal.head.hex())
    except TimeoutError:
        raise UnavailableError(
            "the guarded write was not decided in time; read the head and the keys to see "
            "whether it was applied"
        ) from None
    if not won:
        return convert.head_conflict_response(_current(store, checked), write_path.head())
    return convert.set_response(results, head=write_path.head())


def _current(store: VStore, checked: Sequence[CheckedRow]) -> list[tuple[int, int]]:
    """``(key id, its version now)`` per update of the batch: a refusal's answer."""
    return [(row[0], store.version_of(row[0])) for row in checked]
