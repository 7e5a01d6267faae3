"""Issue 26's failure model, on both harnesses: a step's final failure caught by the
workflow (``catch = true``), errors that must not be retried (``error({ retry = false })``),
the retry policy (``max_backoff``, ``jitter``, retry now) and the refusals of bad options.

Step bodies call ``Attempt(wf.id):try(name)``, an object stand-in that counts calls per
name and answers whether this one succeeds, or fails for good (``fatal``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidTransition, NoSuchRun, ProjectLoadError
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "failures"


class Attempts:
    """``try(name)`` returns ``{ok, n, fatal}``: the nth call of a name succeeds when ``n`` is in
    ``ok[name]`` and raises a non-retryable error when it is in ``fatal[name]``."""

    def __init__(self) -> None:
        self.p: Any = None
        self.ok: dict[str, set[int]] = {}
        self.fatal: dict[str, set[int]] = {}
        self.calls: list[tuple[str, float]] = []
        self.keyed: list[tuple[str, str]] = []

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        name = args[0]
        self.calls.append((name, self.p.now))
        self.keyed.append((key, name))
        n = self.keyed.count((key, name))  # attempts of this run's step of that name
        return [{"ok": n in self.ok.get(name, set()), "n": n, "fatal": n in self.fatal.get(name, set())}]

    def count(self, name: str) -> int:
        return sum(1 for c in self.calls if c[0] == name)

    def times(self, name: str) -> list[float]:
        return [t for c, t in self.calls if c == name]


@pytest.fixture
def attempts() -> Attempts:
    return Attempts()


@pytest.fixture
def p(harness: Any, tmp_path: Path, attempts: Attempts) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path / "data", objects=attempts) as platform:
        attempts.p = platform
        yield platform


def kinds(p: LocalPlatform, run_id: str) -> list[str]:
    return [e.kind for e in p.journal(run_id)]


def entries(p: LocalPlatform, run_id: str, kind: str) -> list[Any]:
    return [e for e in p.journal(run_id) if e.kind == kind]


# --- 1. catch ----------------------------------------------------------------------------


def test_catch_raises_the_final_failure_as_a_value_the_workflow_can_pcall(
    p: LocalPlatform, attempts: Attempts
) -> None:
    attempts.ok = {"refund": {1}}
    p.start("caught", {"retries": 3, "catch": True, "backoff": "1s"}, id="c-1")
    p.advance("1h")
    run = p.get("c-1")
    assert run.status == "completed", run.error
    assert run.result == {
        "caught": "step 'charge' failed after 3 attempts: boom 3",
        "step": "charge",
        "attempts": 3,
        "message": "boom 3",
        "retry": True,
        "refunded": 1,
    }
    assert attempts.count("charge") == 3
    (raised,) = entries(p, "c-1", "step.raised")
    assert raised.name == "charge"
    assert raised.data["error"] == "step 'charge' failed after 3 attempts: boom 3"
    # the raise sits right after the final failure, before the compensation's step
    ks = kinds(p, "c-1")
    assert ks.index("step.raised") == ks.index("step.failed", ks.index("step.raised") - 1) + 1


def test_a_caught_failure_replays_without_running_the_body_again(
    p: LocalPlatform, attempts: Attempts
) -> None:
    attempts.ok = {"refund": {1}}
    p.start("caught", {"retries": 2, "catch": True, "backoff": "1s"}, id="c-2")
    p.advance("1h")
    before = p.journal("c-2")
    p.restart()
    p.advance("1h")
    assert attempts.count("charge") == 2 and attempts.count("refund") == 1
    assert [e.as_dict() for e in p.journal("c-2")] == [e.as_dict() for e in before]


def test_the_raise_is_replayed_at_the_same_point_after_a_restart_mid_compensation(
    p: LocalPlatform, attempts: Attempts
) -> None:
    """The compensation fails once and waits out its backoff; after a restart, replay raises
    the recorded failure again (the charge body does not run) and the refund's retry runs."""
    attempts.ok = {"refund": {2}}
    p.start("caught", {"retries": 1, "catch": True}, id="c-3")
    assert p.get("c-3").status == "sleeping"
    p.restart()
    p.advance("1m")
    run = p.get("c-3")
    assert run.status == "completed", run.error
    assert run.result["refunded"] == 2
    assert attempts.count("charge") == 1
    assert len(entries(p, "c-3", "step.raised")) == 1


