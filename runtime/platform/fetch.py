"""HTTP requests and responses as the project's ``on "fetch"`` handler sees them.

One shape for ``lunaflow dev``, the test harness and (later) API Gateway: a request is
``{ method, path, query, headers (lower-case), body }``; the handler returns
``{ status_code, headers, body }``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from runtime.engine.code import Code
from runtime.errors import InvalidInput

MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Response:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


def make_request(
    method: str,
    target: str,
    body: str | None = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A request table from a request target as the client sent it: the path is everything
    before the first ``?``, verbatim, and the rest becomes ``query`` (later keys win)."""
    path, _, query_string = target.partition("?")
    return request_table(method, _origin_path(path), query_string, body, headers, query)


def request_table(
    method: str,
    path: str,
    query_string: str,
    body: str | None = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A request table from a path taken verbatim and a raw query string. The path is never
    parsed: read as a URL, ``//host/admin`` would become ``/admin`` and slip past a rule on
    the path in front of the function."""
    q = dict(parse_qsl(query_string, keep_blank_values=True))
    q.update(query or {})
    return {
        "method": method.upper(),
        "path": path or "/",
        "query": q,
        "headers": {k.lower(): v for k, v in (headers or {}).items()},
        "body": body or "",
    }


def _origin_path(path: str) -> str:
    """An absolute-form target (``http://host/x``, which HTTP/1.1 servers must accept) is read
    as its path; any other target is kept as it came."""
    scheme, sep, rest = path.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        return "/" + rest.partition("/")[2]
    return path


def request_target(requestline: str, parsed: str) -> str:
    """The target of an HTTP request line as the client sent it. ``http.server`` reduces a
    leading ``//`` to ``/`` in ``path``; API Gateway's ``rawPath`` keeps it, and so must
    ``lunaflow dev``, for the handler to see the same path on both."""
    words = requestline.split()
    return words[1] if len(words) >= 2 else parsed


def check_text(request: dict[str, Any]) -> None:
    """Refuse a request whose strings are not text: a lone surrogate (a Python string that
    came from bad UTF-16 or a JSON escape) has no UTF-8 form for the handler to see."""

    def check(value: Any, what: str) -> None:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidInput(
                    f"fetch: the request's {what} is not valid UTF-8 text ({e.reason} at character "
                    f"{e.start}); pass text that encodes as UTF-8, binary data base64-encoded"
                ) from None

    check(request.get("method"), "method")
    check(request.get("path"), "path")
    check(request.get("body"), "body")
    for part, label in (("query", "query"), ("headers", "header")):
        for name, value in (request.get(part) or {}).items():
            check(name, f"{label} name")
            check(value, f"value of {label} '{name}'" if _is_text(name) else f"{label} value")


def _is_text(value: Any) -> bool:
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def error_response(message: str, status: int = 500) -> tuple[Response, str]:
    request_id = str(uuid.uuid4())
    body = f"internal error (request id {request_id})" if status == 500 else message
    return Response(
        status, {"content-type": "text/plain; charset=utf-8", "x-request-id": request_id}, body
    ), request_id


def shape_response(out: Any) -> Response | None:
    """The handler's return value as a Response, or None when it is not one."""
    if not isinstance(out, dict):
        return None
    status = out.get("status_code", 200)
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        return None
    headers = out.get("headers") or {}
    if not isinstance(headers, dict):
        return None
    for name, value in headers.items():
        # A CR or LF would end the header early and let a value write headers of its own.
        if any(c in str(name) + str(value) for c in "\r\n\0") or not str(name).strip():
            return None
    body = out.get("body")
    if body is None:
        body = ""
    if not isinstance(body, str):
        return None
    return Response(status, {str(k).lower(): str(v) for k, v in headers.items()}, body)


@dataclass(frozen=True)
class Failure:
    """Why a request got a 500: logged with its request id, never shown to the client."""

    request_id: str
    message: str
    traceback: str | None


NO_HANDLER = Response(404, {"content-type": "text/plain"}, 'this project declares no on "fetch" handler')


def handle(code: Code, request: dict[str, Any]) -> tuple[Response, Failure | None]:
    """Run the project's fetch handler; a handler error or a non-response becomes a 500."""
    if not code.has_fetch():
        return NO_HANDLER, None
    ok, out, tb = code.call_fetch(request)
    response = shape_response(out) if ok else None
    if response is not None:
        return response, None
    message = str(out) if not ok else NOT_A_RESPONSE
    error, request_id = error_response(message)
    return error, Failure(request_id, message, tb)


NOT_A_RESPONSE = (
    "the fetch handler returned something that is not a response; return a table like "
    '{ status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "" } '
    "(status_code 100-599, body a string)"
)
