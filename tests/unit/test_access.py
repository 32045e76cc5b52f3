"""Authentication never fails any other way than saying who is refused and why."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from vehicle_middleware.server.auth.authentication import Authenticator
from vehicle_middleware.server.auth.rate_limits import RateLimits
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint
from vehicle_middleware.server.config import AccessSettings
from vehicle_middleware.server.errors import LimitExceededError, UnauthenticatedError
from vehicle_middleware.server.kuksa.subscriptions import SUBSCRIPTION_MARK


@pytest.fixture(scope="module")
def token_access(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authenticator, bytes]:
    private, public = generate_key_pair("ES256")
    pub: Path = tmp_path_factory.mktemp("keys") / "k.pub"
    pub.write_bytes(public)
    s = AccessSettings(
        auth_mode="token",
        token_public_key=str(pub),
        token_audience="vehicle_middleware",
        rate_limit_rps=1e9,
        rate_limit_burst=10**9,
    )
    return _authenticator(s), private


def _authenticator(access: AccessSettings) -> Authenticator:
    return Authenticator.of(access, RateLimits.of(access))


header_values = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=50),
    st.sampled_from(
        [
            "Bearer ",
            "Bearer",
            "bearer x.y.z",
            "Basic abc",
            "Bearer a.b.c.d",
            "Bearer eyJhbGciOiJub25lIn0.e30.",
            "Bearer " + "A" * 5000,
        ]
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    md=st.lists(
        st.tuples(st.sampled_from(["authorization", "app-id", "x-other"]), header_values),
        max_size=4,
    )
)
def test_random_metadata_is_refused_as_unauthenticated_or_admitted(
    token_access: tuple[Authenticator, bytes], md: list[tuple[str, str | bytes]]
) -> None:
    access, _ = token_access
    try:
        caller = access.authenticate(md, peer="ipv4:127.0.0.1:1")
    except (UnauthenticatedError, LimitExceededError):
        return
    raise AssertionError(f"admitted {caller} from {md!r}")


def test_a_valid_token_is_admitted_and_cached(token_access: tuple[Authenticator, bytes]) -> None:
    access, private = token_access
    token = mint(
        private, subject="dash", scope="read:Vehicle.**", ttl_s=60, audience="vehicle_middleware"
    )
    md = [("authorization", f"Bearer {token}")]
    first = access.authenticate(md)
    second = access.authenticate(md)
    assert first.app == "dash"
    assert first.grants is second.grants  # the verified token is cached with its grants


@pytest.mark.parametrize("name", ["victim/kuksa-sub-1", f"victim{SUBSCRIPTION_MARK}7"])
def test_no_caller_can_claim_the_identity_of_a_kuksa_subscription(
    token_access: tuple[Authenticator, bytes], name: str
) -> None:
    """Neither an app id in open mode nor a token's subject may name a stream the
    middleware opened for another app's KUKSA subscription (it would replace it)."""
    access, private = token_access
    token = mint(
        private, subject=name, scope="read:Vehicle.**", ttl_s=60, audience="vehicle_middleware"
    )
    with pytest.raises(UnauthenticatedError):
        access.authenticate([("authorization", f"Bearer {token}")])
    open_mode = _authenticator(AccessSettings(rate_limit_rps=1e9, rate_limit_burst=10**9))
    with pytest.raises(UnauthenticatedError):
        open_mode.authenticate([("app-id", name)], peer="ipv4:127.0.0.1:1")
