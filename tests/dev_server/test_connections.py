"""Issue 24 §4: connections that never finish a request cannot take ``lunaflow dev`` down.

The server runs under a file limit of 256 (macOS's default), set in the child before it
starts; the test holds 300 connections open on it, some silent, some stopped half-way
through their headers, and a normal request must still be answered.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator

import pytest

from runtime.dev.server import HEADER_TIMEOUT_S, MAX_CONNECTIONS
from tests.support.devserver import PROJECTS, DevServer, Servers, parse_response, raw_exchange

EVENTS = PROJECTS / "events"
FILE_LIMIT = 256
HELD = 300
ANSWER_S = HEADER_TIMEOUT_S + 60  # generous: the answer waits for nothing but the header timeout


def _low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@pytest.fixture
def dev(servers: Servers) -> DevServer:
    return servers.start(EVENTS, preexec_fn=_low_file_limit)


@contextlib.contextmanager
def _held(port: int, n: int) -> Iterator[list[socket.socket]]:
    """``n`` connections that never complete a request: every other one sends half a
    request head and stops."""
    held: list[socket.socket] = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(f"GET /_console HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
            held.append(s)
        yield held
    finally:
        for s in held:
            s.close()


def _answer(port: int) -> tuple[int, bytes] | None:
    """One normal request on a fresh connection: (status, body), or None if it got none."""
    try:
        raw = raw_exchange(
            port,
            f"GET /_console HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(),
            timeout=5.0,
        )
        status, _, body, _ = parse_response(raw)
        return status, body
    except (OSError, AssertionError):
        return None


def _got(s: socket.socket) -> bytes:
    """What the server sent on a held connection (b"" if it closed it without a word)."""
    s.settimeout(5.0)
    got = b""
    with contextlib.suppress(OSError):
        while chunk := s.recv(4096):
            got += chunk
    return got


def test_300_half_open_connections_under_a_256_file_limit_do_not_stop_the_server(dev: DevServer) -> None:
    """Before: a thread per connection, no header timeout and no cap, so the server used up
    its 256 files on connections that never spoke and then answered no one (accept failed
    with EMFILE). Now: at most ``MAX_CONNECTIONS`` are served at once, the rest answered 503
    at once, and a connection that has not sent a whole request head within
    ``HEADER_TIMEOUT_S`` is closed, so a normal request gets its 200."""
    with _held(dev.port, HELD) as held:
        deadline = time.monotonic() + ANSWER_S
        answer = _answer(dev.port)
        while (answer is None or answer[0] != 200) and time.monotonic() < deadline:
            assert answer is None or answer[0] == 503, answer
            time.sleep(0.5)
            answer = _answer(dev.port)
        assert answer is not None and answer[0] == 200, (
            f"with {HELD} connections held open, a normal request got {answer!r} "
            f"within {ANSWER_S:g} s\n{dev.output_tail()}"
        )
        replies = [_got(s) for s in held]
    refused = [r for r in replies if r.startswith(b"HTTP/1.1 503")]
    assert len(refused) >= HELD - MAX_CONNECTIONS - 5, (len(refused), replies[-1][:200])
    assert b"connections" in refused[-1], refused[-1][:300]
    assert dev.alive, dev.output_tail()
    assert dev.get("/_console").status == 200


def test_a_silent_connection_is_closed_after_the_header_timeout(dev: DevServer) -> None:
    """A connection that sends nothing, or half a request head, is closed by the server
    (its read ends) instead of holding a thread forever."""
    with _held(dev.port, 2) as held:
        for s in held:
            s.settimeout(HEADER_TIMEOUT_S + 30)
            with contextlib.suppress(ConnectionResetError):  # closed, without an answer
                assert s.recv(4096) == b""


def test_a_client_trickling_its_head_is_closed_at_the_header_deadline(dev: DevServer) -> None:
    """A per-read timeout alone would let a client that sends a byte now and then hold its
    connection for ever: the head has one deadline over all its reads."""
    head = f"GET /_console HTTP/1.1\r\nHost: 127.0.0.1:{dev.port}\r\nX-Slow: {'a' * 200}".encode()
    with socket.create_connection(("127.0.0.1", dev.port), timeout=10) as s:
        started = time.monotonic()
        closed = False
        for byte in head:
            try:
                s.sendall(bytes([byte]))
            except OSError:  # reset: the server closed it
                closed = True
                break
            s.settimeout(0.5)
            try:
                if s.recv(4096) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except OSError:
                closed = True
                break
        assert closed, "the server kept a trickling connection open past its whole head"
        assert time.monotonic() - started >= HEADER_TIMEOUT_S - 1
