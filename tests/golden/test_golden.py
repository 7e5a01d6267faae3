"""Golden journals: runs recorded by an earlier engine must replay on the current one.

Each file in tests/golden/journals/ (written by make_golden.py, by hand) is loaded into a
fresh SQLite store through the store API, then replayed with the current engine:
complete runs reproduce their result without running a body or writing an entry,
mid-flight runs continue to the same result leaving their recorded prefix untouched,
and a journal whose code was since renamed fails with the SPEC's divergence message.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from runtime.core import children
from runtime.core.child_commands import ChildCmd, ChildResultCmd, ReadChild
from runtime.core.journal import FORMAT_VERSION, Entry, Kind
from runtime.core.replay import (
    Complete,
    EnterCleanup,
    OnCancelCmd,
    Park,
    Replay,
    Resume,
    StepCmd,
    ValueCmd,
    WaitCmd,
)
from runtime.engine.code import Code, Issued, Raised, Returned
from runtime.store.base import RunRecord, RunUpdate, TimerSet
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
JOURNALS = HERE / "journals"


def _load_generator() -> Any:
    # By path, so the test does not depend on how pytest puts folders on sys.path.
    spec = importlib.util.spec_from_file_location("golden_make_golden", HERE / "make_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def goldens(case: str | None = None) -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(JOURNALS.glob("*.json"))]
    for doc, path in zip(docs, sorted(JOURNALS.glob("*.json")), strict=True):
        doc["_file"] = path.name
    return [d for d in docs if case is None or d["case"] == case]


def golden(name: str) -> dict[str, Any]:
    doc = json.loads((JOURNALS / name).read_text(encoding="utf-8"))
    doc["_file"] = name
    return doc


def entries_of(doc_entries: list[dict[str, Any]]) -> list[Entry]:
    return [Entry(e["seq"], e["kind"], e["name"], e["data"], e["at"]) for e in doc_entries]


def as_dicts(entries: list[Entry]) -> list[dict[str, Any]]:
    return [e.as_dict() for e in entries]


def load_into(data_dir: Path, doc: dict[str, Any]) -> None:
    """Write the golden run into a fresh store as the engine would have left it: run row,
    journal, signals (same ids), timer."""
    entries = entries_of(doc["entries"])
    run = doc["run"]
    store = SQLiteStore(data_dir / STORE_FILE)
    try:
        record = RunRecord(
            id=doc["run_id"],
            workflow=doc["workflow"],
            status="running",
            input=entries[0].data["input"],
            created_at=run["created_at"],
            updated_at=run["created_at"],
        )
        _, created = store.create_run(record, entries[0])
        assert created
        for sig in doc["signals"]:
            sid, _live = store.add_signal(doc["run_id"], sig["name"], sig["payload"], sig["at"])
            assert sid == sig["id"], "signal ids in a fresh store must match the golden's"
        timer = TimerSet(doc["timer_ms"]) if doc["timer_ms"] is not None else None
        store.append(
            doc["run_id"],
            1,
            entries[1:],
            update=RunUpdate(run["status"], run["current_step"], run["result"], run["error"]),
            timer=timer,
        )
        assert as_dicts(store.journal(doc["run_id"])) == doc["entries"]
        assert store.timer(doc["run_id"]) == doc["timer_ms"]
    finally:
        store.close()


def catch_up_clock(p: LocalPlatform, doc: dict[str, Any]) -> None:
    """Move the fresh platform's fake clock to where the recording stopped."""
    behind_ms = round((doc["now"] - p.now) * 1000)
    assert behind_ms >= 0
    if behind_ms:
        p.advance(f"{behind_ms}ms")


