"""Acceptance: SPEC 3 "A step's values must be JSON-like ... Each recorded value is at
most 256 KiB encoded ... Same limits for inputs, results and signal payloads"."""

from __future__ import annotations

import json
import math
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "spec_values"
LIMIT = 256 * 1024


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[LocalPlatform]:
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def names_size_and_limit(message: str | None, low: int, high: int) -> bool:
    """The message states a size in [low, high] bytes and the 256 KiB limit."""
    if message is None:
        return False
    numbers = [int(n) for n in re.findall(r"\d+", message)]
    has_size = any(low <= n <= high for n in numbers)
    has_limit = LIMIT in numbers or "256 KiB" in message
    return has_size and has_limit


def signal_from_lua(p: LocalPlatform, run_id: str, kind: str, size: int = 0) -> dict[str, Any]:
    resp = p.fetch("POST", "/", body=json.dumps({"id": run_id, "kind": kind, "size": size}))
    assert resp.status_code == 200, resp
    answer: dict[str, Any] = json.loads(resp.body)
    return answer


# --- JSON-like values round-trip --------------------------------------------------------


def test_step_values_round_trip_and_integers_stay_integers(p: LocalPlatform) -> None:
    """SPEC 3: "A step's values must be JSON-like: nil, booleans, numbers (integers stay
    integers), strings, and tables whose keys are all strings or form a 1..n array" —
    checked after a restart, so the values the function sees come from the journal."""
    p.start("shapes", {"n": 1, "f": 1.5}, id="s1")
    p.restart()
    p.advance("1s")
    run = p.get("s1")
    assert run.status == "completed", run.error
    r = run.result
    assert r["types"] == {
        "one": "integer",
        "half": "float",
        "two_f": "float",
        "neg": "integer",
        "big": "integer",
        "nested": "integer",
        "input_n": "integer",
        "input_f": "float",
    }
    assert r["big_exact"] is True
    assert r["arr_len"] == 3 and r["nested_len"] == 3 and r["empty_is_table"] is True
    v = r["v"]
    assert type(v["one"]) is int and v["one"] == 1
    assert type(v["half"]) is float and v["half"] == 1.5
    assert type(v["two_f"]) is float and v["two_f"] == 2.0
    assert type(v["big"]) is int and v["big"] == 9007199254740993
    assert v["nested"] == {"a": {"b": [1, 2, {"c": "d"}]}}
    assert v["arr"] == ["x", "y", "z"]
    assert v["yes"] is True and v["no"] is False
    assert v["s"] == "text ✓"
    # The journal holds the same values the function saw.
    [recorded] = [e for e in p.journal("s1") if e.kind == Kind.STEP_RESULT and e.name == "vals"]
    assert recorded.data["values"][0] == v
    assert type(recorded.data["values"][0]["one"]) is int


def test_a_step_returns_all_values_its_body_returned(p: LocalPlatform) -> None:
    """SPEC 3: "wf:step(name, fn) -- returns all values fn returned" — nils included."""
    p.start("shapes", {"n": 1, "f": 1.5}, id="s1")
    p.restart()
    p.advance("1s")
    multi = p.get("s1").result["multi"]
    assert multi == {"a": 1, "b_nil": True, "c": 3, "count": 4, "none": 0}


def test_signal_payload_integers_stay_integers(p: LocalPlatform) -> None:
    """SPEC 3: "integers stay integers ... Same limits for inputs, results and signal
    payloads"."""
    p.start("echo", {"n": 7}, id="e1")
    p.restart()
    p.signal("e1", "data", {"n": 1, "f": 1.5, "list": [1, 2.5]})
    run = p.get("e1")
    assert run.result["kind"] == "integer" and run.result["fkind"] == "float"
    assert run.result["payload"] == {"n": 1, "f": 1.5, "list": [1, 2.5]}
    assert type(run.result["payload"]["list"][0]) is int
    assert type(run.result["input"]["n"]) is int


