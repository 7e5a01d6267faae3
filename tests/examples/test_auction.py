"""examples/auction through both harnesses (LocalPlatform, AwsPlatform) with its real
services (the sales database, the Account, Payments and Registrar objects): the routes of
api.lua, the settle-sale workflow of the seed (sale.lua) and the pay-sale workflow (pay.lua).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.testing import AwsPlatform, LocalPlatform
from tests.support import databases

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auction"


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest) -> Iterator[LocalPlatform]:
    """The example on both harnesses: in-process on SQLite, and through the Lambda handlers
    on a moto server (its database through the Data API, answered over SQLite)."""
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    # No data folder given: the harness's own, whose sales database goes on the process's
    # scratch server (a CREATE DATABASE, where a folder given made a PostgreSQL cluster
    # copied and started for each test, most of its time).
    with harness(EXAMPLE) as platform:
        yield platform


def _post(p: LocalPlatform, path: str, value: Any) -> tuple[int, Any]:
    r = p.fetch("POST", path, body=json.dumps(value), headers={"content-type": "application/json"})
    return r.status_code, json.loads(r.body)


def _open(p: LocalPlatform, sale_id: str = "lot-42", winner: str = "ada", price: int = 25) -> None:
    assert _post(p, "/api/sale", {"id": sale_id, "winner": winner, "price": price}) == (
        201,
        {"sale": sale_id, "run": f"sale-{sale_id}"},
    )


def _pay(p: LocalPlatform, sale_id: str = "lot-42", user: str = "ada") -> tuple[int, Any]:
    return _post(p, "/api/sale/pay", {"id": sale_id, "user": user})


def _sale(p: LocalPlatform, sale_id: str = "lot-42") -> Any:
    r = p.fetch("GET", f"/api/sale/{sale_id}")
    assert r.status_code == 200, r
    assert r.headers["content-type"] == "application/json"
    return json.loads(r.body)


def _ledger(p: LocalPlatform) -> dict[str, Any]:
    r = p.fetch("GET", "/api/payments")
    assert r.status_code == 200, r
    value = json.loads(r.body)
    return {} if value == [] else value  # an empty Lua table encodes as []


def _table(p: LocalPlatform) -> dict[str, str]:
    folder = p.data_dir / "db" if isinstance(p, AwsPlatform) else p.data_dir
    return dict(databases.rows(folder, "sales", "SELECT id, state FROM sales"))


def _kinds(p: LocalPlatform, run_id: str) -> list[tuple[str, str | None]]:
    return [(e.kind, e.name) for e in p.journal(run_id)]


# --- open, pay, settle -----------------------------------------------------------------


def test_opening_a_sale_notifies_the_winner_and_awaits_payment(p: LocalPlatform) -> None:
    """Seed: settle-sale notifies the winner in a step, then races "paid" and "cancelled"."""
    _open(p)
    run = p.get("sale-lot-42")
    assert (run.workflow, run.status, run.input) == (
        "settle-sale",
        "awaiting",
        {"id": "lot-42", "winner": "ada", "price": 25},
    )
    assert _sale(p) == {
        "sale": {"id": "lot-42", "winner": "ada", "price": 25, "state": "open"},
        "run": {"id": "sale-lot-42", "status": "awaiting"},
    }
    assert _table(p) == {"lot-42": "open"}
    notified = [entry for entry in p.logs if entry["message"] == "notify ada"]
    assert len(notified) == 1
    assert notified[0]["fields"] == {"kind": "pay-up", "fields": {"price": 25}}


def test_paying_charges_once_signs_and_settles_the_sale(p: LocalPlatform) -> None:
    """Seed: "Reach the network by calling an object from a step"; the charge is keyed by
    wf.step_id, whose shape is `<run id>/<step name>/<pass>/<attempt>` (SPEC 3)."""
    _open(p)
    assert _pay(p) == (202, {"sale": "lot-42", "run": "pay-lot-42"})
    pay = p.get("pay-lot-42")
    assert (pay.workflow, pay.status) == ("pay-sale", "completed")
    ledger = _ledger(p)
    assert list(ledger) == ["pay-lot-42/charge/1/1"]
    receipt = ledger["pay-lot-42/charge/1/1"]
    assert receipt["amount"] == 25 and receipt["repeats"] == 0 and receipt["key"] == "pay-lot-42/charge/1/1"
    assert re.fullmatch(r"rcpt-[0-9a-f]{12}", receipt["id"])
    assert pay.result["receipt"] == receipt["id"]
    assert re.fullmatch(r"[0-9a-f]{64}", pay.result["signature"])
    assert _sale(p) == {
        "sale": {"id": "lot-42", "winner": "ada", "price": 25, "state": "settled"},
        "run": {"id": "sale-lot-42", "status": "completed", "result": {"outcome": "settled"}},
    }
    assert _table(p) == {"lot-42": "settled"}
    assert p.get("sale-lot-42").result == {"outcome": "settled"}


def test_the_settled_sale_journal_records_each_step_and_the_paid_signal(p: LocalPlatform) -> None:
    """Seed: "Each step, signal and timer is journaled before it takes effect." """
    _open(p)
    _pay(p, user="ada")
    assert _kinds(p, "sale-lot-42") == [
        (Kind.STARTED, "settle-sale"),
        (Kind.STEP_INTENT, "record"),
        (Kind.STEP_RESULT, "record"),
        (Kind.STEP_INTENT, "notify"),
        (Kind.STEP_RESULT, "notify"),
        (Kind.WAIT, "race"),
        (Kind.WAIT_DONE, "race"),
        (Kind.STEP_INTENT, "settle"),
        (Kind.STEP_RESULT, "settle"),
        (Kind.VALUE_SET, "state"),
        (Kind.COMPLETED, None),
    ]
    assert p.values("sale-lot-42") == {"state": "settled"}
    assert [r.id for r in p.find("state=settled")] == ["sale-lot-42"]
    done = next(e for e in p.journal("sale-lot-42") if e.kind == Kind.WAIT_DONE)
    receipt = p.get("pay-lot-42").result["receipt"]
    assert done.data["signal"] == "paid"
    assert done.data["payload"] == {"by": "ada", "receipt": receipt}
    assert [(e.kind, e.name) for e in p.journal("pay-lot-42") if e.kind == Kind.STEP_RESULT] == [
        (Kind.STEP_RESULT, "hold"),
        (Kind.STEP_RESULT, "charge"),
        (Kind.STEP_RESULT, "sign"),
        (Kind.STEP_RESULT, "tell-sale"),
    ]


def test_reopening_a_sale_joins_its_run(p: LocalPlatform) -> None:
    """Seed: "The id is the run's identity, so a retried start joins the run instead of
    making a second one." SPEC 3: "the input of the second start is ignored"."""
    _open(p, price=25)
    _open(p, price=99)
    assert [r.id for r in p.runs(workflow="settle-sale")] == ["sale-lot-42"]
    assert p.get("sale-lot-42").input["price"] == 25
    assert _sale(p)["sale"]["price"] == 25
    assert len([e for e in p.logs if e["message"] == "notify ada"]) == 1


