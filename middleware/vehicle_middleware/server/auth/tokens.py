"""JWT verification (and, for development, key pairs and minting) with PyJWT.

Tokens are signed RS256 or ES256 by a key whose public half the middleware is
configured with. ``exp`` is required, ``aud`` must match when one is
configured, ``sub`` is the app's identity and ``scope`` its grants
(:mod:`vehicle_middleware.server.auth.scopes`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from vehicle_middleware.server.auth.scopes import Grants, ScopeError, parse_scopes

__all__ = ["ALGORITHMS", "Claims", "TokenError", "TokenVerifier", "generate_key_pair", "mint"]

ALGORITHMS: Final = ("RS256", "ES256")


class TokenError(Exception):
    """A token was refused; the message says why (never echoes the token)."""


@dataclass(frozen=True)
class Claims:
    """What a verified token says."""

    subject: str
    grants: Grants
    expires_at: float
    """Seconds since the epoch."""


class TokenVerifier:
    """Verifies bearer tokens against one public key."""

    def __init__(
        self, public_key_pem: bytes, *, audience: str | None = None, leeway_s: float = 0.0
    ) -> None:
        self._key = serialization.load_pem_public_key(public_key_pem)
        if isinstance(self._key, rsa.RSAPublicKey):
            self._algorithms = ["RS256"]
        elif isinstance(self._key, ec.EllipticCurvePublicKey):
            self._algorithms = ["ES256"]
        else:
            raise ValueError("the token public key must be RSA (RS256) or EC P-256 (ES256)")
        self._audience = audience
        self._leeway = leeway_s

    @classmethod
    def from_file(
        cls, path: Path, *, audience: str | None = None, leeway_s: float = 0.0
    ) -> TokenVerifier:
        return cls(path.read_bytes(), audience=audience, leeway_s=leeway_s)

    def verify(self, token: str) -> Claims:
        """The token's claims, or TokenError saying what is wrong."""
        try:
            payload = jwt.decode(
                token,
                self._key,  # type: ignore[arg-type]
                algorithms=self._algorithms,  # only the key's own: no algorithm confusion
                audience=self._audience,
                leeway=self._leeway,
                options={"require": ["exp", "sub"], "verify_aud": self._audience is not None},
            )
        except jwt.ExpiredSignatureError as e:
            raise TokenError("token expired") from e
        except jwt.InvalidAudienceError as e:
            raise TokenError(f"token audience is not {self._audience!r}") from e
        except jwt.MissingRequiredClaimError as e:
            raise TokenError(f"token lacks the required claim {e.claim!r}") from e
        except jwt.InvalidSignatureError as e:
            raise TokenError("token signature does not verify with the configured key") from e
        except jwt.InvalidAlgorithmError as e:
            raise TokenError(
                f"token algorithm not allowed; use one of {', '.join(ALGORITHMS)}"
            ) from e
        except jwt.ImmatureSignatureError as e:
            raise TokenError("token not valid yet (its 'nbf' or 'iat' is in the future)") from e
        except jwt.PyJWTError as e:
            raise TokenError(f"malformed token ({type(e).__name__})") from e
        except Exception as e:
            raise TokenError(f"malformed token ({type(e).__name__})") from e
        subject = payload.get("sub")
        if not isinstance(subject, str) or not subject:
            raise TokenError("token subject ('sub') must be a non-empty string")
        scope = payload.get("scope", "")
        if not isinstance(scope, str):
            raise TokenError("token 'scope' must be a space-separated string")
        try:
            grants = parse_scopes(scope)
        except ScopeError as e:
            raise TokenError(str(e)) from e
        exp = payload["exp"]
        if not isinstance(exp, int | float) or not 0 < exp < 2**40:
            raise TokenError("token 'exp' is not a plausible time")
        return Claims(subject, grants, float(exp))


def generate_key_pair(algorithm: str = "ES256") -> tuple[bytes, bytes]:
    """A new (private PEM, public PEM) pair for RS256 or ES256. For development."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def mint(
    private_key_pem: bytes,
    *,
    subject: str,
    scope: str,
    ttl_s: float,
    audience: str | None = None,
    now: float | None = None,
) -> str:
    """A signed token (RS256 or ES256 by the key's type). For development and tests."""
    parse_scopes(scope)  # refuse to mint what the middleware would refuse
    key = serialization.load_pem_private_key(private_key_pem, password=None)
    algorithm = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
    issued = time.time() if now is None else now
    claims: dict[str, object] = {
        "sub": subject,
        "scope": scope,
        "iat": int(issued),
        "exp": int(issued + ttl_s),
    }
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, key, algorithm=algorithm)  # type: ignore[arg-type]