# --- non-JSON values refused ------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, problem", [("function", "function"), ("cycle", "cycle"), ("mixed", "mix"), ("second", "function")]
)
def test_a_non_json_step_value_is_refused_naming_the_step(p: LocalPlatform, kind: str, problem: str) -> None:
    """SPEC 3: "A function, userdata, cycle or mixed table is refused, naming the step"."""
    run = p.start("bad-shape", {"kind": kind}, id="b1")
    assert run.status == "failed"
    assert f"make-{kind}" in (run.error or ""), run.error
    assert problem in (run.error or ""), run.error
    assert not any(e.kind == Kind.STEP_RESULT for e in p.journal("b1"))


@pytest.mark.parametrize("kind", ["function", "cycle", "mixed"])
def test_a_non_json_workflow_result_is_refused(p: LocalPlatform, kind: str) -> None:
    """SPEC 3: values must be JSON-like — "Same limits for inputs, results and signal
    payloads"."""
    run = p.start("bad-return", {"kind": kind}, id="b1")
    assert run.status == "failed"
    assert "bad-return" in (run.error or ""), run.error
    assert not any(e.kind == Kind.COMPLETED for e in p.journal("b1"))


@pytest.mark.parametrize(
    "bad",
    [{"x": {1, 2}}, {"x": object()}, {"x": math.nan}, {"x": math.inf}, {1: "a"}],
    ids=["set", "object", "nan", "inf", "int-key"],
)
def test_non_json_inputs_and_payloads_from_python_are_refused(p: LocalPlatform, bad: Any) -> None:
    """SPEC 3: values must be JSON-like; "Same limits for inputs ... and signal payloads"."""
    with pytest.raises(InvalidInput):
        p.start("echo", bad, id="x1")
    assert p.runs() == []
    p.start("echo", {}, id="e1")
    journal = p.journal("e1")
    with pytest.raises(InvalidInput):
        p.signal("e1", "data", bad)
    assert p.journal("e1") == journal
    assert p.get("e1").status == "awaiting"


def test_a_function_signal_payload_from_lua_is_refused(p: LocalPlatform) -> None:
    """SPEC 3: "A function ... is refused" — for signal payloads sent from Lua too."""
    p.start("waiter", {}, id="w1")
    out = signal_from_lua(p, "w1", "function")
    assert out["ok"] is False
    assert "function" in out["err"] and "data" in out["err"], out["err"]
    assert p.get("w1").status == "awaiting"
    assert signal_from_lua(p, "w1", "ok") == {"ok": True, "err": True}
    assert p.get("w1").result == {"ok": True}


# --- the 256 KiB limit ------------------------------------------------------------------


def test_input_at_the_limit_is_accepted_and_one_byte_over_is_refused(p: LocalPlatform) -> None:
    """SPEC 3: "Each recorded value is at most 256 KiB encoded; larger is refused with the
    size and the limit. Same limits for inputs" — a JSON string of n chars is n+2 bytes."""
    run = p.start("echo", "x" * (LIMIT - 2), id="at-limit")
    assert run.status == "awaiting"
    with pytest.raises(InvalidInput) as e:
        p.start("echo", "x" * (LIMIT - 1), id="over")
    assert names_size_and_limit(str(e.value), LIMIT + 1, LIMIT + 1), str(e.value)
    assert [r.id for r in p.runs()] == ["at-limit"]