def drive_with_code(code: Code, doc: dict[str, Any]) -> tuple[Any, Replay, list[Any]]:
    """Replay the golden journal through the pure core (runtime.core.replay.Replay), driven by
    the real workflow code. Returns the code's return value, the core, and every decision
    that was not a plain Resume (a body to run, a value to produce, a park, a failure)."""
    entries = entries_of(doc["entries"])
    replay = Replay(doc["run_id"], entries, now_ms=round(doc["now"] * 1000), signals=())
    lua = code.new_run(doc["run_id"], doc["workflow"], entries[0].data["input"])
    other: list[Any] = []
    reply: Any = None
    for _ in range(1000):
        out = code.drive(lua, reply)
        if isinstance(out, Returned):
            return out.result, replay, other
        assert not isinstance(out, Raised), f"the workflow raised during replay: {out.message}"
        assert isinstance(out, Issued) and out.command is not None, f"refused command: {out}"
        cmd = out.command
        if isinstance(cmd, StepCmd):
            decision = replay.step(cmd)
        elif isinstance(cmd, WaitCmd):
            decision = replay.wait(cmd)
        elif isinstance(cmd, ValueCmd):
            decision = replay.value(cmd)
        elif isinstance(cmd, OnCancelCmd):
            decision = replay.on_cancel(cmd)
        elif isinstance(cmd, ChildCmd):
            decision = children.child(replay, cmd)
        elif isinstance(cmd, ChildResultCmd):
            decision = children.result(replay, cmd)
        else:
            raise AssertionError(cmd)
        if isinstance(decision, EnterCleanup):
            # The journal's cancel: the workflow function stops, the handler runs from here.
            other.append(decision)
            replay.enter_cleanup()
            assert code.begin_cleanup(lua)
            reply = None
            continue
        if not isinstance(decision, Resume):
            other.append(decision)
            return None, replay, other
        reply = code.reply(decision.value)
    raise AssertionError("the replay did not finish in 1000 commands")


# --- the journal format ------------------------------------------------------------------


def test_golden_journals_cover_every_case() -> None:
    """The three kinds of golden the suite relies on are all committed."""
    cases = sorted(d["case"] for d in goldens())
    assert cases == [
        "caught",
        "children",
        "cleanup",
        "complete",
        "complete-before-code-versions",
        "divergent",
        "interrupted",
        "mid-flight",
        "mid-flight",
    ]
    complete = golden("complete.json")
    kinds = [e["kind"] for e in complete["entries"]]
    assert Kind.STEP_FAILED in kinds and kinds.count(Kind.STEP_INTENT) == 3  # a retry
    assert any(e["kind"] == Kind.WAIT_DONE and e["data"]["by"] == "signal" for e in complete["entries"])
    assert any(e["kind"] == Kind.WAIT and e["name"] == "sleep" for e in complete["entries"])
    assert any(e["kind"] == Kind.VALUE and e["name"] == "os.time" for e in complete["entries"])
    states = {golden(f)["run"]["status"] for f in ("midflight_awaiting.json", "midflight_backoff.json")}
    assert states == {"awaiting", "sleeping"}


@pytest.mark.parametrize("doc", goldens(), ids=lambda d: d["_file"])
def test_journal_format_is_frozen_entry_1_is_run_started_with_format_1(doc: dict[str, Any]) -> None:
    """runtime/core/journal.py: "Entry 1 is always run.started and carries format, the journal
    format version"; the goldens were written in format 1."""
    first = doc["entries"][0]
    assert first["seq"] == 1
    assert first["kind"] == "run.started"
    assert first["name"] == doc["workflow"]
    assert first["data"]["format"] == 1
    assert [e["seq"] for e in doc["entries"]] == list(range(1, len(doc["entries"]) + 1))


def test_current_engine_still_starts_journals_in_format_1(tmp_path: Path) -> None:
    """A new run today still begins with run.started, format 1: the goldens' format."""
    assert FORMAT_VERSION == 1
    with LocalPlatform(ROOT / gen.PROJECT, data_dir=tmp_path, objects=gen.Warehouse()) as p:
        p.start("order", gen.INPUT, id="fresh")
        first = p.journal("fresh")[0]
    assert (first.seq, first.kind, first.name) == (1, "run.started", "order")
    assert first.data["format"] == 1
    assert first.data["input"] == gen.INPUT


@pytest.mark.parametrize("scenario", gen.SCENARIOS, ids=lambda s: s["file"])
def test_current_engine_records_the_same_journal_as_the_golden(scenario: dict[str, Any]) -> None:
    """The journal format is frozen: the same code and the same events produce, entry for
    entry, the journal committed as golden. (A deliberate format change regenerates the
    goldens with make_golden.py and bumps FORMAT_VERSION.)"""
    committed = golden(scenario["file"])
    fresh = json.loads(json.dumps(gen.record(scenario)))
    assert fresh["entries"] == committed["entries"]
    assert fresh["run"] == committed["run"]
    if "finish" in committed:
        assert fresh["finish"] == committed["finish"]


# --- complete runs -----------------------------------------------------------------------


def test_a_golden_recorded_before_runs_named_their_code_version_still_replays(tmp_path: Path) -> None:
    """Issue 29.2 extended format 1: ``run.started`` names the code version the run started
    on (``code``). A journal recorded before that (complete.json as committed until then)
    replays on today's engine to its recorded result."""
    doc = golden("complete_before_code_versions.json")
    assert "code" not in doc["entries"][0]["data"]
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
    assert other == [] and replay.take_unsaved() == []
    assert result == doc["run"]["result"]


