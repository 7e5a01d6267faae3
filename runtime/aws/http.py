"""API Gateway HTTP API (payload format 2.0) to and from the fetch request shape."""

from __future__ import annotations

import base64
from typing import Any

from runtime.platform.fetch import MAX_BODY_BYTES, Response, make_request


class BadRequest(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def request_from_event(event: dict[str, Any]) -> dict[str, Any]:
    http = event.get("requestContext", {}).get("http", {})
    method = str(http.get("method") or "GET")
    path = str(event.get("rawPath") or http.get("path") or "/")
    raw_query = str(event.get("rawQueryString") or "")
    target = path + ("?" + raw_query if raw_query else "")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") and body else str(body).encode("utf-8")
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(
            Response(
                413,
                {"content-type": "text/plain"},
                f"request body is over the limit of {MAX_BODY_BYTES} bytes",
            )
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(
            Response(400, {"content-type": "text/plain"}, "request body is not valid UTF-8")
        ) from e
    if event.get("cookies") and "cookie" not in headers:
        headers["cookie"] = "; ".join(event["cookies"])
    return make_request(method, target, text, headers)


def response_to_event(response: Response) -> dict[str, Any]:
    headers = dict(response.headers)
    headers.setdefault("content-type", "text/plain; charset=utf-8")
    return {
        "statusCode": response.status_code,
        "headers": headers,
        "body": response.body,
        "isBase64Encoded": False,
    }
