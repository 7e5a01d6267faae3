"""The crash torture, small: bench/torture.py's driver and invariant checker on a few
dozen runs of tests/projects/torture, with a real ``lunaflow dev`` process killed with
SIGKILL 3-4 times at random instants and started again on the same data folder.

One torture run (module fixture, ~10-20 s) feeds the tests about what it found; the last
tests tamper with a copy of its folders to show the checker counts what it claims to
count (a checker that cannot fail proves nothing).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture import Outcome, Settings, run  # noqa: E402
from bench.torture_check import STORE_FILE, Report, check  # noqa: E402
from bench.torture_common import PROJECT  # noqa: E402

SMALL = Settings(
    runs=48,
    rate=8.0,  # at most 8 starts a second: the load lasts at least 6 s, across the kills
    clients=8,
    seed=11,
    kill_min=0.3,
    kill_max=1.0,
    max_kills=4,
)


@pytest.fixture(scope="module")
def torture(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    work = tmp_path_factory.mktemp("torture")
    settings = Settings(**{**SMALL.__dict__, "work": work, "keep": True})
    return run(settings, out=lambda text: None)


def explain(outcome: Outcome) -> str:
    return f"\n{outcome.text}\n(work folder {outcome.work})"


def test_sigkilled_dev_server_finishes_every_run_with_its_expected_result(torture: Outcome) -> None:
    """SPEC 5: "Killed at any instant and started again, it resumes every run; timers that
    fell due while it was down fire at start." Seed: "A workflow is a function that runs
    like ordinary code but can pause for days and resume where it stopped, including
    across crashes and deploys.\""""
    r = torture.report
    assert torture.kills >= 3, explain(torture)
    assert r.runs_planned > SMALL.runs  # parents' children are planned too
    assert r.runs_completed_as_expected == r.runs_planned, explain(torture)
    assert r.runs_not_as_expected == 0 and r.unplanned_runs == 0, explain(torture)
    assert r.runs_across_kills > 0, explain(torture)  # the kills landed on live runs
    assert not torture.driver_errors, explain(torture)


def test_no_acknowledged_signal_is_lost_across_sigkills(torture: Outcome) -> None:
    """Seed: "Duplicate signals are safe. An unconsumed extra is set aside rather than
    breaking replay." SPEC 3: "A signal that arrives before the run waits for it is kept
    and consumed when the run reaches a wait for that name.\""""
    r = torture.report
    assert r.signal_copies_acked > r.signals_sent  # some were sent twice
    assert r.signals_before_wait > 0  # and some arrived before their wait
    assert r.signals_set_aside > 0, explain(torture)
    assert r.lost_signals == 0, explain(torture)
    assert r.signals_consumed_twice == 0, explain(torture)
    assert r.pending_after_end == 0, explain(torture)


def test_step_bodies_repeat_only_across_a_crash_with_the_same_step_id(torture: Outcome) -> None:
    """Seed: `wf.step_id` across "a crash between the effect and its recorded result:
    stays the same, so the repeat is recognised"; "a retry after a recorded failure:
    changes, because that attempt is a new effect". SPEC 3: "Each attempt journals an
    intent before the body runs, and the result after it returns.\""""
    r = torture.report
    assert r.recorded_failures > 0  # the flaky steps failed and ran again under new ids
    assert r.body_runs >= r.step_attempts
    assert r.bad_repeats == 0, explain(torture)
    assert r.effects_without_intent == 0, explain(torture)
    assert r.outcomes_without_effect == 0, explain(torture)


def test_no_journal_position_is_written_twice_and_every_journal_replays(torture: Outcome) -> None:
    """Seed: "Each step, signal and timer is journaled before it takes effect. A resuming
    run replays the function from the top, and steps that already ran return their
    recorded results instead of running again.\""""
    r = torture.report
    assert r.audit_installed, explain(torture)
    assert r.journal_entries > 0
    assert r.positions_written_twice == 0, explain(torture)
    assert r.malformed_entries == 0, explain(torture)
    assert r.divergences == 0, explain(torture)
    assert r.engine_bug_reports == 0, explain(torture)


def test_the_limit_cases_fail_their_first_attempt_and_the_server_lives(torture: Outcome) -> None:
    """Issue 14: a step whose object runs the Lua state out of memory, a handler that fills
    its state and keeps the hoard (then a 200 KB request), steps whose host calls (HTTP, a
    database query) outlive their timeouts: each first attempt fails with the limit's
    error, the next completes, and no server process ends but by the driver's kills."""
    r = torture.report
    assert r.timeouts >= 2, explain(torture)  # the slow call and the long query
    assert r.memory_refusals >= 1, explain(torture)
    assert r.server_deaths == 0, explain(torture)


# --- the checker can fail ----------------------------------------------------------------


@pytest.fixture
def copy(torture: Outcome, tmp_path: Path) -> Path:
    """A copy of the torture's data folder and ledger, to tamper with."""
    shutil.copytree(torture.work / "data", tmp_path / "data")
    shutil.copy(torture.work / "ledger.sqlite", tmp_path / "ledger.sqlite")
    return tmp_path


def recheck(folder: Path, replay: bool = False) -> Report:
    return check(PROJECT, folder / "data", folder / "ledger.sqlite", replay=replay)


