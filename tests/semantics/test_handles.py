"""Acceptance: SPEC section 3 "Handles" — start, get, status, result, signal, cancel,
resume, and the run-id rules, from Python and from Lua (a fetch handler and a step)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.errors import AlreadyCancelled, InvalidInput, InvalidTransition, NoSuchRun, RunIdTaken
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "spec_handles"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MISSING = "no run 'sale-9' of workflow 'settle-sale'"
ID_RULE = "run id must be a non-empty string without '/'"


class Gate:
    """Stand-in for `objects "Gate"`: the gated workflow's step fails until it opens."""

    def __init__(self) -> None:
        self.open = False

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        return [self.open]


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def p(harness: Any, tmp_path: Path, gate: Gate):
    with harness(PROJECT, data_dir=tmp_path, objects=gate) as plat:
        yield plat


def lua_start(p: LocalPlatform, workflow: str, input: Any, id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"workflow": workflow, "input": input}
    if id is not None:
        body["id"] = id
    resp = p.fetch("POST", "/start", body=json.dumps(body))
    assert resp.status_code in (200, 400), resp
    return json.loads(resp.body)


def lua_call(p: LocalPlatform, workflow: str, id: Any, method: str, *args: Any) -> dict[str, Any]:
    resp = p.fetch(
        "POST",
        "/call",
        body=json.dumps({"workflow": workflow, "id": id, "method": method, "args": list(args)}),
    )
    assert resp.status_code == 200, resp
    return json.loads(resp.body)


# --- start ------------------------------------------------------------------------------


def test_start_with_an_existing_id_joins_and_ignores_the_second_input(p: LocalPlatform) -> None:
    """Seed: "a retried start joins the run instead of making a second one". SPEC 3:
    "the input of the second start is ignored"."""
    first = p.start("settle-sale", {"id": "lot-42", "price": 25}, id="sale-lot-42")
    second = p.start("settle-sale", {"id": "lot-42", "price": 99}, id="sale-lot-42")
    assert second.id == first.id == "sale-lot-42"
    assert second.input == {"id": "lot-42", "price": 25}
    assert len(p.runs()) == 1
    assert [e.kind for e in p.journal("sale-lot-42")].count(Kind.STARTED) == 1


def test_start_from_lua_with_an_existing_id_joins(p: LocalPlatform) -> None:
    """Seed: `settle:start({ id = "lot-42", winner = "ada", price = 25 }, { id = "sale-lot-42" })`
    — "The id is the run's identity, so a retried start joins the run"."""
    a = lua_start(p, "settle-sale", {"id": "lot-42", "winner": "ada", "price": 25}, id="sale-lot-42")
    b = lua_start(p, "settle-sale", {"id": "lot-42", "winner": "bob", "price": 1}, id="sale-lot-42")
    assert a == b == {"id": "sale-lot-42"}
    assert p.get("sale-lot-42").input == {"id": "lot-42", "winner": "ada", "price": 25}
    assert len(p.runs()) == 1


def test_start_joining_a_completed_run_returns_it_unchanged(p: LocalPlatform) -> None:
    """SPEC 3: "`start` with an id that exists joins that run and returns its handle"."""
    p.start("quick", {"n": 1}, id="q1")
    again = p.start("quick", {"n": 2}, id="q1")
    assert again.status == "completed"
    assert again.result == {"echo": {"n": 1}}


def test_start_with_an_id_held_by_another_workflow_is_refused_naming_both(p: LocalPlatform) -> None:
    """SPEC 3: "An id held by a run of another workflow is refused, naming both
    workflows"."""
    p.start("other", {}, id="shared")
    with pytest.raises(RunIdTaken) as e:
        p.start("settle-sale", {}, id="shared")
    assert "'other'" in str(e.value) and "'settle-sale'" in str(e.value)
    assert p.get("shared").workflow == "other"
    out = lua_start(p, "settle-sale", {}, id="shared")
    assert "'other'" in out["err"] and "'settle-sale'" in out["err"]
    assert len(p.runs()) == 1


