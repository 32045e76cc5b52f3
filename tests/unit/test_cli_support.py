"""The command-line clients' app id from a token, and their one-line refusals."""

from __future__ import annotations

import re

import grpc
import pytest
from vehicle_middleware.sdk import PublishRefusedError
from vehicle_middleware.sdk.cli import TokenFormatError, app_id_for, refusal, token_subject
from vehicle_middleware.server.auth.tokens import generate_key_pair, mint


def test_the_app_id_is_the_one_given_else_the_tokens_subject_else_the_default() -> None:
    token = mint(generate_key_pair()[0], subject="dashboard", scope="read:**", ttl_s=60)
    assert token_subject(token) == "dashboard"
    assert app_id_for("logger", token, "x") == "logger"  # the middleware then checks the match
    assert app_id_for(None, token, "x") == "dashboard"
    assert app_id_for(None, None, "x") == "x"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("abc", "not a JWT (three dot-separated parts)"),
        ("a.%%%.c", "not a JWT: its claims do not decode"),
        ("a.eyJleHAiOjF9.c", "the token has no subject"),  # {"exp":1}
    ],
)
def test_a_token_whose_subject_cannot_be_read_is_refused_with_a_reason(
    token: str, reason: str
) -> None:
    with pytest.raises(TokenFormatError, match=re.escape(reason)):
        app_id_for(None, token, "x")
    assert app_id_for("given", token, "x") == "given"  # the middleware will judge it


def test_final_refusals_are_one_line_and_anything_else_is_not_swallowed() -> None:
    refused = PublishRefusedError(grpc.StatusCode.PERMISSION_DENIED, "no provide: scope")
    assert refusal(refused) == "the middleware refused it (PERMISSION_DENIED): no provide: scope"
    assert refusal(PublishRefusedError(grpc.StatusCode.UNAVAILABLE, "gone")) is None
    assert refusal(KeyError("x")) is None