def sql(path: Path, statement: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    db = sqlite3.connect(str(path))
    try:
        rows = db.execute(statement, args).fetchall()
        db.commit()
        return rows
    finally:
        db.close()


def test_checker_counts_nothing_bad_on_the_untouched_copy(copy: Path) -> None:
    bad = recheck(copy).bad()
    assert bad == dict.fromkeys(bad, 0)


def test_checker_counts_a_body_run_twice_in_one_generation(copy: Path) -> None:
    ledger = copy / "ledger.sqlite"
    step_id, gen = sql(ledger, "SELECT step_id, gen FROM effects ORDER BY id LIMIT 1")[0]
    sql(ledger, "INSERT INTO effects (step_id, gen, at) VALUES (?,?,0)", (step_id, gen))
    assert recheck(copy).bad_repeats == 1


def test_checker_counts_a_body_run_after_its_outcome_was_recorded(copy: Path) -> None:
    ledger, store = copy / "ledger.sqlite", copy / "data" / STORE_FILE
    last_gen, spawned = sql(ledger, "SELECT gen, spawned_at FROM gens ORDER BY gen DESC LIMIT 1")[0]
    # A step whose outcome was on disk before the last generation started.
    intent = sql(
        store,
        "SELECT i.data FROM journal i JOIN journal o ON o.run_id = i.run_id AND o.seq = i.seq + 1 "
        "WHERE i.kind = 'step.intent' AND o.at < ? LIMIT 1",
        (spawned,),
    )
    step_id = json.loads(str(intent[0][0]))["step_id"]
    sql(ledger, "INSERT INTO effects (step_id, gen, at) VALUES (?,?,0)", (step_id, last_gen))
    assert recheck(copy).bad_repeats == 1


def test_checker_counts_an_effect_without_an_intent(copy: Path) -> None:
    sql(copy / "ledger.sqlite", "INSERT INTO effects (step_id, gen, at) VALUES ('chain-9999/add/1/1', 1, 0)")
    assert recheck(copy).effects_without_intent == 1


def test_checker_counts_a_journal_position_written_twice(copy: Path) -> None:
    store = copy / "data" / STORE_FILE
    run_id = sql(store, "SELECT id FROM runs LIMIT 1")[0][0]
    sql(store, "UPDATE journal SET at = at WHERE run_id = ? AND seq = 2", (run_id,))
    assert recheck(copy).positions_written_twice == 1


def test_checker_counts_an_acknowledged_signal_missing_from_the_store(copy: Path) -> None:
    store = copy / "data" / STORE_FILE
    acks: dict[str, int] = {}
    for (nonce,) in sql(copy / "ledger.sqlite", "SELECT nonce FROM acks"):
        acks[str(nonce)] = acks.get(str(nonce), 0) + 1
    stored: dict[str, list[tuple[int, str]]] = {}
    for sig_id, payload, state in sql(store, "SELECT id, payload, state FROM signals"):
        nonce = json.loads(str(payload)).get("n")
        if nonce is not None:
            stored.setdefault(nonce, []).append((int(str(sig_id)), str(state)))
    # A signal sent twice, both copies acknowledged and stored: drop the one set aside.
    victim = next(
        sig_id
        for nonce, copies in stored.items()
        if acks.get(nonce) == len(copies) == 2
        for sig_id, state in copies
        if state == "set_aside"
    )
    sql(store, "DELETE FROM signals WHERE id = ?", (victim,))
    report = recheck(copy)
    assert report.lost_signals == 1
    assert report.malformed_entries == 0


def test_checker_counts_a_run_with_another_result(copy: Path) -> None:
    store = copy / "data" / STORE_FILE
    sql(store, "UPDATE runs SET result = '{\"total\":-1}' WHERE id = (SELECT id FROM runs LIMIT 1)")
    assert recheck(copy).runs_not_as_expected == 1


def test_checker_counts_a_journal_the_code_does_not_replay(copy: Path) -> None:
    store = copy / "data" / STORE_FILE
    sql(
        store,
        "UPDATE journal SET name = 'renamed' WHERE kind LIKE 'step.%' AND name = 'last' "
        "AND run_id = (SELECT id FROM runs WHERE workflow = 'chain' LIMIT 1)",
    )
    assert recheck(copy, replay=True).divergences == 1


def test_checker_counts_a_failure_as_interrupted_before_three_starts(copy: Path) -> None:
    """Issue 14 point 6's rule in the grammar: an attempt is recorded as interrupted only
    after three starts (its intent and two step.rerun entries)."""
    store = copy / "data" / STORE_FILE
    run_id, seq, data = sql(
        store, "SELECT run_id, seq, data FROM journal WHERE kind = 'step.failed' LIMIT 1"
    )[0]
    failed = json.loads(str(data))
    failed["error"] = "step 'flaky' attempt 1 was interrupted 3 times: the process running it ended"
    sql(store, "UPDATE journal SET data = ? WHERE run_id = ? AND seq = ?", (json.dumps(failed), run_id, seq))
    assert recheck(copy).malformed_entries == 1


def test_checker_counts_a_server_that_died_on_its_own(copy: Path) -> None:
    sql(copy / "ledger.sqlite", "UPDATE gens SET ended_by = 'died (gen001 exit -6)' WHERE gen = 1")
    assert recheck(copy).server_deaths == 1
