"""Issue 17, point 5: the auction example never leaves a charge for a void sale. A real
``lunaflow dev`` on a copy of examples/auction (fresh data folder), spoken to over HTTP and
through the CLI, as a developer trying the example would.

A payment for a sale that can no longer be paid is refused before anything is charged
(the route checks the sale row and its run; pay-sale reserves the row before charging), or,
when the sale's run ended after the charge, refunded (the ledger entry says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.devserver import EXAMPLES, DevServer, Servers, copy_project, wait_for


def _auction(servers: Servers, tmp_path: Path) -> DevServer:
    return servers.start(copy_project(EXAMPLES / "auction", tmp_path / "auction"))


def _open_sale(dev: DevServer, sale: str) -> None:
    r = dev.post_json("/api/sale", {"id": sale, "winner": "ada", "price": 25})
    assert r.status == 201, r
    dev.wait_status(f"sale-{sale}", {"awaiting"})


def _ledger(dev: DevServer) -> dict[str, Any]:
    value = dev.get("/api/payments").json()
    return {} if value == [] else dict(value)


def _unrefunded(dev: DevServer, sale: str) -> list[dict[str, Any]]:
    return [v for k, v in _ledger(dev).items() if k.startswith(f"pay-{sale}/") and not v.get("refunded")]


def _pay_ended(dev: DevServer, sale: str) -> dict[str, Any] | None:
    """pay-<sale> once it has ended, or None if it was never started (bounded wait)."""

    def ended() -> Any:
        d = dev.cli("show", f"pay-{sale}", "--json")
        if d.code != 0:
            return "never started"
        run = json.loads(d.out)["run"]
        return run if run["status"] in ("completed", "failed", "cancelled") else None

    found = wait_for(f"pay-{sale} to end", ended, 15, interval=0.3)
    return None if found == "never started" else found


def test_paying_a_sale_whose_run_was_cancelled_is_refused_before_any_charge(
    servers: Servers, tmp_path: Path
) -> None:
    """Sale lot-50's run is cancelled (``lunaflow cancel sale-lot-50``, as the console does);
    a payment for it is refused with 409 and nothing is charged."""
    dev = _auction(servers, tmp_path)
    _open_sale(dev, "lot-50")
    d = dev.cli("cancel", "sale-lot-50")
    assert d.code == 0, str(d)
    r = dev.post_json("/api/sale/pay", {"id": "lot-50", "user": "ada"})
    assert r.status == 409, r
    assert _pay_ended(dev, "lot-50") is None
    assert _ledger(dev) == {}


def test_pay_sale_for_a_void_sale_started_directly_charges_nothing(servers: Servers, tmp_path: Path) -> None:
    """pay-sale itself checks the sale: started directly (``lunaflow start pay-sale ... --id
    pay-lot-51``) for a sale already void (cancelled through the API), it completes with
    outcome "refused" and charges nothing."""
    dev = _auction(servers, tmp_path)
    _open_sale(dev, "lot-51")
    r = dev.post_json("/api/sale/cancel", {"id": "lot-51", "user": "ada"})
    assert r.status == 202, r
    dev.wait_status("sale-lot-51", {"completed"})
    assert dev.get("/api/sale/lot-51").json()["sale"]["state"] == "void"
    d = dev.cli(
        "start", "pay-sale", json.dumps({"id": "lot-51", "user": "ada", "price": 25}), "--id", "pay-lot-51"
    )
    assert d.code == 0, str(d)
    run = _pay_ended(dev, "lot-51")
    assert run is not None and run["status"] == "completed", run
    assert run["result"]["outcome"] == "refused", run
    assert _ledger(dev) == {}


def test_a_charge_whose_sale_run_has_ended_is_refunded(servers: Servers, tmp_path: Path) -> None:
    """The window the route cannot close: pay-sale reserved and charged, and the sale's run
    was cancelled before the "paid" signal reached it (``signal`` answered false). pay-sale
    refunds the charge and voids the sale. Driven by starting pay-sale directly for a sale
    whose run was cancelled from the CLI (the row still 'open')."""
    dev = _auction(servers, tmp_path)
    _open_sale(dev, "lot-52")
    assert dev.cli("cancel", "sale-lot-52").code == 0
    d = dev.cli(
        "start", "pay-sale", json.dumps({"id": "lot-52", "user": "ada", "price": 25}), "--id", "pay-lot-52"
    )
    assert d.code == 0, str(d)
    run = _pay_ended(dev, "lot-52")
    assert run is not None and run["status"] == "completed", run
    assert run["result"]["outcome"] == "refunded", run
    charges = [v for k, v in _ledger(dev).items() if k.startswith("pay-lot-52/")]
    assert len(charges) == 1 and charges[0]["refunded"] is True, charges
    assert _unrefunded(dev, "lot-52") == []
    assert dev.get("/api/sale/lot-52").json()["sale"]["state"] == "void"


def test_a_paid_sale_is_charged_once_and_settled(servers: Servers, tmp_path: Path) -> None:
    """The guard: a sale paid while awaiting settles, with one charge, not refunded."""
    dev = _auction(servers, tmp_path)
    _open_sale(dev, "lot-53")
    r = dev.post_json("/api/sale/pay", {"id": "lot-53", "user": "ada"})
    assert r.status == 202, r
    run = _pay_ended(dev, "lot-53")
    assert run is not None and run["result"]["outcome"] == "paid", run
    dev.wait_status("sale-lot-53", {"completed"})
    assert dev.get("/api/sale/lot-53").json()["sale"]["state"] == "settled"
    assert len(_unrefunded(dev, "lot-53")) == 1