def test_complete_golden_replays_to_the_same_result_without_running_a_body(tmp_path: Path) -> None:
    """Seed: "A resuming run replays the function from the top, and steps that already ran
    return their recorded results instead of running again." Driven by the real code, the
    pure core answers every command from the journal, writes nothing, and the function
    returns the recorded result."""
    doc = golden("complete.json")
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
    assert other == [], f"replay asked for more than the journal: {other}"
    assert result == doc["entries"][-1]["data"]["result"] == doc["run"]["result"]
    assert replay.take_unsaved() == []
    assert replay.length == len(doc["entries"])
    # Everything up to the recorded return was consumed: the head is run.completed.
    assert replay.pos == len(doc["entries"]) - 1
    assert doc["entries"][replay.pos]["kind"] == Kind.COMPLETED
    assert warehouse.calls == []  # no step body ran
    assert result["shipped_at"] == next(
        e["data"]["value"] for e in doc["entries"] if e["kind"] == Kind.VALUE and e["name"] == "os.time"
    )


def test_complete_golden_replay_accepts_the_recorded_return(tmp_path: Path) -> None:
    """Replaying a completed journal to its end: when the code returns where the journal
    recorded the return, the core completes with that result and records nothing."""
    doc = golden("complete.json")
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=gen.Warehouse()) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
        assert other == []
        decision = replay.complete(result)
    assert decision == Complete(doc["run"]["result"])
    assert replay.take_unsaved() == []


def test_complete_golden_loaded_into_a_fresh_store_stays_completed_untouched(tmp_path: Path) -> None:
    """A completed run opened by a new engine keeps its result and journal; nothing runs."""
    doc = golden("complete.json")
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        p.advance("2h")
        run = p.get(doc["run_id"])
        assert (run.status, run.result, run.error) == ("completed", doc["run"]["result"], None)
        assert as_dicts(p.journal(doc["run_id"])) == doc["entries"]
        assert p.signal(doc["run_id"], "paid", {"by": "late"}) is False
        assert as_dicts(p.journal(doc["run_id"])) == doc["entries"]
    assert warehouse.calls == []


# --- mid-flight runs ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["midflight_awaiting.json", "midflight_backoff.json"])
def test_midflight_golden_continues_to_the_expected_result_prefix_untouched(
    tmp_path: Path, name: str
) -> None:
    """Seed: "A workflow ... can pause for days and resume where it stopped, including across
    crashes and deploys." A run parked by an earlier engine wakes on the current one,
    keeps its recorded entries as they are, and finishes with the recorded outcome."""
    doc = golden(name)
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        run = p.get(doc["run_id"])
        assert (run.status, run.current_step) == (doc["run"]["status"], doc["run"]["current_step"])
        assert as_dicts(p.journal(doc["run_id"])) == doc["entries"]  # waking it wrote nothing
        catch_up_clock(p, doc)
        gen.apply(p, doc["run_id"], doc["finish"]["actions"])
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "completed", run.error
    assert run.result == doc["finish"]["result"]
    assert run.result["outcome"] == "shipped" and run.result["paid_by"] == "ada"
    prefix = len(doc["entries"])
    assert journal[:prefix] == doc["entries"]
    assert journal == doc["finish"]["entries"]
    # Only the effects the recording had not performed ran, each under its own step id.
    recorded_intents = {e["data"]["step_id"] for e in doc["entries"] if e["kind"] == Kind.STEP_INTENT}
    ran = [call[3][-1] for call in warehouse.calls]
    assert ran and not recorded_intents & set(ran)


def test_midflight_backoff_golden_retries_with_the_next_attempts_step_id(tmp_path: Path) -> None:
    """Seed, `wf.step_id` across "a retry after a recorded failure: changes, because that
    attempt is a new effect" — also when the failure was recorded by an earlier engine."""
    doc = golden("midflight_backoff.json")
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        assert p.get(doc["run_id"]).status == "sleeping"
        assert warehouse.calls == []  # the backoff is not due yet
        p.advance("1s")
        assert p.get(doc["run_id"]).status == "awaiting"
    assert warehouse.calls == [("Warehouse", "tea", "reserve", [2, "golden-backoff/reserve/1/2"])]


# --- interrupted attempts ----------------------------------------------------------------


