"""Issue 24.2 "depth": a chain of 1,201 runs made `lunaflow cancel` of its root print a
RecursionError and cancel nothing, and the root's console page a 500 (``Runs._cancel_tree``,
``cli._descendants``, ``render.descendants`` recursed). Every walk is iterative now: a chain
5,000 deep and a parent of 10,000 children are ordinary trees."""

from __future__ import annotations

from pathlib import Path

from runtime.console import render
from runtime.core.clock import FakeClock
from runtime.platform.runs import Runs
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.cancel.trees import chain, fan, statuses
from tests.support.cli import cli
from tests.support.devserver import Servers

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cancel_cascade"


def fast_runs(path: Path) -> Runs:
    return Runs(SQLiteStore(path, synchronous="OFF"), FakeClock(2_000.0))


def test_a_chain_5000_deep_is_walked_named_and_cancelled(tmp_path: Path) -> None:
    runs = fast_runs(tmp_path / STORE_FILE)
    ids = chain(runs.store, "deep", 5_000)
    assert render.descendants(runs, "deep") == ids[1:]
    assert ids[-1] in render.cancel_confirmation(runs, runs.get("deep"))
    done = runs.cancel("deep")
    assert statuses(runs.store, ids) == {"cancelled": 5_001}
    assert done.below == ids[1:] and done.changed == ids
    assert runs.store.pending_cancels() == []


def test_a_parent_of_10000_children_is_walked_named_and_cancelled(tmp_path: Path) -> None:
    runs = fast_runs(tmp_path / STORE_FILE)
    ids = fan(runs.store, "wide", 10_000)
    assert render.descendants(runs, "wide") == ids[1:]
    runs.cancel("wide")
    assert statuses(runs.store, ids) == {"cancelled": 10_001}


def test_lunaflow_cancel_of_a_1201_deep_chain_cancels_all_and_its_console_page_renders(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    runs = fast_runs(data / STORE_FILE)
    ids = chain(runs.store, "root", 1_200)
    runs.store.close()
    servers = Servers(tmp_path)
    try:
        server = servers.start(PROJECT, data)
        page = server.get("/_console/runs/root")
        assert page.status == 200, page.body[:2000]
        assert "name='action' value='cancel'" in page.body  # its Cancel button (it walks the tree)
        done = cli("cancel", "root", "--data", str(data), "--project", str(PROJECT))
        assert done.code == 0, done
        assert "cancelled root and the runs it started: root-1, root-2," in done.out
        store = SQLiteStore(data / STORE_FILE)
        assert statuses(store, ids) == {"cancelled": 1_201}
        store.close()
    finally:
        servers.close()
