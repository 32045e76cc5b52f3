"""The ``bytes`` ceiling's batches (``bench.bare_server --build bytes``), put together by hand.

A module of its own so that the ceiling can run compiled as well as the
middleware: ``bench.e2e`` compiles a copy of it with mypyc into a scratch
directory (:func:`bench.e2e.compile_ceiling`) and the server imports that
copy by its top-level name, ``hand_bytes`` (``--compiled-from DIR``). It is
the bare server's own code, not the middleware's: a floor must not borrow the
product's encoder.
"""

from __future__ import annotations

import time
from typing import Final

__all__ = ["batch_bytes"]


def _varint(n: int) -> bytes:
    """Protobuf's varint of ``n`` >= 0."""
    out = []
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_ONE: Final = tuple(bytes((n,)) for n in range(128))


def _seq(n: int) -> bytes:
    """A seq's varint: up to three bytes without a loop."""
    if n < 128:
        return _ONE[n]
    if n < 1 << 14:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 1 << 21:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    return _varint(n)


def batch_bytes(seq: int, n: int, keys: int, value: bytes) -> bytes:
    """``n`` events after ``seq``, as the bytes of one EventBatch put together by hand."""
    heads = _heads(keys)
    tail = b"\x18" + _varint(time.time_ns()) + b"\x22" + _varint(len(value)) + value
    pieces: list[bytes] = []
    extend = pieces.extend
    for s in range(seq + 1, seq + n + 1):
        head = heads[1 + s % keys]
        seq_bytes = _seq(s)
        body = len(head) + len(seq_bytes) + len(tail)  # < 126: --value-size <= 64
        extend((b"\x0a", _ONE[body + 2], b"\x12", _ONE[body], head, seq_bytes, tail))
    return b"".join(pieces)


_HEADS: Final[dict[int, list[bytes]]] = {}


def _heads(keys: int) -> list[bytes]:
    """Each key id's field and the tag of the seq after it."""
    heads = _HEADS.get(keys)
    if heads is None:
        heads = _HEADS[keys] = [b"\x08" + _varint(k) + b"\x10" for k in range(keys + 1)]
    return heads
