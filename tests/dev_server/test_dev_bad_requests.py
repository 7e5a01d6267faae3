"""``lunaflow dev`` facing bad requests and misbehaving fetch handlers, over real HTTP.

tests/projects/e2e_bad has a fetch handler with a route for each way a handler can go
wrong (an error, an endless loop, a memory bomb, a number instead of a response, a bad
status); examples/auction stands for a real project receiving bad bodies. Each case gets
an answer, and the server goes on serving the next request.
"""

from __future__ import annotations

import json
import re
import select
import socket
from collections.abc import Iterator

import pytest

from tests.support.devserver import EXAMPLES, PROJECTS, UUID, DevServer, Servers, wait_for

BAD = PROJECTS / "e2e_bad"
AUCTION = EXAMPLES / "auction"
MIB = 1024 * 1024
NOT_A_RESPONSE = "the fetch handler returned something that is not a response"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("dev-bad"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def bad(servers: Servers) -> DevServer:
    return servers.start(BAD, servers.tmp / "bad-data")


@pytest.fixture(scope="module")
def auction(servers: Servers) -> DevServer:
    # The example itself, with its state in a temporary folder (not examples/auction/.lunaflow).
    return servers.start(AUCTION, servers.tmp / "auction-data")


def _request_id_of(body: str, headers: dict[str, str]) -> str:
    m = UUID.search(body)
    assert m, f"the 500's body names no request id: {body!r}"
    assert headers.get("x-request-id") == m.group(0)
    return m.group(0)


def _logged(server: DevServer, request_id: str) -> str:
    """The server's log from the line naming ``request_id`` on (bounded wait for it)."""
    out = wait_for(
        f"request id {request_id} in the server log",
        lambda: request_id in server.output() and server.output(),
        5,
    )
    return str(out)[str(out).index(request_id) :]


def _serves_ok(server: DevServer) -> None:
    # Several in a row, so every pooled Lua state answers at least once.
    for _ in range(6):
        r = server.get("/ok")
        assert (r.status, r.body) == (200, "ok")


# --- bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["{bad json", "", "[1, 2", '"just a string"', "null"])
def test_malformed_json_to_open_a_sale_is_a_400_with_a_clear_body(auction: DevServer, body: str) -> None:
    """The example's routes answer a body they cannot read with 400 and say what to send."""
    r = auction.request("POST", "/api/sale", body, headers={"content-type": "application/json"})
    assert r.status == 400, r
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {
        "error": 'send { id = "lot-42", winner = "ada", price = 25 } with a positive whole price'
    }


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/sale/pay", 'send { id = "lot-42", user = "ada" }'),
        ("/api/sale/cancel", 'send { id = "lot-42" }'),
    ],
)
def test_malformed_json_to_pay_or_cancel_is_a_400_with_a_clear_body(
    auction: DevServer, path: str, message: str
) -> None:
    r = auction.request("POST", path, "{nope")
    assert (r.status, r.json()) == (400, {"error": message})


def _post_huge(port: int, size: int) -> tuple[bytes, bytes]:
    """POST ``size`` bytes with an honest Content-Length from a client that reads an early
    answer: it gives the server 2 s to answer the headers alone, then sends the body in
    chunks, stopping as soon as an answer can be read. Returns (status line, body)."""
    head = (
        f"POST /api/sale HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    chunk = b"x" * 65536
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head)
        sent = 0
        while sent < size:
            readable, _, _ = select.select([conn], [], [], 0 if sent else 2.0)
            if readable:
                break
            try:
                sent += conn.send(chunk[: size - sent])
            except (BrokenPipeError, ConnectionResetError):
                break
        try:
            while data := conn.recv(65536):
                received += data
                status, _, rest = received.partition(b"\r\n")
                headers, sep, body = rest.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:\s*(\d+)", headers)
                if sep and m and len(body) >= int(m.group(1)):
                    break
        except ConnectionResetError:
            pass
    status, _, rest = received.partition(b"\r\n")
    return status, rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("size", [MIB + 1, MIB + 1024, 8 * MIB])
def test_a_body_over_one_mebibyte_is_refused_with_413(auction: DevServer, size: int) -> None:
    """A body over the 1 MiB limit, with an honest Content-Length, is refused before the
    handler sees it, with the size and the limit in the answer."""
    status, body = _post_huge(auction.port, size)
    assert status.startswith(b"HTTP/1.1 413"), (status, body)
    assert body.decode() == f"request body of {size} bytes is over the limit of {MIB} bytes"
    assert auction.get("/api/sale/after-413").status == 404  # and it keeps serving


def test_a_body_of_exactly_one_mebibyte_reaches_the_handler(auction: DevServer) -> None:
    """The limit is on bodies over 1 MiB: one of exactly 1 MiB is the handler's to judge."""
    r = auction.request("POST", "/api/sale", b" " * MIB)
    assert r.status == 400, r
    assert "error" in r.json()


def test_a_huge_body_sent_whole_by_urllib_gets_a_readable_413(auction: DevServer) -> None:
    """An ordinary client (urllib writes the whole body before it reads) sees the 413."""
    size = 32 * MIB
    r = auction.try_request("POST", "/api/sale", b"x" * size)
    assert r is not None, "the connection broke before the 413 could be read"
    assert r.status == 413