def test_the_limit_counts_encoded_bytes_not_characters(p: LocalPlatform) -> None:
    """SPEC 3: "at most 256 KiB encoded" — "é" is two bytes in UTF-8."""
    p.start("echo", "é" * 131_000, id="fits")  # 262 002 bytes
    with pytest.raises(InvalidInput) as e:
        p.start("echo", "é" * (LIMIT // 2), id="over")  # 131 072 chars, 262 146 bytes
    assert names_size_and_limit(str(e.value), LIMIT + 2, LIMIT + 2), str(e.value)


def test_oversized_signal_payload_from_python_is_refused_with_size_and_limit(p: LocalPlatform) -> None:
    """SPEC 3: "larger is refused with the size and the limit. Same limits for ... signal
    payloads"."""
    p.start("echo", {}, id="e1")
    journal = p.journal("e1")
    with pytest.raises(InvalidInput) as e:
        p.signal("e1", "data", "x" * LIMIT)
    assert names_size_and_limit(str(e.value), LIMIT + 2, LIMIT + 2), str(e.value)
    assert p.journal("e1") == journal
    assert p.get("e1").status == "awaiting"


def test_oversized_signal_payload_from_lua_is_refused_with_size_and_limit(p: LocalPlatform) -> None:
    """SPEC 3: "larger is refused with the size and the limit" — run:signal from a
    handler."""
    p.start("waiter", {}, id="w1")
    out = signal_from_lua(p, "w1", "big", size=LIMIT)
    assert out["ok"] is False
    assert names_size_and_limit(out["err"], LIMIT, LIMIT + 16), out["err"]
    assert p.get("w1").status == "awaiting"


def test_oversized_step_result_is_refused_naming_the_step_size_and_limit(p: LocalPlatform) -> None:
    """SPEC 3: "Each recorded value is at most 256 KiB encoded; larger is refused with the
    size and the limit"."""
    size = LIMIT + 100
    run = p.start("big-step", {"size": size}, id="b1")
    assert run.status == "failed"
    assert "'big'" in (run.error or ""), run.error
    assert names_size_and_limit(run.error, size, size + 16), run.error
    assert not any(e.kind == Kind.STEP_RESULT for e in p.journal("b1"))


def test_step_result_just_under_the_limit_is_recorded(p: LocalPlatform) -> None:
    """SPEC 3: "Each recorded value is at most 256 KiB encoded"."""
    run = p.start("big-step", {"size": LIMIT - 100}, id="b1")
    assert run.status == "completed", run.error
    [recorded] = [e for e in p.journal("b1") if e.kind == Kind.STEP_RESULT]
    assert recorded.data["values"] == ["x" * (LIMIT - 100)]


def start_traced(p: LocalPlatform, workflow: str, size: int) -> tuple[Any, int]:
    """Run ``workflow`` with a value of ``size`` bytes as run "megabytes": the run, and the
    most Python held meanwhile (tracemalloc's peak). A refused run of the limit's size goes
    first, so the path's clients and caches are made outside the measure."""
    p.start(workflow, {"size": LIMIT + 100}, id="warm")
    tracemalloc.start()
    try:
        run = p.start(workflow, {"size": size}, id="megabytes")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return run, peak


def test_a_step_value_of_megabytes_is_refused_before_python_holds_a_copy_of_it(p: LocalPlatform) -> None:
    """A limit at the limits: a step that returns 20 MB (what a 256 MiB Lua state can still
    encode) is refused with its size, and its text never reaches Python. It was copied into
    Python, parsed and measured there (three more copies: a 40 MB value took a worker's
    resident memory from 65 to 332 MB), on a function sized for one state and 128 MB of
    Python values (infra/memory.py)."""
    size = 20_000_000
    run, peak = start_traced(p, "big-step", size)
    assert run.status == "failed", run
    assert f"the result of step 'big' is {size + 2} bytes encoded, over the limit of {LIMIT} bytes" in (
        run.error or ""
    )
    assert peak < size // 4, f"Python held {peak} bytes at its peak for a refused {size}-byte value"


def test_a_step_of_floats_is_held_to_the_limit_at_the_size_it_is_journaled(p: LocalPlatform) -> None:
    """15,000 prices of 19.99 are 90,001 bytes encoded, as the journal keeps them: recorded.
    Lua wrote each float with 17 digits ("19.989999999999998"), and the step was refused as
    285,001 bytes, over the 256 KiB limit, at three times its size."""
    run = p.start("prices", {"n": 15_000, "price": 19.99}, id="prices")
    assert run.status == "completed", run.error
    assert run.result == {"count": 15_000, "first": 19.99}
    [recorded] = [e for e in p.journal("prices") if e.kind == Kind.STEP_RESULT]
    assert len(json.dumps(recorded.data["values"][0], separators=(",", ":"))) == 90_001


def test_a_step_value_of_exactly_256_kib_is_recorded_and_one_byte_more_is_refused(p: LocalPlatform) -> None:
    """SPEC 3: "Each recorded value is at most 256 KiB encoded": the limit is the value's, as
    for an input (a string of LIMIT - 2 characters is LIMIT bytes encoded). The step's values
    travel as one JSON array, and its two brackets were counted: such a value was refused as
    262146 bytes."""
    run = p.start("big-step", {"size": LIMIT - 2}, id="exact")
    assert run.status == "completed", run.error
    [recorded] = [e for e in p.journal("exact") if e.kind == Kind.STEP_RESULT]
    assert recorded.data["values"] == ["x" * (LIMIT - 2)]
    over = p.start("big-step", {"size": LIMIT - 1}, id="over")
    assert over.status == "failed"
    assert f"is {LIMIT + 1} bytes encoded, over the limit of {LIMIT} bytes" in (over.error or "")


def test_oversized_workflow_result_is_refused_with_size_and_limit(p: LocalPlatform) -> None:
    """SPEC 3: "larger is refused with the size and the limit. Same limits for inputs,
    results and signal payloads"."""
    size = LIMIT + 100
    run = p.start("big-return", {"size": size}, id="r1")
    assert run.status == "failed", "an oversized result was recorded"
    assert names_size_and_limit(run.error, size, size + 16), run.error
    assert not any(e.kind == Kind.COMPLETED for e in p.journal("r1"))


def test_a_run_result_of_megabytes_is_refused_before_python_holds_a_copy_of_it(p: LocalPlatform) -> None:
    """As a step's value of megabytes: a workflow that returns 20 MB fails with its size and
    the limit, and its text never reaches Python, where it was copied, parsed and measured
    (a worker sized for one state and 128 MB of Python values could be killed by Lambda
    instead, at every activation the reconciler gave the run)."""
    size = 20_000_000
    run, peak = start_traced(p, "big-return", size)
    assert run.status == "failed", run
    assert f"the result of run 'megabytes' is {size + 2} bytes encoded, over the limit of {LIMIT} bytes" in (
        run.error or ""
    ), run.error
    assert not any(e.kind == Kind.COMPLETED for e in p.journal("megabytes"))
    assert peak < size // 4, f"Python held {peak} bytes at its peak for a refused {size}-byte result"


@pytest.mark.parametrize(
    ("workflow", "what"),
    [("big-signal", "the payload of signal 'data' for run 'w'"), ("big-child", "the input of run 'child'")],
)
def test_a_signal_or_a_start_of_megabytes_is_refused_before_python_holds_a_copy_of_it(
    p: LocalPlatform, workflow: str, what: str
) -> None:
    """As a step's value of megabytes: a step that signals a run, or starts one, with 20 MB
    is refused with its size and the limit, and the text never reaches Python, where it was
    copied, parsed, and written again to be measured."""
    p.start("waiter", None, id="w")
    size = 20_000_000
    run, peak = start_traced(p, workflow, size)
    assert run.status == "failed", run
    assert f"{what} is {size + 2} bytes encoded, over the limit of {LIMIT} bytes" in (run.error or ""), (
        run.error
    )
    assert p.get("w").status == "awaiting" and [r.id for r in p.runs() if r.id == "child"] == []
    assert peak < size // 4, f"Python held {peak} bytes at its peak for a refused {size}-byte value"


def test_oversized_child_input_from_a_step_is_refused(p: LocalPlatform) -> None:
    """SPEC 3: "Same limits for inputs" — a start from inside a step."""
    size = LIMIT + 100
    run = p.start("big-child", {"size": size}, id="parent")
    assert run.status == "failed"
    assert names_size_and_limit(run.error, size, size + 16), run.error
    assert [r.id for r in p.runs()] == ["parent"]
