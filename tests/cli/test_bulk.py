"""Issue 29.3: repair by query, with a dry run. ``lunaflow resume|retry|cancel`` with a
selection (``--status``, ``--workflow``, ``--since``, ``--until``, ``--where``) instead of a
run id previews every matching run, replaying each on the current code and leaving out
those that would diverge, and acts only with ``--yes``; interrupted, the same command acts
on what is left and on nothing twice.

The data folder (tests/projects/why, fake clock from 2026-01-01): three runs of "flaky"
failed after their attempts, a "waiter" parked, and a "waiter" failed by a divergence (its
code, tests/projects/why_v2, adds a step before the wait)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.platform import bulk
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
V1, V2 = PROJECTS / "why", PROJECTS / "why_v2"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    with LocalPlatform(V1, data_dir=folder) as p:
        for i in (1, 2, 3):
            p.start("flaky", None, id=f"f{i}")
        p.advance("1m")
        p.start("waiter", None, id="parked")
        p.start("waiter", None, id="diverged")
        p.deploy(V2)
        p.signal("diverged", "paid", {"by": "ada"})
        assert [p.get(r).status for r in ("f1", "f2", "f3", "parked", "diverged")] == [
            "failed",
            "failed",
            "failed",
            "awaiting",
            "failed",
        ]
    return folder


@pytest.fixture
def lunaflow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data: Path
) -> Iterator[Any]:
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))

    def run(*args: str, project: Path = V2) -> Result:
        capsys.readouterr()
        code = cli.main([*args, "--data", str(data), "--project", str(project)])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


def statuses(data: Path) -> dict[str, str]:
    store = SQLiteStore(data / STORE_FILE)
    try:
        return {r.id: str(r.status) for r in store.list_runs(limit=100)}
    finally:
        store.close()


def test_a_dry_run_previews_and_leaves_out_what_the_code_would_not_replay(lunaflow: Any, data: Path) -> None:
    before = statuses(data)
    shown = lunaflow("resume", "--status", "failed", "--dry-run", "--json")
    assert shown.code == 0, shown.err
    got = shown.json()
    assert sorted(got["runs"]) == ["f1", "f2", "f3"]
    assert list(got["diverging"]) == ["diverged"]
    assert got["diverging"]["diverged"].startswith("journal divergence: expected await 'paid'")
    assert got["done"] == [] and got["dry_run"] is True
    assert statuses(data) == before, "a dry run changes nothing"
    text = lunaflow("resume", "--status", "failed")  # without --yes: the preview only
    assert "3 run(s) would be resumed (status failed); 1 left out" in text.out
    assert "nothing done: run the same command with --yes to resume these 3" in text.out
    assert statuses(data) == before


def test_with_yes_every_previewed_run_is_acted_on_and_the_diverging_one_left(
    lunaflow: Any, data: Path
) -> None:
    done = lunaflow("resume", "--status", "failed", "--workflow", "flaky", "--yes", "--json")
    assert done.code == 0, done.err
    assert sorted(done.json()["done"]) == ["f1", "f2", "f3"]
    after = statuses(data)
    assert [after[r] for r in ("f1", "f2", "f3")] == ["running"] * 3  # resumed, for a worker to take
    assert after["diverged"] == "failed" and after["parked"] == "awaiting"
    again = lunaflow("resume", "--status", "failed", "--workflow", "flaky", "--yes", "--json").json()
    assert again["runs"] == [] and again["done"] == [], "a second pass finds nothing left: nothing twice"


def test_an_interrupted_repair_is_finished_by_the_same_command(lunaflow: Any, data: Path) -> None:
    """The selection is the record: runs acted on no longer match, so the command run again
    after an interruption (here: a batch of one, then a stop) acts on the rest alone."""
    store = SQLiteStore(data / STORE_FILE)
    try:
        from runtime.core.clock import SystemClock
        from runtime.platform.runs import Runs

        runs = Runs(store, SystemClock())
        first = bulk.preview(runs, "cancel", bulk.Selection(workflow="flaky"), None)
        assert sorted(r.id for r in first.todo) == ["f1", "f2", "f3"]

        class Interrupted(Exception):
            pass

        def stop_after_first_batch(outcome: bulk.Outcome, total: int) -> None:
            raise Interrupted

        with pytest.raises(Interrupted):
            bulk.act(runs, "cancel", first.todo, batch=1, progress=stop_after_first_batch)
    finally:
        store.close()
    cancelled = [r for r, s in statuses(data).items() if s == "cancelled"]
    assert len(cancelled) == 1
    rest = lunaflow("cancel", "--workflow", "flaky", "--yes", "--json").json()
    assert sorted(rest["done"]) == sorted({"f1", "f2", "f3"} - set(cancelled))
    assert rest["skipped"] == {cancelled[0]: "has ended (cancelled)"}


def test_a_selection_by_time_and_by_status_narrows_what_is_acted_on(lunaflow: Any, data: Path) -> None:
    none_yet = lunaflow("cancel", "--since", "2026-01-02", "--json").json()
    assert none_yet["runs"] == []
    parked = lunaflow(
        "cancel", "--status", "awaiting", "--until", "2026-01-02T00:00", "--yes", "--json"
    ).json()
    assert parked["done"] == ["parked"]
    assert statuses(data)["parked"] == "cancelled"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "lunaflow resume needs a run id or a selection"),
        (("f1", "--status", "failed"), "lunaflow resume takes a run id or a selection"),
        (("--since", "yesterday"), "--since 'yesterday' is not a time; write 2026-11-01"),
        # Both: a preview that would have done nothing while the caller meant to act.
        (("--status", "failed", "--dry-run", "--yes"), "was given both --dry-run and --yes"),
        # A run id acts at once; the flags of a selection beside it are a mistake said as such.
        (("f1", "--yes"), "lunaflow resume f1 was given --yes, which goes with a selection"),
        (("f1", "--dry-run"), "a run id is acted on at once: drop --dry-run"),
    ],
)
def test_a_bad_selection_is_refused_and_changes_nothing(
    lunaflow: Any, data: Path, args: tuple[str, ...], said: str
) -> None:
    before = statuses(data)
    r = lunaflow("resume", *args)
    assert r.code == 2 and said in r.err, (r.code, r.err)
    assert statuses(data) == before


BILLING = """
workflow "billing" (function(wf, input)
  wf:set("month", input.month)
  if input.fail then error("card declined", 0) end
  return wf:await("paid")
end)
"""


def test_runs_by_value_and_status_lists_every_match_up_to_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three failed runs published months 1-3, newer awaiting runs months 4-6: the limit
    counts runs matching both filters, not the newest holders of the value thinned after."""
    project, folder = tmp_path / "billing", tmp_path / "data"
    project.mkdir()
    (project / "main.lua").write_text(BILLING, encoding="utf-8")
    with LocalPlatform(project, data_dir=folder) as p:
        for month in range(1, 7):
            p.start("billing", {"month": month, "fail": month <= 3}, id=f"m{month}")
            p.advance("1s")
        assert [p.get(f"m{m}").status for m in (1, 4)] == ["failed", "awaiting"]
    capsys.readouterr()
    where = ("--where", "month>=1", "--data", str(folder), "--project", str(project), "--json")
    assert cli.main(["runs", *where, "--status", "failed", "--limit", "2"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["m3", "m2"]
    assert cli.main(["runs", *where, "--where", "month<=2", "--status", "failed", "--limit", "5"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["m2", "m1"]


def test_retry_by_query_selects_only_runs_in_a_backoff_not_a_wf_sleep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two "napper" runs sleep in wf:sleep and one "flaky" run waits out its step's backoff:
    a retry by query previews and retries the flaky one alone, the nappers skipped (not
    previewed as retried, then refused as having moved)."""
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    folder = tmp_path / "data"
    with LocalPlatform(V1, data_dir=folder) as p:
        p.start("napper", None, id="n1")
        p.start("napper", None, id="n2")
        p.start("flaky", None, id="b1")
        assert [p.get(r).status for r in ("n1", "n2", "b1")] == ["sleeping"] * 3

    def lunaflow(*args: str) -> str:
        capsys.readouterr()
        assert cli.main([*args, "--data", str(folder), "--project", str(V1)]) == 0
        return capsys.readouterr().out

    naps = lunaflow("retry", "--workflow", "napper", "--yes")
    assert "0 run(s) would be retried (any status, workflow napper); 2 matched but" in naps
    assert "skipped n1: is sleeping, not in a step's backoff; retry applies" in naps
    assert "retried 0 run(s); 0 had moved and were left" in naps
    got = json.loads(lunaflow("retry", "--status", "sleeping", "--yes", "--json"))
    assert (got["runs"], got["done"], got["refused"]) == (["b1"], ["b1"], {})
    assert sorted(got["skipped"]) == ["n1", "n2"]
    assert statuses(folder) == {"n1": "sleeping", "n2": "sleeping", "b1": "running"}
