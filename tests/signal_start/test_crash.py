"""Issue 28.4/28.5: signal-with-start survives a SIGKILL right after its store write.

The subject kills itself right after the write that creates the run
(``LUNAFLOW_KILL_AFTER_STARTS``, runtime/platform/faults.py): no prompt, no answer, no
first activation. Were the run and its signal two writes, this is where the signal would
be lost (or a retried start would find the run and never send it). After the kill the run
exists exactly once, holding its signal, and the next ``lunaflow dev`` finishes it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from runtime.core.journal import Kind
from runtime.platform.faults import KILL_AFTER_STARTS
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.cli import cli
from tests.support.devserver import Servers

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "signal_start"
PAID = {"outcome": "paid", "by": "ada", "n": 1}


def start(data: Path, *extra: str, env: dict[str, str] | None = None):  # noqa: ANN201
    return cli(
        "start", "order", '{"n": 1}', "--id", "order-1", "--signal", "paid", "--payload", '{"by": "ada"}',
        *extra, "-p", str(PROJECT), "--data", str(data), env=env,
    )  # fmt: skip


def assert_written_once(data: Path, run_id: str) -> None:
    """The run, once, with journal entry 1 only and its signal pending, and a wake-up."""
    store = SQLiteStore(data / STORE_FILE)
    try:
        assert [r.id for r in store.list_runs()] == [run_id]
        assert [e.kind for e in store.journal(run_id)] == [Kind.STARTED]
        assert [(s.name, s.payload, s.state) for s in store.signals(run_id)] == [
            ("paid", {"by": "ada"}, "pending")
        ]
        assert [w[0] for w in store.wakeups()] == [run_id]
    finally:
        store.close()


def test_a_cli_start_with_a_signal_killed_after_its_write_leaves_the_run_with_its_signal(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    killed = start(data, env={KILL_AFTER_STARTS: "1"})
    assert killed.code == -signal.SIGKILL, killed
    assert killed.out == ""  # it died before it could say anything
    assert_written_once(data, "order-1")
    servers = Servers(tmp_path)
    try:
        server = servers.start(PROJECT, data)
        run = server.wait_status("order-1", {"completed"})
        assert run["result"] == PAID
    finally:
        servers.close()


def test_a_dev_server_killed_after_a_signal_with_start_finishes_the_run_on_restart(tmp_path: Path) -> None:
    """The checkout route starts and pays an order in one call; the server dies right
    after the write, before it answers. Restarted, it runs the order with its payment."""
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(PROJECT, data, env={KILL_AFTER_STARTS: "1"})
        body = json.dumps({"id": "1", "by": "ada", "n": 1})
        assert (
            first.try_request("POST", "/checkout", body, headers={"content-type": "application/json"}) is None
        )
        assert first.wait_exit(20) == -signal.SIGKILL
        assert_written_once(data, "order-1")
        second = servers.start(PROJECT, data)
        run = second.wait_status("order-1", {"completed"})
        assert run["result"] == PAID
    finally:
        servers.close()