def test_interrupted_golden_records_the_attempt_as_interrupted_and_retries(tmp_path: Path) -> None:
    """Issue 14 point 6 / SPEC 6: "An attempt interrupted because the process running it
    ended is re-run with the same step id; after 3 interruptions it is recorded as failed
    ... then backoff and retries apply as usual." A journal left with attempt 2 started
    three times (an intent, two step.rerun entries) and no outcome: the current engine
    records the failure without running the body again, and attempt 3 runs as a new effect."""
    doc = golden("midflight_interrupted.json")
    kinds = [(e["kind"], e["data"].get("start")) for e in doc["entries"][3:]]
    assert kinds == [(Kind.STEP_INTENT, None), (Kind.STEP_RERUN, 2), (Kind.STEP_RERUN, 3)]
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        journal = as_dicts(p.journal(doc["run_id"]))
        assert journal[: len(doc["entries"])] == doc["entries"]
        failed = journal[len(doc["entries"])]
        assert (failed["kind"], failed["data"]["attempt"], failed["data"]["final"]) == (
            Kind.STEP_FAILED,
            2,
            False,
        )
        assert failed["data"]["error"] == (
            "step 'reserve' attempt 2 was interrupted 3 times: the process running it ended"
        )
        assert p.get(doc["run_id"]).status == "sleeping"  # the backoff before attempt 3
        assert warehouse.calls == []
        gen.apply(p, doc["run_id"], doc["finish"]["actions"])
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "completed", run.error
    assert run.result["hold"]["hold_id"] == "H:golden-interrupted/reserve/1/3"
    assert [(e["kind"], e["name"]) for e in journal] == [
        (e["kind"], e["name"]) for e in doc["finish"]["entries"]
    ]
    assert [c[3][-1] for c in warehouse.calls] == [
        "golden-interrupted/reserve/1/3",
        "golden-interrupted/ship/1/1",
    ]


def test_an_intent_without_outcome_from_an_earlier_engine_reruns_once_journaled(tmp_path: Path) -> None:
    """Journals written before step.rerun existed count an intent without outcome as one
    start: the current engine journals the second start and runs the body again, with the
    same step id. The interrupted golden, cut after attempt 2's intent, stands in for one."""
    doc = golden("midflight_interrupted.json")
    doc = {**doc, "entries": doc["entries"][:4]}  # up to attempt 2's intent: no re-runs yet
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        journal = as_dicts(p.journal(doc["run_id"]))
        assert p.get(doc["run_id"]).status == "awaiting"
    assert journal[:4] == doc["entries"]
    assert (journal[4]["kind"], journal[4]["data"]) == (Kind.STEP_RERUN, {"attempt": 2, "start": 2})
    assert journal[5]["kind"] == Kind.STEP_RESULT
    assert [c[3][-1] for c in warehouse.calls] == ["golden-interrupted/reserve/1/2"]


# --- divergence --------------------------------------------------------------------------


def test_divergent_golden_fails_with_the_exact_divergence_message(tmp_path: Path) -> None:
    """Seed: "Renaming a step breaks runs already in flight. Replay compares the journal against
    the code it re-executes, and a mismatch fails the run with journal divergence" —
    SPEC: `journal divergence: expected step 'settle', code reached step 'other'`."""
    doc = golden("divergent_renamed_step.json")
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["replay_project"], data_dir=tmp_path, objects=warehouse) as p:
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "failed"
    assert run.error == doc["expected_error"]
    assert run.error == "journal divergence: expected step 'reserve', code reached step 'hold'"
    assert journal == doc["entries"]  # failing adds nothing to the journal
    assert warehouse.calls == []  # the renamed step's body did not run


def test_divergent_golden_resumes_after_a_fixing_deploy(tmp_path: Path) -> None:
    """SPEC: "Resume after a fixing deploy replays with the new code." """
    doc = golden("divergent_renamed_step.json")
    load_into(tmp_path, doc)
    with LocalPlatform(ROOT / doc["replay_project"], data_dir=tmp_path, objects=gen.Warehouse()) as p:
        assert p.get(doc["run_id"]).status == "failed"
        catch_up_clock(p, doc)
        p.deploy(ROOT / doc["project"])
        p.resume(doc["run_id"])
        assert p.get(doc["run_id"]).status == "awaiting"
        gen.apply(p, doc["run_id"], doc["finish"]["actions"])
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "completed", run.error
    assert run.result == doc["finish"]["result"]
    assert journal[: len(doc["entries"])] == doc["entries"]
    assert journal[len(doc["entries"])]["kind"] == Kind.RESUMED


# --- a raised failure (issue 26) -----------------------------------------------------------


