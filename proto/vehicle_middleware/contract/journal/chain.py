"""Record offsets and the hash chain. Pure: no I/O, no clock.

Offsets follow the "logged event offsets" scheme: the first record after a
start gets a random offset in 0..2^32-1, each next one the previous + 1 modulo
2^32. A reader that sees a new ``boot_id`` knows of a restart; a gap in the
offsets within a boot is a lost record.

The chain: each record carries the ``hash`` of the record written before it
in the same boot as ``prev_hash`` (empty for the first), and its own ``hash``
is SHA-256 over its canonical JSON without the ``hash`` field. Editing,
reordering or deleting a written record breaks a link.

Canonical JSON: sorted keys, no spaces, UTF-8 rather than escapes for non-ASCII, encoded
by orjson. Journals written before orjson were encoded by ``json.dumps``,
which writes the same bytes except a float's exponent (``1e-07``, not
``1e-7``) and a NaN (``NaN``, not ``null``); a record whose hash does not
check in one form is checked in the other (:func:`hash_checks`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
from typing import Any, Final

import orjson

__all__ = [
    "HASH_PREFIX_LEN",
    "OFFSET_MOD",
    "Chain",
    "OffsetCounter",
    "canonical",
    "distance",
    "hash_checks",
    "line_of",
    "pred",
    "record_hash",
    "succ",
    "verify_line",
]

OFFSET_MOD: Final = 2**32


def succ(offset: int) -> int:
    """The offset after ``offset``: ``s(n) = (n + 1) mod 2^32``."""
    return (offset + 1) % OFFSET_MOD


def pred(offset: int) -> int:
    """The offset before ``offset`` (``p(s(n)) == n``), modulo 2^32."""
    return (offset - 1) % OFFSET_MOD


def distance(start: int, offset: int) -> int:
    """How many steps of :func:`succ` lead from ``start`` to ``offset`` (0..2^32-1).

    Offsets wrap, so they compare only by their distance from a common start:
    within a window that begins at ``start``, ``a`` comes before ``b`` iff
    ``distance(start, a) < distance(start, b)``.
    """
    return (offset - start) % OFFSET_MOD


class OffsetCounter:
    """Hands out record offsets: random start, +1 modulo 2^32.

    Safe to share between the event loop and the writer thread: ``take`` is
    one call into ``itertools.count``, which the GIL makes atomic.
    """

    __slots__ = ("_count",)

    def __init__(self, start: int | None = None) -> None:
        first = secrets.randbelow(OFFSET_MOD) if start is None else start % OFFSET_MOD
        self._count = itertools.count(first)

    def take(self) -> int:
        return next(self._count) % OFFSET_MOD


def canonical(record: dict[str, Any]) -> bytes:
    """The bytes a record's hash is computed over: sorted keys, no spaces, no ``hash``."""
    return _encode(_body(record))


def _body(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "hash"} if "hash" in record else record


def _encode(body: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson does not encode (an int beyond 64 bits, a non-str key)
        return _json_dumps(body)


def _json_dumps(body: dict[str, Any]) -> bytes:
    """The canonical form of journals written before orjson (see the module's doc)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_PIECE: Final = 2047
"""hashlib lets other threads run while it hashes 2,048 bytes or more at once. The
journal's writer is a thread beside the middleware's event loop: given the GIL
away for a few microseconds of hashing, it waits for it back behind the loop,
for each record. Hashed in pieces below that size, it keeps the GIL (the same
digest): a delivered batch of 64 events is a record of about 2.4 KB, so the
journal at ``full`` would otherwise give the GIL away for most records. What the
journal costs is in BENCHMARKS.md."""


def _sha256_hex(data: bytes) -> str:
    """SHA-256 hex of ``data``, hashed without letting go of the GIL (see :data:`_PIECE`)."""
    if len(data) <= _PIECE:
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256(data[:_PIECE])
    for start in range(_PIECE, len(data), _PIECE):
        digest.update(data[start : start + _PIECE])
    return digest.hexdigest()


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 hex of :func:`canonical`."""
    return _sha256_hex(canonical(record))


def hash_checks(record: dict[str, Any]) -> bool:
    """Whether the record's ``hash`` is that of its canonical form, as written
    today or (a journal of an older version) by ``json.dumps``."""
    expected, body = record.get("hash"), _body(record)
    return any(
        expected == hashlib.sha256(encode(body)).hexdigest() for encode in (_encode, _json_dumps)
    )


HASH_PREFIX_LEN: Final = len('{"hash":"",') + 64
"""Characters before a line's body: ``{"hash":"<64 hex>",``."""


def line_of(record: dict[str, Any]) -> bytes:
    """A record as its journal line: the hash first, then the canonical body.

    The line is ``{"hash":"H",`` + the canonical JSON of the record without
    ``hash`` minus its opening brace, so a reader can check the hash over the
    line's own bytes (``"{" + line[HASH_PREFIX_LEN:]``) without re-encoding:
    what Spark's ``sha2`` does at scale.
    """
    body = canonical(record)
    digest = _sha256_hex(body)
    record["hash"] = digest
    return b"".join((b'{"hash":"', digest.encode(), b'",', memoryview(body)[1:], b"\n"))


def verify_line(line: bytes) -> dict[str, Any]:
    """The record of one journal line whose ``hash`` checks, or ValueError saying why not.

    A line written by :func:`line_of` is checked over its own bytes (what
    the hash was computed over); any other JSON line (older journals) over
    its :func:`canonical` form. The line's chain link (``prev_hash``) is the
    reader's to check: it needs the record before.

    Raises:
        ValueError: not one whole JSON object, no ``hash``, or a hash that
            does not match (the line was edited).
    """
    if not line.endswith(b"\n"):
        raise ValueError("not a whole line (no newline)")
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:  # NaN, which older journals could hold
            record = json.loads(line)
        except ValueError as e:
            raise ValueError(f"not JSON ({e})") from None
    if not isinstance(record, dict) or not isinstance(record.get("hash"), str):
        raise ValueError("not a journal record (no hash)")
    prefix = line[:HASH_PREFIX_LEN]
    hash_first = (
        len(prefix) == HASH_PREFIX_LEN
        and prefix.startswith(b'{"hash":"')
        and prefix.endswith(b'",')
    )
    own_bytes = hash_first and (
        hashlib.sha256(b"{" + line[HASH_PREFIX_LEN:-1]).hexdigest() == record["hash"]
    )
    # Else: an older line (the hash last), or a hash-first line not in canonical form.
    if not own_bytes and not hash_checks(record):
        raise ValueError("hash does not match the record (edited?)")
    return record


class Chain:
    """Links records in the order they are written."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = ""

    def link(self, record: dict[str, Any]) -> dict[str, Any]:
        """Set ``prev_hash`` and ``hash`` on ``record`` (in place) and return it."""
        record["prev_hash"] = self.last
        record["hash"] = self.last = record_hash(record)
        return record

    def line(self, record: dict[str, Any]) -> bytes:
        """Link ``record`` and return its journal line (one JSON encoding, one hash)."""
        record["prev_hash"] = self.last
        line = line_of(record)
        self.last = record["hash"]
        return line
