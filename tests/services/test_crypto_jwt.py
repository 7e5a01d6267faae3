"""Acceptance: ``crypto.*`` ("hashing and randomness") and ``Jwt.sign`` / ``Jwt.verify`` ("JSON
Web Tokens") of SPEC section 2, checked against Python's hashlib, hmac, base64 and PyJWT."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from runtime.testing import LocalPlatform

from . import error, project, value

ALL_BYTES = bytes(range(256))
KEY = "k" * 32  # HS256 wants at least 32 bytes of key
OTHER_KEY = "o" * 32


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_crypto"), data_dir=tmp_path) as plat:
        yield plat


def b64url_json(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


# --- crypto --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "abc", "héllo wörld", "x" * 1000])
def test_sha256_matches_hashlib(p: LocalPlatform, text: str) -> None:
    """SPEC 2: `crypto.sha256(s)`, read as hex with `crypto.hex(s)`."""
    assert value(p, op="sha256", s=text) == hashlib.sha256(text.encode()).hexdigest()


def test_sha256_of_binary_input_matches_hashlib(p: LocalPlatform) -> None:
    assert value(p, op="sha256_bytes") == hashlib.sha256(ALL_BYTES).hexdigest()


def test_sha256_known_vector(p: LocalPlatform) -> None:
    """FIPS 180-2's "abc" vector."""
    assert value(p, op="sha256", s="abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_hmac_sha256_known_vector(p: LocalPlatform) -> None:
    """RFC 4231 test case 2."""
    assert value(p, op="hmac", key="Jefe", s="what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


@pytest.mark.parametrize(("key", "text"), [("secret", "payload"), ("", "empty key"), ("k" * 100, "long key")])
def test_hmac_sha256_matches_python(p: LocalPlatform, key: str, text: str) -> None:
    expected = hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()
    assert value(p, op="hmac", key=key, s=text) == expected


def test_hmac_sha256_of_binary_key_and_input_matches_python(p: LocalPlatform) -> None:
    assert value(p, op="hmac_bytes") == hmac.new(ALL_BYTES, ALL_BYTES, hashlib.sha256).hexdigest()


def test_hex_encodes_every_byte(p: LocalPlatform) -> None:
    assert value(p, op="hex", s="AZ\n") == "415a0a"
    assert value(p, op="hex", bytes=True) == ALL_BYTES.hex()


def test_base64_encode_matches_python(p: LocalPlatform) -> None:
    for text in ["", "f", "fo", "foo", "hello wörld"]:
        assert value(p, op="b64", s=text) == base64.b64encode(text.encode()).decode()


def test_base64_round_trips_binary(p: LocalPlatform) -> None:
    out = value(p, op="b64_bytes")
    assert out["encoded"] == base64.b64encode(ALL_BYTES).decode()
    assert out["same"] is True and out["len"] == 256


def test_base64_decode_matches_python(p: LocalPlatform) -> None:
    assert value(p, op="b64_decode", s=base64.b64encode(b"hello").decode()) == "hello"


def test_base64_decode_refuses_invalid_text(p: LocalPlatform) -> None:
    e = error(p, op="b64_decode", s="not base64!")
    assert "crypto.base64_decode" in e and "not valid base64" in e


@pytest.mark.parametrize("n", [0, 1, 16, 32, 1000])
def test_random_bytes_has_the_asked_length(p: LocalPlatform, n: int) -> None:
    """SPEC 2: `crypto.random_bytes(n)`."""
    out = value(p, op="random", n=n)
    assert out["len"] == n
    assert len(bytes.fromhex(out["hex"])) == n
    if n >= 16:
        assert out["differ"] is True  # two draws of 16+ random bytes never collide


@pytest.mark.parametrize("n", [-1, 1.5, 70000])
def test_random_bytes_refuses_a_bad_count(p: LocalPlatform, n: Any) -> None:
    assert "crypto.random_bytes expects a whole number" in error(p, op="random", n=n)


def test_crypto_and_jwt_are_absent_in_run_code_including_step_bodies(p: LocalPlatform) -> None:
    """Seed: "`http`, `crypto`, `Jwt` | absent, inside step bodies too"."""
    run = p.start("absent", {}, id="absent")
    assert run.status == "completed", run.error
    nil_both = {"crypto": "nil", "Jwt": "nil"}
    assert run.result == {"run": nil_both, "body": nil_both}


# --- Jwt -----------------------------------------------------------------------------------


def test_jwt_sign_makes_an_hs256_token_python_can_verify(p: LocalPlatform) -> None:
    """SPEC 2: `Jwt.sign(claims, key, { alg = "HS256" })`."""
    token = value(p, op="sign", claims={"sub": "ada", "n": 3}, key=KEY)
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    assert jwt.decode(token, KEY, algorithms=["HS256"]) == {"sub": "ada", "n": 3}


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_jwt_sign_honours_the_alg_option(p: LocalPlatform, alg: str) -> None:
    key = "k" * 64
    token = value(p, op="sign", claims={"sub": "ada"}, key=key, opts={"alg": alg})
    assert jwt.get_unverified_header(token)["alg"] == alg
    assert jwt.decode(token, key, algorithms=[alg]) == {"sub": "ada"}


@pytest.mark.parametrize("alg", ["RS256", "none", "ES256"])
def test_jwt_sign_refuses_an_unsupported_alg(p: LocalPlatform, alg: str) -> None:
    e = error(p, op="sign", claims={"sub": "ada"}, key=KEY, opts={"alg": alg})
    assert f"Jwt.sign: algorithm '{alg}' is not supported" in e


JWT_VERIFY_BUG = (
    "engine: Jwt.verify reads its host reply as a table (r[1], r[2]) but the host returns two "
    "values, so a valid token verifies to nil and an invalid one raises 'attempt to index a nil "
    "value (local 'r')'"
)


def test_jwt_sign_then_verify_round_trips_the_claims(p: LocalPlatform) -> None:
    """SPEC 2: `Jwt.sign(claims, key)`, `Jwt.verify(token, key)`."""
    claims = {"sub": "ada", "n": 3, "roles": ["admin"]}
    token = value(p, op="sign", claims=claims, key=KEY)
    out = value(p, op="verify", token=token, key=KEY)
    assert out == {"claims": claims, "claims_type": "table"}


def test_jwt_verify_accepts_a_token_python_signed(p: LocalPlatform) -> None:
    token = jwt.encode({"sub": "grace"}, KEY, algorithm="HS256")
    assert value(p, op="verify", token=token, key=KEY)["claims"] == {"sub": "grace"}


def test_jwt_verify_with_the_wrong_key_returns_nil_and_an_error(p: LocalPlatform) -> None:
    token = value(p, op="sign", claims={"sub": "ada"}, key=KEY)
    out = value(p, op="verify", token=token, key=OTHER_KEY)
    assert out["claims_type"] == "nil"
    assert isinstance(out.get("error"), str) and out["error"]


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        # alg "none": unsigned, must never verify
        f"{b64url_json({'alg': 'none', 'typ': 'JWT'})}.{b64url_json({'sub': 'ada'})}.",
    ],
    ids=["malformed", "alg-none"],
)
def test_jwt_verify_of_a_malformed_or_unsigned_token_returns_nil_and_an_error(
    p: LocalPlatform, token: str
) -> None:
    out = value(p, op="verify", token=token, key=KEY)
    assert out["claims_type"] == "nil"
    assert isinstance(out.get("error"), str) and out["error"]


def test_jwt_verify_of_a_tampered_token_returns_nil_and_an_error(p: LocalPlatform) -> None:
    token = value(p, op="sign", claims={"sub": "ada", "admin": False}, key=KEY)
    header, _, signature = token.split(".")
    forged = f"{header}.{b64url_json({'sub': 'ada', 'admin': True})}.{signature}"
    out = value(p, op="verify", token=forged, key=KEY)
    assert out["claims_type"] == "nil"
    assert isinstance(out.get("error"), str) and out["error"]


def test_jwt_expiry_follows_the_platform_clock(p: LocalPlatform) -> None:
    """A token made in a handler with `exp = os.time() + 3600` verifies now and has expired
    two hours later on the same clock (os.time in a handler is the platform's clock)."""
    token = value(p, op="sign_expiring", sub="ada", key=KEY)
    assert jwt.decode(token, options={"verify_signature": False})["exp"] == int(p.now) + 3600
    now = value(p, op="verify", token=token, key=KEY)
    assert now["claims"]["sub"] == "ada"
    p.advance("2h")
    later = value(p, op="verify", token=token, key=KEY)
    assert later["claims_type"] == "nil"
    assert "expired" in later["error"].lower()
