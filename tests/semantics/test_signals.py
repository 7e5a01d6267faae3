"""Acceptance: the seed's "Signals" section, through LocalPlatform and the seed's own
fetch route."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "spec_signals"
SLASH = "run id must be a non-empty string without '/' (got \"a/b\")"


class Recorder:
    """Stand-ins for the seed's database and Account objects, recording every call."""

    def __init__(self) -> None:
        self.db: list[tuple[str, str, list[Any]]] = []
        self.objects: list[tuple[str, str, str, list[Any]]] = []

    def database(self, name: str, method: str, args: list[Any]) -> list[Any]:
        self.db.append((name, method, args))
        return [{"changes": 1, "last_insert_id": 0}]

    def object(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.objects.append((cls, key, method, args))
        return []


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def p(harness: Any, tmp_path: Path, rec: Recorder):
    with harness(PROJECT, data_dir=tmp_path, services={"database": rec.database}, objects=rec.object) as plat:
        yield plat


def consumptions(p: LocalPlatform, run_id: str) -> list:
    return [e for e in p.journal(run_id) if e.kind == Kind.WAIT_DONE and e.data.get("by") == "signal"]


# --- buffering and order ----------------------------------------------------------------


def test_signal_sent_before_the_wait_is_consumed_when_the_run_gets_there(p: LocalPlatform) -> None:
    """SPEC 3: "A signal that arrives before the run waits for it is kept and consumed
    when the run reaches a wait for that name"."""
    p.start("late-waiter", {"waits": 1}, id="w1")
    assert p.get("w1").status == "sleeping"
    assert p.signal("w1", "paid", {"by": "ada"}) is True
    assert p.get("w1").status == "sleeping"  # a signal does not cut a sleep short
    assert consumptions(p, "w1") == []
    p.advance("1h")
    run = p.get("w1")
    assert run.status == "completed"
    assert run.result == [{"by": "ada"}]


def test_each_wait_consumes_the_earliest_unconsumed_signal_of_its_name(p: LocalPlatform) -> None:
    """SPEC 3: "Each wait consumes the earliest unconsumed signal of its name; the
    consumption is journaled"."""
    p.start("late-waiter", {"waits": 3}, id="w1")
    for n in (1, 2, 3):
        p.signal("w1", "paid", {"n": n})
    p.advance("1h")
    run = p.get("w1")
    assert run.result == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert [e.data["payload"] for e in consumptions(p, "w1")] == [{"n": 1}, {"n": 2}, {"n": 3}]
    ids = [e.data["signal_id"] for e in consumptions(p, "w1")]
    assert len(set(ids)) == 3


def test_a_wait_with_no_signal_left_times_out_even_after_earlier_ones_were_consumed(
    p: LocalPlatform,
) -> None:
    """SPEC 3: "Each wait consumes the earliest unconsumed signal of its name" — a
    consumed signal is never handed to a second wait."""
    p.start("late-waiter", {"waits": 2}, id="w1")
    p.signal("w1", "paid", {"n": 1})
    p.advance("1h")
    assert p.get("w1").status == "awaiting"
    p.advance("1h")
    assert p.get("w1").result == [{"n": 1}, "timeout"]


# --- duplicates -------------------------------------------------------------------------


@pytest.mark.parametrize("cache_size", [256, 0])
def test_duplicate_signal_is_set_aside_and_never_breaks_replay(
    harness: Any, tmp_path: Path, cache_size: int
) -> None:
    """Seed: "Duplicate signals are safe. An unconsumed extra is set aside rather than
    breaking replay, which matters because buttons get clicked twice."""
    with harness(PROJECT, data_dir=tmp_path, cache_size=cache_size) as p:
        p.start("pay-once", {}, id="d1")
        assert p.signal("d1", "paid", {"click": 1}) is True
        assert p.signal("d1", "paid", {"click": 2}) is True
        assert p.get("d1").status == "sleeping"
        journal = p.journal("d1")
        p.restart()
        assert p.journal("d1") == journal
        assert p.signal("d1", "paid", {"click": 3}) is True  # clicked again, later
        assert p.get("d1").status == "sleeping"
        p.advance("1h")
        run = p.get("d1")
        assert run.status == "completed", run.error
        assert run.result == {"p": {"click": 1}, "stamp": "stepped"}
        [consumed] = consumptions(p, "d1")
        assert consumed.data["payload"] == {"click": 1}
        assert len([e for e in p.journal("d1") if e.kind == Kind.STEP_INTENT]) == 1
        p.restart()
        assert p.get("d1").status == "completed"
        assert p.get("d1").result == {"p": {"click": 1}, "stamp": "stepped"}


# --- signal's return value --------------------------------------------------------------


def test_signal_returns_true_for_a_live_run(p: LocalPlatform) -> None:
    """SPEC 3: "run:signal(...) -- true if a live run got it"."""
    p.start("late-waiter", {"waits": 1}, id="sleeping")
    p.start("pay-once", {}, id="awaiting")
    p.start("breaks", {}, id="failed")
    assert p.get("failed").status == "failed"
    assert p.signal("sleeping", "paid", {}) is True
    assert p.signal("awaiting", "other", {}) is True
    assert p.signal("failed", "paid", {}) is True  # failed has not ended: it can resume


def test_signal_returns_false_for_a_completed_run_and_changes_nothing(p: LocalPlatform) -> None:
    """SPEC 3: "false if the run has ended (the signal is set aside)"."""
    p.start("quick", {}, id="q1")
    assert p.get("q1").status == "completed"
    journal = p.journal("q1")
    assert p.signal("q1", "paid", {"by": "ada"}) is False
    assert p.get("q1").status == "completed"
    assert p.get("q1").result == "done"
    assert p.journal("q1") == journal


def test_signal_returns_false_for_a_cancelled_run_and_changes_nothing(p: LocalPlatform) -> None:
    """SPEC 3: "false if the run has ended (the signal is set aside)"."""
    p.start("pay-once", {}, id="c1")
    p.cancel("c1")
    journal = p.journal("c1")
    assert p.signal("c1", "paid", {"by": "ada"}) is False
    assert p.get("c1").status == "cancelled"
    assert p.journal("c1") == journal


# --- run ids ----------------------------------------------------------------------------


def test_signal_to_a_run_id_with_a_slash_is_refused_with_the_spec_message(p: LocalPlatform) -> None:
    """Seed: "A run id is a non-empty string without /." SPEC 3: refused with
    `run id must be a non-empty string without '/' (got "a/b")`."""
    with pytest.raises(InvalidInput) as e:
        p.signal("a/b", "paid", {})
    assert str(e.value) == SLASH


def test_start_with_a_slash_in_the_id_is_refused_with_the_spec_message(p: LocalPlatform) -> None:
    """Seed: "A run id is a non-empty string without /." """
    with pytest.raises(InvalidInput) as e:
        p.start("quick", {}, id="a/b")
    assert str(e.value) == SLASH
    assert p.runs() == []


def test_empty_run_id_is_refused(p: LocalPlatform) -> None:
    """Seed: "A run id is a non-empty string without /." """
    with pytest.raises(InvalidInput) as e:
        p.start("quick", {}, id="")
    assert str(e.value) == "run id must be a non-empty string without '/' (got \"\")"
    with pytest.raises(InvalidInput):
        p.signal("", "paid", {})


def test_route_addressing_a_run_id_with_a_slash_fails_with_the_spec_message(
    p: LocalPlatform, rec: Recorder
) -> None:
    """Seed: "A run id is a non-empty string without /." — refused from Lua too."""
    p.start("settle-sale", {"id": "lot-42", "winner": "ada", "price": 25}, id="sale-lot-42")
    resp = p.fetch("POST", "/api/sale/pay", body=json.dumps({"id": "x/y", "user": "ada"}))
    assert resp.status_code == 500
    messages = [r["message"] for r in p.logs if r.get("level") == "error"]
    assert any(
        m.endswith("run id must be a non-empty string without '/' (got \"sale-x/y\")") for m in messages
    ), messages
    assert p.get("sale-lot-42").status == "awaiting"


# --- the seed's fetch route -------------------------------------------------------------


def test_seed_fetch_route_signals_the_run_it_names(p: LocalPlatform, rec: Recorder) -> None:
    """Seed: "Signals come from outside the run, addressed by the run id" — the seed's
    route `settle:get("sale-" .. body.id):signal("paid", { by = body.user })`."""
    run = p.start("settle-sale", {"id": "lot-42", "winner": "ada", "price": 25}, id="sale-lot-42")
    assert run.status == "awaiting"
    assert rec.objects == [("Account", "ada", "notify", ["pay-up", {"price": 25}])]
    resp = p.fetch("POST", "/api/sale/pay", body='{"id":"lot-42","user":"ada"}')
    assert resp.status_code == 200
    run = p.get("sale-lot-42")
    assert run.status == "completed"
    assert run.result == {"outcome": "settled"}
    assert rec.db == [("sales", "exec", ["UPDATE sales SET state = 'settled' WHERE id = ?", ["lot-42"]])]
    [consumed] = consumptions(p, "sale-lot-42")
    assert consumed.data["signal"] == "paid"
    assert consumed.data["payload"] == {"by": "ada"}


def test_seed_fetch_route_clicked_twice_is_safe(p: LocalPlatform, rec: Recorder) -> None:
    """Seed: "Duplicate signals are safe ... because buttons get clicked twice"."""
    p.start("settle-sale", {"id": "lot-42", "winner": "ada", "price": 25}, id="sale-lot-42")
    body = '{"id":"lot-42","user":"ada"}'
    assert p.fetch("POST", "/api/sale/pay", body=body).status_code == 200
    assert p.fetch("POST", "/api/sale/pay", body=body).status_code == 200
    run = p.get("sale-lot-42")
    assert run.status == "completed"
    assert run.result == {"outcome": "settled"}
    assert len(rec.db) == 1
    assert len(consumptions(p, "sale-lot-42")) == 1


def test_seed_workflow_voids_after_72h_without_payment(p: LocalPlatform, rec: Recorder) -> None:
    """Seed: `wf:race({ "paid", "cancelled" }, { timeout = "72h" })` then the void step."""
    p.start("settle-sale", {"id": "lot-42", "winner": "ada", "price": 25}, id="sale-lot-42")
    p.advance("71h59m")
    assert p.get("sale-lot-42").status == "awaiting"
    p.advance("1m")
    run = p.get("sale-lot-42")
    assert run.result == {"outcome": "void"}
    assert rec.db == [("sales", "exec", ["UPDATE sales SET state = 'void' WHERE id = ?", ["lot-42"]])]
    # The route now reaches an ended run: the signal is set aside and nothing changes.
    journal = p.journal("sale-lot-42")
    assert p.fetch("POST", "/api/sale/pay", body='{"id":"lot-42","user":"ada"}').status_code == 200
    assert p.journal("sale-lot-42") == journal
    assert len(rec.db) == 1


def test_seed_fetch_route_for_a_missing_run_fails_naming_it(p: LocalPlatform) -> None:
    """SPEC 3: "`get` of an id with no run returns a handle whose calls fail with
    `no run 'sale-9' of workflow 'settle-sale'`"."""
    resp = p.fetch("POST", "/api/sale/pay", body='{"id":"9","user":"ada"}')
    assert resp.status_code == 500
    messages = [r["message"] for r in p.logs if r.get("level") == "error"]
    assert any(m.endswith("no run 'sale-9' of workflow 'settle-sale'") for m in messages), messages


@pytest.mark.parametrize("cache_size", [256, 0])
def test_a_signal_after_a_timeout_does_not_change_the_recorded_outcome(
    harness: Any, tmp_path: Path, cache_size: int
) -> None:
    """Seed: "An unconsumed extra is set aside rather than breaking replay" — a signal that
    arrives after its wait timed out stays unconsumed; replay still sees the timeout."""
    with harness(PROJECT, data_dir=tmp_path, cache_size=cache_size) as p:
        p.start("late-signal", {}, id="l1")
        p.advance("1h")
        assert p.get("l1").status == "sleeping"
        assert p.signal("l1", "paid", {"late": True}) is True
        p.restart()
        p.advance("1h")
        run = p.get("l1")
        assert run.status == "completed", run.error
        assert run.result == {"timed_out": True}
        assert consumptions(p, "l1") == []
