"""The seed's "Replay" section, through LocalPlatform.

The state diagram (six states and their transitions), "Each step, signal and timer is
journaled before it takes effect", "A resuming run replays the function from the top, and
steps that already ran return their recorded results instead of running again", and
"Run code must take the same path given the same journal" with its table.

Step bodies call ``Probe(wf.id):look(label)``, an object stand-in: it records the call
and, at the moment the body performs its effect, the run's status and journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidTransition
from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parent.parent / "projects"
PROJECT = PROJECTS / "seed_replay"
PROJECT_V2 = PROJECTS / "seed_replay_v2"


class Probe:
    """Objects stand-in. ``look(label)`` returns how many times ``label`` was looked at
    (1, 2, ...) unless ``answers`` says otherwise, and snapshots the platform."""

    def __init__(self) -> None:
        self.p: LocalPlatform | None = None
        self.calls: list[tuple[str, str, str, list[Any]]] = []
        self.answers: dict[str, Any] = {}
        self.status_at: dict[str, str] = {}
        self.journal_at: dict[str, list[tuple[str, str | None]]] = {}

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.calls.append((cls, key, method, args))
        if cls != "Probe":
            return [{"signed": args[0], "by": key}]
        label = args[0]
        if self.p is not None:
            self.status_at[label] = self.p.get(key).status
            self.journal_at[label] = [(e.kind, e.name) for e in self.p.journal(key)]
        if label in self.answers:
            return [self.answers[label]]
        return [self.labels().count(label)]

    def labels(self) -> list[str]:
        return [c[3][0] for c in self.calls if c[0] == "Probe"]


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def p(harness: Any, probe: Probe):
    # No data folder given: the harness's own, whose database goes on the process's scratch
    # server (a CREATE DATABASE, where a folder given made a PostgreSQL cluster copied and
    # started for each test, most of its time); a restart reopens that folder all the same.
    with harness(PROJECT, objects=probe) as platform:
        probe.p = platform
        yield platform


def kinds(p: LocalPlatform, run_id: str) -> list[tuple[str, str | None]]:
    return [(e.kind, e.name) for e in p.journal(run_id)]


# --- the state diagram ---------------------------------------------------------------


def test_start_enters_running(p: LocalPlatform, probe: Probe) -> None:
    """`[*] --> running: start`: the first step body runs while the run is running."""
    p.start("sleeper", None, id="s-1")
    assert probe.status_at["before"] == "running"


def test_sleep_moves_running_to_sleeping(p: LocalPlatform) -> None:
    """`running --> sleeping: wf:sleep`."""
    run = p.start("sleeper", None, id="s-1")
    assert run.status == "sleeping"
    assert run.current_step == "sleep"


def test_timer_due_moves_sleeping_to_running(p: LocalPlatform, probe: Probe) -> None:
    """`sleeping --> running: timer due` — not a moment before the timer is due."""
    p.start("sleeper", None, id="s-1")
    p.advance("59m59s")
    assert p.get("s-1").status == "sleeping"
    assert "after" not in probe.labels()
    p.advance("1s")
    assert probe.status_at["after"] == "running"
    assert p.get("s-1").status == "completed"


@pytest.mark.parametrize("workflow", ["awaiter", "racer", "aller"])
def test_await_race_and_all_move_running_to_awaiting(p: LocalPlatform, workflow: str) -> None:
    """`running --> awaiting: wf:await, race, all`."""
    run = p.start(workflow, None, id="w-1")
    assert run.status == "awaiting"


def test_await_current_step_names_the_wait(p: LocalPlatform) -> None:
    """The console lists runs with status and current step: an awaiting run names its wait."""
    assert p.start("awaiter", None, id="w-1").current_step == "await 'go'"


def test_signal_moves_awaiting_to_running(p: LocalPlatform, probe: Probe) -> None:
    """`awaiting --> running: signal or timeout` — the signal half."""
    p.start("awaiter", None, id="w-1")
    assert p.signal("w-1", "go", {"n": 1}) is True
    assert probe.status_at["after"] == "running"
    run = p.get("w-1")
    assert run.status == "completed"
    assert run.result == {"payload": {"n": 1}, "timed_out": False}


def test_timeout_moves_awaiting_to_running(p: LocalPlatform, probe: Probe) -> None:
    """`awaiting --> running: signal or timeout` — the timeout half."""
    p.start("awaiter", None, id="w-1")
    p.advance("59m")
    assert p.get("w-1").status == "awaiting"
    p.advance("1h")
    assert probe.status_at["after"] == "running"
    assert p.get("w-1").result == {"timed_out": True}


def test_race_signal_moves_awaiting_to_running(p: LocalPlatform, probe: Probe) -> None:
    """`awaiting --> running` for `race`: the payload and the name that arrived first."""
    p.start("racer", None, id="w-1")
    p.signal("w-1", "b", "second-name")
    assert probe.status_at["after"] == "running"
    assert p.get("w-1").result == {"payload": "second-name", "which": "b"}


def test_all_stays_awaiting_until_every_signal(p: LocalPlatform) -> None:
    """`awaiting --> running` for `all`: only once every entry has arrived."""
    p.start("aller", None, id="w-1")
    p.signal("w-1", "a", 1)
    assert p.get("w-1").status == "awaiting"
    p.signal("w-1", "b", 2)
    assert p.get("w-1").status == "completed"
    assert p.get("w-1").result == {"a": 1, "b": 2}


def test_exhausted_step_moves_running_to_failed(p: LocalPlatform, probe: Probe) -> None:
    """`running --> failed: a step exhausts its attempts`."""
    probe.answers["charge"] = False
    run = p.start("fragile", None, id="f-1")
    assert probe.status_at["charge"] == "running"
    assert run.status == "failed"
    assert run.error == "step 'charge' failed after 1 attempts: card declined"


def test_resume_moves_failed_to_running(p: LocalPlatform, probe: Probe) -> None:
    """`failed --> running: resume from the console`."""
    probe.answers["charge"] = False
    p.start("fragile", None, id="f-1")
    probe.answers["charge"] = True
    probe.status_at.clear()
    p.resume("f-1")
    assert probe.status_at["charge"] == "running"
    run = p.get("f-1")
    assert run.status == "completed"
    assert run.result == "charged"


def test_return_moves_running_to_completed(p: LocalPlatform) -> None:
    """`running --> completed: the function returns`; the journal ends with the result."""
    p.start("awaiter", None, id="w-1")
    p.signal("w-1", "go", "x")
    run = p.get("w-1")
    assert run.status == "completed"
    last = p.journal("w-1")[-1]
    assert last.kind == "run.completed"
    assert last.data["result"] == run.result


def test_run_cancel_moves_running_to_cancelled(p: LocalPlatform, probe: Probe) -> None:
    """`running --> cancelled: run:cancel` — a run cancelled while its step body runs."""
    run = p.start("selfcancel", None, id="c-1")
    assert probe.status_at["cancel-me"] == "running"
    assert run.status == "cancelled"
    assert "never" not in probe.labels()
    assert kinds(p, "c-1")[-1] == ("run.cancelled", None)


@pytest.mark.parametrize(
    ("workflow", "status"), [("sleeper", "sleeping"), ("awaiter", "awaiting"), ("fragile", "failed")]
)
def test_cancel_applies_to_parked_and_failed_runs(
    p: LocalPlatform, probe: Probe, workflow: str, status: str
) -> None:
    """SPEC 3: "Cancel applies to every state but completed and cancelled"."""
    probe.answers["charge"] = False
    assert p.start(workflow, None, id="r-1").status == status
    p.cancel("r-1")
    assert p.get("r-1").status == "cancelled"
    p.advance("2h")
    assert p.get("r-1").status == "cancelled"
    assert "after" not in probe.labels()


def test_completed_is_final(p: LocalPlatform) -> None:
    """`completed --> [*]`: a completed run can be neither cancelled nor resumed."""
    p.start("awaiter", None, id="w-1")
    p.signal("w-1", "go", 1)
    with pytest.raises(InvalidTransition):
        p.cancel("w-1")
    with pytest.raises(InvalidTransition):
        p.resume("w-1")
    assert p.signal("w-1", "go", 2) is False
    assert p.get("w-1").status == "completed"


def test_cancelled_is_final(p: LocalPlatform, probe: Probe) -> None:
    """`cancelled --> [*]`: a cancelled run stays cancelled; a signal finds no live run."""
    p.start("awaiter", None, id="w-1")
    p.cancel("w-1")
    with pytest.raises(InvalidTransition):
        p.cancel("w-1")
    with pytest.raises(InvalidTransition):
        p.resume("w-1")
    assert p.signal("w-1", "go", 1) is False
    assert p.get("w-1").status == "cancelled"
    assert "after" not in probe.labels()


def test_resume_applies_to_failed_runs_only(p: LocalPlatform) -> None:
    """SPEC 3: "resume applies to `failed` only" — not to a sleeping or awaiting run."""
    p.start("sleeper", None, id="s-1")
    p.start("awaiter", None, id="w-1")
    for run_id in ("s-1", "w-1"):
        with pytest.raises(InvalidTransition):
            p.resume(run_id)


def test_every_status_is_one_of_the_six(p: LocalPlatform, probe: Probe) -> None:
    """The diagram has six states: running, sleeping, awaiting, failed, completed, cancelled."""
    probe.answers["charge"] = False
    p.start("sleeper", None, id="sleeping")
    p.start("awaiter", None, id="awaiting")
    p.start("fragile", None, id="failed")
    p.start("awaiter", None, id="completed")
    p.signal("completed", "go", 1)
    p.start("awaiter", None, id="cancelled")
    p.cancel("cancelled")
    assert {r.id: r.status for r in p.runs()} == {
        "sleeping": "sleeping",
        "awaiting": "awaiting",
        "failed": "failed",
        "completed": "completed",
        "cancelled": "cancelled",
    }
    assert [r.id for r in p.runs(status="failed")] == ["failed"]


# --- journaled before it takes effect ------------------------------------------------


def test_step_intent_is_journaled_before_the_body_runs(p: LocalPlatform, probe: Probe) -> None:
    """ "Each step ... is journaled before it takes effect": when the body performs its
    effect, the journal already ends with the step's intent, and holds no result yet."""
    p.start("sleeper", None, id="s-1")
    assert probe.journal_at["before"] == [("run.started", "sleeper"), ("step.intent", "before")]
    after = kinds(p, "s-1")
    assert after[2] == ("step.result", "before")


