"""``lunaflow dev`` answers a response over Lambda's 6 MB as AWS would be made to (issue 25):
a 500 whose JSON body names the limit, and a line in its output, instead of handing back
8.4 MB that API Gateway would answer with a bare 500. A request body over the limit gets the
413 every platform answers (tests/semantics/test_fetch_sizes.py has the harnesses)."""

from __future__ import annotations

from runtime.platform.limits import MAX_BODY_BYTES, MAX_RESPONSE_BYTES
from tests.support.devserver import PROJECTS, Servers, wait_for

PROJECT = PROJECTS / "seed_fetch_sizes"


def test_a_response_over_the_lambda_limit_is_a_500_naming_it_and_logged(servers: Servers) -> None:
    server = servers.start(PROJECT)
    mark = server.mark()
    reply = server.get("/body?copies=8400000")
    assert reply.status == 500
    assert reply.headers["content-type"] == "application/json"
    answer = reply.json()
    assert answer["limit_bytes"] == MAX_RESPONSE_BYTES
    assert answer["error"].startswith("fetch GET /body: the response is 8400115 bytes")
    assert reply.headers["x-request-id"] == answer["request_id"]
    assert server.get("/body?copies=5000000").status == 200  # still serving; under the limit

    def logged() -> bool:
        out = server.output_since(mark)
        return answer["request_id"] in out and "over the limit of 6291556 bytes" in out

    wait_for("the failure in the server's output", logged, timeout=10)


def test_a_request_body_over_the_limit_is_refused_with_the_same_413(servers: Servers) -> None:
    server = servers.start(PROJECT)
    reply = server.request("POST", "/echo", "x" * (MAX_BODY_BYTES + 1))
    assert reply.status == 413
    assert (
        reply.body
        == f"request body of {MAX_BODY_BYTES + 1} bytes is over the limit of {MAX_BODY_BYTES} bytes"
    )
