"""Reading the DynamoDB store's items: the state every part of ``DynamoDBStore`` shares
(``runtime.store.dynamodb``, whose constructor sets it), the Queries and batch reads, a run
item as a record, and a run with its journal and signals (``get_run``, ``load``).
"""

from __future__ import annotations

import heapq
import json
import threading
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from runtime.core.clock import Clock, now_ms
from runtime.core.journal import ENDED, Entry, Kind, Signal, Status
from runtime.errors import LunaflowError, NewerLayout
from runtime.store.base import RunRecord, SignalRecord, Snapshot, current_step
from runtime.store.dynamodb_chunks import FIRST, HEAD_LAST, ROWS, SPILLED, Tip, head_rows, journal_v2, tip_of
from runtime.store.dynamodb_layout import (
    INDEXES,
    LAYOUT,
    REF,
    RUN_SK,
    SHARDS,
    _armed_from,
    _filled,
    _ids,
    _journal_sk,
    _result_of,
    _signal_sk,
    changed_at,
    needed_layout,
    run_key,
    run_pk,
    run_signal_id,
    run_signal_item,
)
from runtime.store.dynamodb_spill import Spill
from runtime.store.dynamodb_ttl import expired, of_another_start, own
from runtime.store.items import num, s, text, whole

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

FIRST_SK = _journal_sk(1)  # the first chunk: it holds the input when the run item does not
FIRSTS_KEPT = 256  # first entries (inputs) read from first chunks, kept per store
UNSEEN_SIGNAL_MS = 60_000  # a numbered signal without its item is taken for abandoned after this


def refuse_newer(run_id: str, run_item: dict[str, Any]) -> None:
    """Raise ``NewerLayout`` for a run item naming a run layout past ``LAYOUT``."""
    needed = needed_layout(run_item)
    if needed > LAYOUT:
        raise NewerLayout(run_id, needed, LAYOUT)


def with_current_step(run: RunRecord, last: Entry) -> RunRecord:
    current = current_step(run.status, run.current_step, last)
    return run if current == run.current_step else RunRecord(**{**run.__dict__, "current_step": current})


TORN = object()  # a read of a run's journal with entries missing (``Reads._load``)
TORN_READS = 3


def _whole(chunks: list[tuple[str, list[list[Any]]]], after: int) -> bool:
    """Whether the rows of ``chunks`` (key, rows after ``after``) run on with no entry
    missing. A whole read (``after`` 0) may skip entries only before its first chunk past
    entry 1's: ``drop_entries`` deletes chunks from J#2 on, oldest first, so what is left of
    the journal, even by a drop cut short, is a suffix of it. Nowhere else may a chunk's
    rows start later than the entry after the last one read."""
    expected, opened = (after + 1, True) if after else (1, False)
    for sk, rows in chunks:
        for row in rows:
            seq = int(row[0])
            if seq != expected and (opened or seq < expected):
                return False
            expected = seq + 1
        opened = opened or sk != FIRST_SK
    return True