def test_signal_is_journaled_before_it_takes_effect(p: LocalPlatform, probe: Probe) -> None:
    """ "Each ... signal ... is journaled before it takes effect": the code after the wait
    runs only once the signal's consumption is in the journal, payload and all."""
    p.start("awaiter", None, id="w-1")
    assert kinds(p, "w-1")[-1] == ("wait", "await")
    p.signal("w-1", "go", {"n": 7})
    assert probe.journal_at["after"][-3:] == [
        ("wait", "await"),
        ("wait.done", "await"),
        ("step.intent", "after"),
    ]
    done = next(e for e in p.journal("w-1") if e.kind == "wait.done")
    assert done.data["by"] == "signal"
    assert done.data["signal"] == "go"
    assert done.data["payload"] == {"n": 7}


def test_timer_is_journaled_before_it_takes_effect(p: LocalPlatform, probe: Probe) -> None:
    """ "Each ... timer is journaled before it takes effect": the sleep's due time is in
    the journal while the run sleeps, and its firing is journaled before the code after
    the sleep runs."""
    start = p.now
    p.start("sleeper", None, id="s-1")
    wait = p.journal("s-1")[-1]
    assert (wait.kind, wait.name) == ("wait", "sleep")
    assert wait.data["due_at"] == round((start + 3600) * 1000)
    p.advance("1h")
    assert probe.journal_at["after"][-3:] == [
        ("wait", "sleep"),
        ("wait.done", "sleep"),
        ("step.intent", "after"),
    ]
    done = next(e for e in p.journal("s-1") if e.kind == "wait.done")
    assert done.data["by"] == "timer"


