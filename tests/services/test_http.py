"""Acceptance: ``http.request{ method, url, headers, body, timeout }``, ``http.get(url, opts)``,
``http.post(url, body, opts)`` returning ``{ status = n, headers = {...}, body = "..." }``
(SPEC section 2), against a real HTTP server on the loopback interface."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform

from . import Loopback, error, loopback_server, project, value


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_http"), data_dir=tmp_path) as plat:
        yield plat


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback_server() as s:
        yield s


def test_get_returns_status_headers_and_body(p: LocalPlatform, server: Loopback) -> None:
    resp = value(p, op="get", url=server.url + "/hello?x=1")
    assert resp["status"] == 200
    assert json.loads(resp["body"]) == {
        "method": "GET",
        "path": "/hello?x=1",
        "body": "",
        "body_hex": "",
        "x_token": None,
    }
    assert resp["headers"]["content-type"] == "application/json"
    assert [r.path for r in server.requests] == ["/hello?x=1"]


def test_response_header_names_are_lower_case(p: LocalPlatform, server: Loopback) -> None:
    resp = value(p, op="get", url=server.url + "/hello")
    assert resp["headers"]["x-custom-header"] == "Yes"
    assert all(name == name.lower() for name in resp["headers"])


def test_get_sends_the_given_headers(p: LocalPlatform, server: Loopback) -> None:
    value(p, op="get", url=server.url + "/h", opts={"headers": {"X-Token": "secret-1"}})
    assert server.requests[-1].headers["x-token"] == "secret-1"


def test_post_sends_the_body(p: LocalPlatform, server: Loopback) -> None:
    resp = value(
        p,
        op="post",
        url=server.url + "/orders",
        body='{"id":1}',
        opts={"headers": {"Content-Type": "application/json"}},
    )
    echo = json.loads(resp["body"])
    assert echo["method"] == "POST" and echo["body"] == '{"id":1}'
    assert server.requests[-1].headers["content-type"] == "application/json"
    assert server.requests[-1].body == b'{"id":1}'


def test_request_takes_method_url_headers_and_body(p: LocalPlatform, server: Loopback) -> None:
    resp = value(
        p,
        op="request",
        req={
            "method": "PUT",
            "url": server.url + "/items/3",
            "headers": {"X-Token": "t"},
            "body": "qty=2",
        },
    )
    assert resp["status"] == 200
    assert json.loads(resp["body"]) == {
        "method": "PUT",
        "path": "/items/3",
        "body": "qty=2",
        "body_hex": b"qty=2".hex(),
        "x_token": "t",
    }


def test_an_error_status_is_a_response_not_an_error(p: LocalPlatform, server: Loopback) -> None:
    resp = value(p, op="get", url=server.url + "/missing")
    assert resp["status"] == 404
    assert resp["body"] == "not here"


def test_binary_bodies_cross_intact(p: LocalPlatform, server: Loopback) -> None:
    out = value(p, op="bytes", url=server.url)
    assert out["echoed"] == bytes(range(256)).hex()
    assert out["len"] == 256 and out["hex"] == bytes(range(256)).hex()


def test_a_timeout_fails_with_a_clear_error(p: LocalPlatform, server: Loopback) -> None:
    """`http.request{ ..., timeout }`: past it the call fails, naming the request."""
    began = time.monotonic()
    e = error(p, op="get", url=server.url + "/slow", opts={"timeout": "200ms"})
    assert time.monotonic() - began < 1.5
    assert "timed out" in e
    assert f"GET {server.url}/slow" in e


def test_a_bad_timeout_is_refused_with_the_duration_message(p: LocalPlatform, server: Loopback) -> None:
    e = error(p, op="get", url=server.url + "/x", opts={"timeout": "soon"})
    assert 'bad duration "soon" for the timeout of http.request' in e
    assert server.requests == []


def test_a_refused_connection_is_a_clear_error(p: LocalPlatform, server: Loopback) -> None:
    e = error(p, op="get", url="http://127.0.0.1:1/nothing-listens")
    assert "http.request GET http://127.0.0.1:1/nothing-listens failed" in e


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "127.0.0.1/x", ""])
def test_a_non_http_url_is_refused(p: LocalPlatform, url: str) -> None:
    e = error(p, op="get", url=url)
    assert "http.request: url must be an http:// or https:// address" in e


def test_http_is_absent_in_run_code_including_step_bodies(p: LocalPlatform) -> None:
    """Seed: "`http`, `crypto`, `Jwt` | absent, inside step bodies too"."""
    run = p.start("absent", {}, id="absent")
    assert run.status == "completed", run.error
    assert run.result == {"run": "nil", "body": "nil"}


def test_http_is_usable_from_fetch_handlers_and_objects(p: LocalPlatform, server: Loopback) -> None:
    """Seed: "Reach the network by calling an object from a step. The step records what the
    object returned, so replay does not call again"."""
    via_handler = value(p, op="object", url=server.url + "/from-handler")
    assert via_handler["status"] == 200
    run = p.start("via-object", {"url": server.url + "/from-step"}, id="via-object")
    assert run.status == "completed", run.error
    assert json.loads(run.result["body"])["path"] == "/from-step"
    p.restart()
    p.start("via-object", {"url": server.url + "/from-step"}, id="via-object")
    assert [r.path for r in server.requests] == ["/from-handler", "/from-step"]


def test_http_is_usable_from_queue_handlers(p: LocalPlatform, server: Loopback) -> None:
    p.start("ping", {"url": server.url + "/ping"}, id="ping")
    assert [r.path for r in server.requests] == ["/ping"]
    assert [entry["fields"] for entry in p.logs if entry["message"] == "pinged"] == [{"status": 200}]