def test_uncaught_raise_fails_the_run_as_today_and_resume_grants_fresh_attempts(
    p: LocalPlatform, attempts: Attempts
) -> None:
    p.start("uncaught", {"retries": 2}, id="u-1")
    p.advance("1h")
    run = p.get("u-1")
    assert run.status == "failed"
    assert run.error == "step 'charge' failed after 2 attempts: boom 2"
    attempts.ok = {"charge": {4}}
    p.resume("u-1")
    p.advance("1h")
    run = p.get("u-1")
    assert run.status == "completed", run.error
    assert run.result == {"charged": 4}
    assert attempts.count("charge") == 4
    step_ids = [e.data["step_id"] for e in entries(p, "u-1", "step.intent")]
    assert step_ids == [f"u-1/charge/1/{n}" for n in (1, 2, 3, 4)]


def test_without_catch_the_default_is_unchanged(p: LocalPlatform, attempts: Attempts) -> None:
    p.start("caught", {"retries": 2, "backoff": "1s"}, id="d-1")
    p.advance("1h")
    run = p.get("d-1")
    assert run.status == "failed"
    assert run.error == "step 'charge' failed after 2 attempts: boom 2"
    assert "step.raised" not in kinds(p, "d-1")
    assert attempts.count("refund") == 0


# --- 2. errors that must not be retried --------------------------------------------------


def test_retry_false_ends_the_attempts_at_once_and_parks_the_run_failed(
    p: LocalPlatform, attempts: Attempts
) -> None:
    attempts.fatal = {"charge": {1}}
    p.start("caught", {"retries": 5}, id="n-1")
    p.advance("1d")
    run = p.get("n-1")
    assert run.status == "failed"
    assert run.error == (
        "step 'charge' failed after 1 attempts, not retried (its error said retry = false): card declined 1"
    )
    assert attempts.count("charge") == 1
    (failed,) = entries(p, "n-1", "step.failed")
    assert failed.data["final"] is True and failed.data["retryable"] is False


def test_retry_false_with_catch_raises_at_once(p: LocalPlatform, attempts: Attempts) -> None:
    attempts.fatal = {"charge": {2}}
    attempts.ok = {"refund": {1}}
    p.start("caught", {"retries": 5, "catch": True, "backoff": "1s"}, id="n-2")
    p.advance("1d")
    run = p.get("n-2")
    assert run.status == "completed", run.error
    assert run.result["attempts"] == 2
    assert run.result["retry"] is False
    assert run.result["message"] == "card declined 2"
    assert attempts.count("charge") == 2


def test_resume_after_a_non_retryable_failure_grants_fresh_attempts(
    p: LocalPlatform, attempts: Attempts
) -> None:
    attempts.fatal = {"charge": {1}}
    p.start("caught", {"retries": 3, "backoff": "1s"}, id="n-3")
    assert p.get("n-3").status == "failed"
    attempts.ok = {"charge": {2}}
    p.resume("n-3")
    p.advance("1h")
    assert p.get("n-3").result == {"charged": 2}


# --- 3. retry policy ---------------------------------------------------------------------


def test_max_backoff_caps_the_doubling(p: LocalPlatform, attempts: Attempts) -> None:
    p.start("caught", {"retries": 6, "backoff": "2s", "max_backoff": "5s"}, id="b-1")
    p.advance("1h")
    t = attempts.times("charge")
    assert [round(b - a) for a, b in zip(t, t[1:], strict=False)] == [2, 4, 5, 5, 5]


def test_jitter_draws_each_wait_within_its_share_and_journals_the_due_time(
    p: LocalPlatform, attempts: Attempts
) -> None:
    p.start("caught", {"retries": 8, "backoff": "10s", "max_backoff": "10s", "jitter": 0.5}, id="j-1")
    p.advance("1h")
    failures = entries(p, "j-1", "step.failed")[:-1]
    waits = [f.data["retry_at"] - round(f.at * 1000) for f in failures]
    assert all(5000 <= w <= 10000 for w in waits), waits
    assert len(set(waits)) > 1  # spread: seven draws are not all the same
    # each attempt ran when its journaled due time came (AWS schedules are whole seconds)
    ran = [round(x * 1000) for x in attempts.times("charge")[1:]]
    due = [f.data["retry_at"] for f in failures]
    assert all(d <= r < d + 1000 for r, d in zip(ran, due, strict=True)), (ran, due)


def test_jitter_true_is_the_whole_wait_and_defaults_stay(p: LocalPlatform, attempts: Attempts) -> None:
    p.start("caught", {"retries": 3, "backoff": "4s", "jitter": True}, id="j-2")
    p.advance("1h")
    for f in entries(p, "j-2", "step.failed")[:-1]:
        assert 0 <= f.data["retry_at"] - round(f.at * 1000) <= 8000