def test_start_without_an_id_uses_a_fresh_uuid(p: LocalPlatform) -> None:
    """SPEC 3: "`start` without an id uses a fresh UUID"."""
    a = p.start("quick", {})
    b = p.start("quick", {})
    c = lua_start(p, "quick", {})["id"]
    d = lua_start(p, "quick", {})["id"]
    for rid in (a.id, b.id, c, d):
        assert UUID.match(rid), rid
    assert len({a.id, b.id, c, d}) == 4
    assert p.get(c).status == "completed"


# --- get of a missing run ---------------------------------------------------------------


def test_get_of_a_missing_id_from_python_raises_no_such_run(p: LocalPlatform) -> None:
    """SPEC 5: "LocalPlatform raises runtime.errors.LunaflowError subclasses" — NoSuchRun
    for every call on a run that does not exist."""
    for call in (
        lambda: p.get("sale-9"),
        lambda: p.journal("sale-9"),
        lambda: p.signal("sale-9", "paid", {}),
        lambda: p.cancel("sale-9"),
        lambda: p.resume("sale-9"),
    ):
        with pytest.raises(NoSuchRun) as e:
            call()
        assert "'sale-9'" in str(e.value)
    assert p.runs() == []


def test_get_of_a_missing_id_from_a_fetch_handler_returns_a_handle_whose_calls_fail(
    p: LocalPlatform,
) -> None:
    """SPEC 3: "`get` of an id with no run returns a handle whose calls fail with
    `no run 'sale-9' of workflow 'settle-sale'`"."""
    got = lua_call(p, "settle-sale", "sale-9", "id")
    assert got == {"ok": True, "id": "sale-9", "value": "sale-9"}
    for method, args in [
        ("status", ()),
        ("result", ()),
        ("signal", ("paid", {"by": "ada"})),
        ("cancel", ()),
        ("resume", ()),
    ]:
        out = lua_call(p, "settle-sale", "sale-9", method, *args)
        assert out["ok"] is False, (method, out)
        assert out["err"].endswith(MISSING), (method, out["err"])
    assert p.runs() == []


def test_get_of_a_missing_id_inside_a_step_fails_every_call(p: LocalPlatform) -> None:
    """SPEC 3: "`get` of an id with no run returns a handle whose calls fail with
    `no run 'sale-9' of workflow 'settle-sale'`" — from inside a step body."""
    run = p.start("probe", {"target": "sale-9"}, id="probe-1")
    assert run.status == "completed", run.error
    assert run.result["id"] == "sale-9"
    for method in ("status", "result", "signal", "cancel", "resume"):
        assert run.result[method].endswith(MISSING), (method, run.result[method])


@pytest.mark.parametrize("method", ["status", "result", "signal", "cancel", "resume"])
def test_a_failing_handle_call_points_at_the_calling_line(p: LocalPlatform, method: str) -> None:
    """SPEC 3: calls fail with `no run 'sale-9' of workflow 'settle-sale'` — raised at the
    user's call (flows.lua:N), never positioned inside the engine."""
    run = p.start("direct", {"method": method}, id="d1")
    assert run.status == "failed"
    assert "<python>" not in run.error, run.error
    assert re.search(r"flows\.lua:\d+: no run 'sale-9' of workflow 'settle-sale'$", run.error), run.error


def test_get_of_an_id_held_by_another_workflow_fails_like_a_missing_run(p: LocalPlatform) -> None:
    """SPEC 3: "no run 'sale-9' of workflow 'settle-sale'" — a run of another workflow is
    not a run of this one."""
    p.start("other", {}, id="sale-9")
    out = lua_call(p, "settle-sale", "sale-9", "status")
    assert out["ok"] is False and out["err"].endswith(MISSING)
    assert p.get("sale-9").status == "awaiting"


