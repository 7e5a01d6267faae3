"""The events Lambda hands the handlers, built the way AWS builds them: API Gateway HTTP API
(payload format 2.0) requests, SQS batches from an event source mapping, and the invocation
context. ``runtime.aws.harness`` plays Lambda with these; the shapes follow AWS's
documented examples (tests/events/ holds captured ones the handler tests read).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from runtime.aws.contract import SERVICE


def http_event(
    method: str,
    target: str,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    *,
    now_s: float,
) -> dict[str, Any]:
    """A request as API Gateway hands it to the fetch function: ``rawPath`` verbatim, the
    query string (``target``'s, then ``query``'s keys, later keys winning, as
    ``make_request`` reads them), lower-case headers, the body as text."""
    parts = urlsplit(target)
    merged = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(query or {})
    path = parts.path or "/"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(merged),
        "headers": {k.lower(): v for k, v in (headers or {}).items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "lunaflow",
            "domainName": "lunaflow.execute-api.localhost",
            "http": {"method": method.upper(), "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "timeEpoch": int(now_s * 1000),
        },
        "isBase64Encoded": False,
    }
    if merged:
        event["queryStringParameters"] = merged
    if body is not None:
        event["body"] = body
    return event


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """An SQS batch as an event source mapping hands it over, from ReceiveMessage messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {"ApproximateReceiveCount": "1", **m.get("Attributes", {})},
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


@dataclass
class LambdaContext:
    """An invocation's context: what Powertools reads, and the time left, counted down in
    real time from the function's timeout (as Lambda does)."""

    function_name: str
    timeout_s: float
    region: str = "eu-west-1"
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"{SERVICE}/[{self.function_version}]{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_s - (time.monotonic() - self.started)) * 1000))