def test_retry_now_cuts_a_backoff_short(p: LocalPlatform, attempts: Attempts) -> None:
    attempts.ok = {"charge": {2}}
    p.start("caught", {"retries": 3, "backoff": "1h"}, id="r-1")
    assert p.get("r-1").status == "sleeping"
    p.retry("r-1")
    run = p.get("r-1")
    assert run.status == "completed", run.error
    assert attempts.count("charge") == 2
    assert attempts.times("charge")[1] == attempts.times("charge")[0]  # the clock did not move
    assert "step.retry_now" in kinds(p, "r-1")
    p.restart()
    p.settle()
    assert p.get("r-1").status == "completed" and attempts.count("charge") == 2


def test_retry_now_refuses_a_run_not_waiting_out_a_backoff(p: LocalPlatform, attempts: Attempts) -> None:
    attempts.ok = {"charge": {1}}
    p.start("caught", {}, id="r-2")
    with pytest.raises(InvalidTransition, match="not waiting out a step's backoff"):
        p.retry("r-2")


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"retries": 2, "retires": 3}, "wf:step('charge'): unknown option 'retires'; the options are"),
        ({"catch": "yes"}, "step 'charge': catch must be true or false (got \"yes\")"),
        ({"max_backoff": "-5s"}, "bad duration \"-5s\" for the max_backoff of step 'charge'"),
        ({"max_backoff": -5}, "bad duration -5 for the max_backoff of step 'charge'"),
        ({"max_backoff": "soon"}, "bad duration \"soon\" for the max_backoff of step 'charge'"),
        ({"jitter": 1.5}, "step 'charge': jitter must be a share of each wait from 0 to 1"),
        ({"jitter": "lots"}, "step 'charge': jitter must be a share of each wait from 0 to 1"),
    ],
)
def test_bad_step_options_are_refused_before_anything_is_journaled(
    p: LocalPlatform, attempts: Attempts, opts: dict[str, Any], message: str
) -> None:
    p.start("opts", opts, id="bad")
    run = p.get("bad")
    assert run.status == "failed"
    assert run.error is not None and message in run.error
    assert kinds(p, "bad") == ["run.started"]
    assert attempts.count("charge") == 0


# --- versioning and lunaflow check ---------------------------------------------------------

V1 = PROJECT.parent / "failures_v1"
V2 = PROJECT.parent / "failures_v2"


def test_wf_version_guards_adding_catch_under_runs_in_flight(
    harness: Any, tmp_path: Path, attempts: Attempts
) -> None:
    with harness(V1, data_dir=tmp_path / "data", objects=attempts) as p:
        attempts.p = p
        p.start("order", None, id="old")
        p.deploy(V2)
        p.start("order", None, id="new")
        p.signal("old", "go")
        p.signal("new", "go")
        p.advance("1m")
        old, new = p.get("old"), p.get("new")
        # the run started before the change parks failed as it always did ...
        assert old.status == "failed"
        assert old.error == "step 'charge' failed after 2 attempts: boom 2"
        assert "step.raised" not in kinds(p, "old")
        # ... and the run started on the new code compensates
        assert new.status == "awaiting", new.error
        assert [e.name for e in entries(p, "new", "step.raised")] == ["charge"]
        p.signal("new", "ack")
        assert p.get("new").result == {"outcome": "refunded"}


@pytest.mark.local_only("lunaflow check reads the local data folder here; --aws is tests/aws' concern")
def test_check_replays_a_raise_and_reports_code_that_dropped_catch(
    harness: Any, tmp_path: Path, attempts: Attempts
) -> None:
    from runtime import cli

    data = tmp_path / "data"
    with harness(V2, data_dir=data, objects=attempts) as p:
        attempts.p = p
        p.start("order", None, id="caught")
        p.signal("caught", "go")
        p.advance("1m")
        assert p.get("caught").status == "awaiting"
    assert cli.main(["check", str(V2), "--data", str(data)]) == 0
    assert cli.main(["check", str(V1), "--data", str(data)]) == 1


# --- 4. a run bounded in time --------------------------------------------------------------


def test_a_start_timeout_ends_the_run_across_a_restart_and_cancels_its_children(
    p: LocalPlatform, attempts: Attempts
) -> None:
    attempts.ok = {"work": {1}}
    r = p.fetch("POST", "/", body=json.dumps({"id": "b-1", "timeout": "30d"}))
    assert r.status_code == 202, r.body
    assert (p.get("b-1").status, p.get("b-1-child").status) == ("awaiting", "awaiting")
    p.advance("29d")
    assert p.get("b-1").status == "awaiting"
    p.restart()  # the bound is a durable timer: it fires on whatever runs the platform next
    p.advance("1d")
    run = p.get("b-1")
    assert run.status == "failed"
    assert run.error is not None and run.error.startswith("run 'b-1' timed out after 30d")
    assert p.get("b-1-child").status == "cancelled"
    assert kinds(p, "b-1")[-1] == "run.timed_out"
    # resume goes on with no bound: the run is where it stood, awaiting
    p.resume("b-1")
    p.advance("400d")
    assert p.get("b-1").status == "awaiting"
    p.signal("b-1", "done", 5)
    assert p.get("b-1").result == 5