# --- status, result, id, signal ---------------------------------------------------------


def test_handle_status_result_and_id_follow_the_run(p: LocalPlatform) -> None:
    """SPEC 3: `run.id`, `run:status()`, `run:result()` — "the function's return value once
    completed, else nil"."""
    lua_start(p, "settle-sale", {"id": "lot-1"}, id="sale-1")
    assert lua_call(p, "settle-sale", "sale-1", "id")["value"] == "sale-1"
    assert lua_call(p, "settle-sale", "sale-1", "status")["value"] == "awaiting"
    assert lua_call(p, "settle-sale", "sale-1", "result") == {"ok": True, "id": "sale-1", "is_nil": True}
    assert lua_call(p, "settle-sale", "sale-1", "signal", "paid", {"by": "ada"})["value"] is True
    assert lua_call(p, "settle-sale", "sale-1", "status")["value"] == "completed"
    assert lua_call(p, "settle-sale", "sale-1", "result")["value"] == {"outcome": "settled", "by": "ada"}
    assert p.get("sale-1").result == {"outcome": "settled", "by": "ada"}


def test_handle_status_reports_sleeping_failed_and_cancelled(p: LocalPlatform) -> None:
    """SPEC 3: `run:status() -- "running" | "sleeping" | "awaiting" | "failed" |
    "completed" | "cancelled"`."""
    p.start("napper", {}, id="n1")
    p.start("gated", {}, id="g1")
    p.start("other", {}, id="o1")
    p.cancel("o1")
    assert lua_call(p, "napper", "n1", "status")["value"] == "sleeping"
    assert lua_call(p, "gated", "g1", "status")["value"] == "failed"
    assert lua_call(p, "other", "o1", "status")["value"] == "cancelled"
    assert lua_call(p, "gated", "g1", "result")["is_nil"] is True


def test_handle_signal_returns_false_for_an_ended_run(p: LocalPlatform) -> None:
    """SPEC 3: "true if a live run got it; false if the run has ended (the signal is set
    aside)"."""
    p.start("quick", {}, id="q1")
    p.start("other", {}, id="o1")
    p.cancel("o1")
    assert lua_call(p, "quick", "q1", "signal", "paid", {})["value"] is False
    assert lua_call(p, "other", "o1", "signal", "paid", {})["value"] is False


# --- cancel -----------------------------------------------------------------------------


def test_cancel_applies_to_sleeping_awaiting_and_failed_runs(p: LocalPlatform) -> None:
    """SPEC 3: "Cancel applies to every state but `completed` and `cancelled`"."""
    p.start("napper", {}, id="sleeping")
    p.start("settle-sale", {}, id="awaiting")
    p.start("gated", {}, id="failed")
    for rid, status in (("sleeping", "sleeping"), ("awaiting", "awaiting"), ("failed", "failed")):
        assert p.get(rid).status == status
        p.cancel(rid)
        assert p.get(rid).status == "cancelled"
        assert p.journal(rid)[-1].kind == Kind.CANCELLED
    # A cancelled run's timer does not bring it back.
    p.advance("100h")
    assert p.get("sleeping").status == "cancelled"
    assert p.get("awaiting").status == "cancelled"
    assert p.get("awaiting").result is None


def test_cancel_applies_to_a_running_run(p: LocalPlatform) -> None:
    """SPEC 3: "Cancel applies to every state but `completed` and `cancelled`" — a run
    just started from a step is `running` until a worker advances it."""
    run = p.start("spawn-and-cancel", {"child": "kid"}, id="sc1")
    assert run.status == "completed", run.error
    assert run.result == {"before": "running", "after": "cancelled"}
    assert p.get("kid").status == "cancelled"
    assert not any(e.kind == Kind.WAIT for e in p.journal("kid"))


