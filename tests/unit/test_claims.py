"""Write claims and stream counts: a claim holds while its app has a stream, and a
write by another app is refused naming the owner."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from vehicle_middleware.server.auth.authentication import Caller
from vehicle_middleware.server.auth.claims import WriteClaims
from vehicle_middleware.server.auth.scopes import ALL, parse_scopes
from vehicle_middleware.server.auth.stream_counts import StreamCounts
from vehicle_middleware.server.errors import LimitExceededError, PermissionDeniedError
from vehicle_middleware.vstore import UnknownKeyError

OWNER = Caller("owner", ALL)
OTHER = Caller("other", ALL)


def _parts() -> tuple[WriteClaims, StreamCounts, list[tuple[str, tuple[str, ...], bool]]]:
    told: list[tuple[str, tuple[str, ...], bool]] = []

    def on_claims(app: str, keys: Sequence[str], held: bool) -> None:
        told.append((app, tuple(keys), held))

    claims = WriteClaims(grace_s=30.0, on_claims=on_claims)
    counts = StreamCounts(max_publish_streams_per_app=2, presence=claims)
    return claims, counts, told


def test_a_claim_holds_while_its_app_has_a_stream_and_ends_with_the_last() -> None:
    claims, counts, told = _parts()
    counts.opened("owner")
    counts.opened("owner", publish=True)
    claims.claim(OWNER, ["A", "B"])
    assert claims.claimed_by("A") == "owner"
    with pytest.raises(PermissionDeniedError, match="claimed by 'owner'"):
        claims.check_write(OTHER, "A", field="updates[0]")
    claims.check_write(OWNER, "A")
    counts.closed("owner", publish=True)
    assert claims.claimed_by("A") == "owner"  # one stream is still open
    counts.closed("owner")
    assert claims.claimed_by("A") is None
    assert told == [("owner", ("A", "B"), True), ("owner", ("A", "B"), False)]
    assert counts.publish_stream_count() == 0


def test_a_clean_end_keeps_the_claims_for_the_grace() -> None:
    claims, counts, _ = _parts()
    counts.opened("owner", publish=True)
    claims.claim(OWNER, ["A"])
    counts.closed("owner", publish=True, clean=True)  # to flush: no loop runs the timer here
    assert claims.claimed_by("A") == "owner"


def test_publish_streams_beyond_the_per_app_limit_are_refused_and_not_counted() -> None:
    _, counts, _ = _parts()
    counts.opened("owner", publish=True)
    counts.opened("owner", publish=True)
    with pytest.raises(LimitExceededError, match="app 'owner' already has 2 open"):
        counts.opened("owner", publish=True)
    assert counts.publish_stream_count() == 2


def test_a_write_by_id_of_a_key_the_caller_may_not_see_is_an_unknown_id() -> None:
    claims, _, _ = _parts()
    reader = Caller("reader", parse_scopes("read:Vehicle.**"))
    with pytest.raises(UnknownKeyError) as unknown:
        claims.check_write_by_id(reader, "Secret.Key", 7, 3)
    assert unknown.value.index == 3
    with pytest.raises(PermissionDeniedError, match="no provide: scope matches it"):
        claims.check_write_by_id(reader, "Vehicle.Speed", 8, 0)
    assert not claims.checks_writes(OWNER)
    claims.claim(OWNER, ["Vehicle.Speed"])
    assert claims.checks_writes(OWNER)  # a claim exists: every write is checked
