"""What a client's request line can do to the path the fetch handler sees, on AWS, in the
harness and under a real ``lunaflow dev``; and a body marked base64 that is not.

Issue 20.1: "A path starting with `//` reaches Lua as another path ... A path rule in front
of the function can be bypassed. Take `rawPath` verbatim and parse only `rawQueryString`;
local and AWS agree." Issue 20.6: "A body marked base64 that is not base64 raises out of the
fetch handler (invocation error, bare 500, the Errors alarm) instead of a 400."
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from functions import fetch
from runtime.aws.runtime import AwsRuntime
from runtime.testing import LocalPlatform
from tests.support.aws_events import PROJECTS, http_event
from tests.support.aws_world import FakeContext
from tests.support.devserver import REQUEST_S, DevServer, Servers

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

HTTP = PROJECTS / "aws_http"

# (raw path, raw query string): what a client may put in a request line.
TARGETS = [
    ("//public.example/admin/users", ""),
    ("//public.example/admin/users", "role=admin"),
    ("///admin", ""),
    ("/api//x/", "a=1&a=2&empty="),
    ("/a%3Fb/%2F%2Fc", "q=blue%20vase"),
    ("/http://evil.example/x", ""),
    ("/admin;x=1/..%2Fusers", ""),
]


def aws_sees(path: str, query: str) -> dict[str, Any]:
    answer = fetch.handler(http_event("GET", path, query=query), FakeContext(function_name="lunaflow-fetch"))
    assert answer["statusCode"] == 200, answer
    seen: dict[str, Any] = json.loads(answer["body"])
    return seen


def dev_sees(server: DevServer, target: str) -> dict[str, Any]:
    """Send ``target`` as the request line's target, byte for byte (urllib would rewrite it)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_S)
    try:
        conn.request("GET", target)
        resp = conn.getresponse()
        body = resp.read().decode("utf-8")
    finally:
        conn.close()
    assert resp.status == 200, (resp.status, body, server.output_tail())
    seen: dict[str, Any] = json.loads(body)
    return seen


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    servers = Servers(tmp_path_factory.mktemp("paths-dev"))
    try:
        yield servers.start(HTTP, servers.tmp / "data")
    finally:
        servers.close()


@pytest.mark.parametrize(("path", "query"), TARGETS)
def test_aws_hands_lua_the_raw_path_verbatim(
    make_runtime: Callable[..., AwsRuntime], path: str, query: str
) -> None:
    """`//public.example/admin/users` is a path, not a host and a path: Lua sees rawPath
    exactly, and only rawQueryString becomes request.query."""
    make_runtime(HTTP)
    seen = aws_sees(path, query)
    assert seen["path"] == path
    if query == "a=1&a=2&empty=":
        assert seen["query"] == {"a": "2", "empty": ""}
    elif query:
        key, _, value = query.partition("=")
        assert seen["query"] == {key: value.replace("%20", " ")}
    else:
        assert seen["query"] == {}


def test_a_rule_on_the_path_cannot_be_bypassed_with_a_double_slash(
    make_runtime: Callable[..., AwsRuntime],
) -> None:
    """The attack from the issue: a route guarding `/admin/...` must not be reached by
    `//public.example/admin/users` (before the fix Lua saw `/admin/users`)."""
    make_runtime(HTTP)
    assert not aws_sees("//public.example/admin/users", "")["path"].startswith("/admin")


@pytest.mark.parametrize(("path", "query"), TARGETS)
def test_local_and_aws_agree_on_the_path_and_query(
    make_runtime: Callable[..., AwsRuntime], dev: DevServer, tmp_path: Path, path: str, query: str
) -> None:
    """The same request line reaches Lua the same way through API Gateway, the harness's
    `p.fetch` and a real `lunaflow dev` process."""
    make_runtime(HTTP)
    target = path + ("?" + query if query else "")
    on_aws = aws_sees(path, query)
    with LocalPlatform(HTTP, data_dir=tmp_path) as p:
        in_harness = json.loads(p.fetch("GET", target).body)
    under_dev = dev_sees(dev, target)
    for seen in (in_harness, under_dev):
        assert (seen["path"], seen["query"]) == (on_aws["path"], on_aws["query"]), target


def test_an_absolute_form_target_is_read_as_its_path(dev: DevServer) -> None:
    """HTTP/1.1 lets a client send `GET http://host/x` (absolute-form); the path is `/x`."""
    seen = dev_sees(dev, f"http://127.0.0.1:{dev.port}/x/y?a=1")
    assert (seen["path"], seen["query"]) == ("/x/y", {"a": "1"})


@pytest.mark.parametrize("body", ["!!! not base64 !!!", "abc", "aGVsbG8=x", "===="])
def test_a_body_marked_base64_that_is_not_is_a_400(
    make_runtime: Callable[..., AwsRuntime], body: str
) -> None:
    """Issue 20.6: not an invocation error (the Errors alarm) but a 400 that says why."""
    make_runtime(HTTP)
    answer = fetch.handler(
        http_event("POST", "/api/echo", body, base64=True), FakeContext(function_name="lunaflow-fetch")
    )
    assert answer["statusCode"] == 400, answer
    assert answer["body"] == "request body is marked base64 but is not valid base64"


def test_an_empty_body_marked_base64_is_an_empty_body(make_runtime: Callable[..., AwsRuntime]) -> None:
    make_runtime(HTTP)
    answer = fetch.handler(
        http_event("POST", "/api/echo", "", base64=True), FakeContext(function_name="lunaflow-fetch")
    )
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["body"] == ""