def _first_of(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's first chunk among items of its partition, if read."""
    return next((i for i in items if i["sk"]["S"] == FIRST_SK), None)


T = TypeVar("T")


class Activation(threading.local):
    """What the store read or wrote of a run item for the activation on the calling thread:
    the worker advances a batch's wakes at once, a thread each, on one store, and one
    thread's lease or load must not replace another's (a park that lost its token would
    leave its wake-up for the reconciler, and a count of consumed signals would read 0)."""

    def __init__(self) -> None:
        # The wake token its lease was taken at (or, eager, its load read), the timer armed
        # when it loaded, and the signals its run's journal consumed (its last load's run,
        # and what it appended since: written to ``sig_done`` with the next summary, so the
        # next activation reads only the signals still pending).
        self.tokens: dict[str, int] = {}
        self.armed: dict[str, tuple[int, str] | None] = {}
        self.done: dict[str, set[int]] = {}
        # While set (an eager activation, ``AwsRuntime.eager``), a load takes the wake token
        # it read as the one its park serves, as a lease takes it otherwise.
        self.serving_loaded = False
        # Runs this thread created, as a load would read them then (``Reads.seed``).
        self.seeded: dict[str, Snapshot] = {}
        # While set (a request's handler, ``AwsRuntime.fetch``), a run created is advanced
        # by the request right after: its wake-up is written pending (``create_run``), and
        # its id kept in ``created_pending`` for the request.
        self.pending_starts = False
        self.created_pending: set[str] = set()


class ThreadsOwn(Generic[T]):
    """An attribute of the store that is the calling thread's (its ``Activation``'s)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, store: Reads, owner: type | None = None) -> T:
        value: T = getattr(store._here, self.name)
        return value

    def __set__(self, store: Reads, value: T) -> None:
        setattr(store._here, self.name, value)


CREATED_KEPT = 1024  # runs' created_sk kept by a store
SEEDS_KEPT = 16  # runs a thread created, kept for the request's own activation of them
TIPS_KEPT = 1024  # runs' journal tips kept by a store


class Reads(Spill):
    """The base of every part of ``DynamoDBStore``: its state, and reading items and runs."""

    _db: DynamoDBClient
    table: str
    clock: Clock
    _here: Activation
    _firsts: dict[tuple[str, str], Entry]  # journal entries 1 read from first chunks (they never change)
    _tips: dict[str, Tip]  # runs' journal tips as last read or written here (runtime.store.dynamodb_chunks)
    _created: dict[str, str]  # runs' created_sk (runtime.store.dynamodb_index), refreshed by loads

    # The store's parts read and replace these as attributes; each thread sees its own.
    _tokens = ThreadsOwn[dict[str, int]]("tokens")
    _armed = ThreadsOwn[dict[str, tuple[int, str] | None]]("armed")
    _done = ThreadsOwn[dict[str, set[int]]]("done")
    serving_loaded = ThreadsOwn[bool]("serving_loaded")
    _seeded = ThreadsOwn[dict[str, Snapshot]]("seeded")
    pending_starts = ThreadsOwn[bool]("pending_starts")
    created_pending = ThreadsOwn[set[str]]("created_pending")

    if TYPE_CHECKING:  # another part's (runtime.store.dynamodb_signals)

        def _signal_from(
            self,
            item: dict[str, Any],
            consumed: dict[int, int],
            ended: bool,
            dropped: AbstractSet[int] = frozenset(),
        ) -> SignalRecord: ...

    # --- reading items -----------------------------------------------------------------

    def _query(
        self, first: Future[Any] | None = None, *, grow_to: int | None = None, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        """The items of a Query, a page at a time; ``first``: its first page, already asked;
        ``grow_to``: each next page four times the last one's ``Limit``, up to this (a read
        that goes deep pays fewer Queries, one that stops early reads little)."""
        kwargs.setdefault("TableName", self.table)
        page = first.result() if first is not None else self._db.query(**kwargs)
        while True:
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            if grow_to is not None and "Limit" in kwargs:
                kwargs["Limit"] = min(grow_to, 4 * kwargs["Limit"])
            page = self._db.query(**kwargs)

    def _gathered(
        self,
        index: str,
        base: str,
        *,
        newest_first: bool = False,
        below: str | None = None,
        since: str | None = None,
        page: int | None = None,
        pool: Executor | None = None,
        grow_to: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """An index's entries under a sharded partition key, every shard's merged in sort
        key order (ties by run): each shard is one Query, read a page at a time, as far as
        the caller goes. ``below``: sort keys less than it only; with ``since`` too, from
        ``since`` up to ``below``, both included. ``pool``: each shard's first page is asked
        for at once on it (a list merging many partitions would wait for a hundred Queries
        one after another). ``grow_to``: later pages grow to it."""
        pk, sk = INDEXES[index]
        condition = "#k = :v"
        if below is not None:
            condition += " AND #s < :below" if since is None else " AND #s BETWEEN :since AND :below"
        names = {"#k": pk, **({} if below is None else {"#s": sk})}

        def one(n_: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
            request: dict[str, Any] = {
                "TableName": self.table,
                "IndexName": index,
                "KeyConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {
                    ":v": s(f"{base}#{n_:02d}"),
                    **({} if below is None else {":below": s(below)}),
                    **({} if below is None or since is None else {":since": s(since)}),
                },
                "ScanIndexForward": not newest_first,
                **({} if page is None else {"Limit": page}),
            }
            first = None if pool is None else pool.submit(self._db.query, **request)
            pages = self._query(first, grow_to=grow_to, **request)
            return ((item[sk]["S"], item["pk"]["S"], item) for item in pages)

        merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=newest_first)
        return (item for _, _, item in merged)

    def _partition(self, run_id: str, prefix: str) -> Iterator[dict[str, Any]]:
        return self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":prefix": s(prefix)},
            ConsistentRead=True,
        )

    def _started(self, item: dict[str, Any], first: dict[str, Any] | None = None) -> Entry:
        """Journal entry 1, where the run's input lives: on the run item while small, else
        the run's first chunk (``first`` when the caller read it, else read by key once)."""
        if "started" in item or "started" + REF in item or FIRST in item:
            started = json.loads(self._text(item, FIRST if FIRST in item else "started") or "{}")
            return Entry(1, Kind.STARTED, started["workflow"], started["data"], float(started["at"]))
        run_id = str(item["id"]["S"])
        # By run and start: a run deleted at its expiry and started again under its id has
        # another first entry.
        cached = (run_id, str(item.get("created_sk", {}).get("S", "")))
        known = self._firsts.get(cached)
        if known is not None:
            return known
        if first is None:
            key = {"pk": s(run_pk(run_id)), "sk": s(_journal_sk(1))}
            first = self._db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            if first is None:
                raise LunaflowError(
                    f"run '{run_id}' has lost its first journal entry (its input): the item "
                    f"{run_pk(run_id)} / {_journal_sk(1)} is missing from table {self.table}. "
                    "A run's journal items are written once and deleted by lunaflow only with its "
                    "run item, at the run's expiry, so something outside it removed this one; "
                    "restore the item from the table's point-in-time recovery (on in the stack) "
                    "to read the run again"
                )
        row = self._rows(first)[0]
        entry = Entry(1, Kind.STARTED, row[2], row[3], float(row[4]))
        if len(self._firsts) >= FIRSTS_KEPT:
            self._firsts.clear()  # a bound, not a policy: a miss costs one read
        self._firsts[cached] = entry
        return entry

    def _run_from(
        self,
        item: dict[str, Any],
        journal_len: int = 0,
        result: Any = None,
        first: dict[str, Any] | None = None,
    ) -> RunRecord:
        """The run item as a record; ``result`` comes from the run's ``run.completed``
        entry (the item only points at its chunk), the input from journal entry 1 (on the
        item, or ``first``, the run's first chunk, when it holds it)."""
        return RunRecord(
            id=item["id"]["S"],
            workflow=item["workflow"]["S"],
            status=Status(item["status"]["S"]),
            input=self._started(item, first).data.get("input"),
            result=result,
            error=self._text(item, "error"),
            parent_id=text(item.get("parent_id")),
            current_step=self._text(item, "current_step"),
            created_at=num(item.get("created_at")),
            updated_at=changed_at(item),
            journal_len=journal_len,
            expires_at=num(item["expires_ms"]) / 1000 if "expires_ms" in item else None,
        )

    def _rows(self, chunk: dict[str, Any], *, last: bool = False) -> list[list[Any]]:
        """A chunk's entries as stored: ``[[seq, kind, name, data, at(, where)], ...]``; a
        chunk that grows in place (``runtime.store.dynamodb_chunks``) holds them a batch per
        append, and ``last`` reads its last batch only (the run's end, its last entry:
        no other batch's S3 object is read)."""
        if ROWS not in chunk:
            rows: list[list[Any]] = json.loads(self._text(chunk, "entries") or "[]")
            return rows
        out: list[list[Any]] = []
        for element in chunk[ROWS]["L"][-1:] if last else chunk[ROWS]["L"]:
            batch = str(element["S"])
            if batch.startswith(SPILLED):
                batch = self._text({"batch" + REF: s(batch[len(SPILLED) :])}, "batch") or "[]"
            out += json.loads(batch)
        return out

    def _tail(self, chunk: dict[str, Any]) -> tuple[Kind, str | None]:
        """The kind and name of a chunk's last entry, without reading S3 when it is kept."""
        if "tail" in chunk:
            kind, name = json.loads(chunk["tail"]["S"])
            return Kind(kind), name
        last = self._rows(chunk, last=True)[-1]
        return Kind(last[1]), last[2]

    def _run_and_tip(self, run_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The run item and the journal's last chunk (None: entry 1 alone), in one Query:
        newest first between the journal and the run item, two items. The tip is kept."""
        items = self._newest_to(run_id, RUN_SK, 2)
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        chunk = next((i for i in items if i["sk"]["S"].startswith("J#")), None)
        if run_item is None or expired(run_item, self.clock.now()):
            return None, None  # past its TTL expiry: deleted (runtime.store.dynamodb_ttl)
        chunk = self._own_chunk(run_id, run_item, chunk)
        if needed_layout(run_item) > LAYOUT:
            self._tips.pop(run_id, None)  # a newer lunaflow's run: an append reads it again, and refuses
        elif run_item is not None:
            self._keep_tip(run_id, tip_of(run_item, chunk))
        return run_item, chunk

    def _own_chunk(
        self, run_id: str, run_item: dict[str, Any], chunk: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """``chunk``, or the first one below it of the run item's start: a chunk of an
        earlier run of the id (one TTL has yet to delete, up to ``MAX_CHUNKS`` of them) is
        stepped over, a Query each."""
        while chunk is not None and of_another_start(chunk, run_item):
            chunk = self._chunk_below(run_id, chunk["sk"]["S"])
        return chunk

    def _chunk_below(self, run_id: str, sk: str) -> dict[str, Any] | None:
        """The journal's chunk before ``sk``, if any."""
        return next((i for i in self._newest_to(run_id, sk, 2) if i["sk"]["S"] != sk), None)

    def _newest_to(self, run_id: str, upto: str, limit: int) -> list[dict[str, Any]]:
        """The partition's last ``limit`` items from its first chunk to ``upto``, newest first."""
        items: list[dict[str, Any]] = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :j AND :upto",
            ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":j": s("J#"), ":upto": s(upto)},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        ).get("Items", [])
        return items

    def child_state(self, run_id: str) -> RunRecord | None:
        """A child's run, for its parent to journal: a newer lunaflow's run is refused."""
        run_item, chunk = self._run_and_tip(run_id)
        if run_item is not None:
            refuse_newer(run_id, run_item)
        return self._record_of(run_id, run_item, chunk)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._record_of(run_id, *self._run_and_tip(run_id))

    def _record_of(
        self, run_id: str, run_item: dict[str, Any] | None, chunk: dict[str, Any] | None
    ) -> RunRecord | None:
        if run_item is None:
            return None
        if chunk is None:
            head = head_rows(run_item)  # the journal is entry 1 and the head, if any
            if not head:
                return self._run_from(run_item, 1)
            done = run_item["status"]["S"] == Status.COMPLETED
            last = head[-1]
            run = self._run_from(run_item, int(last[0]), _result_of(head) if done else None)
            return with_current_step(run, Entry(run.journal_len, Kind(last[1]), last[2]))
        # A completed run's last chunk holds its run.completed entry, and so its result.
        done = run_item["status"]["S"] == Status.COMPLETED
        result = None
        if done and run_item.get("result_sk", {}).get("S", chunk["sk"]["S"]) != chunk["sk"]["S"]:
            result = self._stored_result(run_id, run_item)  # a chunk was appended after the end's
        elif done:
            result = self._result_in(chunk)
        run = self._run_from(run_item, whole(chunk["last"]), result, _first_of([chunk]))
        kind, name = self._tail(chunk)
        return with_current_step(run, Entry(run.journal_len, kind, name))

    def seed(self, snap: Snapshot) -> None:
        """A run this thread just created, whole (its first entry, no signal, wake token 1):
        the request's own activation of it (``serving_loaded``) starts from it instead of
        reading it back. Whatever changed it since is caught by that activation's writes as
        by any stale view: a journal entry by its chunk's condition, anything else (a signal,
        a cancel) by the wake token its park is conditional on. A signal this thread sends
        it drops the seed, so the activation does not lose its park to it. A seed lasts the
        request (``unseed``) and a create drops the one its id had."""
        seeds = self._seeded
        seeds[snap.run.id] = snap
        while len(seeds) > SEEDS_KEPT:
            del seeds[next(iter(seeds))]

    def unseed(self) -> None:
        """Drop this thread's seeds: they are the request's that made them, whose own
        activations are done (``AwsRuntime.fetch``); a later request's would start from a
        run that may have changed, or been deleted and created again, since."""
        self._seeded = {}

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        # The whole run (``after`` 0): its journal, the signals its wait.dones consumed (a
        # wait.done's payload lives in its signal's item) and the pending ones, not every
        # signal ever sent: those consumed in generations continue_as_new dropped stay unread.
        seeded = self._seeded.pop(run_id, None)
        if seeded is not None and self.serving_loaded and not after:
            self._armed = {run_id: None}
            self._tokens = {run_id: 1}
            self._done = {run_id: set()}
            return seeded
        for _ in range(TORN_READS):
            snap = self._load(run_id, after or 0)
            if snap is not TORN:
                return cast(Snapshot | None, snap)
        raise LunaflowError(
            f"run '{run_id}': {TORN_READS} reads of its journal in a row found entries missing between "
            "two chunks (the journal grew while a read that spans pages was under way); the "
            "activation is not run on such a view and is tried again at the run's next wake"
        )

    def _load(self, run_id: str, after: int) -> Any:
        """One read of the run (``load``); ``TORN`` when the journal it returns has a hole:
        a Query that spans pages (1 MB each) is no snapshot, and a chunk that grows in place
        may be read on one page before it grew and the chunk after it on the next."""
        items = self._load_after(run_id, after)
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return None
        self._armed = {run_id: _armed_from(run_item)}  # one run's: an activation's
        if "created_sk" in run_item:
            # The values an activation publishes sort by its run's start: the one read now,
            # not a run of the id deleted at its expiry whose start another load kept.
            self._keep_created(run_id, run_item["created_sk"]["S"])
        if self.serving_loaded:
            # An eager activation takes no lease: the wake-up it serves is the one it read.
            self._tokens = {run_id: whole(run_item.get("wake_token"))}
        chunks = [i for i in items if i["sk"]["S"].startswith("J#")]
        # Entries 2 on, while few, are on the run item (``dynamodb_chunks.HEAD``): before
        # every chunk, which begin after them.
        head = [row for row in head_rows(run_item) if int(row[0]) > after]
        if chunks:
            self._keep_tip(run_id, tip_of(run_item, chunks[-1]))
        elif not after or head:
            self._keep_tip(run_id, tip_of(run_item, None))
        # A chunk that grew in place since an earlier load holds rows that load read.
        batches = [(RUN_SK, head)] if head else []
        batches += [(i["sk"]["S"], [row for row in self._rows(i) if int(row[0]) > after]) for i in chunks]
        rows = [row for _, chunk_rows in batches for row in chunk_rows]
        first = _first_of(items)
        if journal_v2(run_item) and not _whole(batches, after):
            return TORN
        run = self._run_from(run_item, first=first)
        signal_items = [i for i in items if i["sk"]["S"].startswith("S#")]
        consumed = {
            int(row[3]["signal_id"]): int(row[0])
            for row in rows
            if row[1] == Kind.WAIT_DONE and row[3].get("signal_id") is not None
        }
        known = set(consumed) | _ids(json.loads(run_item.get("sig_done", {}).get("S", "[]")))
        # Only pending signals and those the entries read cite are read (``_load_after``): a
        # signal consumed in a generation continue_as_new dropped is in neither.
        signals = {
            x.id: x for x in (self._signal_from(i, consumed, run.status in ENDED) for i in signal_items)
        }
        if after:
            known |= self._done.get(run_id, set())
        self._done = {run_id: known}  # one run's: an activation's
        if len(known | set(signals)) < whole(run_item.get("signal_seq")) and (
            now_ms(self.clock) - whole(run_item.get("sig_at")) < UNSEEN_SIGNAL_MS
        ):
            # A signal is numbered (its wake-up recorded) but its item is not written yet:
            # its sender is between its two writes. This activation has not seen it, so its
            # park must leave that wake-up, as if it had come after the load: else a lost
            # prompt would leave the signal pending with nothing to wake the run. A number
            # whose item never came (a sender that died between them and was not retried)
            # stops holding wake-ups back after UNSEEN_SIGNAL_MS.
            self._tokens.pop(run_id, None)
        entries = [_filled(row, run, signals) for row in rows]
        if not after and first is None:
            entries.insert(0, self._started(run_item))  # kept on the run item
        length = entries[-1].seq if entries else after or 0
        result = None
        if run.status == Status.COMPLETED:
            ends = [e for e in entries if e.kind == Kind.COMPLETED]
            result = ends[-1].data.get("result") if ends else self._stored_result(run_id, run_item)
        run = RunRecord(**{**run.__dict__, "journal_len": length, "result": result})
        if entries:
            run = with_current_step(run, entries[-1])
        pending = [Signal(x.id, x.name, x.payload, x.at) for x in signals.values() if x.state == "pending"]
        return Snapshot(run, sorted(pending, key=lambda x: x.id), entries)

    def _load_after(self, run_id: str, after: int) -> list[dict[str, Any]]:
        """What an activation with the journal up to ``after`` cached reads: the entries
        appended since, the run item, and the signals still pending. Consumed signals stay
        out of the range (the run item's ``sig_done`` names them), so a signal costs the
        same reads however many came before; a wait.done among the new entries brings the
        signal it consumed by key."""
        pk = s(run_pk(run_id))
        start = _journal_sk(after + 1)
        known = self._tips.get(run_id)
        if after and known is not None and known.v2 and known.sk is not None and known.sk < start:
            start = known.sk  # entries after ``after`` may have been added to that chunk
        # An earlier run of the id's items, and a run past its TTL expiry, are not there.
        items = own(
            self._query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :run",
                ExpressionAttributeValues={":pk": pk, ":from": s(start), ":run": s(RUN_SK)},
                ConsistentRead=True,
            ),
            self.clock.now(),
        )
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return items
        refuse_newer(run_id, run_item)  # before reading anything a newer layout may have moved
        in_head = after <= whole(run_item.get(HEAD_LAST))  # no chunk holds it
        if after and journal_v2(run_item) and start == _journal_sk(after + 1) and not in_head:
            # Not known here which chunk holds entry ``after``: it may have grown past it.
            items = own(self._holding(run_id, after, run_item), self.clock.now(), run_item) + items
        after_rows = after
        done = _ids(json.loads(run_item.get("sig_done", {}).get("S", "[]"))) | self._done.get(run_id, set())
        sent = whole(run_item.get("signal_seq"))
        pending = [i for i in range(1, sent + 1) if i not in done]
        rows = [row for chunk in items if chunk["sk"]["S"].startswith("J#") for row in self._rows(chunk)]
        cited = {
            int(row[3]["signal_id"])
            for row in head_rows(run_item) + rows
            if int(row[0]) > after_rows and row[1] == Kind.WAIT_DONE and row[3].get("signal_id") is not None
        }
        # The signal on the run item (if any) is read with it: no item of its number exists.
        on_run = run_signal_id(run_item)
        if pending and len(pending) == sent - pending[0] + 1:
            # Pending ones are the newest (signals consumed in order): one range.
            if pending != [on_run]:
                items += own(
                    self._query(
                        KeyConditionExpression="pk = :pk AND sk >= :from",
                        ExpressionAttributeValues={":pk": pk, ":from": s(_signal_sk(pending[0]))},
                        ConsistentRead=True,
                    ),
                    self.clock.now(),
                    run_item,
                )
            wanted = sorted(cited - set(pending) - {on_run})
        else:
            wanted = sorted((cited | set(pending)) - {on_run})
        keys = [{"pk": pk, "sk": s(_signal_sk(i))} for i in wanted]
        items += own(self._by_key(keys), self.clock.now(), run_item)
        signal = run_signal_item(run_id, run_item)
        if signal is not None and (on_run in cited or on_run in pending):
            items.append(signal)
        return items

    def _holding(self, run_id: str, seq: int, run_item: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunk of the run item's start holding entry ``seq``, if it starts before it
        (one item, or none)."""
        newest = next(iter(self._newest_to(run_id, _journal_sk(seq), 1)), None)
        chunk = self._own_chunk(run_id, run_item, newest)
        return [] if chunk is None or whole(chunk.get("last")) <= seq else [chunk]

    def _keep_created(self, run_id: str, created: str) -> None:
        if len(self._created) >= CREATED_KEPT and run_id not in self._created:
            self._created.clear()  # a bound, not a policy: a miss costs one read
        self._created[run_id] = created

    def _keep_tip(self, run_id: str, tip: Tip) -> None:
        if len(self._tips) >= TIPS_KEPT and run_id not in self._tips:
            self._tips.clear()  # a bound, not a policy: a miss costs one read
        self._tips[run_id] = tip

    def _by_key(
        self,
        keys: Sequence[Any],
        projection: str | None = None,
        names: dict[str, str] | None = None,
        *,
        consistent: bool = True,
    ) -> list[dict[str, Any]]:
        """Items by key (``projection``: some attributes), consistently unless told, 100 at
        a time (a ``BatchGetItem``'s most), each batch until DynamoDB has answered every key."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: Any = {"Keys": list(keys[start : start + 100]), "ConsistentRead": consistent}
            if projection is not None:
                request["ProjectionExpression"] = projection
            if names:
                request["ExpressionAttributeNames"] = names
            while request["Keys"]:
                got: Any = self._db.batch_get_item(RequestItems={self.table: request})
                out += got.get("Responses", {}).get(self.table, [])
                request["Keys"] = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return out

    def journal(self, run_id: str) -> list[Entry]:
        snap = self.load(run_id)
        return [] if snap is None else snap.journal

    def _stored_result(self, run_id: str, run_item: dict[str, Any]) -> Any:
        if "result_sk" not in run_item:
            return None
        chunk = self._db.get_item(
            TableName=self.table,
            Key={"pk": s(run_pk(run_id)), "sk": run_item["result_sk"]},
            ConsistentRead=True,
        ).get("Item")
        if chunk is None or of_another_start(chunk, run_item):
            return None  # not this run's: its end pointed at no chunk of an earlier run of the id
        return self._result_in(chunk)

    def _result_in(self, chunk: dict[str, Any]) -> Any:
        """The result in the chunk's run.completed entry: its last batch's, or (an entry a
        cancel appended after it before the end's summary landed) any batch's."""
        rows = self._rows(chunk, last=True)
        if not any(row[1] == Kind.COMPLETED for row in rows):
            rows = self._rows(chunk)
        return _result_of(rows)

    def _items(
        self, run_ids: Sequence[str], projection: str, names: dict[str, str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Run items (some attributes), consistently, by run id."""
        keys = [run_key(run_id) for run_id in dict.fromkeys(run_ids)]
        return {item["id"]["S"]: item for item in self._by_key(keys, projection, names)}
