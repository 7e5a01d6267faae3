"""Races on one SQLite data folder: two worker processes hammering the same runs, judged
by the torture's invariant checker (bench/torture_check.py).

1. Two ``lunaflow dev`` servers on one ``--data`` folder (both run dispatchers and
   workers), driven over HTTP by bench/torture.py's driver, requests spread over both.
2. Two plain Python processes appending to the same runs' journals through
   ``SQLiteStore.append`` (read the length, append conditionally on it), the store's
   conditional append being the only arbiter.

The SQLiteStore docstring: "Several processes may open the same file: every write is one
BEGIN IMMEDIATE transaction, and a journal append is conditional on the run's journal
length, so only one writer can win a slot." The devserver docstring: "A run is advanced by
one thread at a time (an in-process claim); across processes the store's conditional
appends decide."
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture import Outcome, Settings, run  # noqa: E402
from bench.torture_check import STORE_FILE, install_audit  # noqa: E402
from runtime.core.journal import FORMAT_VERSION, Entry, Kind, Status  # noqa: E402
from runtime.store.base import RunRecord  # noqa: E402
from runtime.store.sqlite import SQLiteStore  # noqa: E402

RACE = Settings(runs=40, rate=20.0, clients=12, seed=5, servers=2, kills=False, wait_s=10.0, settle_s=3.0)

NO_SECOND_RUN = (
    "engine: two lunaflow dev processes on one SQLite data folder both advance a woken run "
    "(no cross-process claim), so one step attempt's body runs twice with the same step id"
)


@pytest.fixture(scope="module")
def race(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    work = tmp_path_factory.mktemp("race")
    return run(Settings(**{**RACE.__dict__, "work": work, "keep": True}), out=lambda text: None)


def explain(outcome: Outcome) -> str:
    return f"\n{outcome.text}\n(work folder {outcome.work})"


def test_two_dev_servers_on_one_data_folder_write_no_journal_position_twice(race: Outcome) -> None:
    """SQLiteStore: "a journal append is conditional on the run's journal length, so only
    one writer can win a slot." Every committed write to a journal row is logged by a
    trigger: each position was written once, numbered 1..n, in the grammar, and every
    journal replays against the code."""
    r = race.report
    assert r.audit_installed and r.journal_entries > 0
    assert r.positions_written_twice == 0, explain(race)
    assert r.malformed_entries == 0, explain(race)
    assert r.divergences == 0, explain(race)
    assert r.engine_bug_reports == 0, explain(race)


def test_two_dev_servers_on_one_data_folder_lose_no_signal(race: Outcome) -> None:
    """Seed: "Duplicate signals are safe." No acknowledged signal missing, none consumed
    twice, none left pending on an ended run, whichever server took it."""
    r = race.report
    assert r.signal_copies_acked > r.signals_sent
    assert r.lost_signals == 0, explain(race)
    assert r.signals_consumed_twice == 0, explain(race)
    assert r.pending_after_end == 0, explain(race)


def test_two_dev_servers_on_one_data_folder_run_no_step_body_twice_for_one_recorded_attempt(
    race: Outcome,
) -> None:
    """Without a crash there is no crash window: each journaled attempt's body runs once.
    Seed: "steps that already ran return their recorded results instead of running again";
    `wf.step_id` "stays the same" only "across a crash between the effect and its recorded
    result"."""
    r = race.report
    assert r.body_runs > 0
    assert r.effects_without_intent == 0, explain(race)
    assert r.bad_repeats == 0, explain(race)


def test_two_dev_servers_on_one_data_folder_finish_every_run_as_expected(race: Outcome) -> None:
    """Two servers on one folder should finish what one finishes: every planned run
    completed with the result the driver computed."""
    r = race.report
    assert r.runs_completed_as_expected == r.runs_planned, explain(race)


# --- the store's conditional appends, raced by two processes -------------------------------

APPENDER = r"""
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from runtime.errors import JournalConflict
from runtime.core.journal import Entry, Kind
from runtime.store.sqlite import SQLiteStore

path, tag, rounds, go = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
runs = json.loads(sys.argv[6])
store = SQLiteStore(path)
rng = random.Random(tag)
open(go + "." + tag, "w").close()  # ready: imports done and the store open
while not __import__("os").path.exists(go):
    time.sleep(0.001)
wins, conflicts = [], 0
for i in range(rounds):
    run_id = rng.choice(runs)
    n = store.get_run(run_id).journal_len
    time.sleep(rng.uniform(0, 0.002))  # widen the read-to-write gap a little
    entry = Entry(n + 1, Kind.VALUE.value, "math.random", {"value": f"{tag}:{i}"}, time.time())
    try:
        store.append(run_id, n, [entry])
        wins.append([run_id, n + 1, f"{tag}:{i}"])
    except JournalConflict:
        conflicts += 1
store.close()
print(json.dumps({"wins": wins, "conflicts": conflicts}))
"""


def test_two_processes_appending_to_the_same_journals_win_each_position_once(tmp_path: Path) -> None:
    """SQLiteStore: "Several processes may open the same file: every write is one BEGIN
    IMMEDIATE transaction, and a journal append is conditional on the run's journal length,
    so only one writer can win a slot.\""""
    data = tmp_path / "data"
    install_audit(data)
    runs = ["r1", "r2", "r3"]
    store = SQLiteStore(data / STORE_FILE)
    for run_id in runs:
        record = RunRecord(run_id, "w", Status.RUNNING, {}, created_at=1.0, updated_at=1.0)
        store.create_run(
            record, Entry(1, Kind.STARTED.value, "w", {"format": FORMAT_VERSION, "input": {}}, 1.0)
        )
    store.close()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                APPENDER,
                str(ROOT),
                str(data / STORE_FILE),
                tag,
                "150",
                str(go),
                json.dumps(runs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    # Both ready before either begins, however slow a start: else one may finish alone.
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.{tag}").exists() for tag in ("a", "b")) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.write_text("go")
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout))
    wins = [tuple(w) for out in outs for w in out["wins"]]
    assert sum(out["conflicts"] for out in outs) > 0  # they did race
    assert len(wins) + sum(out["conflicts"] for out in outs) == 300

    db = sqlite3.connect(str(data / STORE_FILE))
    try:
        writes = Counter(db.execute("SELECT run_id, seq FROM torture_journal_writes").fetchall())
        journal = db.execute("SELECT run_id, seq, data FROM journal WHERE seq > 1").fetchall()
        lengths = dict(db.execute("SELECT run_id, MAX(seq) FROM journal GROUP BY run_id").fetchall())
    finally:
        db.close()
    assert [k for k, n in writes.items() if n != 1] == []  # each position committed once
    # Every win is in the journal, at the position it won, and nothing else is.
    assert sorted((r, s, json.loads(d)["value"]) for r, s, d in journal) == sorted(wins)
    for run_id in runs:
        seqs = sorted(s for r, s, _ in wins if r == run_id)
        assert seqs == list(range(2, lengths[run_id] + 1))
