"""Issue 26 under a real ``lunaflow dev``: a SIGKILL inside a compensation's step body (the
partner's answer held open), then a second server on the same data folder finishes the
cleanup, exactly once per step id; the console's Retry now and ``lunaflow show`` on a
failed and a caught step. The partner is a loopback HTTP server reached as step body ->
object -> http.post, so the test can hold one call open and read every call made."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from runtime.core.journal import Kind
from runtime.platform.faults import KILL_AFTER_CANCELS
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.console import Html
from tests.support.devserver import PROJECTS, DevServer, Servers, wait_for

PROJECT = PROJECTS / "failures_dev"
FORM = "application/x-www-form-urlencoded"


class Partner:
    """Records each POST's path (``/<what>/<step id>``). The first call whose path starts with
    ``hold`` waits until ``release`` is set; ``fail`` paths answer 500."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.hold = "/never"
        self.fail = "/never"
        self.release = threading.Event()
        self.held = threading.Event()
        partner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                partner.paths.append(self.path)
                if self.path.startswith(partner.hold) and not partner.held.is_set():
                    partner.held.set()
                    partner.release.wait(60)
                status = 500 if self.path.startswith(partner.fail) else 200
                body = b"ok"
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(body)))
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass
                self.close_connection = True

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def partner() -> Iterator[Partner]:
    p = Partner()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()


def _start(dev: DevServer, workflow: str, run_id: str, value: Any) -> None:
    r = dev.post_json("/", {"workflow": workflow, "id": run_id, "input": value})
    assert r.status == 202, r


def _journal(data: Path, run_id: str) -> list[Any]:
    store = SQLiteStore(data / STORE_FILE)
    try:
        return store.journal(run_id)
    finally:
        store.close()


def test_sigkill_during_a_compensation_finishes_after_restart_once_per_step_id(
    servers: Servers, partner: Partner, tmp_path: Path
) -> None:
    partner.hold = "/release/"  # the first release (the hotel's) is held open: the server dies in it
    dev = servers.start(PROJECT)
    _start(dev, "trip", "t-1", {"url": partner.url, "sold_out": "car"})
    wait_for("the hotel's release to reach the partner", partner.held.is_set, 20)
    dev.kill()
    partner.release.set()

    again = servers.start(PROJECT, dev.data)
    run = again.wait_status("t-1", {"completed", "failed"}, timeout=30)
    assert run["status"] == "completed", run
    assert run["result"] == {"outcome": "cancelled", "failed": "reserve-car", "reason": "no car left"}

    releases = [p for p in partner.paths if p.startswith("/release/")]
    # the killed attempt ran again with the same step id (recognisable), then the flight's
    assert releases == [
        "/release/t-1/release-hotel/1/1",
        "/release/t-1/release-hotel/1/1",
        "/release/t-1/release-flight/1/1",
    ]
    journal = _journal(dev.data, "t-1")
    results = [e.name for e in journal if e.kind == Kind.STEP_RESULT and e.name.startswith("release-")]
    assert results == ["release-hotel", "release-flight"]  # each cleanup recorded once
    assert [e.name for e in journal if e.kind == Kind.STEP_RERUN] == ["release-hotel"]
    assert [e.name for e in journal if e.kind == Kind.STEP_RAISED] == ["reserve-car"]
    assert [p for p in partner.paths if p.startswith("/reserve/")] == [
        "/reserve/t-1/reserve-flight/1/1",
        "/reserve/t-1/reserve-hotel/1/1",
    ]


def test_console_retry_now_and_show_say_why_attempts_stopped(servers: Servers, partner: Partner) -> None:
    partner.fail = "/flaky/"
    dev = servers.start(PROJECT)
    _start(dev, "slow-retry", "r-1", {"url": partner.url})
    dev.wait_status("r-1", {"sleeping"})
    page = dev.send("GET", "/_console/runs/r-1")
    assert page.status == 200 and "Retry now" in page.body
    origin = {"Content-Type": FORM, "Origin": f"http://127.0.0.1:{dev.port}"}

    def submit(body: str, button: str) -> Any:
        form = Html(body).form(button)
        fields = dict(form.fields)
        if form.button_name:
            fields[form.button_name] = form.button_value
        return dev.send("POST", form.action, urlencode(fields).encode(), origin)

    ask = submit(page.body, "Retry now")
    assert ask.status == 200, ask
    done = submit(ask.body, "Yes, retry")
    assert done.status == 303, done
    run = dev.wait_status("r-1", {"failed"}, timeout=15)  # the second (last) attempt ran at once
    assert run["error"] == "step 'flaky' failed after 2 attempts: partner answered 500"
    assert [p for p in partner.paths if p.startswith("/flaky/")] == [
        "/flaky/r-1/flaky/1/1",
        "/flaky/r-1/flaky/1/2",
    ]
    shown = dev.cli("show", "r-1", env={"COLUMNS": "300"})
    assert shown.code == 0, str(shown)
    assert "retry now" in shown.out and "its backoff cut short" in shown.out

    _start(dev, "trip", "t-2", {"url": partner.url, "sold_out": "flight"})
    dev.wait_status("t-2", {"completed"})
    shown = dev.cli("show", "t-2", env={"COLUMNS": "300"})
    assert "not retried (its error said retry = false)" in shown.out
    assert "raised into the workflow (catch = true)" in shown.out
    data = json.loads(dev.cli("show", "t-2", "--json").out)
    (step,) = [i for i in data["timeline"] if i["title"] == "step 'reserve-flight'"]
    assert step["detail"] == (
        "step 'reserve-flight' failed after 1 attempts, not retried (its error said retry = false): "
        "no flight left · raised into the workflow (catch = true)"
    )
    again = dev.cli("retry", "t-2")
    assert again.code != 0 and "not waiting out a step's backoff" in again.err


