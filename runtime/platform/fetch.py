"""HTTP requests and responses as the project's ``on "fetch"`` handler sees them.

One shape for ``lunaflow dev``, the test harness and (later) API Gateway: a request is
``{ method, path, query, headers (lower-case), body }``; the handler returns
``{ status_code, headers, body }``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from runtime.engine.code import Code
from runtime.errors import InvalidInput

MAX_BODY_BYTES = 1024 * 1024  # a request's body, in UTF-8 bytes (below API Gateway's 10 MB)
# A synchronous Lambda invocation's response, as Lambda words it: "Response payload size
# exceeded maximum allowed payload size (6291556 bytes)"; API Gateway then answers a bare 500.
# What is measured is what the fetch function returns (``gateway_response``) as JSON, so JSON
# escapes and, for a binary body, base64 count, as they do on Lambda.
MAX_RESPONSE_BYTES = 6_291_556
DEFAULT_CONTENT_TYPE = "text/plain; charset=utf-8"


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


def body_bytes(request: dict[str, Any]) -> int:
    """A request body's size in UTF-8 bytes (0 for one plainly within the limit)."""
    body = str(request.get("body") or "")
    return 0 if 4 * len(body) <= MAX_BODY_BYTES else len(body.encode("utf-8"))


def body_too_large(size: int) -> Response:
    """The 413 every platform answers a request body over ``MAX_BODY_BYTES`` with."""
    return Response(
        413,
        {"content-type": "text/plain"},
        f"request body of {size} bytes is over the limit of {MAX_BODY_BYTES} bytes",
    )


def gateway_response(response: Response) -> dict[str, Any]:
    """The response as the fetch function returns it to API Gateway (HTTP API, payload
    format 2.0): the one shape the response limit is measured on, on every platform."""
    headers = dict(response.headers)
    headers.setdefault("content-type", DEFAULT_CONTENT_TYPE)
    return {
        "statusCode": response.status_code,
        "headers": headers,
        "body": response.body,
        "isBase64Encoded": False,
    }


def response_bytes(response: Response) -> int:
    """The bytes Lambda would send for ``response``: its API Gateway shape as JSON, encoded
    as Lambda's Python 3.12 runtime does (``json.dumps``, ``ensure_ascii=False``)."""
    texts = [response.body, *(k + v for k, v in response.headers.items())]
    if 6 * sum(len(t) for t in texts) + 200 < MAX_RESPONSE_BYTES:
        return 0  # within the limit however it escapes (a character is at most 6 bytes of JSON)
    text = json.dumps(gateway_response(response), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def _too_large(request: dict[str, Any], size: int) -> tuple[Response, Failure]:
    """A 500 that says which limit, rather than the bare 500 API Gateway would answer."""
    message = (
        f"fetch {request.get('method')} {request.get('path')}: the response is {size} bytes as the "
        f"fetch function would return it to API Gateway, over the limit of {MAX_RESPONSE_BYTES} "
        "bytes (6 MB) of a synchronous Lambda response, past which API Gateway answers a bare 500; "
        "answer less per request (pages, a range), or keep the data elsewhere and answer where "
        "to fetch it"
    )
    request_id = str(uuid.uuid4())
    body = json.dumps({"error": message, "limit_bytes": MAX_RESPONSE_BYTES, "request_id": request_id})
    headers = {"content-type": "application/json", "x-request-id": request_id}
    return Response(500, headers, body), Failure(request_id, message, None)


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
        size = response_bytes(response)
        if size > MAX_RESPONSE_BYTES:
            return _too_large(request, size)
        return response, None
    message = str(out) if not ok else NOT_A_RESPONSE
    error, request_id = error_response(message)
    return error, Failure(request_id, message, tb)


NOT_A_RESPONSE = (
    "the fetch handler returned something that is not a response; return a table like "
    '{ status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "" } '
    "(status_code 100-599, body a string)"
)
