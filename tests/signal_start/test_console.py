"""The local console's start form with a signal (issue 28.4): `lunaflow dev`'s /_console
starts a run and delivers its signal in one write; a payload with no signal is refused and
nothing is written."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from tests.console import Html
from tests.support.devserver import Reply, Servers

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "signal_start"
FORM = "application/x-www-form-urlencoded"


def submit_start(server, **typed: str) -> Reply:  # noqa: ANN001
    """Fill the runs page's start form as a browser on the console's origin would."""
    form = Html(server.send("GET", "/_console").body).form("Start run")
    fields = {**form.fields, **typed}
    if form.button_name:
        fields[form.button_name] = form.button_value
    headers = {"Content-Type": FORM, "Origin": f"http://127.0.0.1:{server.port}"}
    reply: Reply = server.send("POST", form.action, urlencode(fields).encode(), headers)
    return reply


def test_the_console_start_form_starts_a_run_with_its_signal(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    try:
        server = servers.start(PROJECT)
        lone = submit_start(
            server, start_workflow="order", start_input='{"n": 5}', start_id="c1", start_payload="{}"
        )
        assert lone.status == 400 and "a payload goes with a signal" in Html(lone.body).text, lone
        assert server.cli("runs", "--json").out.strip() == "[]"
        sent = submit_start(
            server,
            start_workflow="order",
            start_input='{"n": 5}',
            start_id="c1",
            start_signal="paid",
            start_payload='{"by": "console"}',
        )
        assert sent.status in (302, 303), sent
        run = server.wait_status("c1", {"completed"})
        assert run["result"] == {"outcome": "paid", "by": "console", "n": 5}
    finally:
        servers.close()
