"""API Gateway HTTP API (payload format 2.0) to and from the fetch request shape, read with
Powertools' ``APIGatewayProxyEventV2``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from runtime.platform.fetch import MAX_BODY_BYTES, Response, body_too_large, gateway_response, request_table

NOT_BASE64 = "request body is marked base64 but is not valid base64"


class BadRequest(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def request_from_event(raw: dict[str, Any]) -> dict[str, Any]:
    # Powertools reads the keys API Gateway always sends; a hand-made event may lack some.
    context = raw.get("requestContext") or {}
    http = {"method": "GET", "path": "/", **(context.get("http") or {})}
    event = APIGatewayProxyEventV2(
        {
            "rawPath": "",
            "rawQueryString": "",
            "headers": {},
            "isBase64Encoded": False,
            **raw,
            "requestContext": {**context, "http": http},
        }
    )
    method = str(event.request_context.http.method or "GET")
    # rawPath verbatim: read as a URL, `//host/admin` would reach Lua as `/admin`.
    path = str(event.raw_path or event.request_context.http.path or "/")
    raw_query = str(event.raw_query_string or "")
    headers = {str(k).lower(): str(v) for k, v in (event.headers or {}).items()}
    body = event.body or ""
    if event.is_base64_encoded and body:
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as e:
            raise BadRequest(Response(400, {"content-type": "text/plain"}, NOT_BASE64)) from e
    else:
        data = str(body).encode("utf-8")
    if len(data) > MAX_BODY_BYTES:
        raise BadRequest(body_too_large(len(data)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(
            Response(400, {"content-type": "text/plain"}, "request body is not valid UTF-8")
        ) from e
    if event.cookies and "cookie" not in headers:
        headers["cookie"] = "; ".join(event.cookies)
    return request_table(method, path, raw_query, text, headers)


def response_to_event(response: Response) -> dict[str, Any]:
    # The shape every platform measures a response by (``MAX_RESPONSE_BYTES``).
    return gateway_response(response)