def test_cancel_is_refused_for_a_completed_run_and_repeats_harmlessly_on_a_cancelled_one(
    p: LocalPlatform,
) -> None:
    """SPEC 3: "Cancel applies to every state but `completed` and `cancelled`". Issue 24.2:
    cancelling a cancelled run finishes its cascade; it is still refused as a transition
    (``AlreadyCancelled``, an ``InvalidTransition``), and leaves the run itself as it was."""
    p.start("quick", {}, id="done")
    p.start("other", {}, id="gone")
    p.cancel("gone")
    journal = p.journal("done")
    with pytest.raises(InvalidTransition):
        p.cancel("done")
    assert p.get("done").status == "completed" and p.journal("done") == journal
    journal = p.journal("gone")
    with pytest.raises(AlreadyCancelled, match="its cascade is finished"):
        p.cancel("gone")
    assert p.get("gone").status == "cancelled" and p.journal("gone") == journal
    assert lua_call(p, "quick", "done", "cancel")["ok"] is False
    assert lua_call(p, "other", "gone", "cancel")["ok"] is False
    assert p.get("gone").status == "cancelled" and p.journal("gone") == journal
    assert p.get("done").result == {"echo": {}}


def test_cancelling_a_parent_cancels_its_children_recursively(p: LocalPlatform) -> None:
    """Seed: "Cancelling a run cancels the runs it spawned." SPEC 3: "Starting a workflow
    from inside a step of another run records the parent; cancelling the parent cancels
    its children" — parent → child → grandchild."""
    p.start("tree", {"depth": 2}, id="t")
    assert [p.get(r).status for r in ("t", "t-c", "t-c-c")] == ["awaiting"] * 3
    assert p.get("t").parent_id is None
    assert p.get("t-c").parent_id == "t"
    assert p.get("t-c-c").parent_id == "t-c"
    p.cancel("t")
    assert [p.get(r).status for r in ("t", "t-c", "t-c-c")] == ["cancelled"] * 3
    assert p.signal("t-c-c", "done", {}) is False


def test_cancelling_from_lua_cancels_the_spawned_runs(p: LocalPlatform) -> None:
    """SPEC 3: `run:cancel() -- cancels the run and, recursively, the runs it spawned`."""
    p.start("tree", {"depth": 2}, id="t")
    out = lua_call(p, "tree", "t", "cancel")
    assert out["ok"] is True
    assert [p.get(r).status for r in ("t", "t-c", "t-c-c")] == ["cancelled"] * 3


def test_cancelling_a_child_leaves_its_parent_running(p: LocalPlatform) -> None:
    """SPEC 3: "cancelling the parent cancels its children" — not the other way round."""
    p.start("tree", {"depth": 2}, id="t")
    p.cancel("t-c")
    assert p.get("t").status == "awaiting"
    assert p.get("t-c").status == "cancelled"
    assert p.get("t-c-c").status == "cancelled"
    p.signal("t", "done", {})
    assert p.get("t").result == {"child": "t-c"}


def test_runs_started_outside_a_step_have_no_parent(p: LocalPlatform) -> None:
    """SPEC 3: "Starting a workflow from inside a step of another run records the parent"
    — a start from Python or a fetch handler has none."""
    p.start("settle-sale", {}, id="py")
    lua_start(p, "settle-sale", {}, id="route")
    assert p.get("py").parent_id is None
    assert p.get("route").parent_id is None
    p.cancel("py")
    assert p.get("route").status == "awaiting"


# --- resume -----------------------------------------------------------------------------


def test_resume_applies_to_failed_runs(p: LocalPlatform, gate: Gate) -> None:
    """Seed diagram: "failed --> running: resume from the console". SPEC 3: "resume applies
    to `failed` only"."""
    run = p.start("gated", {}, id="g1")
    assert run.status == "failed"
    assert "step 'gate' failed after 1 attempts" in run.error and "gate closed" in run.error
    gate.open = True
    p.resume("g1")
    run = p.get("g1")
    assert run.status == "completed"
    assert run.result == "through"