class Died(BaseException):
    """The process running the activation ended here (an exception no code catches)."""


class DiesWhenTimedOut:
    """An observer that ends the process right after a run's time-out is saved, before the
    cascade to its children runs: where a SIGKILL between the two would land."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def ended(self, run_id: str, workflow: str, status: Any, **kw: Any) -> None:
        self.inner.ended(run_id, workflow, status, **kw)
        if "timed out" in str(kw.get("error")):
            raise Died(run_id)


def test_a_timed_out_runs_children_are_cancelled_though_the_process_died_before_the_cascade(
    p: Any, attempts: Attempts
) -> None:
    """Before, the children were cancelled in a loop after the run's end was saved, with no
    record of it: a process dying in between left them live for ever. Now their cancel
    intents are written first, and recovery (locally) or the reconciler (on AWS) finishes."""
    attempts.ok = {"work": {1}}
    assert p.fetch("POST", "/", body=json.dumps({"id": "b-9", "timeout": "1d"})).status_code == 202
    executor = p.platform.worker.executor
    executor.observer = DiesWhenTimedOut(executor.observer)
    with pytest.raises(Died):
        p.advance("1d")
    executor.observer = executor.observer.inner
    assert p.get("b-9").status == "failed"
    assert p.platform.store.pending_cancels() == ["b-9-child"]
    assert p.platform.store.get_run("b-9-child").status == "awaiting"
    if isinstance(p, LocalPlatform):
        p.restart()  # a restart recovers: the intent is finished
    else:
        p.advance("2m")  # the reconciler takes an intent a minute old for orphaned
        p.reconcile()
    assert p.get("b-9-child").status == "cancelled"
    assert p.platform.store.pending_cancels() == []
    assert p.get("b-9").status == "failed"  # the timed-out run itself stays failed, resumable


def test_a_timeout_falls_inside_a_backoff_and_a_run_within_it_is_untouched(
    p: LocalPlatform, attempts: Attempts
) -> None:
    """The bound wakes a run sleeping out a longer backoff; a run that finishes in time never
    hears of it."""
    p.start("bounded", {"backoff": "10d"}, id="b-2", timeout="1d")
    assert p.get("b-2").status == "sleeping"
    p.advance("1d")
    assert p.get("b-2").error.startswith("run 'b-2' timed out after 1d")
    attempts.ok = {"work": {1}}
    p.start("bounded", {}, id="b-3", timeout="2h")
    p.signal("b-3", "done", "ok")
    p.advance("3h")
    assert p.get("b-3").status == "completed"
    assert "run.timed_out" not in kinds(p, "b-3")


@pytest.mark.parametrize("timeout", ["36501d", "-1s", "soon"])
def test_a_bad_start_timeout_is_refused_before_anything_is_written(p: LocalPlatform, timeout: str) -> None:
    r = p.fetch("POST", "/", body=json.dumps({"id": "b-bad", "timeout": timeout}))
    assert r.status_code == 400
    assert f"bad duration \"{timeout}\" for the timeout of run 'b-bad'" in r.body
    with pytest.raises(NoSuchRun):
        p.get("b-bad")


def test_a_workflow_level_timeout_is_every_starts_default(p: LocalPlatform) -> None:
    p.start("bounded-default", None, id="d-1")
    p.start("bounded-default", None, id="d-2", timeout="1d")
    p.advance("2h")
    assert p.get("d-1").error.startswith("run 'd-1' timed out after 2h")
    assert p.get("d-2").status == "awaiting"
    p.advance("22h")
    assert p.get("d-2").error.startswith("run 'd-2' timed out after 1d")


@pytest.mark.local_only("a project refused at load: the same loader on both paths")
def test_a_bad_workflow_timeout_refuses_the_project(harness: Any, tmp_path: Path) -> None:
    project = tmp_path / "bad"
    project.mkdir()
    (project / "main.lua").write_text(
        'workflow "w" { timeout = "36501d" } (function(wf) end)\n'
        'workflow "v" { timout = "1d" } (function(wf) end)\n'
    )
    with pytest.raises(
        ProjectLoadError,
        match="unknown option 'timout'; the workflow options are timeout, concurrency, rate and priority",
    ):
        harness(project, data_dir=tmp_path / "data")
    (project / "main.lua").write_text('workflow "w" { timeout = "36501d" } (function(wf) end)\n')
    with pytest.raises(ProjectLoadError, match="bad duration \"36501d\" for the timeout of workflow 'w'"):
        harness(project, data_dir=tmp_path / "data")