# --- cancel and timeout ----------------------------------------------------------------


def test_cancelling_voids_the_sale(p: LocalPlatform) -> None:
    """Seed: `if which ~= "paid"` the run voids the sale and returns { outcome = "void" }."""
    _open(p)
    assert _post(p, "/api/sale/cancel", {"id": "lot-42", "user": "clerk"}) == (
        202,
        {"sale": "lot-42", "delivered": True},
    )
    assert _sale(p) == {
        "sale": {"id": "lot-42", "winner": "ada", "price": 25, "state": "void"},
        "run": {"id": "sale-lot-42", "status": "completed", "result": {"outcome": "void"}},
    }
    assert _table(p) == {"lot-42": "void"}
    done = next(e for e in p.journal("sale-lot-42") if e.kind == Kind.WAIT_DONE)
    assert (done.data["signal"], done.data["payload"]) == ("cancelled", {"by": "clerk"})
    assert _ledger(p) == {}


def test_cancelling_an_ended_sale_is_a_409_and_the_signal_is_set_aside(p: LocalPlatform) -> None:
    """SPEC 3: signal returns "false if the run has ended (the signal is set aside)"."""
    _open(p)
    _post(p, "/api/sale/cancel", {"id": "lot-42"})
    assert _post(p, "/api/sale/cancel", {"id": "lot-42"}) == (409, {"sale": "lot-42", "delivered": False})
    assert _sale(p)["run"]["result"] == {"outcome": "void"}


