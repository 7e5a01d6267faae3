"""``http.request``'s timeout bounds the whole exchange, not each read (issue 14, point 5).

urllib's own timeout is per socket operation: an upstream that sends a byte now and then
outlives it. The test speaks to ``runtime.services.builtins.http_request`` directly, the
function every platform's ``http`` reaches, against a real loopback server that drips.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from runtime.services import deadline
from runtime.services.base import ServiceError
from runtime.services.builtins import http_request


class _Drip(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("content-length", "40")
        self.end_headers()
        for _ in range(40):
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)


@pytest.fixture
def drip() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/drip"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dripping_answer_is_cut_at_the_timeout(drip: str) -> None:
    """A byte every 0.1 s for 4 s, under timeout = "500ms": the call fails with the timeout
    well before the drip ends. Before: each read met its 500 ms timeout and the call took 4 s."""
    t0 = time.monotonic()
    with pytest.raises(ServiceError) as e:
        http_request({"method": "GET", "url": drip, "timeout": "500ms"}, None)
    assert time.monotonic() - t0 < 3.0  # not the 4 s the drip lasts
    assert str(e.value) == f"http.request GET {drip} timed out after 500ms"


def test_a_step_attempts_deadline_cuts_the_call_first(drip: str) -> None:
    """Inside a step attempt the earlier of the call's timeout and the attempt's deadline
    holds, and the call fails with the attempt's timeout message."""
    t0 = time.monotonic()
    limit = deadline.Deadline(t0 + 0.3, "step 'call' timed out after 300ms")
    with deadline.attempt(limit), pytest.raises(ServiceError) as e:
        http_request({"method": "GET", "url": drip}, None)
    assert time.monotonic() - t0 < 3.0  # not the 4 s the drip lasts
    assert str(e.value) == "step 'call' timed out after 300ms"


def test_a_call_made_past_the_attempts_deadline_is_not_sent(drip: str) -> None:
    limit = deadline.Deadline(time.monotonic() - 1, "step 'call' timed out after 1ms")
    with deadline.attempt(limit), pytest.raises(ServiceError, match="timed out after 1ms"):
        http_request({"method": "GET", "url": drip}, None)