def test_a_run_timeout_falls_while_lunaflow_dev_is_down_and_fires_at_its_next_start(servers: Servers) -> None:
    dev = servers.start(PROJECT)
    done = dev.cli("start", "waits", "--id", "w-1", "--timeout", "2s")
    assert done.code == 0, str(done)
    dev.wait_status("w-1", {"awaiting"})
    dev.kill()
    time.sleep(2.5)  # the bound falls while no server runs
    again = servers.start(PROJECT, dev.data)
    run = again.wait_status("w-1", {"failed"}, timeout=20)
    assert run["error"].startswith("run 'w-1' timed out after 2s")


def test_sigkill_during_a_cancel_handler_finishes_the_cleanup_after_restart_once_per_step_id(
    servers: Servers, partner: Partner
) -> None:
    partner.hold = "/release/"  # the cleanup's release is held open: the server dies in it
    dev = servers.start(PROJECT)
    _start(dev, "held-order", "h-1", {"url": partner.url})
    dev.wait_status("h-1", {"awaiting"})
    dev.wait_status("h-1-child", {"awaiting"})
    done = dev.cli("cancel", "h-1")
    assert done.code == 0, str(done)
    assert "is cleaning up: its on_cancel handler runs" in done.out
    wait_for("the cleanup's release to reach the partner", partner.held.is_set, 20)
    again = dev.cli("cancel", "h-1", "--json")  # a second cancel starts no second cleanup
    assert again.code == 0 and json.loads(again.out)["cleanup"] is True, str(again)
    dev.kill()
    partner.release.set()
    assert dev.run("h-1-child")["status"] == "awaiting"  # the cascade waits for the cleanup

    restarted = servers.start(PROJECT, dev.data)
    run = restarted.wait_status("h-1", {"cancelled"}, timeout=30)
    assert run["error"] is None, run
    restarted.wait_status("h-1-child", {"cancelled"}, timeout=15)
    # the killed attempt ran again with the same step id, then the cleanup went on
    assert [p for p in partner.paths if not p.startswith("/reserve/")] == [
        "/release/h-1/release/1/1",
        "/release/h-1/release/1/1",
        "/notify/h-1/notify/1/1",
    ]
    journal = _journal(dev.data, "h-1")
    kinds = [e.kind for e in journal]
    assert kinds.count(Kind.CANCEL_REQUESTED) == 1
    assert [e.name for e in journal if e.kind == Kind.STEP_RESULT] == [
        "reserve",
        "spawn",
        "release",
        "notify",
    ]
    assert [e.name for e in journal if e.kind == Kind.STEP_RERUN] == ["release"]
    assert journal[-1].kind == Kind.CANCELLED and journal[-1].data == {"cleanup": "done"}

    shown = restarted.cli("show", "h-1", env={"COLUMNS": "300"})
    assert shown.code == 0, str(shown)
    for drawn in ("on_cancel", "cancel: cleanup", "cleanup: step 'release'", "after its cleanup (done)"):
        assert drawn in shown.out, shown.out
    page = restarted.send("GET", "/_console/runs/h-1")
    assert page.status == 200 and "cleanup: step" in page.body and "after its cleanup (done)" in page.body
    store = SQLiteStore(dev.data / STORE_FILE)
    try:
        assert store.pending_cancels() == []  # the cascade finished and its intent was dropped
    finally:
        store.close()


def test_a_server_killed_between_a_cleanups_end_and_its_cascade_finishes_the_cascade_at_restart(
    servers: Servers, partner: Partner
) -> None:
    """The server SIGKILLs itself right after the cleanup's end (the run's cancel committed,
    none below it yet); the cancel's intent, kept while the cleanup ran, is finished by the
    next server's start, which cancels the child."""
    dev = servers.start(PROJECT, env={KILL_AFTER_CANCELS: "1"})
    _start(dev, "held-order", "h-2", {"url": partner.url})
    dev.wait_status("h-2-child", {"awaiting"})
    dev.wait_status("h-2", {"awaiting"})
    done = dev.cli("cancel", "h-2")
    assert done.code == 0, str(done)
    assert dev.wait_exit(20) is not None, "the server was to kill itself after the cleanup's end"
    store = SQLiteStore(dev.data / STORE_FILE)
    try:
        assert store.get_run("h-2").status == "cancelled"
        assert store.get_run("h-2-child").status == "awaiting"
        assert store.pending_cancels() == ["h-2"]
    finally:
        store.close()

    restarted = servers.start(PROJECT, dev.data)
    restarted.wait_status("h-2-child", {"cancelled"}, timeout=15)
    assert [p for p in partner.paths if p.startswith(("/release/", "/notify/"))] == [
        "/release/h-2/release/1/1",
        "/notify/h-2/notify/1/1",
    ]
    store = SQLiteStore(dev.data / STORE_FILE)
    try:
        assert store.pending_cancels() == []
    finally:
        store.close()
