"""The signal backlog bound holds under concurrent senders (issue 14, point 9).

Senders are separate processes, each with its own connection to one SQLite store, as the
console CLI and several ``lunaflow dev`` processes on one data folder are. They signal
through ``Runs.signal``, the path every sender takes.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.clock import SystemClock
from runtime.errors import InvalidInput
from runtime.platform.runs import Runs
from runtime.store.sqlite import SQLiteStore

SENDERS = 6
EACH = 40
PREFILLED = MAX_SIGNAL_BACKLOG - 50


def _send(path: str, barrier: Any, out: Any) -> None:
    runs = Runs(SQLiteStore(path, synchronous="NORMAL"), SystemClock())
    sent = refused = 0
    barrier.wait(timeout=30)
    for i in range(EACH):
        try:
            runs.signal("b1", "junk", i)
            sent += 1
        except InvalidInput as e:
            assert "unconsumed signals" in str(e), e
            refused += 1
    runs.store.close()
    out.put((sent, refused))


def test_the_signal_backlog_holds_under_concurrent_senders(tmp_path: Path) -> None:
    """A run holds 9,950 unconsumed signals; 6 processes send 40 more each at once (240
    for the 50 places left). At most 10,000 are accepted and pending, and every other send
    is refused with the backlog error. Before: the backlog was counted outside the insert's
    transaction, and concurrent senders overshot the bound."""
    path = tmp_path / "lunaflow.sqlite"
    store = SQLiteStore(path, synchronous="OFF")
    Runs(store, SystemClock()).start("inbox", None, id="b1")
    for i in range(PREFILLED):  # below the API's bound: only the count matters here
        store.add_signal("b1", "junk", i, 0.0)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(SENDERS), ctx.Queue()
    procs = [ctx.Process(target=_send, args=(str(path), barrier, out)) for _ in range(SENDERS)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=60) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    accepted = PREFILLED + sum(sent for sent, _ in results)
    pending = store.signal_backlog("b1")
    store.close()
    assert sum(sent + refused for sent, refused in results) == SENDERS * EACH
    assert accepted == pending
    assert pending == MAX_SIGNAL_BACKLOG, f"{pending} signals pending, the bound is {MAX_SIGNAL_BACKLOG}"
