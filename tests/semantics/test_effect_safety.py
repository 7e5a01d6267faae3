"""The seed's "Making an effect safe to repeat", through LocalPlatform.

"wf.step_id names the effect the body is performing, so the outside world can recognise a
repeat", with its table (a crash between the effect and its recorded result, a retry
after a recorded failure, the same step name reached again in a loop, outside a step body)
and SPEC 3's shape `<run id>/<step name>/<pass>/<attempt>`.

``Payments("desk"):charge(amount, wf.step_id)`` is an object stand-in: the outside world
that sees each effect and the step id it was performed under.

The crash row is proved here in-process by copying the committed store while the body is
performing its effect (an SQLite online backup: exactly what a crash at that instant
leaves on disk) and opening a second platform on the copy. The real-process crash test
(kill -9 of `lunaflow dev`) lives with the e2e tests.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime.store.sqlite import STORE_FILE
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "seed_effects"

OUTSIDE = "wf.step_id is only available inside a step body"


class World:
    """Objects stand-in for Payments and Receipts: records every effect and its step id.
    A charge is declined while its call number is in ``decline``."""

    def __init__(self) -> None:
        self.charges: list[tuple[Any, str]] = []
        self.receipts: list[tuple[str, Any]] = []
        self.decline: set[int] = set()
        self.on_charge: Any = None

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        if cls == "Receipts":
            self.receipts.append((key, args[0]))
            return [{"receipt": key}]
        assert (cls, key, method) == ("Payments", "desk", "charge")
        amount, step_id = args
        self.charges.append((amount, step_id))
        if self.on_charge is not None:
            self.on_charge(step_id)
        if len(self.charges) in self.decline:
            return [{"declined": True}]
        return [{"charged": amount, "ref": step_id}]

    def step_ids(self) -> list[str]:
        return [sid for _, sid in self.charges]


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def p(harness: Any, tmp_path: Path, world: World):
    with harness(PROJECT, data_dir=tmp_path / "data", objects=world) as platform:
        yield platform


# --- the shape -------------------------------------------------------------------------


def test_step_id_has_the_reference_shape(p: LocalPlatform) -> None:
    """SPEC 3: "Its shape is `<run id>/<step name>/<pass>/<attempt>`, e.g.
    `sale-lot-42/charge/1/2`" — the first attempt of the first pass is `/1/1`."""
    assert p.start("shape", None, id="sale-lot-42").result == "sale-lot-42/charge/1/1"


def test_step_id_is_journaled_with_the_intent(p: LocalPlatform, world: World) -> None:
    """The console's timeline shows step ids: the intent carries the id the body saw."""
    p.start("charge", {"price": 25}, id="sale-lot-42")
    intent = next(e for e in p.journal("sale-lot-42") if e.kind == "step.intent")
    assert intent.data["step_id"] == "sale-lot-42/charge/1/1"
    assert (intent.data["pass"], intent.data["attempt"]) == (1, 1)
    assert world.step_ids() == ["sale-lot-42/charge/1/1"]


def test_step_id_is_a_usable_key(p: LocalPlatform, world: World) -> None:
    """ "The same string works anywhere a repeat needs recognising: a row id, an object
    key, a filename.\""""
    result = p.start("keyed", {"order": 7}, id="order-7").result
    assert world.receipts == [("order-7/receipt/1/1", {"order": 7})]
    assert result == {"receipt": "order-7/receipt/1/1"}


# --- across a crash between the effect and its recorded result ------------------------


def _copy_store(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src / STORE_FILE) as a, sqlite3.connect(dst / STORE_FILE) as b:
        a.backup(b)
    a.close()
    b.close()


def test_step_id_stays_the_same_across_a_crash_after_the_effect(tmp_path: Path, world: World) -> None:
    """ "a crash between the effect and its recorded result — stays the same, so the
    repeat is recognised": the store as it stood while the body performed its effect
    (intent written, result not) is reopened; the body runs again under the same id."""
    crashed = tmp_path / "crashed"

    def snapshot_once(step_id: str) -> None:
        if not crashed.exists():
            _copy_store(tmp_path / "live", crashed)

    world.on_charge = snapshot_once
    with LocalPlatform(PROJECT, data_dir=tmp_path / "live", objects=world) as live:
        assert live.start("charge", {"price": 25}, id="sale-lot-42").status == "completed"

    # What the crash left: the intent, and no outcome; the run was mid-activation.
    with sqlite3.connect(crashed / STORE_FILE) as db:
        kinds = [
            r[0]
            for r in db.execute("SELECT kind FROM journal WHERE run_id = ? ORDER BY seq", ("sale-lot-42",))
        ]
        status = db.execute("SELECT status FROM runs WHERE id = ?", ("sale-lot-42",)).fetchone()[0]
    db.close()
    assert kinds == ["run.started", "step.intent"]
    assert status == "running"

    again = World()
    with LocalPlatform(PROJECT, data_dir=crashed, objects=again) as recovered:
        run = recovered.get("sale-lot-42")
        assert run.status == "completed"
        assert again.step_ids() == ["sale-lot-42/charge/1/1"]
        assert again.step_ids() == world.step_ids()
        assert [e.kind for e in recovered.journal("sale-lot-42")].count("step.intent") == 1
        assert run.result == {"charged": 25, "ref": "sale-lot-42/charge/1/1"}


