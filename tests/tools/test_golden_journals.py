"""Issue 21, point 2: golden journals for users. A run's journal recorded into the project
(``lunaflow record RUN_ID``, ``LocalPlatform.record``) under ``tests/golden/`` is replayed
by ``lunaflow test`` and ``lunaflow check`` on the project's current code, as Temporal's
replayer replays saved histories: code that would take another path fails them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runtime.dev.golden import file_name, replay_goldens
from runtime.dev.luatest import run_tests
from runtime.errors import LunaflowError
from runtime.testing import LocalPlatform
from tests.support.cli import ROOT, cli

AUCTION = ROOT / "examples" / "auction"


def test_the_auction_example_ships_a_golden_that_replays() -> None:
    """examples/auction/tests/golden/ holds a recorded paid sale, replayed by its tests."""
    verdicts = replay_goldens(AUCTION)
    assert [v.file for v in verdicts] == ["tests/golden/sale-lot-1.json"]
    assert verdicts[0].passed and verdicts[0].message == "replays cleanly to its return", verdicts


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "auction"
    shutil.copytree(AUCTION, root, ignore=shutil.ignore_patterns(".lunaflow", "golden"))
    return root


def _rename_step(project: Path, old: str, new: str) -> None:
    sale = project / "sale.lua"
    text = sale.read_text(encoding="utf-8")
    assert f'wf:step("{old}"' in text
    sale.write_text(text.replace(f'wf:step("{old}"', f'wf:step("{new}"'), encoding="utf-8")


def _paid_sale(p: LocalPlatform, lot: str) -> None:
    p.fetch("POST", "/api/sale", body=json.dumps({"id": lot, "winner": "ada", "price": 5}))
    p.fetch("POST", "/api/sale/pay", body=json.dumps({"id": lot, "user": "ada"}))
    assert p.get(f"sale-{lot}").status == "completed"


def test_a_recorded_run_replays_in_lunaflow_test_until_the_code_diverges(
    project: Path, tmp_path: Path
) -> None:
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        _paid_sale(p, "lot-1")
        path = p.record("sale-lot-1")
    assert path == project / "tests" / "golden" / "sale-lot-1.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["run"]["status"] == "completed" and doc["entries"][0]["kind"] == "run.started"

    report = run_tests(project)
    golden = [o for o in report.outcomes if o.file == "tests/golden/sale-lot-1.json"]
    assert len(golden) == 1 and golden[0].error is None, report.outcomes
    assert not report.failed, report.failed

    _rename_step(project, "settle", "settled")
    report = run_tests(project, pattern="sale-lot-1")
    assert [o.file for o in report.outcomes] == ["tests/golden/sale-lot-1.json"]
    assert report.failed[0].error == "journal divergence: expected step 'settle', code reached step 'settled'"


def test_lunaflow_check_replays_goldens_without_a_data_folder(project: Path, tmp_path: Path) -> None:
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        _paid_sale(p, "lot-2")
        p.record("sale-lot-2")
    done = cli("check", str(project), env={"COLUMNS": "200"})
    assert done.code == 0, done
    assert "1 golden journal(s), 0 would not replay" in done.out, done.out
    assert "replays cleanly to its return" in done.out
    assert "in-flight" not in done.out, "no data folder: no in-flight table"

    _rename_step(project, "notify", "tell")
    done = cli("check", str(project), "--json")
    assert done.code == 1, done
    [verdict] = json.loads(done.out)
    assert verdict["golden"] == "tests/golden/sale-lot-2.json"
    assert verdict["passed"] is False
    assert verdict["message"] == "journal divergence: expected step 'notify', code reached step 'tell'"

    done = cli("test", str(project), "-k", "sale-lot-2")
    assert done.code == 1, done
    assert "FAIL journal divergence" in done.out and "0 passed, 1 failed" in done.out, done.out


def test_lunaflow_record_writes_the_golden_from_a_data_folder(project: Path) -> None:
    with LocalPlatform(project, data_dir=project / ".lunaflow") as p:
        p.fetch("POST", "/api/sale", body=json.dumps({"id": "lot-3", "winner": "bo", "price": 9}))
        assert p.get("sale-lot-3").status == "awaiting"
        journal = [e.as_dict() for e in p.journal("sale-lot-3")]
    done = cli("record", "sale-lot-3", "-p", str(project))
    assert done.code == 0, done
    path = project / "tests" / "golden" / "sale-lot-3.json"
    assert (
        f"recorded run sale-lot-3 (settle-sale, awaiting, {len(journal)} journal entries) in {path}"
        in done.out
    )
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["entries"] == journal
    assert doc["entries"][-1]["kind"] == "wait"

    # recorded in flight: replays cleanly to where its journal ends, and fails once the
    # code reaches something else first
    [v] = replay_goldens(project)
    assert v.passed and v.status == "awaiting" and v.message.startswith("replays cleanly"), v
    sale = project / "sale.lua"
    sale.write_text(
        sale.read_text(encoding="utf-8").replace(
            "local paid, which = wf:race(", 'wf:sleep("1h")\n    local paid, which = wf:race('
        ),
        encoding="utf-8",
    )
    [v] = replay_goldens(project)
    assert not v.passed and "journal divergence" in v.message, v

    # a run that does not exist is refused in one line
    done = cli("record", "sale-nope", "-p", str(project))
    assert done.code == 1 and "no run 'sale-nope'" in done.err, done


def test_a_completed_golden_fails_when_the_code_now_raises_before_returning(
    project: Path, tmp_path: Path
) -> None:
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        _paid_sale(p, "lot-4")
        p.record("sale-lot-4")
    sale = project / "sale.lua"
    sale.write_text(
        sale.read_text(encoding="utf-8").replace(
            'return { outcome = "settled" }', 'error("refuses to settle", 0)'
        ),
        encoding="utf-8",
    )
    [v] = replay_goldens(project)
    assert not v.passed, v
    assert v.message.startswith("the recorded run completed, but on this code the code raises on replay")
    assert "refuses to settle" in v.message


def test_record_refuses_to_replace_the_golden_of_another_run(project: Path, tmp_path: Path) -> None:
    assert file_name("a b") == file_name("a_b") == "a_b.json"
    assert file_name("../..") == "_...json"
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        p.start("settle-sale", {"id": "x", "winner": "ada", "price": 1}, id="a b")
        p.start("settle-sale", {"id": "y", "winner": "ada", "price": 1}, id="a_b")
        p.record("a b")
        p.record("a b")  # the same run again: replaced
        with pytest.raises(LunaflowError, match=r"holds the golden of 'a b', not of 'a_b'; name the file"):
            p.record("a_b")
        p.record("a_b", name="second")
    names = sorted(f.name for f in (project / "tests" / "golden").iterdir())
    assert names == ["a_b.json", "second.json"]
    assert all(v.passed for v in replay_goldens(project))


def test_an_unreadable_golden_fails_with_a_reason(project: Path) -> None:
    folder = project / "tests" / "golden"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text('{"run": {"id": "r"}, "entries": []}', encoding="utf-8")
    [v] = replay_goldens(project)
    assert not v.passed and v.message.startswith("cannot be read as a golden journal"), v


@pytest.fixture(scope="module")
def paid_golden(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The golden of a paid sale (run sale-lot-7) on the example's code, recorded once for
    the cases that each put a broken copy of it beside it."""
    tmp = tmp_path_factory.mktemp("paid-golden")
    root = tmp / "auction"
    shutil.copytree(AUCTION, root, ignore=shutil.ignore_patterns(".lunaflow", "golden"))
    with LocalPlatform(root, data_dir=tmp / "data") as p:
        _paid_sale(p, "lot-7")
        return p.record("sale-lot-7").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda doc: doc["entries"][0].update(data=[]), "journal entry 1's data is a list, not an object"),
        (lambda doc: doc["entries"][1].update(data="x"), "journal entry 2's data is text, not an object"),
        (lambda doc: doc["entries"].__setitem__(1, 7), "journal entry 2 is a number, not an object"),
        (lambda doc: doc.update(run=[]), "its 'run' is a list, not an object"),
        (lambda doc: doc.update(entries={}), "its 'entries' is an object, not a list of journal entries"),
        (
            lambda doc: doc["entries"][2].update(kind="step.nope"),
            "kind 'step.nope' is not a journal entry kind",
        ),
    ],
)
def test_a_malformed_golden_is_one_verdict_and_the_others_are_judged(
    project: Path, paid_golden: str, edit, reason: str
) -> None:
    """Issue 24 §5: a golden whose first entry's data is a list crashed `lunaflow test` and
    `check` with an AttributeError traceback and no verdicts. It is one "cannot be read"
    verdict naming the file and the fix; the other goldens are still judged."""
    # Goldens only: the example's Lua tests (a PostgreSQL cluster each, most of the time
    # `lunaflow test` takes) judge no golden.
    (project / "tests" / "sale_test.lua").unlink()
    good = project / "tests" / "golden" / "sale-lot-7.json"
    good.parent.mkdir(parents=True)
    good.write_text(paid_golden, encoding="utf-8")
    doc = json.loads(paid_golden)
    edit(doc)
    (good.parent / "bad.json").write_text(json.dumps(doc), encoding="utf-8")

    verdicts = {v.file: v for v in replay_goldens(project)}
    assert verdicts["tests/golden/sale-lot-7.json"].passed, verdicts
    bad = verdicts["tests/golden/bad.json"]
    assert not bad.passed
    assert bad.message.startswith("cannot be read as a golden journal"), bad
    assert reason in bad.message and "lunaflow record RUN_ID" in bad.message, bad

    for command in ("test", "check"):
        done = cli(command, str(project), env={"COLUMNS": "300"})
        assert done.code == 1, done
        assert "Traceback" not in done.out + done.err, done
        assert "tests/golden/bad.json" in done.out and reason in done.out, done
        assert "replays cleanly to its return" in done.out, done


