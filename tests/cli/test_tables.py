"""Issue 24 §6: the CLI's tables at a terminal's 80 columns (and narrower) never cut or wrap
an id or a name; the other columns wrap. ``check`` with no run in flight says so in a
sentence. Real processes, with COLUMNS set as a terminal of that width would."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.testing import LocalPlatform
from tests.support.cli import Done, cli
from tests.support.devserver import write_project

WORKFLOW = "settle-sale"
SHORT = ["sale-lot-42", "sale-lot-2024-11-17-02"]
LONG = ["sale-lot-2024-11-17-auction-00001", "sale-lot-2024-11-17-auction-00002"]
BOXES = set("┏┃┡│└━─")

SALE = """
workflow "settle-sale" (function(wf, input)
  wf:step("notify-the-winner-of-the-lot", function() return 1 end)
  return wf:await("paid")
end)

workflow "quick" (function(wf, input)
  return wf:step("one", function() return 1 end)
end)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("tables") / "proj", {"main.lua": SALE})


def _started(project: Path, data: Path, ids: list[str], workflow: str = WORKFLOW) -> Path:
    for run_id in ids:
        done = cli("start", workflow, "--id", run_id, "-p", str(project), "--data", str(data))
        assert done.code == 0, str(done)
    return data


def _whole(done: Done, texts: list[str], columns: int) -> None:
    """Each text is printed whole on one line, and nothing is cut with an ellipsis."""
    lines = done.out.splitlines()
    for text in texts:
        assert any(text in line for line in lines), f"{text!r} is not whole at {columns} columns:\n{done.out}"
    assert "…" not in done.out, done.out
    assert all(len(line) <= columns for line in lines if not any(t in line for t in texts)), done.out


@pytest.mark.parametrize("columns", [80, 60, 40])
@pytest.mark.parametrize("ids", [SHORT, LONG], ids=["short-ids", "long-ids"])
def test_runs_never_cuts_or_wraps_ids_and_workflow_names(
    project: Path, tmp_path: Path, ids: list[str], columns: int
) -> None:
    """Before: at 80 columns the workflow name wrapped (``settle-sal`` / ``e``)."""
    data = _started(project, tmp_path / "data", ids)
    done = cli("runs", "-p", str(project), "--data", str(data), env={"COLUMNS": str(columns)})
    assert done.code == 0, str(done)
    _whole(done, [*ids, WORKFLOW], columns)
    assert done.out.count(WORKFLOW) == len(ids), done.out


@pytest.mark.parametrize("columns", [80, 60])
def test_checks_goldens_table_never_cuts_run_ids(project: Path, tmp_path: Path, columns: int) -> None:
    """Before: the goldens table cut run ids (``sale-lot…``) and workflow names at 80 columns."""
    copy = write_project(tmp_path / "proj", {"main.lua": SALE})
    data = _started(copy, tmp_path / "data", LONG)
    for run_id in LONG:
        done = cli("record", run_id, "-p", str(copy), "--data", str(data))
        assert done.code == 0, str(done)
    done = cli("check", str(copy), "--data", str(data), env={"COLUMNS": str(columns)})
    assert done.code == 0, str(done)
    files = [f"tests/golden/{run_id}.json" for run_id in LONG]
    _whole(done, [*LONG, *files, WORKFLOW], columns)
    assert "2 golden journal(s), 0 would not replay" in done.out, done.out


def test_check_with_no_run_in_flight_says_so_in_a_sentence(project: Path, tmp_path: Path) -> None:
    """Before: an empty bordered table titled ``0 in-flight run(s), 0 would diverge``."""
    data = tmp_path / "data"
    with LocalPlatform(project, data_dir=data) as p:
        assert p.start("quick", None, id="done-1").status == "completed"
    done = cli("check", str(project), "--data", str(data), env={"COLUMNS": "80"})
    assert done.code == 0, str(done)
    assert not BOXES & set(done.out), done.out
    assert "no runs are in flight" in done.out, done.out