# --- across a retry after a recorded failure ------------------------------------------


def test_step_id_changes_after_a_recorded_failure(p: LocalPlatform, world: World) -> None:
    """ "a retry after a recorded failure — changes, because that attempt is a new
    effect"."""
    world.decline = {1, 2}
    p.start("charge", {"price": 25}, id="sale-lot-42")
    p.advance("1m")
    assert world.step_ids() == [
        "sale-lot-42/charge/1/1",
        "sale-lot-42/charge/1/2",
        "sale-lot-42/charge/1/3",
    ]
    assert p.get("sale-lot-42").result == {"charged": 25, "ref": "sale-lot-42/charge/1/3"}


def test_step_id_changes_after_resume(p: LocalPlatform, world: World) -> None:
    """A resumed step's attempt is a new effect too: attempts go on counting, so the id
    after resume is one no earlier attempt used."""
    world.decline = {1, 2, 3}
    p.start("charge", {"price": 25}, id="sale-lot-42")
    p.advance("1m")
    assert p.get("sale-lot-42").status == "failed"
    p.resume("sale-lot-42")
    assert world.step_ids()[-1] == "sale-lot-42/charge/1/4"
    assert len(set(world.step_ids())) == 4
    assert p.get("sale-lot-42").status == "completed"


def test_step_id_is_not_reused_after_restart(p: LocalPlatform, world: World) -> None:
    """The attempt number comes from the journal: a retry after a restart still gets a
    new id."""
    world.decline = {1}
    p.start("charge", {"price": 25}, id="sale-lot-42")
    p.restart()
    p.advance("1s")
    assert world.step_ids() == ["sale-lot-42/charge/1/1", "sale-lot-42/charge/1/2"]


# --- the same step name reached again, in a loop --------------------------------------


def test_step_id_changes_on_each_loop_pass(p: LocalPlatform, world: World) -> None:
    """ "the same step name reached again, in a loop — changes, because each pass is its
    own effect"; SPEC: "pass counts how many times this run has reached a step of that
    name"."""
    result = p.start("loop", {"price": 10}, id="sale-9").result
    assert world.step_ids() == ["sale-9/charge/1/1", "sale-9/charge/2/1", "sale-9/charge/3/1"]
    assert [r["ref"] for r in result] == world.step_ids()
    between = [
        e.data["step_id"] for e in p.journal("sale-9") if e.kind == "step.intent" and e.name == "between"
    ]
    assert between == ["sale-9/between/1/1", "sale-9/between/2/1", "sale-9/between/3/1"]


def test_step_id_counts_pass_and_attempt_independently(p: LocalPlatform, world: World) -> None:
    """Pass and attempt are separate counters: pass 2's retry is `/2/2`."""
    world.decline = {1, 3}
    p.start("loop-retry", None, id="lr")
    p.advance("1m")
    assert world.step_ids() == ["lr/charge/1/1", "lr/charge/1/2", "lr/charge/2/1", "lr/charge/2/2"]
    assert p.get("lr").status == "completed"


# --- outside a step body --------------------------------------------------------------


def test_step_id_outside_a_body_is_an_error(p: LocalPlatform) -> None:
    """ "outside a step body — an error; there is no effect to name"; SPEC: "Read outside
    a step body it raises `wf.step_id is only available inside a step body`" — before
    any step and after one."""
    result = p.start("outside", None, id="o-1").result
    assert result["ok"] is False and result["ok_after"] is False
    for err in (result["err"], result["err_after"]):
        assert re.fullmatch(r"main\.lua:\d+: " + re.escape(OUTSIDE), err), err


def test_step_id_outside_a_body_fails_the_run(p: LocalPlatform) -> None:
    """Uncaught, the error fails the run with the reference's message."""
    run = p.start("outside-raw", None, id="o-2")
    assert run.status == "failed"
    assert re.fullmatch(r"main\.lua:\d+: " + re.escape(OUTSIDE), run.error or ""), run.error