def test_resume_from_lua_resumes_a_failed_run(p: LocalPlatform, gate: Gate) -> None:
    """SPEC 3: `run:resume() -- resumes a failed run`."""
    p.start("gated", {}, id="g1")
    gate.open = True
    assert lua_call(p, "gated", "g1", "resume")["ok"] is True
    assert p.get("g1").status == "completed"


def test_resume_is_refused_for_every_state_but_failed(p: LocalPlatform) -> None:
    """SPEC 3: "resume applies to `failed` only"."""
    p.start("napper", {}, id="sleeping")
    p.start("settle-sale", {}, id="awaiting")
    p.start("quick", {}, id="completed")
    p.start("other", {}, id="cancelled")
    p.cancel("cancelled")
    for rid in ("sleeping", "awaiting", "completed", "cancelled"):
        journal = p.journal(rid)
        with pytest.raises(InvalidTransition):
            p.resume(rid)
        assert p.get(rid).status == rid
        assert p.journal(rid) == journal
    assert lua_call(p, "settle-sale", "awaiting", "resume")["ok"] is False


# --- run-id rules -----------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["x" * 200, "é" * 100, "sale-lot-42", "ü-ñ-日本", "a b.c:d"])
def test_run_ids_up_to_200_bytes_without_slash_or_controls_are_accepted(p: LocalPlatform, rid: str) -> None:
    """SPEC 3: "A run id is a non-empty string without `/`, at most 200 bytes, no control
    characters"."""
    run = p.start("quick", {}, id=rid)
    assert run.id == rid
    assert p.get(rid).status == "completed"
    assert lua_call(p, "quick", rid, "status")["value"] == "completed"


@pytest.mark.parametrize(
    "rid",
    ["x" * 201, "é" * 101, "", "a/b", "/", "line\nbreak", "tab\there", "nul\x00", "esc\x1b", "del\x7f"],
)
def test_bad_run_ids_are_refused_everywhere(p: LocalPlatform, rid: str) -> None:
    """SPEC 3: "at most 200 bytes, no control characters. Anything else is refused:
    `run id must be a non-empty string without '/' (got "a/b")`" — by start, signal and a
    Lua handle."""
    with pytest.raises(InvalidInput) as e:
        p.start("quick", {}, id=rid)
    assert str(e.value).startswith(ID_RULE)
    with pytest.raises(InvalidInput) as e:
        p.signal(rid, "paid", {})
    assert str(e.value).startswith(ID_RULE)
    out = lua_call(p, "quick", rid, "status")
    assert out["ok"] is False and ID_RULE in out["err"]
    out = lua_start(p, "quick", {}, id=rid)
    assert ID_RULE in out["err"]
    assert p.runs() == []


def test_a_non_string_run_id_is_refused(p: LocalPlatform) -> None:
    """SPEC 3: "A run id is a non-empty string"."""
    with pytest.raises(InvalidInput):
        p.start("quick", {}, id=42)  # type: ignore[arg-type]
    out = lua_call(p, "quick", 42, "status")
    assert out["ok"] is False and ID_RULE in out["err"]
    out = lua_start(p, "quick", {}, id=42)  # type: ignore[arg-type]
    assert ID_RULE in out["err"]
    assert p.runs() == []


def test_a_signal_sent_to_a_failed_run_is_kept_for_after_resume(p: LocalPlatform, gate: Gate) -> None:
    """SPEC 3: "true if a live run got it" — a failed run has not ended: the signal is
    kept, and the resumed run consumes it at its wait."""
    p.start("gated-then-await", {}, id="g1")
    assert p.get("g1").status == "failed"
    assert p.signal("g1", "paid", {"by": "ada"}) is True
    assert lua_call(p, "gated-then-await", "g1", "signal", "paid", {"by": "bob"})["value"] is True
    gate.open = True
    p.resume("g1")
    run = p.get("g1")
    assert run.status == "completed", run.error
    assert run.result == {"by": "ada"}
