"""The sizes API Gateway and Lambda put on a fetch, held on both harnesses (issue 25): a
route answering an 8.4 MB body was handed back whole by `AwsPlatform`, though Lambda refuses
a synchronous response over 6 MB (6,291,556 bytes of the JSON it sends API Gateway, which
then answers a bare 500). Every platform now answers such a response with a 500 whose JSON
body names the limit, and logs why; a request body over the limit is refused with the same
413 on every platform.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.platform.limits import MAX_BODY_BYTES, MAX_RESPONSE_BYTES
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "seed_fetch_sizes"
MB = 1_000_000
# {"statusCode": 200, "headers": {"content-type": "text/plain; charset=utf-8"}, "body": "",
# "isBase64Encoded": false}: what Lambda sends besides the body.
ENVELOPE = 115


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[LocalPlatform]:
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def refused(p: LocalPlatform, status: int, body: str) -> dict[str, Any]:
    assert status == 500, body[:200]
    answer: dict[str, Any] = json.loads(body)
    assert answer["limit_bytes"] == MAX_RESPONSE_BYTES
    errors = [r for r in p.logs if r.get("level") == "error"]
    assert errors and errors[-1]["request_id"] == answer["request_id"]
    assert errors[-1]["message"] == answer["error"]
    return answer


def test_a_response_over_six_megabytes_is_a_500_naming_the_limit(p: LocalPlatform) -> None:
    response = p.fetch("GET", "/body", query={"copies": str(int(8.4 * MB))})
    answer = refused(p, response.status_code, response.body)
    assert response.headers["content-type"] == "application/json"
    assert answer["error"] == (
        f"fetch GET /body: the response is {int(8.4 * MB) + ENVELOPE} bytes as the fetch function would "
        f"return it to API Gateway, over the limit of {MAX_RESPONSE_BYTES} bytes (6 MB) of a "
        "synchronous Lambda response, past which API Gateway answers a bare 500; answer less per "
        "request (pages, a range), or keep the data elsewhere and answer where to fetch it"
    )


def test_a_response_just_under_the_limit_is_answered_whole(p: LocalPlatform) -> None:
    n = MAX_RESPONSE_BYTES - 200
    response = p.fetch("GET", "/body", query={"copies": str(n)})
    assert response.status_code == 200
    assert len(response.body) == n


def test_json_escaping_counts_toward_the_limit(p: LocalPlatform) -> None:
    """Lambda sends the response as JSON: 3.5 MB of quotes are 7 MB escaped."""
    response = p.fetch("GET", "/body", query={"copies": str(int(3.5 * MB)), "char": '"'})
    refused(p, response.status_code, response.body)


def test_multibyte_text_counts_in_utf8_bytes(p: LocalPlatform) -> None:
    """2.2 million characters of "é" are 4.4 MB of UTF-8; of "€", 6.6 MB."""
    ok = p.fetch("GET", "/body", query={"copies": str(int(2.2 * MB)), "char": "é"})
    assert ok.status_code == 200 and len(ok.body) == int(2.2 * MB)
    too_big = p.fetch("GET", "/body", query={"copies": str(int(2.2 * MB)), "char": "€"})
    refused(p, too_big.status_code, too_big.body)


def test_a_request_body_over_the_limit_is_refused_with_413_on_every_platform(p: LocalPlatform) -> None:
    response = p.fetch("POST", "/echo", body="x" * (MAX_BODY_BYTES + 1))
    assert response.status_code == 413
    assert (
        response.body
        == f"request body of {MAX_BODY_BYTES + 1} bytes is over the limit of {MAX_BODY_BYTES} bytes"
    )
    assert p.fetch("POST", "/echo", body="x" * MAX_BODY_BYTES).body == str(MAX_BODY_BYTES)


def test_a_request_body_is_measured_in_utf8_bytes(p: LocalPlatform) -> None:
    half = MAX_BODY_BYTES // 2
    assert p.fetch("POST", "/echo", body="é" * half).body == str(MAX_BODY_BYTES)
    assert p.fetch("POST", "/echo", body="é" * half + "x").status_code == 413