def test_an_unpaid_sale_times_out_after_72h_and_is_void(p: LocalPlatform) -> None:
    """Seed: `wf:race({ "paid", "cancelled" }, { timeout = "72h" })`; on timeout `which` is
    nil, so the sale is voided."""
    _open(p)
    p.advance("71h59m")
    assert p.get("sale-lot-42").status == "awaiting"
    assert _table(p) == {"lot-42": "open"}
    p.advance("1m")
    assert _sale(p) == {
        "sale": {"id": "lot-42", "winner": "ada", "price": 25, "state": "void"},
        "run": {"id": "sale-lot-42", "status": "completed", "result": {"outcome": "void"}},
    }
    done = next(e for e in p.journal("sale-lot-42") if e.kind == Kind.WAIT_DONE)
    assert done.data["by"] == "timeout"


def test_a_sale_paid_just_before_the_timeout_settles(p: LocalPlatform) -> None:
    _open(p)
    p.advance("71h")
    assert _pay(p)[0] == 202
    p.advance("2h")
    assert _sale(p)["run"]["result"] == {"outcome": "settled"}
    assert _table(p) == {"lot-42": "settled"}


# --- double clicks ---------------------------------------------------------------------


def test_a_double_clicked_pay_joins_one_pay_run_and_charges_once(p: LocalPlatform) -> None:
    """Seed: "Duplicate signals are safe ... which matters because buttons get clicked
    twice"; the run id "pay-<sale id>" makes the second click join the first run."""
    _open(p)
    assert _pay(p) == (202, {"sale": "lot-42", "run": "pay-lot-42"})
    assert _pay(p) == (202, {"sale": "lot-42", "run": "pay-lot-42"})
    assert [r.id for r in p.runs(workflow="pay-sale")] == ["pay-lot-42"]
    ledger = _ledger(p)
    assert list(ledger) == ["pay-lot-42/charge/1/1"]
    assert ledger["pay-lot-42/charge/1/1"]["repeats"] == 0
    assert _sale(p)["run"]["result"] == {"outcome": "settled"}
    assert len([e for e in p.journal("pay-lot-42") if e.kind == Kind.STEP_INTENT and e.name == "charge"]) == 1


def test_a_paid_signal_sent_twice_is_set_aside_and_the_sale_settles_once(p: LocalPlatform) -> None:
    """Seed: "Duplicate signals are safe. An unconsumed extra is set aside rather than
    breaking replay." """
    _open(p)
    assert p.signal("sale-lot-42", "paid", {"by": "ada"}) is True
    assert p.signal("sale-lot-42", "paid", {"by": "ada"}) is False
    run = p.get("sale-lot-42")
    assert (run.status, run.result) == ("completed", {"outcome": "settled"})
    assert len([e for e in p.journal("sale-lot-42") if e.kind == Kind.WAIT_DONE]) == 1
    p.restart()
    assert p.get("sale-lot-42").result == {"outcome": "settled"}