def test_timeout_is_journaled_before_it_takes_effect(p: LocalPlatform, probe: Probe) -> None:
    """A wait's timeout is a timer too: journaled (`by = timeout`) before the code goes on."""
    p.start("awaiter", None, id="w-1")
    p.advance("1h")
    assert probe.journal_at["after"][-2:] == [("wait.done", "await"), ("step.intent", "after")]
    done = next(e for e in p.journal("w-1") if e.kind == "wait.done")
    assert done.data["by"] == "timeout"


def test_journal_begins_with_run_started_and_the_input(p: LocalPlatform) -> None:
    """The journal is the run's record from its start: entry 1 carries the input."""
    p.start("counter", {"x": 1}, id="k-1")
    first = p.journal("k-1")[0]
    assert (first.seq, first.kind) == (1, "run.started")
    assert first.data["input"] == {"x": 1}
    assert [e.seq for e in p.journal("k-1")] == list(range(1, len(p.journal("k-1")) + 1))


# --- replay from the top -------------------------------------------------------------


def test_restart_replays_from_the_top_without_rerunning_steps(p: LocalPlatform, probe: Probe) -> None:
    """ "A resuming run replays the function from the top, and steps that already ran
    return their recorded results instead of running again" — across a restart, with
    every in-memory state dropped."""
    p.start("counter", None, id="k-1")
    assert probe.labels() == ["count"]
    assert [r["message"] for r in p.logs] == ["top of counter"]
    p.restart()
    p.signal("k-1", "go", "later")
    # The function ran again from the top (its first line logged again, in the new
    # process)...
    assert [r["message"] for r in p.logs] == ["top of counter"]
    # ...but the step that already ran was not called again: its recorded 1 came back.
    assert probe.labels() == ["count", "count-again"]
    run = p.get("k-1")
    assert run.status == "completed"
    assert run.result == {"n": 1, "m": 1, "payload": "later"}


