"""functions/fetch.py: API Gateway HTTP API (payload format 2.0) events to the project's
``on "fetch"`` handler, with the real event shapes kept under tests/events/."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import functions._runtime as container
from functions import fetch
from runtime.aws.runtime import AwsRuntime
from runtime.platform.fetch import MAX_BODY_BYTES
from tests.support.aws_events import PROJECTS, http_event, load_event
from tests.support.aws_world import AwsWorld, FakeContext

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

HTTP = PROJECTS / "aws_http"


@pytest.fixture
def rt(make_runtime: Callable[..., AwsRuntime]) -> AwsRuntime:
    return make_runtime(HTTP)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """What the handlers' Powertools logger writes, as log records."""
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    handler = Keep(level=logging.DEBUG)
    base = container.logger._logger
    base.addHandler(handler)
    yield got
    base.removeHandler(handler)


def call(event: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = fetch.handler(event, FakeContext(function_name="lunaflow-fetch"))
    return answer


def seen(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["statusCode"] == 200, answer
    data: dict[str, Any] = json.loads(answer["body"])
    return data


def test_post_event_reaches_the_handler_as_a_request(rt: AwsRuntime) -> None:
    """SPEC 2: "A fetch request is `{ method, path, query = {...}, headers = {...} (lower-case
    names), body = "..." }`" — built from API Gateway's payload format 2.0."""
    event = load_event("apigw_v2_post.json")
    answer = call(event)
    got = seen(answer)
    assert got["method"] == "POST"
    assert got["path"] == "/api/sale"
    assert got["body"] == event["body"]
    assert got["headers"]["content-type"] == "application/json"
    assert got["headers"]["x-forwarded-proto"] == "https"
    assert all(name == name.lower() for name in got["headers"])


def test_response_is_shaped_for_api_gateway(rt: AwsRuntime) -> None:
    """The handler's `{ status_code, headers, body }` becomes API Gateway's
    `{ statusCode, headers, body, isBase64Encoded }`."""
    answer = call(load_event("apigw_v2_post.json"))
    assert set(answer) >= {"statusCode", "headers", "body", "isBase64Encoded"}
    assert answer["isBase64Encoded"] is False
    assert answer["headers"]["content-type"] == "application/json"
    assert answer["headers"]["x-seen-method"] == "POST"
    assert isinstance(answer["body"], str)


def test_cookies_of_payload_v2_come_back_as_the_cookie_header(rt: AwsRuntime) -> None:
    """Payload format 2.0 moves Cookie headers into `cookies`; the handler still sees them."""
    got = seen(call(load_event("apigw_v2_post.json")))
    assert got["headers"]["cookie"] == "session=abc123; theme=dark"


def test_query_string_becomes_request_query(rt: AwsRuntime) -> None:
    """SPEC 5: "a query string in the path becomes request.query" — from rawQueryString,
    percent-decoded, blank values kept."""
    got = seen(call(load_event("apigw_v2_get_query.json")))
    assert got["method"] == "GET"
    assert got["path"] == "/api/search"
    assert got["query"] == {"q": "blue vase", "lot": "42", "empty": ""}
    assert got["body"] == ""


def test_base64_body_is_decoded_before_the_handler_sees_it(rt: AwsRuntime) -> None:
    """API Gateway base64-encodes bodies it treats as binary (`isBase64Encoded: true`)."""
    event = load_event("apigw_v2_base64.json")
    got = seen(call(event))
    assert got["method"] == "PUT"
    assert got["body"] == base64.b64decode(event["body"]).decode("utf-8")
    assert json.loads(got["body"]) == {"note": "café ☕", "n": 7}


def test_base64_body_that_is_not_utf8_is_refused_with_400(rt: AwsRuntime) -> None:
    """Lua sees text; bytes that are not UTF-8 are a bad request, not a crash."""
    event = http_event("PUT", "/api/echo", base64.b64encode(b"\xff\xfe\x00bad").decode(), base64=True)
    answer = call(event)
    assert answer["statusCode"] == 400
    assert "UTF-8" in answer["body"]


def test_body_over_one_mib_is_refused_with_413(rt: AwsRuntime) -> None:
    """Request bodies are bounded at 1 MiB, on AWS as locally: over it, 413 without running
    the handler."""
    answer = call(http_event("POST", "/size", "x" * (MAX_BODY_BYTES + 1)))
    assert answer["statusCode"] == 413
    assert str(MAX_BODY_BYTES) in answer["body"]


def test_body_of_exactly_one_mib_is_served(rt: AwsRuntime) -> None:
    answer = call(http_event("POST", "/size", "x" * MAX_BODY_BYTES))
    assert answer["statusCode"] == 200
    assert answer["body"] == str(MAX_BODY_BYTES)


def test_base64_body_over_one_mib_once_decoded_is_refused_with_413(rt: AwsRuntime) -> None:
    """The limit applies to the decoded bytes, whatever API Gateway's encoding."""
    raw = base64.b64encode(b"y" * (MAX_BODY_BYTES + 1)).decode()
    answer = call(http_event("POST", "/size", raw, base64=True))
    assert answer["statusCode"] == 413


def test_handler_error_is_a_500_with_a_request_id_that_is_logged(
    rt: AwsRuntime, records: list[logging.LogRecord]
) -> None:
    """A handler error becomes a 500 that names a request id and hides the error; the error is
    logged with that request id so the log search finds it."""
    answer = call(http_event("GET", "/boom"))
    assert answer["statusCode"] == 500
    request_id = answer["headers"]["x-request-id"]
    assert request_id and request_id in answer["body"]
    assert "broke on purpose" not in answer["body"]
    logged = [r for r in records if getattr(r, "request_id", None) == request_id]
    assert logged, [r.getMessage() for r in records]
    assert logged[0].levelno == logging.ERROR
    assert "the handler broke on purpose" in str(getattr(logged[0], "error", ""))


def test_handler_returning_a_non_response_is_a_500_with_a_request_id(
    rt: AwsRuntime, records: list[logging.LogRecord]
) -> None:
    answer = call(http_event("GET", "/not-a-response"))
    assert answer["statusCode"] == 500
    request_id = answer["headers"]["x-request-id"]
    assert any(getattr(r, "request_id", None) == request_id for r in records)


def test_each_failed_request_gets_its_own_request_id(rt: AwsRuntime) -> None:
    first = call(http_event("GET", "/boom"))["headers"]["x-request-id"]
    second = call(http_event("GET", "/boom"))["headers"]["x-request-id"]
    assert first != second


def test_the_container_serves_again_after_a_handler_error(rt: AwsRuntime) -> None:
    """A failing request leaves the warm container able to serve the next one."""
    assert call(http_event("GET", "/boom"))["statusCode"] == 500
    assert seen(call(http_event("GET", "/fine", query="a=1")))["query"] == {"a": "1"}


def test_handler_reads_secrets_from_secrets_manager_under_the_configured_prefix(
    rt: AwsRuntime, aws: AwsWorld
) -> None:
    """`secret "name"` on AWS is Secrets Manager, named LUNAFLOW_SECRETS_PREFIX + name."""
    rt.store.add_secret("api-key", "v1")
    stored = aws.secretsmanager.get_secret_value(SecretId=aws.env["LUNAFLOW_SECRETS_PREFIX"] + "api-key")
    assert stored["SecretString"] == "v1"
    answer = call(http_event("GET", "/secret"))
    assert (answer["statusCode"], answer["body"]) == (200, "v1")
    rt.store.add_secret("api-key", "v2")
    assert call(http_event("GET", "/secret"))["body"] == "v2"
