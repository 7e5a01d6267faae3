"""Finding runs (runtime/console/search.py): what the console's search reads from its
parameters, and what it finds over a store larger than the part it scans."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.console import search
from runtime.console.html import Zone
from runtime.console.search import RunQuery, find_runs
from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore

T0 = 1_767_225_600.0
STATUSES = ("completed", "awaiting", "failed")


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    """130 runs, one a second: run-000 (oldest) to run-129; statuses cycle."""
    store = SQLiteStore(tmp_path / STORE_FILE, synchronous="OFF")
    for i in range(130):
        at = T0 + i
        run = RunRecord(
            id=f"run-{i:03d}", workflow="w" if i % 2 else "v", status=STATUSES[i % 3], input=i,
            created_at=at, updated_at=at,
        )  # fmt: skip
        store.create_run(run, Entry(1, Kind.STARTED, run.workflow, {"format": 1, "input": i}, at))
    yield Runs(store, FakeClock(T0 + 200))
    store.close()


@pytest.mark.parametrize(
    "page, expected",
    [
        ("2", 2),
        ("0", 0),
        ("9999", search.MAX_PAGE),
        ("²", 0),
        ("1" + "0" * 23, 0),
        ("-1", 0),
        ("+2", 0),
        (" 3", 3),
    ],
)
def test_the_page_parameter_is_a_small_digit_string_clamped(page: str, expected: int) -> None:
    q = RunQuery.read({"page": page}, Zone())
    assert q.page == expected
    assert bool(q.problems) == (page.strip() != str(expected) and expected == 0 and page != "0")


def test_unreadable_parameters_are_ignored_and_said() -> None:
    q = RunQuery.read({"status": "asleep", "since": "yesterday", "until": "2026-01-02"}, Zone())
    assert (q.status, q.since, q.until) == (None, None, T0 + 86400)
    assert q.problems == (
        "status 'asleep' is not a run status",
        "since 'yesterday' is not a date (write 2026-01-31 or 2026-01-31T09:30)",
    )


def test_times_are_read_in_the_pages_zone() -> None:
    assert RunQuery.read({"since": "2026-01-01T01:00"}, Zone(60, "CET")).since == T0


def test_pages_go_past_what_is_scanned(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SCAN_LIMIT", 100)
    found = find_runs(runs, RunQuery(page=2))
    assert [r.id for r in found.runs] == [f"run-{i:03d}" for i in range(29, -1, -1)]
    assert not found.more
    # The store keeps the counts per status: exact over every run, never a scan, so never capped.
    assert not found.capped and sum(found.counts.values()) == 130


def test_counts_of_a_prefix_search_cover_the_newest_matching_runs_and_say_so(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SCAN_LIMIT", 100)
    found = find_runs(runs, RunQuery(id="run-"))
    assert found.capped and sum(found.counts.values()) == 100
    # run-030 .. run-129 were counted: statuses cycle completed, awaiting, failed from run-000.
    assert found.counts["completed"] == sum(1 for i in range(30, 130) if i % 3 == 0)
    assert [r.id for r in found.runs][:2] == ["run-129", "run-128"] and found.more


def test_a_prefix_searches_what_is_scanned_and_an_exact_id_is_found_however_old(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SCAN_LIMIT", 100)
    assert [r.id for r in find_runs(runs, RunQuery(id="run-12")).runs] == [
        f"run-12{i}" for i in range(9, -1, -1)
    ]
    old = find_runs(runs, RunQuery(id="run-003"))
    assert [r.id for r in old.runs] == ["run-003"] and old.exact is not None


def test_filters_combine_and_counts_ignore_only_the_status(runs: Runs) -> None:
    q = RunQuery(id="run-0", workflow="w", status="failed", since=T0 + 10, until=T0 + 40)
    found = find_runs(runs, q)
    assert [r.id for r in found.runs] == ["run-035", "run-029", "run-023", "run-017", "run-011"]
    assert found.counts == {
        "running": 0,
        "sleeping": 0,
        "awaiting": 5,
        "failed": 5,
        "completed": 5,
        "cancelled": 0,
    }
    assert q.describe(Zone()) == (
        "failed runs with id 'run-0' (exact or prefix), workflow w, started since 2026-01-01 00:00:10 UTC, "
        "started before 2026-01-01 00:00:40 UTC"
    )