def test_sales_paid_and_cancelled_side_by_side_each_keep_their_outcome(p: LocalPlatform) -> None:
    for i in range(6):
        _open(p, f"lot-{i}", winner=f"w{i}", price=10 + i)
    for i in (0, 1, 2):
        assert _pay(p, f"lot-{i}", user=f"w{i}")[0] == 202
    assert _pay(p, "lot-0", user="w0")[0] == 202
    assert _post(p, "/api/sale/cancel", {"id": "lot-3"})[0] == 202
    p.advance("72h")
    assert _table(p) == {
        "lot-0": "settled",
        "lot-1": "settled",
        "lot-2": "settled",
        "lot-3": "void",
        "lot-4": "void",
        "lot-5": "void",
    }
    ledger = _ledger(p)
    assert sorted(ledger) == [f"pay-lot-{i}/charge/1/1" for i in (0, 1, 2)]
    assert [ledger[f"pay-lot-{i}/charge/1/1"]["amount"] for i in (0, 1, 2)] == [10, 11, 12]


def test_paying_a_void_sale_charges_nothing(p: LocalPlatform) -> None:
    _open(p)
    p.advance("72h")
    assert _table(p) == {"lot-42": "void"}
    status, _ = _pay(p)
    assert status in (404, 409)
    assert _ledger(p) == {}


# --- bad requests ----------------------------------------------------------------------

OPEN_HELP = {"error": 'send { id = "lot-42", winner = "ada", price = 25 } with a positive whole price'}


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "",
        "[]",
        '"lot-42"',
        json.dumps({"winner": "ada", "price": 25}),
        json.dumps({"id": "lot-42", "price": 25}),
        json.dumps({"id": "lot-42", "winner": "ada"}),
        json.dumps({"id": "lot-42", "winner": "ada", "price": 0}),
        json.dumps({"id": "lot-42", "winner": "ada", "price": -5}),
        json.dumps({"id": "lot-42", "winner": "ada", "price": 2.5}),
        json.dumps({"id": "lot-42", "winner": "ada", "price": "25"}),
        json.dumps({"id": "lot/42", "winner": "ada", "price": 25}),
        json.dumps({"id": "", "winner": "ada", "price": 25}),
        json.dumps({"id": "x" * 65, "winner": "ada", "price": 25}),
        json.dumps({"id": 42, "winner": "ada", "price": 25}),
    ],
)
def test_opening_with_a_bad_body_is_a_400_and_starts_nothing(p: LocalPlatform, body: str) -> None:
    r = p.fetch("POST", "/api/sale", body=body)
    assert (r.status_code, json.loads(r.body)) == (400, OPEN_HELP)
    assert p.runs() == []


@pytest.mark.parametrize(
    ("path", "body", "help"),
    [
        ("/api/sale/pay", "{", 'send { id = "lot-42", user = "ada" }'),
        ("/api/sale/pay", json.dumps({"id": "lot-42"}), 'send { id = "lot-42", user = "ada" }'),
        ("/api/sale/pay", json.dumps({"user": "ada"}), 'send { id = "lot-42", user = "ada" }'),
        ("/api/sale/cancel", "nope", 'send { id = "lot-42" }'),
        ("/api/sale/cancel", json.dumps({"id": "a b"}), 'send { id = "lot-42" }'),
    ],
)
def test_paying_or_cancelling_with_a_bad_body_is_a_400(
    p: LocalPlatform, path: str, body: str, help: str
) -> None:
    _open(p)
    r = p.fetch("POST", path, body=body)
    assert (r.status_code, json.loads(r.body)) == (400, {"error": help})
    assert p.get("sale-lot-42").status == "awaiting"
    assert p.runs(workflow="pay-sale") == []


def test_an_id_of_64_characters_is_accepted(p: LocalPlatform) -> None:
    _open(p, "x" * 64)
    assert p.get("sale-" + "x" * 64).status == "awaiting"


# --- unknown sales and routes ----------------------------------------------------------


def test_an_unknown_sale_is_a_404(p: LocalPlatform) -> None:
    r = p.fetch("GET", "/api/sale/lot-9")
    assert (r.status_code, json.loads(r.body)) == (404, {"error": "no sale lot-9"})
    assert _pay(p, "lot-9") == (404, {"error": "no sale lot-9"})
    assert _post(p, "/api/sale/cancel", {"id": "lot-9"}) == (404, {"error": "no sale lot-9"})
    assert p.runs() == []


