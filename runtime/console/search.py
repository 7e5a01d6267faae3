"""Finding runs for the console: by run id (exact or prefix), status, workflow and time
started, with counts per status, a page at a time.

On SQLite (a store with ``IndexedSearch``) every search is the store's: a page reads its
own ``PAGE_SIZE`` runs from an index, however many runs there are or however deep the page,
and the counts per status are kept by the store (exact, no scan), or, with an id prefix or a
time, taken over the newest ``SCAN_LIMIT`` matching runs. An open console tab polls this
every second or two, so what it costs must not grow with the runs kept.

Elsewhere (DynamoDB) the store lists runs newest first by status and workflow
(``Store.list_runs``) from an index: a page of those is read from the store however deep.
The counts per status and a search by id prefix or time are done here over the newest
``SCAN_LIMIT`` runs of the workflow asked for (past that the page says what the counts and
the search covered). An exact id is looked up directly, so a run is found by its id however
old it is.

Every parameter is read leniently and safely: a value that is not what it should be is
ignored and the page says so, never an error. ``page`` is a small digit string, clamped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from runtime.console.html import Zone
from runtime.core.journal import Status
from runtime.core.published import parse_where
from runtime.errors import InvalidInput
from runtime.platform.bulk import Selection
from runtime.platform.runs import Runs
from runtime.store.base import IndexedSearch, RunFilter, RunRecord

PAGE_SIZE = 50
MAX_PAGE = 999
SCAN_LIMIT = 5000
STATUSES = tuple(s.value for s in Status)
_PAGE = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class RunQuery:
    id: str = ""  # a run id, or the start of one
    status: str | None = None
    workflow: str | None = None
    since: float | None = None  # started at or after (epoch seconds)
    until: float | None = None  # started before
    where: str = ""  # a published value's filter, as typed: month=7, month>=3
    page: int = 0
    problems: tuple[str, ...] = ()  # parameters that were ignored, and why

    @classmethod
    def read(cls, params: Mapping[str, object], zone: Zone) -> RunQuery:
        problems: list[str] = []

        def text(name: str, limit: int = 200) -> str:
            value = params.get(name)
            return value.strip()[:limit] if isinstance(value, str) else ""

        status = text("status") or None
        if status is not None and status not in STATUSES:
            problems.append(f"status {status[:40]!r} is not a run status")
            status = None
        page_text = text("page", 20)
        page = 0
        if page_text:
            if _PAGE.fullmatch(page_text):
                page = min(int(page_text), MAX_PAGE)
            else:
                problems.append("the page number was not a number; showing the first page")
        times: dict[str, float | None] = {}
        for name in ("since", "until"):
            raw = text(name, 40)
            times[name] = zone.parse(raw) if raw else None
            if raw and times[name] is None:
                problems.append(f"{name} {raw!r} is not a date (write 2026-01-31 or 2026-01-31T09:30)")
        where = text("where")
        if where:
            try:
                parse_where(where)
            except InvalidInput as e:
                problems.append(str(e))
                where = ""
        return cls(
            id=text("id"),
            where=where,
            status=status,
            workflow=text("workflow") or None,
            since=times["since"],
            until=times["until"],
            page=page,
            problems=tuple(problems),
        )

    def params(self, zone: Zone, **changes: object) -> dict[str, str]:
        """The query as link parameters (``changes`` override), empty ones left out."""
        values: dict[str, object] = {
            "id": self.id,
            "status": self.status or "",
            "workflow": self.workflow or "",
            "since": _typed(self.since, zone),
            "until": _typed(self.until, zone),
            "where": self.where,
            "page": str(self.page) if self.page else "",
        }
        values.update(changes)
        return {k: str(v) for k, v in values.items() if v not in (None, "", "0", 0)}

    def selects(self) -> bool:
        """Whether the query narrows the runs at all (a repair needs it to)."""
        return bool(self.id or self.status or self.workflow or self.since or self.until or self.where)

    def selection(self) -> Selection:
        """The same runs, as a repair selects them (``runtime/platform/bulk.py``)."""
        return Selection(
            status=self.status,
            workflow=self.workflow,
            id_prefix=self.id or None,
            since=self.since,
            until=self.until,
            where=(parse_where(self.where),) if self.where else (),
        )

    def describe(self, zone: Zone) -> str:
        """The filters in words: ``failed runs of settle-sale with ids starting 'sale-'``."""
        parts = []
        if self.id:
            parts.append(f"id {self.id!r} (exact or prefix)")
        if self.workflow:
            parts.append(f"workflow {self.workflow}")
        if self.since is not None:
            parts.append(f"started since {zone.when(self.since)}")
        if self.until is not None:
            parts.append(f"started before {zone.when(self.until)}")
        if self.where:
            parts.append(f"value {self.where}")
        what = f"{self.status} runs" if self.status else "runs"
        return what + (" with " + ", ".join(parts) if parts else "")


@dataclass
class Found:
    runs: list[RunRecord]  # this page
    counts: dict[str, int]  # per status, over the runs matching everything but the status
    matching: int  # runs matching every filter (of those counted, when capped)
    more: bool  # a later page exists
    capped: bool  # counts (and an id or time search) covered only the newest SCAN_LIMIT runs
    exact: RunRecord | None = None  # the run whose id is exactly the one searched
    notes: list[str] = field(default_factory=list)


def find_runs(runs: Runs, q: RunQuery) -> Found:
    if q.where:
        return _find_by_value(runs, q)
    if isinstance(runs.store, IndexedSearch):
        return _find_indexed(runs, runs.store, q)
    return _find_scanned(runs, q)


def _find_indexed(runs: Runs, store: IndexedSearch, q: RunQuery) -> Found:
    where = RunFilter(workflow=q.workflow, id_prefix=q.id or None, since=q.since, until=q.until)
    found, capped = store.run_counts(where, bound=SCAN_LIMIT)
    counts = {s: found.get(s, 0) for s in STATUSES}
    start = q.page * PAGE_SIZE
    listed = store.search_runs(where, status=q.status, offset=start, limit=PAGE_SIZE + 1)
    page, more = listed[:PAGE_SIZE], len(listed) > PAGE_SIZE
    exact = runs.store.get_run(q.id) if q.id else None
    if exact is not None and not (_in_time(exact, q) and q.workflow in (None, exact.workflow)):
        exact = None
    if exact is not None and q.page == 0 and q.status in (None, exact.status):
        # The run whose id is exactly the one searched comes first (it matches the prefix).
        rest = [r for r in listed if r.id != exact.id]
        page, more = [exact, *rest][:PAGE_SIZE], len(rest) + 1 > PAGE_SIZE
    matching = counts.get(q.status, 0) if q.status else sum(counts.values())
    return Found(
        runs=page,
        counts=counts,
        matching=max(matching, start + len(page)),
        more=more,
        capped=capped,
        exact=exact,
        notes=list(q.problems),
    )


def _find_scanned(runs: Runs, q: RunQuery) -> Found:
    scanned = runs.runs(workflow=q.workflow, limit=SCAN_LIMIT + 1)
    capped = len(scanned) > SCAN_LIMIT
    scanned = scanned[:SCAN_LIMIT]
    exact = runs.store.get_run(q.id) if q.id else None
    if exact is not None and q.workflow is not None and exact.workflow != q.workflow:
        exact = None
    candidates = [r for r in scanned if _matches(r, q)]
    if exact is not None and _in_time(exact, q) and all(r.id != exact.id for r in candidates):
        candidates.insert(0, exact)  # older than the runs scanned: found by its id all the same
    elif exact is not None:
        candidates.sort(key=lambda r: r.id != exact.id)  # the exact match first
    counts = {s: 0 for s in STATUSES}
    for r in candidates:
        counts[r.status] = counts.get(r.status, 0) + 1
    matching = [r for r in candidates if q.status is None or r.status == q.status]
    start = q.page * PAGE_SIZE
    if not q.id and q.since is None and q.until is None:
        # Status and workflow alone: the store pages through every run, however many.
        listed = runs.runs(status=q.status, workflow=q.workflow, limit=start + PAGE_SIZE + 1)
        page, more = listed[start : start + PAGE_SIZE], len(listed) > start + PAGE_SIZE
    else:
        page, more = matching[start : start + PAGE_SIZE], len(matching) > start + PAGE_SIZE
    return Found(
        runs=page,
        counts=counts,
        matching=max(len(matching), start + len(page)),
        more=more,
        capped=capped,
        exact=exact,
        notes=list(q.problems),
    )


def _find_by_value(runs: Runs, q: RunQuery) -> Found:
    """A search by a published value, on every store: the store's index of values gives the
    runs holding it (at most ``SCAN_LIMIT``, newest first), and the other filters are checked
    on those, so no run without the value is read."""
    listed = runs.find(parse_where(q.where), workflow=q.workflow, limit=SCAN_LIMIT + 1)
    capped = len(listed) > SCAN_LIMIT
    candidates = [r for r in listed[:SCAN_LIMIT] if _matches(r, q)]
    counts = {s: 0 for s in STATUSES}
    for r in candidates:
        counts[r.status] = counts.get(r.status, 0) + 1
    matching = [r for r in candidates if q.status is None or r.status == q.status]
    start = q.page * PAGE_SIZE
    page = matching[start : start + PAGE_SIZE]
    return Found(
        runs=page,
        counts=counts,
        matching=len(matching),
        more=len(matching) > start + PAGE_SIZE,
        capped=capped,
        notes=list(q.problems),
    )


def _matches(run: RunRecord, q: RunQuery) -> bool:
    return (not q.id or run.id.startswith(q.id)) and _in_time(run, q)


def _in_time(run: RunRecord, q: RunQuery) -> bool:
    return (q.since is None or run.created_at >= q.since) and (q.until is None or run.created_at < q.until)


def _typed(at: float | None, zone: Zone) -> str:
    """A time as the search form's inputs show it (and ``Zone.parse`` reads it back)."""
    if at is None:
        return ""
    return zone.when(at)[:16].replace(" ", "T")
