"""grpc-core's stderr as the operator reads it: handshake failures counted per
peer and interval, everything else grpc-core writes passed on unchanged."""

from __future__ import annotations

from vehicle_middleware.server.core_log import HandshakeFailures, StderrFilter, wants_filter

SSL_LINE = (
    b"I1202 07:23:52.049055     885 ssl_transport_security.cc:2563] Handshake failed with "
    b"error SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER: "
    b"Invalid certificate verification context\n"
)


def failure(peer: bytes, port: int) -> bytes:
    """The handshaker trace's failure message, as grpc-core writes it (shortened)."""
    return (
        b"I1202 07:23:52.049092     885 handshaker.cc:155] CallNextHandshakerLocked: "
        b"error=UNKNOWN: Ssl handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: "
        b"error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER: Invalid "
        b"certificate verification context: OK\n=== Source Location Trace: ===\n"
        b"src/core/util/status_helper.cc:68\n shutdown=false index=2, args={endpoint=0x7f63, "
        b"args={grpc.internal.endpoint_local_address=ipv4:127.0.0.1:50762, "
        b"grpc.internal.endpoint_peer_address=" + peer + b":" + str(port).encode() + b", "
        b"grpc.so_reuseport=0}, read_buffer.Length()=0, exit_early=0}\n"
        b"I1202 07:23:52.049117     885 channel_trace.h:396] handshake manager 0x7f63: "
        b"Failed with error: UNKNOWN: Ssl handshake failed\n=== Source Location Trace: ===\n"
        b"src/core/util/status_helper.cc:68\n\n"
    )


OK_TRACE = (
    b"I1202 07:23:52.048486     886 handshaker.cc:155] CallNextHandshakerLocked: error=OK "
    b"shutdown=false index=0, args={endpoint=0x7f63, args={}}\n"
)


def test_handshake_trace_lines_become_failures_by_peer_and_other_lines_pass() -> None:
    passed: list[bytes] = []
    failed: list[tuple[str, str]] = []
    reader = StderrFilter(passed.append, lambda peer, why: failed.append((peer, why)))
    other = b"E1202 07:23:53.000000     885 chttp2_server.cc:1] something else went wrong\n"
    stream = (
        OK_TRACE + SSL_LINE + failure(b"ipv4:10.0.0.7", 41540) + other
        + SSL_LINE + failure(b"ipv6:[::1]", 5000)
    )  # fmt: skip
    for i in range(0, len(stream), 97):  # in pieces, as a pipe may give it
        reader.feed(stream[i : i + 97])
    reader.end_message()  # the read ended: a line without a header is no one's
    reader.feed(b"a line of no one's")
    reader.flush()
    assert failed == [("10.0.0.7", "WRONG_VERSION_NUMBER"), ("::1", "WRONG_VERSION_NUMBER")]
    assert passed == [other, b"a line of no one's"]


def test_a_peers_failures_are_said_once_then_counted_per_interval() -> None:
    failures = HandshakeFailures(every=10.0)
    first = failures.failed("10.0.0.7", "WRONG_VERSION_NUMBER", 0.0)
    assert first is not None
    assert first.startswith("TLS handshake failed from 10.0.0.7: WRONG_VERSION_NUMBER")
    assert "plaintext" in first
    assert [failures.failed("10.0.0.7", "WRONG_VERSION_NUMBER", t) for t in (1, 2, 3)] == [None] * 3
    assert failures.failed("10.0.0.8", "CERTIFICATE_VERIFY_FAILED", 4.0) is not None
    assert failures.due(9.9) == []
    assert failures.due(10.0) == [
        "TLS handshake failed 3 more times from 10.0.0.7 in the last 10 s: WRONG_VERSION_NUMBER"
    ]
    assert failures.due(14.0) == []  # 10.0.0.8 failed once: its episode ends, quietly
    assert failures.due(20.0) == []  # 10.0.0.7 quiet for an interval: its episode ends
    assert failures.next_due() is None
    assert failures.failed("10.0.0.7", "WRONG_VERSION_NUMBER", 21.0) is not None  # said again
    failures.failed("10.0.0.7", "WRONG_VERSION_NUMBER", 22.0)
    assert failures.due(23.0, final=True) == [
        "TLS handshake failed 1 more time from 10.0.0.7 in the last 2 s: WRONG_VERSION_NUMBER"
    ]


def test_the_filter_stays_off_when_the_operator_asks_for_grpcs_own_logging() -> None:
    assert wants_filter({})
    assert not wants_filter({"GRPC_VERBOSITY": "INFO"})
    assert not wants_filter({"GRPC_TRACE": "handshaker"})