def test_a_secret_read_in_the_workflow_function_replays_with_a_placeholder(
    make_project, tmp_path: Path
) -> None:
    project = make_project(
        {
            "main.lua": 'workflow "w" (function(wf)\n'
            '    local key = secret "api-key"\n'
            '    wf:step("use", function() return #key end)\n'
            '    return "done"\n'
            "end)\n"
        }
    )
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        p.set_secret("api-key", "s3cret")
        assert p.start("w", {}, id="w-1").status == "completed"
        path = p.record("w-1")
    assert "s3cret" not in path.read_text(encoding="utf-8")
    [v] = replay_goldens(project)
    assert v.passed, v


def test_lunaflow_deploy_refuses_code_that_does_not_replay_a_golden(project: Path) -> None:
    """The reference: `lunaflow deploy` runs `check`, so a golden that no longer replays
    refuses the deploy (checked on a local data folder with --data and --dry-run)."""
    with LocalPlatform(project, data_dir=project / ".lunaflow") as p:
        _paid_sale(p, "lot-5")
        p.record("sale-lot-5")
    data = str(project / ".lunaflow")
    done = cli("deploy", str(project), "--data", data, "--dry-run")
    assert done.code == 0 and "would run: npx cdk deploy" in done.out, done
    _rename_step(project, "settle", "settled")
    done = cli("deploy", str(project), "--data", data, "--dry-run")
    assert done.code == 1, done
    assert "lunaflow deploy: refused" in done.err and "would run" not in done.out, done
