"""The stateless helpers behind ``http``, ``crypto`` and ``Jwt``. Binary strings arrive
hex-encoded from Lua (the bridge carries only UTF-8) and leave as bytes."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import http.client
import json
import re
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt

from runtime.core.durations import parse_ms
from runtime.services import deadline
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
        key = _unhex(key_hex)
        if not key:
            raise ServiceError(
                "Jwt.sign: the key is empty; an HMAC needs a secret key, at least 32 bytes for "
                'HS256 — sign with one, e.g. Jwt.sign(claims, secret "jwt-key")'
            )
        try:
            return jwt.encode(json.loads(claims_json), key, algorithm=alg)
        except (jwt.PyJWTError, TypeError, ValueError) as e:
            raise ServiceError(f"Jwt.sign: refused ({e}); pass a table of claims and a string key") from e

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


# What http.client would refuse, or let through into the request line or a header:
# RFC 9110 tokens for the method and header names, no control characters or spaces in the
# URL, no CR, LF or NUL in a header value.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_URL_BREAKS = re.compile(r"[\x00-\x20\x7f]")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _check_request(method: str, url: str, headers: dict[Any, Any]) -> None:
    if not _TOKEN.fullmatch(method):
        raise ServiceError(
            f"http.request: method {_shown(method)} is not an HTTP method; use a word such as GET, "
            "POST or PUT (no spaces, CR or LF)"
        )
    if _URL_BREAKS.search(url):
        raise ServiceError(
            f"http.request: url {_shown(shown_url(url))} holds a space or a control character (CR, LF...); "
            "percent-encode it (%20, %0D, %0A)"
        )
    for name, value in headers.items():
        if not _TOKEN.fullmatch(str(name)):
            raise ServiceError(
                f"http.request: header name {_shown(str(name))} is not allowed; a header name is "
                "letters, digits and !#$%&'*+-.^_`|~ (no spaces, CR or LF)"
            )
        if any(c in str(value) for c in "\r\n\0"):
            raise ServiceError(
                f"http.request: the value of header {_shown(str(name))} holds CR, LF or NUL; a "
                "header value is one line"
            )


class _Cutoff:
    """A total bound on one HTTP exchange. urllib's ``timeout`` bounds each socket
    operation, so an upstream that sends a byte now and then outlives it; at ``at`` a timer
    shuts the connection's socket down, which ends whatever read or write is blocked."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, at - time.monotonic()), self._cut)
        self._timer.daemon = True

    def __enter__(self) -> _Cutoff:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _cut(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                # The plain socket's shutdown, even under TLS: an SSLSocket's own would unwrap
                # it under the reading thread's feet.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            fired = self.fired
        if fired:
            self._cut()

    def _connection(self, cls: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        def make(host: str, **kw: Any) -> http.client.HTTPConnection:
            conn = cls(host, **kw)
            connect = conn.connect

            def watched() -> None:
                connect()
                self._watch(conn.sock)

            conn.connect = watched  # type: ignore[method-assign]
            return conn

        return make

    def opener(self) -> urllib.request.OpenerDirector:
        cutoff = self

        class Plain(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(cutoff._connection(http.client.HTTPConnection), req)

        class Secure(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                context = self._context  # type: ignore[attr-defined]
                return self.do_open(cutoff._connection(http.client.HTTPSConnection), req, context=context)

        return urllib.request.build_opener(Plain, Secure)


def http_request(spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
    """``http.request``: the request Lua described, the response as ``{status, headers, body}``.

    ``timeout`` (default 30 s) bounds the whole exchange; inside a step attempt, so does the
    attempt's deadline, whichever comes first."""
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
    _check_request(method, url, headers)
    limit = deadline.current()
    timed_out = f"http.request {method} {shown_url(url)} timed out after {round(timeout * 1000)}ms"
    at = time.monotonic() + timeout
    if limit is not None and limit.at <= at:
        if limit.passed():
            raise limit.expired()
        at, timed_out = limit.at, limit.message
    request = urllib.request.Request(
        url, data=data, method=method, headers={str(k): str(v) for k, v in headers.items()}
    )
    with _Cutoff(at) as cutoff:
        try:
            with cutoff.opener().open(request, timeout=max(0.001, at - time.monotonic())) as resp:
                status, resp_headers, payload = resp.status, resp.headers, resp.read(MAX_HTTP_BODY + 1)
        except urllib.error.HTTPError as e:
            try:
                status, resp_headers, payload = e.code, e.headers, e.read(MAX_HTTP_BODY + 1)
            except (OSError, http.client.HTTPException) as read_error:
                raise _failed(cutoff, timed_out, method, url, read_error) from None
            finally:
                e.close()
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            raise _failed(cutoff, timed_out, method, url, e) from None
        if cutoff.fired:
            raise ServiceError(timed_out)
    if len(payload) > MAX_HTTP_BODY:
        raise ServiceError(
            f"http.request {method} {shown_url(url)}: the response body is over {MAX_HTTP_BODY} bytes"
        )
    return {"status": status, "headers": {k.lower(): v for k, v in resp_headers.items()}, "body": payload}


def _failed(cutoff: _Cutoff, timed_out: str, method: str, url: str, e: BaseException) -> ServiceError:
    if cutoff.fired or isinstance(getattr(e, "reason", e), TimeoutError):
        return ServiceError(timed_out)
    reason = _scrubbed(str(getattr(e, "reason", e)), url)
    return ServiceError(f"http.request {method} {shown_url(url)} failed: {reason}")
