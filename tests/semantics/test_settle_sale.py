"""The seed's settle-sale workflow, exactly as printed (tests/projects/seed_auction/sale.lua),
run through LocalPlatform with stand-ins for `database "sales"` and `objects "Account"`.

"Start a run with an id you choose. The id is the run's identity, so a retried start
joins the run instead of making a second one."
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ServiceUnavailable
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "seed_auction"

SALE = {"id": "lot-42", "winner": "ada", "price": 25}
SETTLE_SQL = "UPDATE sales SET state = 'settled' WHERE id = ?"
VOID_SQL = "UPDATE sales SET state = 'void' WHERE id = ?"
NOTIFY = ("Account", "ada", "notify", ["pay-up", {"price": 25}])


class World:
    """Stand-ins: ``database`` records every call; ``objects`` records every object call
    and fails the first ``notify_failures`` notifications."""

    def __init__(self) -> None:
        self.sql: list[tuple[str, str, list[Any]]] = []
        self.object_calls: list[tuple[str, str, str, list[Any]]] = []
        self.notify_failures = 0

    def database(self, name: str, method: str, args: list[Any]) -> list[Any]:
        self.sql.append((name, method, args))
        return [{"changes": 1, "last_insert_id": None}]

    def objects(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.object_calls.append((cls, key, method, args))
        if self.notify_failures > 0:
            self.notify_failures -= 1
            raise ServiceUnavailable("the mail relay is down")
        return []


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def p(harness: Any, tmp_path: Path, world: World):
    with harness(
        PROJECT, data_dir=tmp_path / "data", services={"database": world.database}, objects=world.objects
    ) as platform:
        yield platform


def start(p: LocalPlatform):
    return p.start("settle-sale", SALE, id="sale-lot-42")


def test_start_notifies_the_winner_and_awaits_the_race(p: LocalPlatform, world: World) -> None:
    """The first step tells the winner to pay, then the run waits on the race."""
    run = start(p)
    assert run.status == "awaiting"
    assert run.current_step == "race ('paid', 'cancelled')"
    assert world.object_calls == [NOTIFY]
    assert world.sql == []


def test_paid_settles_the_sale(p: LocalPlatform, world: World) -> None:
    """`paid` wins the race: the settle step runs its UPDATE and the run returns
    `{ outcome = "settled" }`."""
    start(p)
    assert p.signal("sale-lot-42", "paid", {"by": "ada"}) is True
    run = p.get("sale-lot-42")
    assert run.status == "completed"
    assert run.result == {"outcome": "settled"}
    assert world.sql == [("sales", "exec", [SETTLE_SQL, ["lot-42"]])]
    assert world.object_calls == [NOTIFY]


def test_paid_through_the_seed_fetch_route(p: LocalPlatform, world: World) -> None:
    """The seed's "Signals" route: `settle:get("sale-" .. body.id):signal("paid", ...)`."""
    start(p)
    resp = p.fetch("POST", "/api/sale/pay", body='{"id":"lot-42","user":"ada"}')
    assert resp.status_code == 200
    assert p.get("sale-lot-42").result == {"outcome": "settled"}
    done = next(e for e in p.journal("sale-lot-42") if e.kind == "wait.done")
    assert (done.data["signal"], done.data["payload"]) == ("paid", {"by": "ada"})
    assert world.sql == [("sales", "exec", [SETTLE_SQL, ["lot-42"]])]


def test_cancelled_voids_the_sale(p: LocalPlatform, world: World) -> None:
    """`cancelled` wins the race: `which ~= "paid"`, so the void step runs and the run
    returns `{ outcome = "void" }`."""
    start(p)
    p.signal("sale-lot-42", "cancelled", {"reason": "withdrawn"})
    run = p.get("sale-lot-42")
    assert run.status == "completed"
    assert run.result == {"outcome": "void"}
    assert world.sql == [("sales", "exec", [VOID_SQL, ["lot-42"]])]


def test_no_signal_for_72h_voids_the_sale(p: LocalPlatform, world: World) -> None:
    """`wf:race({ "paid", "cancelled" }, { timeout = "72h" })`: nothing arrives, the race
    times out (which is nil) and the sale is void — at 72h, not before."""
    start(p)
    p.advance("71h59m59s")
    assert p.get("sale-lot-42").status == "awaiting"
    assert world.sql == []
    p.advance("1s")
    run = p.get("sale-lot-42")
    assert run.status == "completed"
    assert run.result == {"outcome": "void"}
    assert world.sql == [("sales", "exec", [VOID_SQL, ["lot-42"]])]


def test_signal_after_the_timeout_finds_the_run_ended(p: LocalPlatform, world: World) -> None:
    """A late payment cannot settle a voided sale: the signal reports no live run."""
    start(p)
    p.advance("72h")
    assert p.signal("sale-lot-42", "paid", {"by": "ada"}) is False
    assert p.get("sale-lot-42").result == {"outcome": "void"}
    assert [s[2][0] for s in world.sql] == [VOID_SQL]


def test_paid_then_cancelled_settles(p: LocalPlatform, world: World) -> None:
    """The race takes the name that arrived first; a later `cancelled` changes nothing."""
    start(p)
    p.signal("sale-lot-42", "paid", {"by": "ada"})
    assert p.signal("sale-lot-42", "cancelled", None) is False
    assert p.get("sale-lot-42").result == {"outcome": "settled"}
    assert [s[2][0] for s in world.sql] == [SETTLE_SQL]


