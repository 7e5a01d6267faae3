"""Issue 17, points 6 and 9: the local console refuses cross-site and tokenless state
changes, and reads its ``page`` parameter safely. A real ``lunaflow dev`` on
tests/projects/events over HTTP; runs are started through the project's route
``POST /start?wf=NAME&id=ID``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from tests.support.devserver import PROJECTS, DevServer, Reply, Servers

from . import Html

EVENTS = PROJECTS / "events"
EVIL = "http://evil.example"
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("console-requests"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def dev(module_servers: Servers) -> DevServer:
    return module_servers.start(EVENTS)


def _start(dev: DevServer, wf: str, run_id: str, status: set[str]) -> None:
    r = dev.request("POST", f"/start?wf={wf}&id={run_id}", "")
    assert r.status == 201, r
    dev.wait_status(run_id, status)


def _journal_len(dev: DevServer, run_id: str) -> int:
    d = dev.cli("show", run_id, "--json")
    assert d.code == 0, str(d)
    return len(json.loads(d.out)["journal"])


def _submit(dev: DevServer, page: str, button: str, origin: str | None = None) -> Reply:
    """Submit the page's form whose button reads ``button``, as a browser on the console's
    own origin would (its hidden fields and the button's name and value)."""
    form = Html(page).form(button)
    fields = dict(form.fields)
    if form.button_name:
        fields[form.button_name] = form.button_value
    headers = {"Content-Type": FORM, "Origin": origin or f"http://127.0.0.1:{dev.port}"}
    return dev.send("POST", form.action, urlencode(fields).encode(), headers)


# --- point 6: cross-site and tokenless POSTs ---------------------------------------------


def test_cross_site_text_plain_post_cannot_cancel_a_run(dev: DevServer) -> None:
    """A text/plain POST with ``Origin: http://evil.example`` to /_console/runs/<id> (what
    any web page can send without a preflight) is refused with 403 and the run is not
    cancelled."""
    _start(dev, "waiter", "c6-cancel", {"awaiting"})
    r = dev.send(
        "POST",
        "/_console/runs/c6-cancel",
        b"action=cancel&step=do",
        {"Content-Type": "text/plain", "Origin": EVIL},
    )
    time.sleep(0.5)
    assert dev.run("c6-cancel")["status"] == "awaiting", (
        f"cross-site POST cancelled the run (answered {r.status})"
    )
    assert r.status == 403, r


def test_cross_site_post_with_the_right_token_is_still_refused(dev: DevServer) -> None:
    """Even carrying a valid token (read by some other means), a POST whose Origin is another
    site, or whose Sec-Fetch-Site says cross-site, is refused."""
    _start(dev, "waiter", "c6-origin", {"awaiting"})
    page = dev.send("GET", "/_console/runs/c6-origin")
    ask = _submit(dev, page.body, "Cancel")
    assert ask.status == 200, ask
    for headers in ({"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
        form = Html(ask.body).form("Yes, cancel")
        fields = {**form.fields, form.button_name: form.button_value}
        r = dev.send("POST", form.action, urlencode(fields).encode(), {"Content-Type": FORM, **headers})
        assert r.status == 403, (headers, r)
    assert dev.run("c6-origin")["status"] == "awaiting"


def test_cross_site_post_cannot_resume_a_failed_run(dev: DevServer) -> None:
    """A cross-site form POST with action=resume is refused and the failed run is not
    resumed (its journal does not grow)."""
    _start(dev, "flaky", "c6-resume", {"failed"})
    before = _journal_len(dev, "c6-resume")
    r = dev.send(
        "POST", "/_console/runs/c6-resume", b"action=resume&step=do", {"Content-Type": FORM, "Origin": EVIL}
    )
    time.sleep(1.0)
    assert _journal_len(dev, "c6-resume") == before, f"cross-site POST resumed the run (answered {r.status})"
    assert r.status == 403, r


def test_same_origin_post_without_the_token_is_refused(dev: DevServer) -> None:
    """A state-changing POST that carries no token is refused even from the console's own
    origin, or with no Origin at all (as curl sends): 403, run not cancelled."""
    _start(dev, "waiter", "c6-notoken", {"awaiting"})
    for origin in (f"http://127.0.0.1:{dev.port}", None):
        headers = {"Content-Type": FORM}
        if origin:
            headers["Origin"] = origin
        r = dev.send("POST", "/_console/runs/c6-notoken", b"action=cancel&step=do", headers)
        time.sleep(0.3)
        assert dev.run("c6-notoken")["status"] == "awaiting", (
            f"a POST without token cancelled the run ({origin=})"
        )
        assert r.status == 403, (origin, r.status)
        assert "token" in r.body, r.body


def test_console_buttons_still_cancel_with_their_token(dev: DevServer) -> None:
    """The console's own Cancel button, then its confirmation, submitted as a browser would
    (same Origin, the forms' hidden fields), cancel the run (303 back to the run)."""
    _start(dev, "waiter", "c6-button", {"awaiting"})
    page = dev.send("GET", "/_console/runs/c6-button")
    assert page.status == 200
    ask = _submit(dev, page.body, "Cancel")
    assert ask.status == 200, ask
    done = _submit(dev, ask.body, "Yes, cancel")
    assert done.status == 303, done
    dev.wait_status("c6-button", {"cancelled"}, timeout=5)


def test_a_token_of_another_server_process_is_refused(dev: DevServer, module_servers: Servers) -> None:
    """The token is per process: the confirmation form served by a second ``lunaflow dev`` on
    the same data folder, posted to the first server, is refused and the run stays awaiting."""
    _start(dev, "waiter", "c6-other", {"awaiting"})
    other = module_servers.start(EVENTS, dev.data)
    page = other.send("GET", "/_console/runs/c6-other")
    ask = _submit(other, page.body, "Cancel")
    assert ask.status == 200, ask
    form = Html(ask.body).form("Yes, cancel")
    fields = {**form.fields, form.button_name: form.button_value}
    r = dev.send(
        "POST",
        form.action,
        urlencode(fields).encode(),
        {"Content-Type": FORM, "Origin": f"http://127.0.0.1:{dev.port}"},
    )
    other.kill()
    time.sleep(0.3)
    assert dev.run("c6-other")["status"] == "awaiting", (
        f"another process's form cancelled the run ({r.status})"
    )
    assert r.status == 403, r.status


# --- point 9: ?page= -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "page",
    ["%C2%B2", "1" + "0" * 23, "9" * 400, "-1", "+2", "%20%31"],
    ids=["superscript-two", "10^23", "400-digits", "minus", "plus", "space"],
)
def test_console_page_parameter_never_answers_500(dev: DevServer, page: str) -> None:
    """/_console?page=² and ?page=10^23 (and other strings that are not small digit strings)
    answer the runs page (200) instead of a 500."""
    r = dev.send("GET", f"/_console?page={page}")
    assert r.status == 200, f"?page={page[:30]} answered {r.status}"
