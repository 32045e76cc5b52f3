"""Protobuf's wire format, for the messages the middleware writes as bytes.

Some messages are written without a protobuf object: a peer message made of
events serialized once (:mod:`vehicle_middleware.server.cluster.convert`), and the fast
implementations behind :mod:`vehicle_middleware.server.codecs` (an app stream's batches, a
KUKSA subscription's responses made of spliced entries). They put fields
together by hand, and a length-delimited field is its tag, its length, then
its bytes; the varint that writes tags and lengths is here, once:
:func:`varint` (tables and unrolled widths, compiled by mypyc in the compiled
build) and :func:`plain_varint`, its readable twin (one byte a step).
"""

from __future__ import annotations

from typing import Final

__all__ = ["ONE_BYTE", "plain_varint", "short_heads", "varint"]


def plain_varint(n: int) -> bytes:
    """Protobuf's base-128 encoding of ``n`` >= 0, seven bits a byte, the low first,
    each byte but the last with its high bit set."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


ONE_BYTE: Final = tuple(plain_varint(n) for n in range(128))
"""The one-byte varints, 0 to 127: most tags and lengths (read from a table, not computed)."""


def short_heads(tag: bytes) -> tuple[bytes, ...]:
    """The heads of a length-delimited field of up to 127 bytes: ``tag`` and each
    one-byte length, indexed by the length (one piece of a message, not two)."""
    return tuple(tag + length for length in ONE_BYTE)


def varint(n: int) -> bytes:
    """Protobuf's base-128 encoding of ``n`` >= 0 (as :func:`plain_varint`)."""
    if n < 128:
        return ONE_BYTE[n]
    # Up to five bytes (any uint32: a seq, a key, a length) without the loop: the
    # fields of every event go through here.
    if n < 1 << 14:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 1 << 21:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 1 << 28:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
    if n < 1 << 35:  # any uint32 (a seq, a key)
        return bytes(
            (
                n & 0x7F | 0x80,
                n >> 7 & 0x7F | 0x80,
                n >> 14 & 0x7F | 0x80,
                n >> 21 & 0x7F | 0x80,
                n >> 28,
            )
        )
    return plain_varint(n)
