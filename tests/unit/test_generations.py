"""Issue 27.3: the replay core reads the journal from the current generation's first entry
(run.continued), so the journal limit counts per generation, and step ids name the
generation."""

from __future__ import annotations

from runtime.core.journal import Entry, Kind, generations
from runtime.core.replay import ContinueAsNew, ContinueCmd, Execute, Fail, Replay, StepCmd, ValueCmd


def _journal(extra: int) -> list[Entry]:
    entries = [Entry(1, Kind.STARTED, "w", {"format": 1, "input": {"n": 1}})]
    for i in range(extra):
        entries.append(Entry(len(entries) + 1, Kind.VALUE, "os.time", {"value": i}))
    return entries


def test_the_journal_limit_counts_the_current_generation_only() -> None:
    journal = _journal(6)
    # Generation 1 would be full at 8 entries; generation 2 starts the count again.
    full = Replay("r", journal, 0, max_entries=8)
    for _ in range(6):
        full.value(ValueCmd("os.time"))
    assert isinstance(full.step(StepCmd("s", 1, 0, None)), Fail)
    closed = Replay("r", journal, 0, max_entries=8)
    for _ in range(6):
        closed.value(ValueCmd("os.time"))
    assert isinstance(closed.continue_as_new(ContinueCmd({"n": 2})), ContinueAsNew)
    fresh = Replay("r", closed.entries, 0, max_entries=8)
    assert fresh.generation == 2 and fresh.start.data["input"] == {"n": 2}
    step = fresh.step(StepCmd("s", 1, 0, None))
    assert isinstance(step, Execute) and step.step_id.startswith("r@2/")
    assert "generation 2" not in str(full.step(StepCmd("s", 1, 0, None)))


def test_generations_lists_each_with_its_range_and_end() -> None:
    closed = Replay("r", _journal(2), 0)
    closed.value(ValueCmd("os.time"))
    closed.value(ValueCmd("os.time"))
    closed.continue_as_new(ContinueCmd({"n": 2}))
    gens = generations(closed.entries)
    assert [(g["generation"], g["first_seq"], g["last_seq"], g["ended"]) for g in gens] == [
        (1, 1, 3, "continued"),
        (2, 4, 4, None),
    ]
