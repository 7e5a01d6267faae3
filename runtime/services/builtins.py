"""The stateless helpers behind ``http``, ``crypto`` and ``Jwt``. Binary strings arrive
hex-encoded from Lua (the bridge carries only UTF-8) and leave as bytes."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt

from runtime.core.durations import parse_ms
from runtime.services.base import ServiceError

DEFAULT_HTTP_TIMEOUT_S = 30.0
MAX_HTTP_BODY = 10 * 1024 * 1024


def _unhex(s: str) -> bytes:
    return binascii.unhexlify(s)


def crypto_functions() -> dict[str, Callable[..., Any]]:
    def b64decode(s: str) -> bytes:
        try:
            return base64.b64decode(s.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as e:
            raise ServiceError(f"crypto.base64_decode: the text is not valid base64 ({e})") from e

    return {
        "crypto_sha256": lambda s: hashlib.sha256(_unhex(s)).digest(),
        "crypto_hmac_sha256": lambda key, s: hmac.new(_unhex(key), _unhex(s), hashlib.sha256).digest(),
        "crypto_random_bytes": lambda n: secrets.token_bytes(int(n)),
        "crypto_b64encode": lambda s: base64.b64encode(_unhex(s)).decode("ascii"),
        "crypto_b64decode": b64decode,
    }


def jwt_functions(
    to_lua: Callable[[Any], Any], pair: Callable[[Any, Any], Any], now: Callable[[], float]
) -> dict[str, Callable[..., Any]]:
    def sign(claims_json: str, key_hex: str, alg: str) -> str:
        if alg not in ("HS256", "HS384", "HS512"):
            raise ServiceError(f"Jwt.sign: algorithm '{alg}' is not supported; use HS256, HS384 or HS512")
        return jwt.encode(json.loads(claims_json), _unhex(key_hex), algorithm=alg)

    def verify(token: str, key_hex: str) -> Any:
        # Times are checked against the platform's clock (a test's fake clock included),
        # not the machine's, so PyJWT's own time checks are off.
        options: Any = {"verify_exp": False, "verify_nbf": False, "verify_iat": False}
        try:
            claims = jwt.decode(
                token, _unhex(key_hex), algorithms=["HS256", "HS384", "HS512"], options=options
            )
        except jwt.PyJWTError as e:
            return pair(None, f"invalid token: {e}")
        t = now()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int | float) and not isinstance(exp, bool) and t >= exp:
            return pair(None, "invalid token: Signature has expired")
        if isinstance(nbf, int | float) and not isinstance(nbf, bool) and t < nbf:
            return pair(None, "invalid token: The token is not yet valid (nbf)")
        return pair(to_lua(claims), None)

    return {"jwt_sign": sign, "jwt_verify": verify}


def shown_url(url: str) -> str:
    """A URL as an error text names it: without userinfo, query string or fragment, which is
    where API keys and passwords ride (``?...`` marks a query left out)."""
    rest = url.split("#", 1)[0]
    rest, query, _ = rest.partition("?")
    scheme, sep, rest = rest.partition("://")
    if sep:
        authority, slash, path = rest.partition("/")
        rest = authority.rpartition("@")[2] + slash + path
    return scheme + sep + rest + ("?..." if query else "")


def _scrubbed(text: str, url: str) -> str:
    """``text`` (an OS or library error) without the URL's userinfo, query string or fragment."""
    before_fragment, _, fragment = url.partition("#")
    query = before_fragment.partition("?")[2]
    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    userinfo = authority.rpartition("@")[0]
    for part in sorted((query, fragment, userinfo), key=len, reverse=True):
        if part:
            text = text.replace(part, "...")
    return text


def http_request(spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
    """``http.request``: the request Lua described, the response as ``{status, headers, body}``."""
    method = str(spec.get("method") or "GET").upper()
    url = spec.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        got = f'"{shown_url(url)}"' if isinstance(url, str) else repr(url)
        raise ServiceError(f"http.request: url must be an http:// or https:// address (got {got})")
    timeout = DEFAULT_HTTP_TIMEOUT_S
    if spec.get("timeout") is not None:
        timeout = parse_ms(spec["timeout"], "the timeout of http.request") / 1000
    headers = spec.get("headers") or {}
    if not isinstance(headers, dict):
        raise ServiceError("http.request: headers must be a table of names to strings")
    request = urllib.request.Request(
        url, data=data, method=method, headers={str(k): str(v) for k, v in headers.items()}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, resp_headers, payload = resp.status, resp.headers, resp.read(MAX_HTTP_BODY + 1)
    except urllib.error.HTTPError as e:
        status, resp_headers, payload = e.code, e.headers, e.read(MAX_HTTP_BODY + 1)
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = _scrubbed(str(getattr(e, "reason", e)), url)
        raise ServiceError(f"http.request {method} {shown_url(url)} failed: {reason}") from None
    if len(payload) > MAX_HTTP_BODY:
        raise ServiceError(
            f"http.request {method} {shown_url(url)}: the response body is over {MAX_HTTP_BODY} bytes"
        )
    return {"status": status, "headers": {k.lower(): v for k, v in resp_headers.items()}, "body": payload}