def test_a_body_that_is_not_utf8_is_a_400(auction: DevServer) -> None:
    r = auction.request("POST", "/api/sale", b'{"id": "\xff\xfe"}')
    assert (r.status, r.body) == (400, "request body is not valid UTF-8")


def test_a_bad_content_length_header_is_a_400(auction: DevServer) -> None:
    with socket.create_connection(("127.0.0.1", auction.port), timeout=10) as conn:
        conn.sendall(
            b"POST /api/sale HTTP/1.1\r\nHost: localhost\r\nContent-Length: lots\r\nConnection: close\r\n\r\n"
        )
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head
    assert body.startswith(b"bad Content-Length header 'lots'"), body


# --- routes ----------------------------------------------------------------------------


def test_an_unknown_route_gets_the_projects_own_404(auction: DevServer, bad: DevServer) -> None:
    r = auction.get("/no/such/route")
    assert (r.status, r.json()) == (404, {"error": "no route GET /no/such/route"})
    r = bad.request("DELETE", "/elsewhere")
    assert (r.status, r.json()) == (404, {"error": "e2e_bad has no route /elsewhere"})


def test_an_unknown_sale_is_the_examples_404(auction: DevServer) -> None:
    r = auction.get("/api/sale/lot-0")
    assert (r.status, r.json()) == (404, {"error": "no sale lot-0"})


def test_a_handler_error_is_a_500_naming_a_request_id_that_the_log_explains(bad: DevServer) -> None:
    """A handler that raises gets a 500 whose body names a request id; the server log holds
    that id with the Lua error and its traceback, positioned at the user's lines."""
    r = bad.get("/error")
    assert r.status == 500
    request_id = _request_id_of(r.body, r.headers)
    log = _logged(bad, request_id)
    assert "request GET /error failed" in bad.output()
    assert "api.lua:3: boom" in log
    assert "stack traceback:" in log
    assert "in upvalue 'fail_here'" in log or "in function 'fail_here'" in log, log[:2000]
    assert "api.lua:12" in log, log[:2000]
    _serves_ok(bad)


def test_each_500_has_its_own_request_id(bad: DevServer) -> None:
    ids = {_request_id_of(r.body, r.headers) for r in (bad.get("/error") for _ in range(3))}
    assert len(ids) == 3


def test_an_endless_loop_is_stopped_with_a_500_and_the_server_keeps_serving(bad: DevServer) -> None:
    """SPEC 6: "Memory per Lua state and instructions per call are bounded; past the bound
    the call fails with a clear error and the platform keeps serving." """
    r = bad.get("/loop", timeout=30)
    assert r.status == 500
    log = _logged(bad, _request_id_of(r.body, r.headers))
    assert "20000000 Lua instructions" in log and "endless loop" in log, log[:2000]
    _serves_ok(bad)


def test_a_memory_bomb_is_stopped_with_a_500_and_the_server_keeps_serving(bad: DevServer) -> None:
    """SPEC 6: "Memory per Lua state ... bounded; past the bound the call fails with a clear
    error and the platform keeps serving." """
    r = bad.get("/bomb", timeout=30)
    assert r.status == 500
    log = _logged(bad, _request_id_of(r.body, r.headers))
    assert "ran out of memory" in log and "64 MiB" in log, log[:2000]
    _serves_ok(bad)
    # Again: the state that ran out was replaced, not left broken.
    assert bad.get("/bomb", timeout=30).status == 500
    _serves_ok(bad)


@pytest.mark.parametrize("path", ["/number", "/bad-status"])
def test_a_handler_returning_a_non_response_is_a_500_logged_with_the_fix(bad: DevServer, path: str) -> None:
    """SPEC 2: "the handler returns { status_code = n, headers = {...}, body = "..." }"."""
    r = bad.get(path)
    assert r.status == 500
    log = _logged(bad, _request_id_of(r.body, r.headers))
    assert NOT_A_RESPONSE in log, log[:2000]
    _serves_ok(bad)


# --- the console -----------------------------------------------------------------------


def test_the_console_page_is_html_listing_runs(auction: DevServer) -> None:
    """SPEC 4: the console "lists runs with status, workflow, current step and times"; it
    exists as "a web page served by `lunaflow dev` at `/_console`"."""
    opened = auction.post_json("/api/sale", {"id": "lot-console", "winner": "ada", "price": 25})
    assert opened.status == 201
    wait_for(
        "the sale to await payment",
        lambda: json.loads(auction.get("/api/sale/lot-console").body)["run"]["status"] == "awaiting",
        10,
    )
    r = auction.get("/_console")
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/html")
    assert r.body.lstrip().lower().startswith("<!doctype html")
    row = r.body[r.body.index("sale-lot-console") :]
    row = row[: row.index("</tr>")]
    assert "settle-sale" in row and "awaiting" in row, row
    page = auction.get("/_console/runs/sale-lot-console")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert "notify" in page.body and "paid" in page.body


def test_the_console_lists_runs_by_status(auction: DevServer) -> None:
    auction.post_json("/api/sale", {"id": "lot-filter", "winner": "bo", "price": 5})
    wait_for(
        "the sale to await payment",
        lambda: json.loads(auction.get("/api/sale/lot-filter").body)["run"]["status"] == "awaiting",
        10,
    )
    assert "sale-lot-filter" in auction.get("/_console?status=awaiting").body
    assert "sale-lot-filter" not in auction.get("/_console?status=completed").body