def test_parked_run_resumes_in_the_same_process_without_replaying(p: LocalPlatform, probe: Probe) -> None:
    """The contrast to the restart case: the top of the function ran once, and the
    result is the same either way."""
    p.start("counter", None, id="k-1")
    p.signal("k-1", "go", "later")
    assert [r["message"] for r in p.logs] == ["top of counter"]
    assert probe.labels() == ["count", "count-again"]
    assert p.get("k-1").result == {"n": 1, "m": 1, "payload": "later"}


def test_recorded_result_is_what_replay_returns(p: LocalPlatform, probe: Probe) -> None:
    """Replay returns the *recorded* result: the stand-in would now answer differently,
    and the run still sees what the journal holds."""
    p.start("counter", None, id="k-1")
    recorded = next(e for e in p.journal("k-1") if e.kind == "step.result" and e.name == "count")
    assert recorded.data == {"n": 1, "values": [1]}
    probe.answers["count"] = 999
    p.restart()
    p.signal("k-1", "go", None)
    assert p.get("k-1").result["n"] == 1
    assert probe.labels().count("count") == 1


def test_deploy_replays_on_new_code_with_recorded_results(p: LocalPlatform, probe: Probe) -> None:
    """ "resume where it stopped, including across ... deploys": after a deploy the run
    replays on the new code; the step that already ran keeps its recorded result (the
    new body is not called), and the steps after run the new code."""
    p.start("counter", None, id="k-1")
    p.deploy(PROJECT_V2)
    assert p.get("k-1").status == "awaiting"
    p.signal("k-1", "go", "after-deploy")
    assert probe.labels() == ["count", "count-again-v2"]
    assert [r["message"] for r in p.logs] == ["top of counter", "top of counter"]
    assert p.get("k-1").result == {"n": 1, "m": 1, "payload": "after-deploy"}


def test_restart_then_deploy_keeps_one_journal(p: LocalPlatform, probe: Probe) -> None:
    """A run survives a restart and a deploy in sequence; its journal only grows."""
    p.start("counter", None, id="k-1")
    before = kinds(p, "k-1")
    p.restart()
    p.deploy(PROJECT_V2)
    p.signal("k-1", "go", 1)
    after = kinds(p, "k-1")
    assert after[: len(before)] == before
    assert after.count(("step.intent", "count")) == 1
    assert p.get("k-1").status == "completed"


