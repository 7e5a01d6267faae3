"""Issue 30.5: ``lunaflow limits`` lists what holds and waits for each key's slots, and sets a
limit at run time (no deploy): the runs already waiting that now fit are admitted at once,
their wake-ups written for the running `lunaflow dev` to pick up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "flow"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=folder) as p:
        for i in range(4):
            p.start("sync", {"customer": "acme", "n": i}, id=f"s{i}")
    return folder


@pytest.fixture
def lunaflow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data: Path
) -> Iterator[Any]:
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = cli.main([*args, "--data", str(data), "--project", str(PROJECT)])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


def test_limits_lists_each_key_and_sets_one_for_the_runs_waiting(lunaflow: Any, data: Path) -> None:
    listed = lunaflow("limits")
    assert listed.code == 0, listed.err
    assert "sync/acme" in listed.out and "2 of 2" in listed.out and "s2, s3" in listed.out
    got = json.loads(lunaflow("limits", "--json").out)
    acme = next(k for k in got["keys"] if k["key"] == "sync/acme")
    assert (acme["in_use"], acme["limit"], acme["waiting"], acme["next_in_line"]) == (2, 2, 2, ["s2", "s3"])
    changed = lunaflow("limits", "set", "sync/*", "3")
    assert changed.code == 0, changed.err
    assert "sync/* = 3; 1 waiting run(s) admitted: s2" in changed.out
    store = SQLiteStore(data / STORE_FILE)
    try:
        assert "s2" in [r for r, _ in store.wakeups()], "its wake-up is written for lunaflow dev"
        assert store.flow_settings() == {"sync/*": "3"}
    finally:
        store.close()
    cleared = lunaflow("limits", "clear", "sync/*")
    assert "sync/* cleared (the code's limit holds); 0 waiting run(s) admitted" in cleared.out
    bad = lunaflow("limits", "set", "sync/*", "lots")
    assert bad.code != 0 and "bad limit 'lots' for sync/*: a concurrency limit is a whole number" in bad.err
    missing = lunaflow("limits", "set", "sync/*")
    assert missing.code != 0 and "needs a VALUE" in missing.err


@pytest.mark.parametrize(
    ("name", "noted"),
    [
        ("syncc/acme", "did you mean 'sync'?"),
        ("nothing/*", "no limit of scope 'nothing' is in the project's code or in use"),
        ("sync/acme", None),  # a workflow's own scope
        ("one", None),
        ("rate:anything", None),  # a step's bucket is whatever its code computes
    ],
)
def test_a_setting_for_a_scope_the_code_has_no_limit_of_is_kept_and_noted(
    lunaflow: Any, data: Path, name: str, noted: str | None
) -> None:
    value = "5/s" if name.startswith("rate:") else "3"
    got = lunaflow("limits", "set", name, value)
    assert got.code == 0, got.err
    if noted is None:
        assert "note:" not in got.err, got.err
    else:
        assert noted in got.err and f"lunaflow limits clear {name} takes it back" in got.err, got.err
    store = SQLiteStore(data / STORE_FILE)
    try:
        assert store.flow_settings()[name] == value, "the setting is kept either way"
    finally:
        store.close()