def test_notify_is_retried_three_attempts_in_total(p: LocalPlatform, world: World) -> None:
    """`wf:step("notify", { retries = 3 }, ...)`: two failed notifications, a third that
    goes through, and the sale goes on."""
    world.notify_failures = 2
    start(p)
    assert p.get("sale-lot-42").status == "sleeping"
    p.advance("6s")
    assert world.object_calls == [NOTIFY, NOTIFY, NOTIFY]
    assert p.get("sale-lot-42").status == "awaiting"


def test_notify_failing_three_times_fails_the_run(p: LocalPlatform, world: World) -> None:
    """A fourth attempt is never made; the run parks as failed."""
    world.notify_failures = 5
    start(p)
    p.advance("1h")
    run = p.get("sale-lot-42")
    assert run.status == "failed"
    # A host error is raised at the user's call site, so it carries the script and line.
    assert run.error == "step 'notify' failed after 3 attempts: sale.lua:6: the mail relay is down"
    assert len(world.object_calls) == 3


def test_whole_settled_run_journal(p: LocalPlatform) -> None:
    """The journal of a settled sale, as the console shows it: each step's intent and
    result, the race and what ended it, the return."""
    start(p)
    p.signal("sale-lot-42", "paid", {"by": "ada"})
    assert [(e.kind, e.name) for e in p.journal("sale-lot-42")] == [
        ("run.started", "settle-sale"),
        ("step.intent", "notify"),
        ("step.result", "notify"),
        ("wait", "race"),
        ("wait.done", "race"),
        ("step.intent", "settle"),
        ("step.result", "settle"),
        ("run.completed", None),
    ]


def test_sale_survives_a_restart_while_awaiting(p: LocalPlatform, world: World) -> None:
    """ "pause for days and resume where it stopped, including across crashes": the
    winner is notified once, however often the platform restarts."""
    start(p)
    p.advance("24h")
    p.restart()
    p.advance("24h")
    p.restart()
    p.signal("sale-lot-42", "paid", {"by": "ada"})
    assert p.get("sale-lot-42").result == {"outcome": "settled"}
    assert world.object_calls == [NOTIFY]


def test_timeout_still_fires_after_a_restart(p: LocalPlatform, world: World) -> None:
    """The race's 72h timer is journal rows and a timer: it fires after a restart."""
    start(p)
    p.restart()
    p.advance("72h")
    assert p.get("sale-lot-42").result == {"outcome": "void"}


# --- a retried start joins the run ---------------------------------------------------


def test_second_start_from_python_joins_the_run(p: LocalPlatform, world: World) -> None:
    """ "a retried start joins the run instead of making a second one"; SPEC 3: "the
    input of the second start is ignored"."""
    first = start(p)
    second = p.start("settle-sale", {"id": "lot-42", "winner": "bob", "price": 99}, id="sale-lot-42")
    assert second.id == first.id == "sale-lot-42"
    assert second.input == SALE
    assert len(p.runs(workflow="settle-sale")) == 1
    assert [e.kind for e in p.journal("sale-lot-42")].count("run.started") == 1
    assert world.object_calls == [NOTIFY]


def test_second_start_from_a_fetch_handler_joins_the_run(p: LocalPlatform, world: World) -> None:
    """The seed's `settle:start({ id = "lot-42", ... }, { id = "sale-lot-42" })`, from a
    fetch handler, twice: one run, one journal."""
    a = p.fetch("POST", "/api/sale/start")
    b = p.fetch("POST", "/api/sale/start")
    assert (a.status_code, a.body) == (200, "sale-lot-42")
    assert (b.status_code, b.body) == (200, "sale-lot-42")
    assert [r.id for r in p.runs()] == ["sale-lot-42"]
    assert p.get("sale-lot-42").input == SALE
    assert [e.kind for e in p.journal("sale-lot-42")].count("run.started") == 1
    assert world.object_calls == [NOTIFY]


def test_fetch_start_and_python_start_join_each_other(p: LocalPlatform, world: World) -> None:
    """Either order, from a fetch handler and from Python: the same run."""
    p.fetch("POST", "/api/sale/start")
    run = start(p)
    assert run.id == "sale-lot-42"
    assert run.status == "awaiting"
    p.fetch("POST", "/api/sale/start")
    assert len(p.runs()) == 1
    p.signal("sale-lot-42", "paid", {"by": "ada"})
    assert p.get("sale-lot-42").result == {"outcome": "settled"}
    assert world.object_calls == [NOTIFY]
    assert world.sql == [("sales", "exec", [SETTLE_SQL, ["lot-42"]])]


def test_start_after_completion_joins_the_finished_run(p: LocalPlatform, world: World) -> None:
    """The id stays the run's identity after it ends: a retried start returns the
    completed run and runs nothing again."""
    start(p)
    p.signal("sale-lot-42", "paid", {"by": "ada"})
    again = p.fetch("POST", "/api/sale/start")
    assert again.body == "sale-lot-42"
    run = start(p)
    assert (run.status, run.result) == ("completed", {"outcome": "settled"})
    assert world.object_calls == [NOTIFY]
    assert len(world.sql) == 1