def test_an_unknown_route_is_a_404_naming_it(p: LocalPlatform) -> None:
    r = p.fetch("PUT", "/api/sale")
    assert (r.status_code, json.loads(r.body)) == (404, {"error": "no route PUT /api/sale"})
    r = p.fetch("GET", "/api/sale/lot-1/extra")
    assert (r.status_code, json.loads(r.body)) == (404, {"error": "no route GET /api/sale/lot-1/extra"})


def test_the_payments_ledger_starts_empty(p: LocalPlatform) -> None:
    assert _ledger(p) == {}


# --- durability ------------------------------------------------------------------------


def test_an_awaiting_sale_survives_a_restart_and_settles_after_it(p: LocalPlatform) -> None:
    """Seed: a workflow "can pause for days and resume where it stopped, including across
    crashes and deploys"."""
    _open(p)
    p.advance("24h")
    p.restart()
    assert p.get("sale-lot-42").status == "awaiting"
    assert _pay(p)[0] == 202
    assert _sale(p)["run"]["result"] == {"outcome": "settled"}
    assert len([e for e in p.logs if e["message"] == "notify ada"]) == 0  # not notified again


# --- an attempt that ends after its update, before its result is recorded -----------------

# The example's database handle, wrapped so that the first statement matching ``pattern``
# commits and then fails its attempt: what a process killed between a step's effect and its
# recorded result leaves behind, met by the attempt that runs next (the same step id).
_FAIL_ONCE_AFTER = """
local sales = (function()
    local db = database "sales" { migrations = "migrations/sales" }
    local failed = false
    return {
        exec = function(_, sql, args)
            local result = db:exec(sql, args)
            if not failed and sql:find(%s, 1, true) then
                failed = true
                error("the attempt ended after its update", 0)
            end
            return result
        end,
        first = function(_, sql, args) return db:first(sql, args) end,
    }
end)()
"""
_DECLARATION = 'local sales = database "sales" { migrations = "migrations/sales" }\n'


def _failing_once_after(tmp_path: Path, script: str, statement: str) -> Path:
    copy = tmp_path / "auction"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".lunaflow", "tests"))
    text = (copy / script).read_text(encoding="utf-8")
    assert text.count(_DECLARATION) == 1, f"{script} no longer declares the sales database as expected"
    (copy / script).write_text(
        text.replace(_DECLARATION, _FAIL_ONCE_AFTER % json.dumps(statement)), encoding="utf-8"
    )
    return copy


def test_a_void_attempt_run_again_after_its_update_still_voids_the_sale(tmp_path: Path) -> None:
    """The void step's update landed, then its attempt ended (a crash, a lost connection)
    before the result was recorded. The next attempt finds the sale void, by its own hand,
    and the run ends void. On main it counted changes, found none, and awaited a payment
    that would never come (the CI failure of the fifty-sale crash test)."""
    project = _failing_once_after(tmp_path, "sale.lua", "SET state = 'void'")
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        _open(p)
        assert _post(p, "/api/sale/cancel", {"id": "lot-42", "user": "clerk"})[0] == 202
        p.advance("10s")  # the retry's backoff
        assert p.get("sale-lot-42").result == {"outcome": "void"}
        assert _table(p) == {"lot-42": "void"}


def test_a_hold_attempt_run_again_after_its_update_still_holds_the_sale(tmp_path: Path) -> None:
    """Likewise for the pay run's hold: run again after its update, it finds the sale held
    by this payment and goes on to charge (on main it refused the payment, leaving the sale
    'paying' for ever)."""
    project = _failing_once_after(tmp_path, "pay.lua", "SET state = 'paying'")
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        _open(p)
        assert _pay(p)[0] == 202
        p.advance("10s")
        assert p.get("pay-lot-42").result["outcome"] == "paid"
        assert p.get("sale-lot-42").result == {"outcome": "settled"}
        assert _table(p) == {"lot-42": "settled"}
