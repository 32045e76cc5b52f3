"""The one protobuf varint of the messages written as bytes (``vehicle_middleware.server.wire``):
the fast one and its readable twin, each held to protobuf's own encoding."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.server.wire import plain_varint, short_heads, varint

_EDGES = [
    0,
    127,
    128,
    2**14 - 1,
    2**14,
    2**21 - 1,
    2**21,
    2**28 - 1,
    2**28,
    2**35 - 1,
    2**35,
    2**63,
    2**64 - 1,
]
VARINTS = [pytest.param(varint, id="fast"), pytest.param(plain_varint, id="reference")]


@pytest.mark.parametrize("varint", VARINTS)
@given(st.one_of(st.integers(0, 2**36), st.integers(0, 2**64 - 1)))
def test_varint_is_protobufs(varint: Callable[[int], bytes], n: int) -> None:
    # A Value's uint64 (field 16: a two-byte tag), written even when 0 (a oneof member).
    assert b"\x80\x01" + varint(n) == t2.Value(uint64=n).SerializeToString()


@pytest.mark.parametrize("varint", VARINTS)
def test_varint_at_each_width_edge(varint: Callable[[int], bytes]) -> None:
    for n in _EDGES:
        assert b"\x80\x01" + varint(n) == t2.Value(uint64=n).SerializeToString(), n


def test_short_heads_are_a_fields_tag_and_length_as_protobuf_writes_them() -> None:
    # A Value's string (field 11, tag 0x5a) of every length a one-byte head covers.
    heads = short_heads(b"\x5a")
    assert len(heads) == 128
    for n, head in enumerate(heads):
        assert head + b"s" * n == t2.Value(string="s" * n).SerializeToString(), n