def test_sleeping_run_survives_restart_and_fires_on_time(p: LocalPlatform, probe: Probe) -> None:
    """A parked run is journal rows and a timer: after a restart the timer still fires
    when due, and the step before the sleep is not repeated."""
    p.start("sleeper", None, id="s-1")
    p.advance("30m")
    p.restart()
    assert p.get("s-1").status == "sleeping"
    p.advance("29m")
    assert p.get("s-1").status == "sleeping"
    p.advance("1m")
    assert p.get("s-1").status == "completed"
    assert probe.labels() == ["before", "after"]


# --- the same path given the same journal --------------------------------------------


def _drawn(p: LocalPlatform) -> dict[str, Any]:
    return next(r["fields"] for r in p.logs if r["message"] == "drew")


def test_time_and_randomness_replay_identically(p: LocalPlatform) -> None:
    """ "`os.time()`, `os.clock()`, `math.random()`, `uuid.v4()` — journaled on first
    run, replayed identically": after a restart and an hour of clock, the replayed run
    returns the values it drew the first time."""
    p.set_secret("api-key", "v1")
    p.start("drawer", None, id="d-1")
    first = _drawn(p)
    values = {e.name: e.data["value"] for e in p.journal("d-1") if e.kind == "value"}
    assert set(values) == {"math.random", "uuid.v4", "os.time", "os.clock"}
    p.advance("1h")
    p.restart()
    p.signal("d-1", "go", None)
    again = _drawn(p)  # the replay drew again, and got the journaled values
    assert again == first
    result = p.get("d-1").result
    assert {k: result[k] for k in ("r", "k", "u", "t")} == {k: first[k] for k in ("r", "k", "u", "t")}
    assert result["t"] == values["os.time"]
    assert result["u"] == values["uuid.v4"]
    assert result["c"] == values["os.clock"]


def test_secret_is_pinned_to_the_version_the_run_first_resolved(p: LocalPlatform) -> None:
    """ "`secret "name"` — pinned to the version the run first resolved"."""
    p.set_secret("api-key", "v1")
    p.start("drawer", None, id="d-1")
    p.set_secret("api-key", "v2")
    p.restart()
    p.signal("d-1", "go", None)
    assert p.get("d-1").result["s"] == "v1"
    p.start("drawer", None, id="d-2")
    p.signal("d-2", "go", None)
    assert p.get("d-2").result["s"] == "v2"


@pytest.mark.parametrize(
    ("what", "needle"),
    [
        ("os.date", "os.date"),
        ("math.randomseed", "math.randomseed"),
        ("kv", "kv:put is an effect and belongs inside wf:step"),
        ("database", "database:exec is an effect and belongs inside wf:step"),
        ("object", "belongs inside wf:step"),
    ],
)
def test_drift_sources_are_refused_in_run_code(
    p: LocalPlatform, probe: Probe, what: str, needle: str
) -> None:
    """ "`os.date`, `math.randomseed` — refused"; "kv, database and object calls outside
    a step — refused: effects belong inside `wf:step`"."""
    run = p.start("refused", what, id="x-1")
    assert run.status == "completed"
    assert run.result["ok"] is False
    assert needle in run.result["err"]
    assert "outside" not in probe.labels()


def test_http_crypto_and_jwt_are_absent_in_run_code(p: LocalPlatform) -> None:
    """ "`http`, `crypto`, `Jwt` — absent, inside step bodies too"."""
    result = p.start("absent", None, id="a-1").result
    nil = {"http": "nil", "crypto": "nil", "Jwt": "nil"}
    assert result == {"run": nil, "body": nil}


def test_object_called_from_a_step_is_not_called_again_on_replay(p: LocalPlatform, probe: Probe) -> None:
    """ "Reach the network by calling an object from a step. The step records what the
    object returned, so replay does not call again"."""
    p.start("signer", {"doc": "deed"}, id="g-1")
    p.restart()
    p.signal("g-1", "go", None)
    signs = [c for c in probe.calls if c[0] == "Registrar"]
    assert signs == [("Registrar", "desk", "sign", [{"doc": "deed"}])]
    assert p.get("g-1").result == {"signed": {"doc": "deed"}, "by": "desk"}