def test_caught_golden_replays_its_raise_through_the_core_without_running_a_body(tmp_path: Path) -> None:
    """step.raised: replay raises the recorded failure into the code at the same point (the
    charge body does not run) and reaches the compensation's backoff, where it parks."""
    doc = golden("midflight_caught.json")
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
    assert result is None
    assert len(other) == 1 and isinstance(other[0], Park), other
    assert other[0].current == "step 'release'"
    assert replay.take_unsaved() == []
    assert warehouse.calls == []


def test_caught_golden_continues_to_the_recorded_result_prefix_untouched(tmp_path: Path) -> None:
    doc = golden("midflight_caught.json")
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        assert as_dicts(p.journal(doc["run_id"])) == doc["entries"]
        catch_up_clock(p, doc)
        gen.apply(p, doc["run_id"], doc["finish"]["actions"])
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "completed", run.error
    assert run.result == doc["finish"]["result"]
    assert run.result["retry"] is False and run.result["reason"] == "card declined"
    assert journal == doc["finish"]["entries"]
    assert [call[3][-1] for call in warehouse.calls] == ["golden-caught/release/1/2"]


# --- child runs (issue 27.1) ---------------------------------------------------------------


def test_children_golden_replays_its_child_entries_through_the_core_reading_no_child(tmp_path: Path) -> None:
    """child.started and child.done answer wf:child and c:result() from the journal: the
    first child's result comes back without any read of it, and replay stops at the second
    child's open wait, asking for its state (nothing recorded)."""
    doc = golden("midflight_children.json")
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
        assert result is None
        assert other == [ReadChild("golden-children-slow", "slow", 6)]
        assert replay.take_unsaved() == []
        finished = {**doc, "entries": doc["finish"]["entries"]}
        result, replay, other = drive_with_code(p.platform.code, finished)
    assert result == doc["finish"]["result"] and other == []
    assert replay.take_unsaved() == []


def test_children_golden_checks_cleanly_and_a_renamed_child_diverges(tmp_path: Path) -> None:
    """lunaflow check (Executor.check) understands the child entries; a journal whose child
    the code names differently is a divergence naming both."""
    doc = golden("midflight_children.json")
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path) as p:
        load_into(tmp_path, doc)  # after the platform's start-up, which would advance it
        verdict = p.platform.worker.executor.check(p.get(doc["run_id"]), p.platform.code)
        assert (verdict.diverges, verdict.message) == (
            False,
            "replays cleanly; parked at child 'golden-children-slow'",
        )
    renamed = [dict(e) for e in doc["entries"]]
    renamed[4] = {**renamed[4], "data": {"child": "golden-children-other"}}
    replay = Replay(doc["run_id"], entries_of(renamed), now_ms=0)
    children.child(replay, ChildCmd("quick", None, None))
    assert isinstance(
        children.result(replay, ChildResultCmd("golden-children.child-1", "quick", None)), Resume
    )
    diverged = children.child(replay, ChildCmd("slow", None, "golden-children-slow"))
    assert diverged.error == (  # type: ignore[union-attr]
        "journal divergence: expected child 'golden-children-other' of workflow 'slow', code reached "
        "child 'golden-children-slow' of workflow 'slow'"
    )


# --- a cleanup on cancel (issue 26) ----------------------------------------------------------


def test_cleanup_golden_replays_into_the_handler_through_the_core_without_running_a_body(
    tmp_path: Path,
) -> None:
    """cancel.handler and run.cancel_requested: replay leaves the workflow function at the
    cancel, enters the handler there and reaches its step's backoff, where it parks."""
    doc = golden("midflight_cleanup.json")
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        result, replay, other = drive_with_code(p.platform.code, doc)
    assert result is None
    assert isinstance(other[0], EnterCleanup)
    assert len(other) == 2 and isinstance(other[1], Park), other
    assert other[1].current == "step 'release'"
    assert replay.take_unsaved() == []
    assert warehouse.calls == []


def test_cleanup_golden_continues_to_cancelled_prefix_untouched(tmp_path: Path) -> None:
    doc = golden("midflight_cleanup.json")
    load_into(tmp_path, doc)
    warehouse = gen.Warehouse()
    with LocalPlatform(ROOT / doc["project"], data_dir=tmp_path, objects=warehouse) as p:
        catch_up_clock(p, doc)
        gen.apply(p, doc["run_id"], doc["finish"]["actions"])
        run = p.get(doc["run_id"])
        journal = as_dicts(p.journal(doc["run_id"]))
    assert run.status == "cancelled", run.error
    assert journal == doc["finish"]["entries"]
    assert journal[-1]["data"] == {"cleanup": "done"}
    assert [call[3][-1] for call in warehouse.calls] == ["golden-cleanup/release/1/2"]
