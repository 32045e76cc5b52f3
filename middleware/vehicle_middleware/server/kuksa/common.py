"""What the KUKSA servicers share: who is calling, which keys a path names, actuation checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

import grpc
from google.protobuf.message import Message
from vehicle_middleware.contract.wire import APP_ID_HEADER, AUTH_HEADER
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2
from vehicle_middleware.server.actuation import Actuation, Target
from vehicle_middleware.server.auth.authentication import Authenticator, Caller
from vehicle_middleware.server.auth.scopes import ScopeError, compile_glob
from vehicle_middleware.server.errors import InvalidRequestError
from vehicle_middleware.server.kuksa.convert import signal_name, to_store
from vehicle_middleware.server.rpc.identity import caller, certified_names
from vehicle_middleware.server.rpc.long_calls import PAUSE_EVERY, scan_keys
from vehicle_middleware.server.signals import Signals
from vehicle_middleware.vstore import UnknownKeyError, VStore

__all__ = [
    "DEFAULT_APP",
    "actuation_target",
    "authenticate_kuksa",
    "kuksa_caller",
    "resolve_path",
]

DEFAULT_APP: Final = "kuksa-client"
"""The app of a KUKSA call without ``app-id`` metadata in open mode (KUKSA clients send none)."""


def kuksa_caller(
    context: grpc.aio.ServicerContext[Any, Any], authenticator: Authenticator
) -> Caller:
    """The caller of a KUKSA call, as the server's interceptor established it by
    :func:`authenticate_kuksa`."""
    return caller(context, authenticator, authenticate_kuksa)


def authenticate_kuksa(
    context: grpc.aio.ServicerContext[Any, Any], authenticator: Authenticator
) -> Caller:
    """The KUKSA services' identity rule: the caller, admitted by its rate limit.

    As the project's own services, with two allowances for KUKSA clients: an
    empty ``authorization`` header (what they send without a token) is no
    header, and in open mode a call without ``app-id`` is :data:`DEFAULT_APP`,
    a pooled caller (:attr:`Caller.pooled`).

    Raises:
        UnauthenticatedError, LimitExceededError.
    """
    metadata = [
        (k, v) for k, v in (context.invocation_metadata() or ()) if not (k == AUTH_HEADER and not v)
    ]
    certified = certified_names(context, authenticator)
    pooled = (
        authenticator.open_mode
        and certified is None  # a client certificate names the app itself
        and not any(k == APP_ID_HEADER for k, _ in metadata)
    )
    if pooled:
        metadata.append((APP_ID_HEADER, DEFAULT_APP))
    who = authenticator.authenticate(tuple(metadata), context.peer() or "", certified=certified)
    return dataclasses.replace(who, pooled=True) if pooled else who


async def readable_keys(store: VStore, path: str, who: Caller) -> list[tuple[str, int]]:
    """:func:`resolve_path`, only the keys ``who`` may read.

    Raises:
        UnknownKeyError: none it may read: the same answer for a branch that does
            not exist and for one whose keys it may not see, so that the answer
            tells nothing about keys it may not read.
        InvalidRequestError: a malformed pattern.
    """
    try:
        found = [(n, i) for n, i in await resolve_path(store, path) if who.grants.allows("read", n)]
    except UnknownKeyError:
        found = []
    if not found:
        raise UnknownKeyError(path)  # as the caller named it, whichever the reason
    return found


def visible_name(signal_id: Message, store: VStore, who: Caller) -> str:
    """The key a v2 SignalID names; by id, only a key ``who`` may read.

    Raises:
        InvalidRequestError: neither a path nor an id.
        UnknownKeyError: an id no key has, or the id of a key ``who`` may not read
            (the same answer, so that ids tell nothing about keys it may not see; by
            path, the access check denies by name).
    """
    name = signal_name(signal_id, store.name_of)
    if signal_id.WhichOneof("signal") == "id" and not who.grants.allows("read", name):
        raise UnknownKeyError(signal_id.id)  # type: ignore[attr-defined]
    return name


async def resolve_path(store: VStore, path: str) -> list[tuple[str, int]]:
    """``(name, id)`` of the keys a KUKSA path names, sorted by name.

    A key name names itself; a branch (``Vehicle.Cabin``, ``Vehicle.Cabin.*``)
    every key below it; a pattern with ``*`` or ``**`` segments (as in scopes)
    the keys it matches; the empty path every key. A scan of many keys lets other
    callers in every :data:`PAUSE_EVERY` keys; what it returns is what the store
    holds at its end.

    Raises:
        UnknownKeyError: nothing matches.
        InvalidRequestError: a malformed pattern.
    """
    key_id = store.id_of(path)
    if key_id is not None:
        return [(path, key_id)]
    asked = path  # the error names the path as asked, as it does for unreadable keys
    if path.endswith(".*") and "*" not in path[:-2]:
        path = path[:-2]
    if "*" in path:
        try:
            glob = compile_glob(path)
        except ScopeError as e:
            raise InvalidRequestError("path", str(e)) from e
        found = await _scan(store, "", glob.matches)
    else:
        branch = path
        found = await _scan(store, branch, lambda n: n != branch)
    if not found:
        raise UnknownKeyError(asked)
    return found


async def _scan(store: VStore, prefix: str, keep: Callable[[str], bool]) -> list[tuple[str, int]]:
    """The keys under ``prefix`` that ``keep`` keeps, pausing every PAUSE_EVERY keys."""
    found: list[tuple[str, int]] = []
    scanned = 0
    async for name, key_id in scan_keys(store, prefix):
        if keep(name):
            found.append((name, key_id))
        scanned += 1
    if scanned >= PAUSE_EVERY:  # it paused: keys may have gone (an id even reused)
        found = [(n, i) for n, i in found if store.name_of(i) == n]
    return found


def actuation_target(
    actuation: Actuation,
    signals: Signals,
    who: Caller,
    name: str,
    value: types_pb2.Value,
    field: str,
) -> Target:
    """A KUKSA actuation request of ``value`` for ``name``, checked (nothing is sent).

    Denials go by name first, then the actuator, then the typed value.

    Raises:
        PermissionDeniedError, UnknownKeyError, InvalidRequestError, InvalidValueError.
    """
    key_id = actuation.admit(who, name, field)
    data = to_store(name, signals.get(name), value, "typed_value")
    return actuation.target(name, key_id, data)
