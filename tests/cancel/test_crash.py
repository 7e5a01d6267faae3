"""Issue 24.2 "the cascade is not durable": a parent with 1,000 awaiting children, cancelled
by `lunaflow cancel` or from the console, the process SIGKILLed after the first child: on
main 998 children stayed awaiting forever, and cancelling the parent again was refused.

The cancel's intent is recorded before anything changes. The process kills itself at an
exact point of the cascade (``LUNAFLOW_KILL_AFTER_CANCELS``, runtime/platform/faults.py),
so the test does not depend on the machine's speed; then the cascade is finished by
cancelling again (which says so), by `lunaflow dev` starting, or by a running server.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from urllib.parse import urlencode

import pytest

from runtime.platform.faults import KILL_AFTER_CANCELS
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.cancel.trees import fan, statuses
from tests.console import Html
from tests.support.cli import cli
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cancel_cascade"
CHILDREN = 1_000
# The parent and its first child are cancelled, then the process dies.
KILLED_AFTER = 2


def parent_of_1000(data: Path) -> list[str]:
    store = SQLiteStore(data / STORE_FILE, synchronous="OFF")
    ids = fan(store, "par", CHILDREN)
    store.close()
    return ids


def cut_short(data: Path, after: int = KILLED_AFTER) -> None:
    """`lunaflow cancel par`, SIGKILLed right after its ``after``-th cancel (1: the parent)."""
    done = cli(
        "cancel", "par", "--data", str(data), "--project", str(PROJECT), env={KILL_AFTER_CANCELS: str(after)}
    )
    assert done.code == -signal.SIGKILL, done
    store = SQLiteStore(data / STORE_FILE)
    try:
        assert store.get_run("par").status == "cancelled"  # type: ignore[union-attr]
        assert store.pending_cancels() == ["par"]
        left = statuses(store, [f"par-{i:05d}" for i in range(CHILDREN)])
        assert left == {
            k: v for k, v in {"cancelled": after - 1, "awaiting": CHILDREN - after + 1}.items() if v
        }
    finally:
        store.close()


def all_cancelled(data: Path, ids: list[str]) -> bool:
    store = SQLiteStore(data / STORE_FILE)
    try:
        return statuses(store, ids) == {"cancelled": len(ids)} and store.pending_cancels() == []
    finally:
        store.close()


@pytest.mark.parametrize("after", [1, KILLED_AFTER, CHILDREN + 1])
def test_cancelling_again_finishes_a_cascade_a_sigkill_cut_short(tmp_path: Path, after: int) -> None:
    """Killed after the parent's cancel, after the first child's, and after the last
    child's (the intent not yet dropped)."""
    data = tmp_path / "data"
    ids = parent_of_1000(data)
    cut_short(data, after)
    again = cli("cancel", "par", "--data", str(data), "--project", str(PROJECT))
    assert again.code == 0, again
    assert "run par was already cancelled; its cascade is finished: " in again.out
    if after <= CHILDREN:
        assert f"cancelled the {CHILDREN - after + 1} runs below it still live" in again.out
    else:
        assert "every run it started had ended already" in again.out
    assert all_cancelled(data, ids)
    # Once more: nothing is left, and it says so.
    third = cli("cancel", "par", "--data", str(data), "--project", str(PROJECT))
    assert third.code == 0 and "every run it started had ended already" in third.out, third


def test_a_death_between_the_intent_and_the_parents_cancel_is_finished_as_dev_starts(tmp_path: Path) -> None:
    """The first step of a cancel is its intent: a process that dies right after it (no run
    changed yet) leaves what this writes, and the cancel is carried out in full."""
    data = tmp_path / "data"
    ids = parent_of_1000(data)
    store = SQLiteStore(data / STORE_FILE)
    store.begin_cancel("par", 1.0)
    store.close()
    servers = Servers(tmp_path)
    try:
        servers.start(PROJECT, data)
        assert all_cancelled(data, ids)
    finally:
        servers.close()


def test_lunaflow_dev_finishes_a_cascade_a_sigkill_cut_short_as_it_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = parent_of_1000(data)
    cut_short(data)
    servers = Servers(tmp_path)
    try:
        servers.start(PROJECT, data)  # serving is printed once start-up's recovery is done
        assert all_cancelled(data, ids)
    finally:
        servers.close()


def test_a_console_cancel_whose_server_is_sigkilled_part_way_is_finished_on_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = parent_of_1000(data)
    servers = Servers(tmp_path)
    try:
        first = servers.start(PROJECT, data, env={KILL_AFTER_CANCELS: str(KILLED_AFTER)})
        page = first.send("GET", "/_console/runs/par")
        ask_form = Html(page.body).form("Cancel")
        origin = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": f"http://127.0.0.1:{first.port}",
        }
        ask = first.send(
            "POST",
            ask_form.action,
            urlencode({**ask_form.fields, ask_form.button_name: ask_form.button_value}).encode(),
            origin,
        )
        assert ask.status == 200, ask
        form = Html(ask.body).form("Yes, cancel")
        fields = {**form.fields, form.button_name: form.button_value}
        with contextlib.suppress(Exception):  # the server may die while answering
            first.send("POST", form.action, urlencode(fields).encode(), origin)
        wait_for("the server to kill itself", lambda: not first.alive, timeout=30)
        assert first.proc.returncode == -signal.SIGKILL
        store = SQLiteStore(data / STORE_FILE)
        assert store.pending_cancels() == ["par"]
        left = statuses(store, ids[1:])
        store.close()
        assert left == {"cancelled": KILLED_AFTER - 1, "awaiting": CHILDREN - KILLED_AFTER + 1}
        servers.start(PROJECT, data)
        assert all_cancelled(data, ids)
    finally:
        servers.close()


def test_a_running_server_finishes_a_cascade_another_process_left(tmp_path: Path) -> None:
    """A `lunaflow cancel` killed beside a running `lunaflow dev`: the server finishes the
    cascade once its intent is older than a cascade in progress would be (30 s)."""
    data = tmp_path / "data"
    ids = parent_of_1000(data)
    servers = Servers(tmp_path)
    try:
        servers.start(PROJECT, data)
        cut_short(data)
        wait_for(
            "the server to finish the cascade", lambda: all_cancelled(data, ids), timeout=90, interval=1.0
        )
    finally:
        servers.close()
