"""Values at the platform's limit (256 KiB encoded each, several in one append), on every
store: what is written reads back equal, whichever home a backend gives it (issue 15.1)."""

from __future__ import annotations

from runtime.core.journal import Entry, Kind, Status
from runtime.core.values import MAX_VALUE_BYTES
from runtime.store.base import RunRecord, RunUpdate, Store

BIG = "b" * (MAX_VALUE_BYTES - 2)  # a string that encodes to exactly the limit


def big(mark: str) -> str:
    return mark + BIG[len(mark) :]


def make_run(store: Store, run_id: str, value: str) -> None:
    run = RunRecord(
        id=run_id, workflow="wf", status=Status.RUNNING, input=value, created_at=1.0, updated_at=1.0
    )
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": value}, 1.0))


def test_an_input_at_the_limit_reads_back_from_the_run_and_its_first_entry(store: Store) -> None:
    make_run(store, "in", big("in"))
    run = store.get_run("in")
    assert run is not None and run.input == big("in")
    assert store.journal("in")[0].data["input"] == big("in")
    assert [r.input for r in store.list_runs()] == [big("in")]


def test_one_append_of_several_values_at_the_limit_reads_back_equal(store: Store) -> None:
    """A step's result, three consumed signal payloads and the run's result in one append
    (over a megabyte), then the run read back whole."""
    make_run(store, "many", "small")
    ids = [store.add_signal("many", name, big(name), 2.0)[0] for name in ("x", "y", "z")]
    entries = [Entry(2, Kind.STEP_RESULT, "make", {"n": 1, "values": [big("step")]}, 3.0)]
    for i, (name, signal_id) in enumerate(zip(("x", "y", "z"), ids, strict=True)):
        seq = 3 + 2 * i
        entries += [
            Entry(seq, Kind.WAIT, "await", {"names": [name], "timeout_ms": None, "due_at": None}, 3.0),
            Entry(
                seq + 1,
                Kind.WAIT_DONE,
                "await",
                {"by": "signal", "signal": name, "payload": big(name), "signal_id": signal_id},
                3.0,
            ),
        ]
    entries.append(Entry(9, Kind.COMPLETED, None, {"result": big("result")}, 3.0))
    store.append("many", 1, entries, update=RunUpdate(Status.COMPLETED, None, result=big("result")))
    assert store.journal("many")[1:] == entries
    run = store.get_run("many")
    assert run is not None and (run.status, run.result, run.journal_len) == ("completed", big("result"), 9)
    assert [s.payload for s in store.signals("many")] == [big("x"), big("y"), big("z")]
    assert [s.state for s in store.signals("many")] == ["consumed"] * 3


def test_a_pending_signal_at_the_limit_reads_back(store: Store) -> None:
    make_run(store, "sig", "small")
    store.add_signal("sig", "paid", big("paid"), 2.0)
    assert [s.payload for s in store.pending_signals("sig")] == [big("paid")]


def test_an_error_of_a_megabyte_reads_back(store: Store) -> None:
    """Error texts have no bound of their own (a step may raise any string)."""
    make_run(store, "err", "small")
    error = "e" * (1 << 20)
    failed = Entry(
        2, Kind.STEP_FAILED, "s", {"attempt": 1, "error": error, "final": True, "final_error": error}, 2.0
    )
    store.append("err", 1, [failed], update=RunUpdate(Status.FAILED, "step 's'", error=error))
    run = store.get_run("err")
    assert run is not None and run.error == error and run.status == "failed"
    assert store.journal("err")[1] == failed
