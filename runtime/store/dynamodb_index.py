"""Lists and searches on the DynamoDB store's indexes: runs by status, workflow and parent,
each index partition read over its shards and merged (completed runs, in no status
partition, by a walk of the recorded workflows' partitions beside the status ones); the
values runs publish (``wf:set``), kept beside the run and found through the ``by_value``
index; and a list's run items read back (the indexes carry keys only).
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from runtime.core import published
from runtime.core.journal import ENDED, Entry, Kind, Status
from runtime.core.published import Where
from runtime.core.values import compact
from runtime.errors import LunaflowError
from runtime.store.base import UNREADABLE_RUN, RunRecord
from runtime.store.dynamodb_chunks import FIRST, HEAD, head_rows
from runtime.store.dynamodb_layout import (
    IN_FLIGHT,
    INDEXES,
    LIVE_PARTITION,
    REF,
    SHARDS,
    STATUS_PARTITIONS,
    TTL_ATTRIBUTE,
    VALUE_SK,
    WORKFLOWS_PK,
    _created_sk,
    _id_of,
    _journal_sk,
    _result_of,
    changed_at,
    legacy_partition,
    run_key,
    run_pk,
    sharded,
    status_partition,
)
from runtime.store.dynamodb_reads import Reads, with_current_step
from runtime.store.dynamodb_ttl import expired, of_another_start
from runtime.store.items import num, s, text

log = logging.getLogger("lunaflow.store")

# Queries a list has under way at once: below botocore's pool of 10 connections a client
# keeps, so a list reuses them rather than opening more.
LIST_THREADS = 8
# Index entries a search by a number range reads before it orders them newest first.
MAX_RANGE_READ = 5000
# Runs a list looks through, newest first, past those it leaves out: in-flight runs share one
# index partition (``STATUS#live``), so a status few of them are in is found by reading them;
# any other list leaves out runs past their expiry that TTL has not deleted yet (up to about
# two days) and runs whose status moved since the index was read.
LIST_SCAN = 20_000
# What a list reads of a run before it reads it whole: whether the list keeps it.
DECIDES = f"id, #st, #wf, {TTL_ATTRIBUTE}, expires_ms"
# Runs a list of completed ones looks through, newest first, and the index entries it reads
# a Query (keys only, about 100 bytes each: well under a Query's 1 MB).
COMPLETED_SCAN = 100_000
COMPLETED_PAGE = 1000
# Runs of any workflow and status such a list walks past at most (another workflow's runs in
# flight, newer than the completed ones, are read to be left out).
COMPLETED_WALK = 1_000_000
# How long a store trusts what it last read of the recorded workflow names (``#WORKFLOWS``)
# before its next completion reads them again: a table restored or made again under its
# name while containers stay warm loses the names, and its lists would lose the runs
# completed after it.
WORKFLOWS_RECHECK_S = 600.0
WORKFLOWS_KEY = {"pk": s(WORKFLOWS_PK), "sk": s(WORKFLOWS_PK)}


def _list_page(limit: int) -> int:
    """A list's first page per shard. A shard holds about limit / SHARDS of the newest: pages
    of twice that (a shard that runs out reads its next page) keep a list from reading
    SHARDS times its length."""
    return min(limit, max(25, 2 * limit // SHARDS))


def _once(ids: Iterator[str]) -> Iterator[str]:
    """``ids`` in their order, each the first time it comes, read as far as the caller goes."""
    seen: set[str] = set()
    for run_id in ids:
        if run_id not in seen:
            seen.add(run_id)
            yield run_id


class _Unreadable:
    """A value a list could not read, and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Index(Reads):
    """Lists, searches and published values: a part of ``DynamoDBStore``."""

    _created: dict[str, str]
    _workflows: set[str]  # names known recorded (``register_workflow``)
    _workflows_read_at: float  # when they were last read

    if TYPE_CHECKING:  # another part's (runtime.store.dynamodb_leases)

        def leased(self, run_ids: Sequence[str], now_ms: int) -> set[str]: ...

    # --- lists: an index's entries, then the run items they name -----------------------

    def _index(self, index: str, key: str, value: str, **more: Any) -> Iterator[dict[str, Any]]:
        return self._query(
            IndexName=index,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key},
            ExpressionAttributeValues={":v": s(value)},
            **more,
        )

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        return self._with_steps(self._list(status, workflow, limit))

    def _with_steps(self, runs: list[RunRecord]) -> list[RunRecord]:
        """The listed running runs with the step each is in, as ``get_run`` shows it: a woken
        run's step intent is a chunk write alone (its run item keeps no step while the step
        runs), so the step is the last entry of its tip chunk, read here a few at once, a
        consistent Query of two items each, as ``get_run``'s (1 RRU for a run item and a
        chunk under 4 KB). A chunk that keeps no
        ``tail`` (its last entry's name too long, or written before stop 46), or one this code
        cannot read (a kind a newer lunaflow wrote), leaves the step as the item has it,
        without reading its rows: one run never fails a list."""
        running = [r for r in runs if r.status == Status.RUNNING and r.current_step is None]
        if not running:
            return runs
        with ThreadPoolExecutor(max_workers=LIST_THREADS) as pool:
            tails = dict(zip((r.id for r in running), pool.map(self._tip_tail, running), strict=True))
        return [r if (tail := tails.get(r.id)) is None else with_current_step(r, tail) for r in runs]

    def _tip_tail(self, run: RunRecord) -> Entry | None:
        """The last entry (kind and name) of a run's tip chunk, when the chunk keeps it."""
        run_item, chunk = self._run_and_tip(run.id)  # get_run's read
        head = head_rows(run_item) if chunk is None and run_item is not None else []
        if not head and (chunk is None or "tail" not in chunk):
            return None
        try:
            # The journal ends in the run item's head (no chunk yet), or in its tip chunk.
            kind, name = head[-1][1:3] if head else json.loads(chunk["tail"]["S"])  # type: ignore[index]
            return Entry(run.journal_len, Kind(kind), name)
        except (ValueError, TypeError):  # JSONDecodeError is a ValueError
            return None

    def _list(self, status: str | None, workflow: str | None, limit: int) -> list[RunRecord]:
        if status == Status.COMPLETED:
            return self._completed(workflow, limit)
        sources: list[tuple[str, str]]
        if status is not None:
            bases = (status_partition(status), legacy_partition(status))
            sources = [("by_status", base) for base in bases if base]
        elif workflow is not None:
            sources = [("by_workflow", f"WF#{workflow}")]
        else:
            # A run not completed is under one status partition, and one completed under its
            # workflow's (or, completed by older code or with no name recorded, under
            # ``STATUS#completed``): together they list every run, most of them twice.
            sources = [("by_status", base) for base in STATUS_PARTITIONS]
            sources += [("by_workflow", f"WF#{name}") for name in self.workflow_names()]
        page = _list_page(limit)
        flight = status is not None and status in IN_FLIGHT
        if flight:
            page = 500  # the live runs are read deeper than the list is long
        with ThreadPoolExecutor(max_workers=LIST_THREADS) as pool:
            entries = (item for _, item in self._newest(sources, page, pool))
            # The live partition holds every in-flight status: a list of one of them reads the
            # live runs' statuses (a small projection), newest first, and keeps that status's,
            # looking at most LIST_SCAN entries deep. Any other list reads its runs and keeps
            # what still holds (an index is read a moment behind the table: a run that just
            # changed status may be listed under both, and is read once).
            if flight and status is not None:
                return self._kept(entries, status, workflow, limit, scan=max(limit, LIST_SCAN))
            return self._first(_once(_id_of(item) for item in entries), limit, status, workflow)

    def _first(
        self, ids: Iterator[str], limit: int, status: str | None, workflow: str | None
    ) -> list[RunRecord]:
        """The first ``limit`` runs of ``ids`` of ``status`` and ``workflow`` (None: any), a
        batch at a time. The first batch is as long as the list and read whole: all a list
        reads when nothing is left out. Later ones (what is missing, at least 100) read what
        decides first (status, workflow, expiry), then whole only the runs kept, so a list
        of failed runs of one workflow does not read other workflows' runs whole. A run left
        out (past its expiry, moved, another workflow's) does not shorten the list; it looks
        at most ``max(limit, LIST_SCAN)`` runs deep."""
        out: list[RunRecord] = []
        deepest, looked, size = max(limit, LIST_SCAN), 0, limit
        while len(out) < limit and looked < deepest:
            batch = list(itertools.islice(ids, min(size, deepest - looked)))
            if not batch:
                break
            looked += len(batch)
            if looked > len(batch):  # past the first batch
                batch = self._decided(batch, status, workflow)
            out.extend(
                r
                for r in self._hydrate(batch)
                if status in (None, r.status) and workflow in (None, r.workflow)
            )
            size = max(limit - len(out), 100)
        return out[:limit]

    def _decided(self, batch: list[str], status: str | None, workflow: str | None) -> list[str]:
        """The runs of ``batch`` a list of ``status`` and ``workflow`` (None: any) keeps, from
        what decides it (``DECIDES``: status, workflow, expiry), read before any run whole."""
        now = self.clock.now()
        found = self._items(batch, DECIDES, {"#st": "status", "#wf": "workflow"})
        return [
            r
            for r in batch
            if r in found
            and not expired(found[r], now)
            and status in (None, found[r]["status"]["S"])
            and workflow in (None, found[r]["workflow"]["S"])
        ]

    def _completed(self, workflow: str | None, limit: int) -> list[RunRecord]:
        """Completed runs (of ``workflow``), newest first: a completed run is in no status
        partition (``status_partition``), so they are the runs under their workflow's
        ``by_workflow`` partition met in no status partition, with those older code ended
        (``STATUS#completed``). Both indexes are sorted by ``created_sk``, so one walk of
        their merged entries tells them apart, keys only. It looks at most COMPLETED_SCAN
        runs of the listed workflows (and under ``STATUS#completed``) deep, walks at most
        COMPLETED_WALK runs in all, and stops when those partitions are read to their end;
        the statuses of the runs it keeps are read to confirm them."""
        names = [workflow] if workflow is not None else self.workflow_names()
        ended_by_older_code = legacy_partition(Status.COMPLETED)
        assert ended_by_older_code is not None
        counted = {f"WF#{name}" for name in names} | {ended_by_older_code}
        sources = [("by_workflow", f"WF#{name}") for name in names]
        sources += [("by_status", base) for base in STATUS_PARTITIONS]
        read_out: set[str] = set()  # the partitions read to their end

        def candidates(merged: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
            looked = 0  # runs under a counted partition (another workflow's run in flight is not)
            runs = itertools.groupby(merged, key=lambda met: (met[1]["created_sk"]["S"], met[1]["pk"]["S"]))
            for walked, (_, met) in enumerate(runs):
                if walked >= COMPLETED_WALK:
                    return
                where = list(met)
                under = {base for base, _ in where}
                if under & counted:
                    looked += 1
                    if looked > max(limit, COMPLETED_SCAN):
                        return
                    others = any(b.startswith("STATUS#") and b != ended_by_older_code for b in under)
                    if ended_by_older_code in under or not others:
                        yield where[0][1]
                # A partition is read out once the merge has taken its last entry, which it
                # has by the time this run's group is formed (it looked one entry past it):
                # what is left is other workflows' runs, in flight or failed.
                if counted <= read_out:
                    return

        # Pages as small as a list's (a console's page reads little), growing as it goes deep.
        with ThreadPoolExecutor(max_workers=LIST_THREADS) as pool:
            merged = self._newest(sources, _list_page(limit), pool, grow_to=COMPLETED_PAGE, read_out=read_out)
            return self._kept(candidates(merged), Status.COMPLETED, workflow, limit, scan=None)

    # --- the names of workflows runs were completed of (the lists of completed runs) ----

    def register_workflow(self, workflow: str) -> bool:
        """Record ``workflow`` among the names the lists read, and say whether it is there:
        read first (a store's first end, then every WORKFLOWS_RECHECK_S), written only
        when missing, so a scale-out of cold containers reads one item rather than all
        writing it. False when it could not be read or written: the caller's end then keeps
        the run under ``STATUS#completed``, which the lists read too."""
        now = self.clock.now()
        if workflow in self._workflows and now - self._workflows_read_at < WORKFLOWS_RECHECK_S:
            return True
        try:
            if workflow not in self._recorded_names(now):
                self._db.update_item(
                    TableName=self.table,
                    Key=WORKFLOWS_KEY,
                    UpdateExpression="ADD #names :name",
                    ExpressionAttributeNames={"#names": "names"},
                    ExpressionAttributeValues={":name": {"SS": [workflow]}},
                )
                self._workflows = self._workflows | {workflow}  # a new set: other threads read it
        except (ClientError, BotoCoreError) as e:
            log.warning("could not record workflow %r for the lists of completed runs: %s", workflow, e)
            return False
        return True

    def _recorded_names(self, now: float, *, consistent: bool = False) -> set[str]:
        item = self._db.get_item(
            TableName=self.table,
            Key=WORKFLOWS_KEY,
            ConsistentRead=consistent,
        ).get("Item", {})
        self._workflows = set(item.get("names", {}).get("SS", []))
        self._workflows_read_at = now
        return self._workflows

    def workflow_names(self) -> list[str]:
        """Every workflow a run this code completed was of (older code recorded none)."""
        return sorted(self._recorded_names(self.clock.now(), consistent=True))

    def _kept(
        self,
        entries: Iterator[dict[str, Any]],
        status: str,
        workflow: str | None,
        limit: int,
        *,
        scan: int | None,
    ) -> list[RunRecord]:
        """Runs of ``status`` (and ``workflow``) among the first ``scan`` entries (or all of
        them), at most ``limit``: each hundred's statuses read first, then the runs that
        match in full."""
        out: list[RunRecord] = []
        seen: set[str] = set()
        batch: list[str] = []

        def flush() -> None:
            out.extend(r for r in self._hydrate(self._decided(batch, status, workflow)) if r.status == status)
            batch.clear()

        for item in entries if scan is None else itertools.islice(entries, scan):
            run_id = _id_of(item)
            if run_id in seen:  # an index a moment behind: a run met in two partitions
                continue
            seen.add(run_id)
            batch.append(run_id)
            if len(batch) >= 100:
                flush()
                if len(out) >= limit:
                    break
        flush()
        return out[:limit]

    def _newest(
        self,
        sources: Sequence[tuple[str, str]],
        page: int,
        pool: Executor,
        grow_to: int | None = None,
        read_out: set[str] | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The entries of each ``(index, base)`` (every shard of the base), newest first by
        ``created_sk`` (every run index's sort key), each with its base; each shard's first
        page asked for ahead on ``pool``, later ones growing to ``grow_to``. ``read_out``:
        each base is added to it once its entries are all read."""

        def one(index: str, base: str) -> Iterator[tuple[str, dict[str, Any]]]:
            _, sk = INDEXES[index]
            assert sk == "created_sk", index  # merged with the others by it
            entries = self._gathered(index, base, newest_first=True, page=page, pool=pool, grow_to=grow_to)
            yield from ((base, item) for item in entries)
            if read_out is not None:
                read_out.add(base)

        return heapq.merge(
            *(one(index, base) for index, base in sources),
            key=lambda met: (met[1]["created_sk"]["S"], met[1]["pk"]["S"]),
            reverse=True,
        )

    def in_flight_runs(self, limit: int = 1_000_000) -> list[RunRecord]:
        """The live partition (and what older code listed by an in-flight status) with the
        failed runs: each in-flight run read once, not once per status."""
        bases = [LIVE_PARTITION, f"STATUS#{Status.FAILED}"]
        bases += [base for status in sorted(IN_FLIGHT) if (base := legacy_partition(status))]
        with ThreadPoolExecutor(max_workers=LIST_THREADS) as pool:
            entries = self._newest([("by_status", base) for base in bases], 500, pool)
            ids = list(itertools.islice(_once(_id_of(item) for _, item in entries), limit))
        return [r for r in self._hydrate(ids) if r.status not in ENDED]

    def _hydrate(self, ids: list[str]) -> list[RunRecord]:
        """The run items themselves, in the order given (the indexes carry no values)."""
        now = self.clock.now()  # a run past its TTL expiry is deleted to a list as well
        keys = [run_key(run_id) for run_id in ids]
        found = {item["id"]["S"]: item for item in self._by_key(keys) if not expired(item, now)}
        results = self._results([item for item in found.values() if "result_sk" in item])
        # A run that ended in its head holds its result there (``dynamodb_chunks.HEAD``).
        results.update(
            {
                run_id: _result_of(head_rows(item))
                for run_id, item in found.items()
                if "result_sk" not in item and item["status"]["S"] == Status.COMPLETED and HEAD in item
            }
        )
        # Inputs too large for their run items are their first chunks: read them together.
        firsts = {
            chunk["pk"]["S"].removeprefix("RUN#"): chunk
            for chunk in self._by_key(
                [
                    {"pk": item["pk"], "sk": s(_journal_sk(1))}
                    for run_id, item in found.items()
                    if "started" not in item
                    and "started" + REF not in item
                    and FIRST not in item
                    and (run_id, str(item.get("created_sk", {}).get("S", ""))) not in self._firsts
                ]
            )
        }
        return [self._listed(found[r], results.get(r), firsts.get(r)) for r in ids if r in found]

    def _listed(self, item: dict[str, Any], result: Any, first: dict[str, Any] | None = None) -> RunRecord:
        """A run as a list shows it. One whose value cannot be read (an object missing from
        the bucket) is listed with what its item holds and the reason as its error, so one
        broken run never hides the others."""
        try:
            if isinstance(result, _Unreadable):
                raise LunaflowError(result.reason)
            return self._run_from(item, result=result, first=first)
        except LunaflowError as e:
            return RunRecord(
                id=item["id"]["S"],
                workflow=item["workflow"]["S"],
                status=Status(item["status"]["S"]),
                input=None,
                error=f"{UNREADABLE_RUN}: {e}",
                parent_id=text(item.get("parent_id")),
                created_at=num(item.get("created_at")),
                updated_at=changed_at(item),
            )

    def _results(self, run_items: list[dict[str, Any]]) -> dict[str, Any]:
        """Completed runs' results, from the chunks their run items point at."""
        out: dict[str, Any] = {}
        by_pk = {i["pk"]["S"]: i for i in run_items}
        for chunk in self._by_key([{"pk": i["pk"], "sk": i["result_sk"]} for i in run_items]):
            run_id = chunk["pk"]["S"].removeprefix("RUN#")
            if of_another_start(chunk, by_pk[chunk["pk"]["S"]]):
                continue  # an earlier run of the id's: no result of this run's
            try:
                out[run_id] = self._result_in(chunk)
            except LunaflowError as e:
                out[run_id] = _Unreadable(str(e))  # its chunk is missing from the bucket
        return out

    def children(self, run_id: str) -> list[str]:
        return [_id_of(i) for i in self._index("by_parent", "parent_pk", f"PARENT#{run_id}")]

    def running_runs(self) -> list[str]:
        """Running runs, oldest first."""
        return [r.id for r in reversed(self._list(Status.RUNNING, None, 10**9))]  # ids: no steps

    def stale_running(self, before: float, now_ms: int, limit: int | None = None) -> list[str]:
        """Runs left running, unchanged since ``before`` and unleased, among the items older
        code wrote (``STATUS#running``). A run the current code writes is listed with every
        in-flight run (``STATUS#live``), where finding the running ones would read them
        all: it needs no such list, because a run that is running carries its wake-up (or,
        woken by its timer, that timer due) until the work that took it parks or ends it or
        releases it with no other lease held (``release_wake``), so the reconciler's wake-ups
        and overdue timers cover it."""
        candidates = [
            _id_of(i)
            for i in self._gathered("by_status", f"STATUS#{Status.RUNNING}")
            if num(i.get("updated_at")) < before
        ]
        busy = self.leased(candidates, now_ms)
        free = [run_id for run_id in candidates if run_id not in busy]
        return free if limit is None else free[:limit]

    # --- values runs publish (wf:set): items beside the run, the by_value index --------

    def _created_of(self, run_id: str) -> str:
        """The run's ``created_sk`` (fixed at its start), read once per run and kept."""
        known = self._created.get(run_id)
        if known is None:
            got = self._db.get_item(
                TableName=self.table, Key=run_key(run_id), ProjectionExpression="created_sk"
            ).get("Item", {})
            known = str(got.get("created_sk", {}).get("S", _created_sk(0, run_id)))
            self._keep_created(run_id, known)
        return known

    def _value_items(self, run_id: str, sets: dict[str, Any]) -> list[Any]:
        created = self._created_of(run_id)
        return [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        "pk": s(run_pk(run_id)),
                        "sk": s(VALUE_SK + key),
                        "value": s(compact(value)),
                        "value_pk": s(sharded(f"VAL#{key}", run_id)),
                        "value_sk": s(f"{published.sort_text(value)}#{created}"),
                    },
                }
            }
            for key, value in sets.items()
        ]

    def run_values(self, run_id: str) -> dict[str, Any]:
        items = self._partition(run_id, VALUE_SK)
        return {str(i["sk"]["S"]).removeprefix(VALUE_SK): json.loads(i["value"]["S"]) for i in items}

    def find_runs(
        self, where: Where, *, workflow: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        # Every shard of the key's index partition, merged by sort key: an equal value reads
        # newest first, a range reads up to MAX_RANGE_READ entries and orders them by created
        # time (the sort key's tail). A run's workflow and status are on its item, not in the
        # index, so the runs are read a page at a time, in that order, until `limit` of them
        # hold: a page cut to `limit` before the filters would drop runs further down.
        span = published.sort_range(where)
        exact = where.op == "="
        filtered = workflow is not None or status is not None

        def one(n_: int) -> Iterator[tuple[str, dict[str, Any]]]:
            values: dict[str, Any] = {":v": s(f"VAL#{where.key}#{n_:02d}")}
            condition = "value_pk = :v"
            if span is not None:
                low, high = span
                values[":a"], values[":b"] = s(low + "#" if exact else low), s(high + "#~")
                condition += " AND value_sk BETWEEN :a AND :b"
            for item in self._query(
                IndexName="by_value",
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                ScanIndexForward=not exact,
                Limit=min(limit + 1, 500) if exact and not filtered else 500,
            ):
                yield item["value_sk"]["S"], item

        def matching() -> Iterator[tuple[str, str]]:
            merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=exact)
            for sk_, item in merged:
                value = json.loads(item["value"]["S"])
                if where.holds(value):
                    created = sk_[len(published.sort_text(value)) + 1 :]  # the tail after the value's text
                    yield created, _id_of(item)

        if exact:  # one value: its entries come newest first, read only as far as needed
            ids: Iterator[str] = (run_id for _, run_id in itertools.islice(matching(), MAX_RANGE_READ))
        else:
            ids = (run_id for _, run_id in sorted(itertools.islice(matching(), MAX_RANGE_READ), reverse=True))
        runs: list[RunRecord] = []
        page = limit if not filtered else max(limit, 100)
        while len(runs) < limit:
            chunk = list(itertools.islice(ids, page))
            if not chunk:
                break
            runs += [
                r
                for r in self._hydrate(chunk)
                if workflow in (None, r.workflow) and status in (None, r.status)
            ]
        return runs[:limit]
