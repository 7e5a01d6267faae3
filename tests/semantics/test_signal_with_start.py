"""Signal-with-start (issue 28.4), on both harnesses: ``start`` with a signal creates the run
and its first signal in one write, or delivers the signal to the run of that workflow
holding the id; anything refused writes nothing, neither the run nor the signal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.core.values import MAX_VALUE_BYTES
from runtime.errors import InvalidInput, RunIdTaken, SignalBacklogFull
from runtime.platform import runs as runs_module
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "signal_start"


@pytest.fixture
def p(harness: Any, tmp_path: Path):
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def consumed(p: LocalPlatform, run_id: str) -> list[Any]:
    return [e.data["payload"] for e in p.journal(run_id) if e.kind == Kind.WAIT_DONE]


def lua_start(p: LocalPlatform, workflow: str, input: Any, opts: Any) -> dict[str, Any]:
    resp = p.fetch("POST", "/start", body=json.dumps({"workflow": workflow, "input": input, "opts": opts}))
    out: dict[str, Any] = json.loads(resp.body)
    return out


def test_a_start_with_a_signal_creates_the_run_holding_it(p: LocalPlatform) -> None:
    run = p.start("order", {"n": 1}, id="order-1", signal="paid", payload={"by": "ada"})
    assert (run.status, run.result) == ("completed", {"outcome": "paid", "by": "ada", "n": 1})
    assert [e.kind for e in p.journal("order-1")][:3] == [Kind.STARTED, Kind.WAIT, Kind.WAIT_DONE]
    assert consumed(p, "order-1") == [{"by": "ada"}]
    assert [r.id for r in p.runs()] == ["order-1"]


def test_a_start_with_a_signal_delivers_it_to_the_run_of_that_id(p: LocalPlatform) -> None:
    """The run exists (an await for two payments): the second start joins it, its input
    ignored, and its signal is delivered as a signal would be."""
    p.start("order", {"n": 1, "extra": 1}, id="order-2", signal="paid", payload={"by": "ada"})
    assert p.get("order-2").status == "awaiting"
    again = p.start("order", {"n": 99}, id="order-2", signal="paid", payload={"by": "bob"})
    assert again.id == "order-2" and again.input == {"n": 1, "extra": 1}
    run = p.get("order-2")
    assert (run.status, run.result) == (
        "completed",
        {"outcome": "paid", "by": "ada", "more": ["bob"], "n": 1},
    )
    assert [e.kind for e in p.journal("order-2")].count(Kind.STARTED) == 1


def test_a_start_with_a_signal_of_an_ended_run_sets_the_signal_aside(p: LocalPlatform) -> None:
    assert p.start("quick", None, id="q1").status == "completed"
    again = p.start("quick", None, id="q1", signal="paid", payload=1)
    assert again.status == "completed"
    [record] = p.platform.store.signals("q1")
    assert (record.name, record.state) == ("paid", "set_aside")


def test_an_id_held_by_another_workflow_is_refused_and_nothing_written(p: LocalPlatform) -> None:
    p.start("other", None, id="x1")
    with pytest.raises(
        RunIdTaken, match="held by a run of workflow 'other', so it cannot start workflow 'order'"
    ):
        p.start("order", {"n": 1}, id="x1", signal="paid", payload={"by": "ada"})
    assert p.platform.store.signals("x1") == []
    assert [e.kind for e in p.journal("x1")] == [Kind.STARTED, Kind.WAIT]


@pytest.mark.parametrize("name", ["", 7])
def test_a_bad_signal_name_is_refused_and_no_run_is_written(p: LocalPlatform, name: Any) -> None:
    with pytest.raises(
        InvalidInput, match=r'a signal name must be a non-empty string \(got .*\), e\.g\. "paid"'
    ):
        p.start("order", {"n": 1}, id="bad-1", signal=name, payload={"by": "ada"})
    assert p.runs() == []


def test_a_payload_over_the_value_limit_is_refused_and_no_run_is_written(p: LocalPlatform) -> None:
    big = "x" * MAX_VALUE_BYTES
    with pytest.raises(InvalidInput) as refused:
        p.start("order", {"n": 1}, id="big-1", signal="paid", payload=big)
    message = str(refused.value)
    assert "the payload of signal 'paid' for run 'big-1'" in message and str(MAX_VALUE_BYTES) in message
    assert p.runs() == []


def test_a_payload_without_a_signal_is_refused(p: LocalPlatform) -> None:
    with pytest.raises(InvalidInput, match="has a payload but no signal; a payload travels with a signal"):
        p.start("order", {"n": 1}, id="lone-1", payload={"by": "ada"})
    assert p.runs() == []


def test_a_signal_past_the_runs_backlog_is_refused_and_nothing_written(
    p: LocalPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound, lowered to 3 so both stores reach it quickly: the run holds 3 unconsumed
    signals (it awaits "never"), and a start with a fourth is refused."""
    monkeypatch.setattr(runs_module, "MAX_SIGNAL_BACKLOG", 3)
    p.start("other", None, id="full-1")
    for i in range(3):
        p.signal("full-1", "junk", i)
    with pytest.raises(SignalBacklogFull, match="run 'full-1' already has 3 unconsumed signals"):
        p.start("other", None, id="full-1", signal="junk", payload=3)
    assert [s.payload for s in p.platform.store.signals("full-1")] == [0, 1, 2]


def test_signal_with_start_from_a_fetch_route(p: LocalPlatform) -> None:
    """The checkout route starts and pays the order in one call; a repeat pays it again,
    which the finished order sets aside."""
    resp = p.fetch("POST", "/checkout", body=json.dumps({"id": "7", "by": "ada", "n": 7}))
    assert resp.status_code == 200, resp
    assert json.loads(resp.body)["id"] == "order-7"
    assert p.get("order-7").result == {"outcome": "paid", "by": "ada", "n": 7}
    p.fetch("POST", "/checkout", body=json.dumps({"id": "7", "by": "ada", "n": 7}))
    assert [s.state for s in p.platform.store.signals("order-7")] == ["consumed", "set_aside"]


def test_signal_with_start_from_a_step_records_the_parent(p: LocalPlatform) -> None:
    p.start("spawner", {"child": "kid-1"}, id="parent-1")
    kid = p.get("kid-1")
    assert (kid.parent_id, kid.status, kid.result["by"]) == ("parent-1", "completed", "parent-1")


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            {"id": "o1", "singal": "paid"},
            "unknown option 'singal'; the options are id, timeout, signal and payload",
        ),
        ({"id": "o1", "signal": 5}, "signal must be a signal's name, a non-empty string (got number)"),
        ({"id": "o1", "signal": ""}, "a signal name must be a non-empty string (got ''), e.g. \"paid\""),
        ({"id": "o1", "payload": {"by": "ada"}}, "has a payload but no signal"),
    ],
)
def test_lua_refuses_bad_signal_options_and_writes_nothing(p: LocalPlatform, opts: Any, message: str) -> None:
    out = lua_start(p, "order", {"n": 1}, opts)
    assert out["ok"] is False and message in out["out"], out
    assert p.runs() == []


def test_lua_signal_with_start_delivers_the_payload(p: LocalPlatform) -> None:
    out = lua_start(p, "order", {"n": 2}, {"id": "o2", "signal": "paid", "payload": {"by": "lua"}})
    assert out == {"ok": True, "out": "o2"}
    assert p.get("o2").result == {"outcome": "paid", "by": "lua", "n": 2}
