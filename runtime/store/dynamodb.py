"""The store on one DynamoDB table (the design is in docs/architecture.md).

Items of a run share its partition, so one consistent Query reads the run, its journal and
its signals. An append is one conditional write whose condition reads as a rule: "the
journal slot is free"; a park or an end writes the slot and the run item's summary in one
transaction, the summary conditional on "the run has not ended". Conditional-check failures
become ``JournalConflict``; nothing else leaks boto3.

Every value is stored once: an input in the run item's ``started`` (journal entry 1), a
step's values in its chunk, a signal's payload in its signal item (a ``wait.done`` that
consumed it points there), a run's result in its ``run.completed`` entry (the run item
points at that chunk). A text too large for an item goes to S3 (``runtime.store.blobs``) and the
item holds its key.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import secrets
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from runtime.core import published
from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.clock import Clock, SystemClock
from runtime.core.flow import Admission, Collect, Rate, SlotView, SlotWant
from runtime.core.journal import ENDED, Entry, Kind, Signal, Status
from runtime.core.published import Where
from runtime.core.values import compact
from runtime.errors import EngineBug, JournalConflict, LunaflowError, SignalBacklogFull
from runtime.store.base import (
    OWNER_DEAD_AFTER_MS,
    UNREADABLE_RUN,
    FirstSignal,
    Lease,
    Progress,
    RunRecord,
    RunUpdate,
    SignalRecord,
    Snapshot,
    TimerSet,
    checked_update,
    current_step,
)
from runtime.store.blobs import Blobs
from runtime.store.dynamodb_flow import AlsoRefused, DynamoFlow
from runtime.store.items import Item, Lost, conditional, error_code, n, num, s, text, whole

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

# Sort keys within a run's partition: journal chunks "J#<first seq>" < the run item "K" <
# secret pins "P#..." < signals "S#...". So "sk >= J#<n+1>" reads what was appended after
# entry n, the run and its signals in one Query.
RUN_SK = "K"
# A value the run published: sk `#V#<key>`, before every other item of the run's partition,
# so no read of its journal, run item or signals (`sk >= J#...`, `BETWEEN J# AND K`) meets it.
VALUE_SK = "#V#"
# Index entries a search by a number range reads before it orders them newest first.
MAX_RANGE_READ = 5000
OWNER_PK = "#OWNER"  # a lease owner's heartbeat: pk OWNER_PK, sk the owner
WAKE_PK = "#WAKE"  # a run asked to advance carries wake_pk/wake_sk (a sparse index)
TIMER_PK = "#TIMER"
CANCEL_PK = "#CANCEL"  # a cancel's intent until its cascade is done: pk CANCEL_PK, sk the run
ALL_RUNS = "#RUNS"
# The index partitions every run shares (all runs, a status, a workflow, the timers, the
# wake-ups) are split in SHARDS, the run's by a hash of its id: one index partition takes
# about 1,000 writes a second, and time-ordered sort keys keep DynamoDB from splitting it.
# A list reads every shard and merges them in order (``_gathered``).
SHARDS = 16
TTL_ATTRIBUTE = "expires_at"  # the table's time-to-live attribute (kv entries, owner beats)

# What an item holds inline; a larger text goes to S3 and the item holds its key (under the
# attribute's name + REF). An item is at most 400 KB with its attribute names: the run item
# carries up to three texts (started, error, current step), a signal item a payload
# of up to 256 KiB and its name. DynamoDB bills writes by the KB and S3 by the request, so
# past a few KB S3 is the cheaper home too; 64 KiB keeps the values most runs use inline.
INLINE_CHUNK_BYTES = 64 * 1024
INLINE_TEXT_BYTES = 32 * 1024
INLINE_SIGNAL_BYTES = 320 * 1024
REF = "_ref"
# A chunk's last entry (kind and name) is kept beside it while short, so reading a run's
# current step never fetches a chunk from S3.
TAIL_BYTES = 1024
# Where a journal entry's value lives when its chunk does not hold it.
IN_SIGNAL = "signal"  # wait.done's payload: the signal item it consumed
# The id of the last conditional write to an item (its start, a chunk, a summary). A write
# whose answer was lost is sent again by botocore, and that retry fails its own condition
# ("the slot is free", "no later summary"): the item as it is (ReturnValuesOnCondition-
# CheckFailure) carrying the write's own id says the write committed, not that another
# writer won (docs/architecture.md, "Retried writes").
WRITE_ID = "wid"


def _write_id() -> str:
    return secrets.token_hex(8)


def _mine(lost: Any, token: str) -> bool:
    """Whether a conditional write that failed its condition finds its own committed write."""
    item = getattr(lost, "item", None)
    return item is not None and text(item.get(WRITE_ID)) == token


def _fired(write: Any, **request: Any) -> bool:
    """Turn a due timer into a wake-up. A retry of a firing that committed finds no timer
    and the wake-up it set: fired all the same (whoever fired it, the wake-up is there)."""
    done = conditional(write, **request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    if done:
        return True
    old = done.item or {}
    return "timer_due" not in old and "wake_pk" in old and "pk" in old


class _Unreadable:
    """A value a list could not read, and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _pointed(item: dict[str, Any] | None) -> set[str]:
    """The S3 keys an item points to (its ``*_ref`` attributes)."""
    return {str(v["S"]) for k, v in (item or {}).items() if k.endswith(REF) and "S" in v}


def shard(run_id: str) -> int:
    """The index shard of a run (stable: a hash of its id)."""
    return int(hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8], 16) % SHARDS


def sharded(key: str, run_id: str) -> str:
    """An index partition key as a run writes it: ``<key>#<shard, 2 digits>``."""
    return f"{key}#{shard(run_id):02d}"


# GSIs: name -> (partition key attribute, sort key attribute)
INDEXES = {
    "by_status": ("status_pk", "created_sk"),
    "by_workflow": ("workflow_pk", "created_sk"),
    "by_parent": ("parent_pk", "created_sk"),
    "all_runs": ("all_pk", "created_sk"),
    "timers": ("timer_pk", "timer_sk"),
    "wakes": ("wake_pk", "wake_sk"),
    # Values runs publish (wf:set): one item per run and key, `VAL#<key>#<shard>`, sorted by
    # the value's order-preserving text then the run's created time (runtime.core.published).
    "by_value": ("value_pk", "value_sk"),
}


# What each index carries besides the keys: what its queries read and nothing else. An
# index entry is written again whenever an attribute it carries changes (and twice when its
# key moves), so the indexes carry keys only (the run id is the table key's) and the lists
# read run items themselves; the status index carries updated_at, which the reconciler
# filters running runs by and which changes with the status anyway.
PROJECTIONS: dict[str, list[str]] = {
    "by_status": ["updated_at"],
    "by_workflow": [],
    "by_parent": [],
    "all_runs": [],
    "timers": [],
    "wakes": [],
    "by_value": ["value"],  # a search checks the value itself (a string may hold '#')
}


def _projection(index: str) -> dict[str, Any]:
    attrs = PROJECTIONS[index]
    if not attrs:
        return {"ProjectionType": "KEYS_ONLY"}
    return {"ProjectionType": "INCLUDE", "NonKeyAttributes": attrs}


def table_definition(name: str) -> dict[str, Any]:
    """The CreateTable request for the store's table (tests, and the CDK stack mirrors it)."""
    attrs = {"pk", "sk"} | {a for pair in INDEXES.values() for a in pair}
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in sorted(attrs)],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": pk, "KeyType": "HASH"},
                    {"AttributeName": sk, "KeyType": "RANGE"},
                ],
                "Projection": _projection(index),
            }
            for index, (pk, sk) in INDEXES.items()
        ],
    }


def _filled(row: list[Any], run: RunRecord, signals: dict[int, SignalRecord]) -> Entry:
    """A stored entry with the value its chunk left out put back from where it lives."""
    data = row[3]
    if len(row) > 5:
        data = dict(data)
        for field, where in row[5].items():
            if where == IN_SIGNAL:
                found = signals.get(int(data["signal_id"]))
                if found is None:
                    raise EngineBug(
                        f"run '{run.id}' entry {row[0]} consumed signal {data['signal_id']}, which is missing"
                    )
                data[field] = found.payload
    return Entry(int(row[0]), Kind(row[1]), row[2], data, float(row[4]))


def _result_of(rows: list[list[Any]]) -> Any:
    """The result in a chunk's run.completed entry (None without one)."""
    ends = [row for row in rows if row[1] == Kind.COMPLETED]
    return ends[-1][3].get("result") if ends else None


def _armed_from(item: dict[str, Any]) -> tuple[int, str] | None:
    if "armed" not in item:
        return None
    due, how = json.loads(item["armed"]["S"])
    return int(due), str(how)


def _with_current_step(run: RunRecord, last: Entry) -> RunRecord:
    current = current_step(run.status, run.current_step, last)
    return run if current == run.current_step else RunRecord(**{**run.__dict__, "current_step": current})


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def _id_of(item: dict[str, Any]) -> str:
    """The run id of an index entry (its table key: indexes carry no other attribute)."""
    return str(item["pk"]["S"]).removeprefix("RUN#")


def run_key(run_id: str) -> Item:
    """The run item's key."""
    return {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)}


def _created_sk(at: float, run_id: str) -> str:
    return f"{at:020.6f}#{run_id}"


def _journal_sk(seq: int) -> str:
    return f"J#{seq:010d}"


def _signal_sk(signal_id: int) -> str:
    return f"S#{signal_id:010d}"


def _elided(entry: Entry) -> list[Any]:
    """An entry as its chunk stores it: ``[seq, kind, name, data, at]``, and a sixth element
    naming where a value the chunk leaves out lives (``{"payload": "signal"}``)."""
    row: list[Any] = [entry.seq, entry.kind, entry.name, entry.data, entry.at]
    if entry.kind == Kind.WAIT_DONE and entry.data.get("signal_id") is not None:
        row[3] = {k: v for k, v in entry.data.items() if k != "payload"}
        row.append({"payload": IN_SIGNAL})
    return row


def _intervals(ids: set[int]) -> list[list[int]]:
    """Signal ids as sorted ``[first, last]`` runs: what the run item keeps of its consumed
    signals (``sig_done``), a few numbers however many were consumed in order."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _ids(intervals: list[list[int]]) -> set[int]:
    return {i for first, last in intervals for i in range(first, last + 1)}


def _consumed(entries: Sequence[Entry]) -> dict[int, int]:
    return {
        int(e.data["signal_id"]): e.seq
        for e in entries
        if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None
    }


class DynamoDBStore:
    """``runtime.store.base.Store`` on DynamoDB. ``client`` is a boto3 DynamoDB client;
    ``secrets`` (optional) holds secret versions, e.g. ``SecretsManagerSecrets``; ``blobs``
    holds texts too large for an item (without it such a text is refused, naming the size)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        secrets: Any = None,
        clock: Clock | None = None,
        blobs: Blobs | None = None,
    ) -> None:
        self._db = client
        self.table = table
        self._secrets = secrets
        self.clock: Clock = clock or SystemClock()
        self.blobs = blobs
        # What this store last read or wrote of a run item, for a caller in the same
        # activation: the wake token its lease was taken at, the timer armed when it loaded.
        self._tokens: dict[str, int] = {}
        self._armed: dict[str, tuple[int, str] | None] = {}
        # The signals this store knows a run's journal consumed (its last load's run, and
        # what it appended since): written to the run item's ``sig_done`` with the next
        # summary, so the next activation reads only the signals still pending.
        self._done: dict[str, set[int]] = {}
        self._created: dict[str, str] = {}  # runs' created_sk, which value items sort by
        self._flow = DynamoFlow(client, table, run_pk, self._wake_admitted)

    # --- texts: inline while small, else in S3 -----------------------------------------

    def _spill(self, run_id: str, what: str, value: str, limit: int, written: list[str]) -> tuple[str, str]:
        """``(attribute suffix, attribute value)`` for a text: ``("", text)`` inline, or
        ``(REF, key)`` once it is written to S3 (its key added to ``written``)."""
        if len(value.encode("utf-8")) <= limit:
            return "", value
        if self.blobs is None:
            raise LunaflowError(
                f"the {what} of run '{run_id}' is {len(value.encode('utf-8'))} bytes, more than an item "
                f"holds inline ({limit}), and this store has no values bucket; deploy the stack again "
                "(it sets LUNAFLOW_VALUES_BUCKET)"
            )
        key = self.blobs.put(run_id, what, value)
        written.append(key)
        return REF, key

    def _text(self, item: dict[str, Any], name: str) -> str | None:
        """An item's text attribute, inline or from S3."""
        if name in item:
            return str(item[name]["S"])
        if name + REF in item:
            if self.blobs is None:
                raise LunaflowError(f"attribute {name} lives in S3 and this store has no values bucket")
            return self.blobs.get(item[name + REF]["S"])
        return None

    def _drop(self, written: list[str], committed: dict[str, Any] | None) -> None:
        """Delete the objects a write that lost its condition wrote, except any the item as
        it is (``committed``) points to. A write whose outcome is unknown (an error other
        than its condition) deletes nothing: it may have committed, and a leftover object
        costs storage, not meaning."""
        keep = _pointed(committed)
        gone = [key for key in written if key not in keep]
        if gone and self.blobs is not None:
            self.blobs.delete(gone)

    # --- reading items -----------------------------------------------------------------

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        kwargs.setdefault("TableName", self.table)
        while True:
            page = self._db.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _partition(self, run_id: str, prefix: str) -> Iterator[dict[str, Any]]:
        return self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":prefix": s(prefix)},
            ConsistentRead=True,
        )

    def _started(self, item: dict[str, Any]) -> Entry:
        """Journal entry 1, kept on the run item: the run's input lives here only."""
        started = json.loads(self._text(item, "started") or "{}")
        return Entry(1, Kind.STARTED, started["workflow"], started["data"], float(started["at"]))

    def _run_from(self, item: dict[str, Any], journal_len: int = 0, result: Any = None) -> RunRecord:
        """The run item as a record; ``result`` comes from the run's ``run.completed``
        entry (the item only points at its chunk)."""
        return RunRecord(
            id=item["id"]["S"],
            workflow=item["workflow"]["S"],
            status=Status(item["status"]["S"]),
            input=self._started(item).data.get("input"),
            result=result,
            error=self._text(item, "error"),
            parent_id=text(item.get("parent_id")),
            current_step=self._text(item, "current_step"),
            created_at=num(item.get("created_at")),
            updated_at=num(item.get("updated_at")),
            journal_len=journal_len,
        )

    def _rows(self, chunk: dict[str, Any]) -> list[list[Any]]:
        """A chunk's entries as stored: ``[[seq, kind, name, data, at(, where)], ...]``."""
        rows: list[list[Any]] = json.loads(self._text(chunk, "entries") or "[]")
        return rows

    def _tail(self, chunk: dict[str, Any]) -> tuple[Kind, str | None]:
        """The kind and name of a chunk's last entry, without reading S3 when it is kept."""
        if "tail" in chunk:
            kind, name = json.loads(chunk["tail"]["S"])
            return Kind(kind), name
        last = self._rows(chunk)[-1]
        return Kind(last[1]), last[2]

    def _signal_from(self, item: dict[str, Any], consumed: dict[int, int], ended: bool) -> SignalRecord:
        """A signal's state is read from the journal, not stored: consumed if a wait.done names
        it, set aside if the run has ended (or had when it arrived), pending otherwise."""
        signal_id = whole(item["signal_id"])
        seq = consumed.get(signal_id)
        if seq is not None:
            state = "consumed"
        elif ended or item.get("state", {}).get("S") == "set_aside":
            state = "set_aside"
        else:
            state = "pending"
        if "body_ref" in item:
            name, payload = json.loads(self._text(item, "body") or "[]")
        else:
            name, payload = item["name"]["S"], json.loads(item["payload"]["S"])
        return SignalRecord(
            id=signal_id,
            run_id=item["run_id"]["S"],
            name=name,
            payload=payload,
            at=num(item["at"]),
            state=state,
            consumed_seq=seq,
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        # Newest first between the journal and the run item: the run, then its last chunk.
        items = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :j AND :k",
            ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":j": s("J#"), ":k": s(RUN_SK)},
            ScanIndexForward=False,
            Limit=2,
            ConsistentRead=True,
        ).get("Items", [])
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return None
        chunk = next((i for i in items if i["sk"]["S"].startswith("J#")), None)
        if chunk is None:
            return self._run_from(run_item, 1)
        # A completed run's last chunk holds its run.completed entry, and so its result.
        done = run_item["status"]["S"] == Status.COMPLETED
        result = _result_of(self._rows(chunk)) if done else None
        run = self._run_from(run_item, whole(chunk["last"]), result)
        kind, name = self._tail(chunk)
        return _with_current_step(run, Entry(run.journal_len, kind, name))

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        if not after:
            # The whole run: its journal, and every signal (a wait.done's payload lives in
            # the signal it consumed).
            items = list(
                self._query(
                    KeyConditionExpression="pk = :pk AND sk >= :from",
                    ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":from": s(_journal_sk(1))},
                    ConsistentRead=True,
                )
            )
        else:
            items = self._load_after(run_id, after)
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return None
        self._armed = {run_id: _armed_from(run_item)}  # one run's: an activation's
        rows = [row for i in items if i["sk"]["S"].startswith("J#") for row in self._rows(i)]
        run = self._run_from(run_item)
        signal_items = [i for i in items if i["sk"]["S"].startswith("S#")]
        consumed = {
            int(row[3]["signal_id"]): int(row[0])
            for row in rows
            if row[1] == Kind.WAIT_DONE and row[3].get("signal_id") is not None
        }
        signals = {
            x.id: x for x in (self._signal_from(i, consumed, run.status in ENDED) for i in signal_items)
        }
        known = set(consumed) | _ids(json.loads(run_item.get("sig_done", {}).get("S", "[]")))
        if after:
            known |= self._done.get(run_id, set())
        self._done = {run_id: known}  # one run's: an activation's
        entries = [_filled(row, run, signals) for row in rows]
        if not after:
            entries.insert(0, self._started(run_item))
        length = entries[-1].seq if entries else after or 0
        result = None
        if run.status == Status.COMPLETED:
            ends = [e for e in entries if e.kind == Kind.COMPLETED]
            result = ends[-1].data.get("result") if ends else self._stored_result(run_id, run_item)
        run = RunRecord(**{**run.__dict__, "journal_len": length, "result": result})
        if entries:
            run = _with_current_step(run, entries[-1])
        pending = [Signal(x.id, x.name, x.payload, x.at) for x in signals.values() if x.state == "pending"]
        return Snapshot(run, sorted(pending, key=lambda x: x.id), entries)

    def _load_after(self, run_id: str, after: int) -> list[dict[str, Any]]:
        """What an activation with the journal up to ``after`` cached reads: the entries
        appended since, the run item, and the signals still pending. Consumed signals stay
        out of the range (the run item's ``sig_done`` names them), so a signal costs the
        same reads however many came before; a wait.done among the new entries brings the
        signal it consumed by key."""
        pk = s(run_pk(run_id))
        items = list(
            self._query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :run",
                ExpressionAttributeValues={":pk": pk, ":from": s(_journal_sk(after + 1)), ":run": s(RUN_SK)},
                ConsistentRead=True,
            )
        )
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return items
        done = _ids(json.loads(run_item.get("sig_done", {}).get("S", "[]"))) | self._done.get(run_id, set())
        sent = whole(run_item.get("signal_seq"))
        pending = [i for i in range(1, sent + 1) if i not in done]
        cited = {
            int(row[3]["signal_id"])
            for chunk in items
            if chunk["sk"]["S"].startswith("J#")
            for row in self._rows(chunk)
            if row[1] == Kind.WAIT_DONE and row[3].get("signal_id") is not None
        }
        if pending and len(pending) == sent - pending[0] + 1:
            # Pending ones are the newest (signals consumed in order): one range.
            items += self._query(
                KeyConditionExpression="pk = :pk AND sk >= :from",
                ExpressionAttributeValues={":pk": pk, ":from": s(_signal_sk(pending[0]))},
                ConsistentRead=True,
            )
            wanted = sorted(cited - set(pending))
        else:
            wanted = sorted(cited | set(pending))
        items += self._by_key([{"pk": pk, "sk": s(_signal_sk(i))} for i in wanted])
        return items

    def _by_key(self, keys: list[Any]) -> list[dict[str, Any]]:
        """Items by key, consistently, 100 at a time."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            batch = keys[start : start + 100]
            while batch:
                got: Any = self._db.batch_get_item(
                    RequestItems={self.table: {"Keys": batch, "ConsistentRead": True}}
                )
                out += got.get("Responses", {}).get(self.table, [])
                batch = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return out

    def journal(self, run_id: str) -> list[Entry]:
        snap = self.load(run_id)
        return [] if snap is None else snap.journal

    def _index(self, index: str, key: str, value: str, **more: Any) -> Iterator[dict[str, Any]]:
        return self._query(
            IndexName=index,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key},
            ExpressionAttributeValues={":v": s(value)},
            **more,
        )

    def _gathered(
        self,
        index: str,
        base: str,
        *,
        newest_first: bool = False,
        below: str | None = None,
        page: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """An index's entries under a sharded partition key, every shard's merged in sort
        key order (ties by run): each shard is one Query, read a page at a time, as far as
        the caller goes. ``below``: sort keys less than it only."""
        pk, sk = INDEXES[index]
        condition = "#k = :v" + ("" if below is None else " AND #s < :below")
        names = {"#k": pk, **({} if below is None else {"#s": sk})}

        def one(n_: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
            values = {":v": s(f"{base}#{n_:02d}"), **({} if below is None else {":below": s(below)})}
            more: dict[str, Any] = {} if page is None else {"Limit": page}
            for item in self._query(
                IndexName=index,
                KeyConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ScanIndexForward=not newest_first,
                **more,
            ):
                yield item[sk]["S"], item["pk"]["S"], item

        merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=newest_first)
        return (item for _, _, item in merged)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        if status is not None:
            index, base = "by_status", f"STATUS#{status}"
        elif workflow is not None:
            index, base = "by_workflow", f"WF#{workflow}"
        else:
            index, base = "all_runs", ALL_RUNS
        ids: list[str] = []
        # A shard holds about limit / SHARDS of the newest: pages of twice that (a shard that
        # runs out reads its next page) keep a list from reading SHARDS times its length.
        page = min(limit, max(25, 2 * limit // SHARDS))
        for item in self._gathered(index, base, newest_first=True, page=page):
            ids.append(_id_of(item))
            if len(ids) >= limit:
                break
        runs = self._hydrate(ids)
        # A status list is read from an index a moment behind the table: keep what still holds.
        return [
            r
            for r in runs
            if (status is None or r.status == status) and (workflow is None or r.workflow == workflow)
        ]

    def _hydrate(self, ids: list[str]) -> list[RunRecord]:
        """The run items themselves, in the order given (the indexes carry no values)."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 100):
            keys: list[Any] = [run_key(run_id) for run_id in ids[start : start + 100]]
            while keys:
                got: Any = self._db.batch_get_item(
                    RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}}
                )
                for item in got.get("Responses", {}).get(self.table, []):
                    found[item["id"]["S"]] = item
                keys = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        results = self._results([item for item in found.values() if "result_sk" in item])
        return [self._listed(found[r], results.get(r)) for r in ids if r in found]

    def _listed(self, item: dict[str, Any], result: Any) -> RunRecord:
        """A run as a list shows it. One whose value cannot be read (an object missing from
        the bucket) is listed with what its item holds and the reason as its error, so one
        broken run never hides the others."""
        try:
            if isinstance(result, _Unreadable):
                raise LunaflowError(result.reason)
            return self._run_from(item, result=result)
        except LunaflowError as e:
            return RunRecord(
                id=item["id"]["S"],
                workflow=item["workflow"]["S"],
                status=Status(item["status"]["S"]),
                input=None,
                error=f"{UNREADABLE_RUN}: {e}",
                parent_id=text(item.get("parent_id")),
                created_at=num(item.get("created_at")),
                updated_at=num(item.get("updated_at")),
            )

    def _results(self, run_items: list[dict[str, Any]]) -> dict[str, Any]:
        """Completed runs' results, from the chunks their run items point at."""
        keys: list[Any] = [{"pk": i["pk"], "sk": i["result_sk"]} for i in run_items]
        out: dict[str, Any] = {}
        for start in range(0, len(keys), 100):
            batch = keys[start : start + 100]
            while batch:
                got: Any = self._db.batch_get_item(
                    RequestItems={self.table: {"Keys": batch, "ConsistentRead": True}}
                )
                for chunk in got.get("Responses", {}).get(self.table, []):
                    run_id = chunk["pk"]["S"].removeprefix("RUN#")
                    try:
                        out[run_id] = _result_of(self._rows(chunk))
                    except LunaflowError as e:
                        out[run_id] = _Unreadable(str(e))  # its chunk is missing from the bucket
                batch = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return out

    def _stored_result(self, run_id: str, run_item: dict[str, Any]) -> Any:
        if "result_sk" not in run_item:
            return None
        chunk = self._db.get_item(
            TableName=self.table,
            Key={"pk": s(run_pk(run_id)), "sk": run_item["result_sk"]},
            ConsistentRead=True,
        ).get("Item")
        return None if chunk is None else _result_of(self._rows(chunk))

    def _last_chunk_sk(self, run_id: str) -> str | None:
        items = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :j AND :k",
            ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":j": s("J#"), ":k": s("J$")},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
            ProjectionExpression="sk",
        ).get("Items", [])
        return str(items[0]["sk"]["S"]) if items else None

    def children(self, run_id: str) -> list[str]:
        return [_id_of(i) for i in self._index("by_parent", "parent_pk", f"PARENT#{run_id}")]

    # --- cancel intents: one small partition (cancels are rare, and each is short-lived) --

    def begin_cancel(self, run_id: str, at: float) -> None:
        conditional(
            self._db.put_item,
            TableName=self.table,
            Item={"pk": s(CANCEL_PK), "sk": s(run_id), "at": n(at)},
            ConditionExpression="attribute_not_exists(pk)",  # a second cancel keeps the first's time
        )

    def end_cancel(self, run_id: str) -> None:
        self._db.delete_item(TableName=self.table, Key={"pk": s(CANCEL_PK), "sk": s(run_id)})

    def pending_cancels(self, before: float | None = None) -> list[str]:
        found = [
            (num(item["at"]), str(item["sk"]["S"]))
            for item in self._query(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": s(CANCEL_PK)},
                ConsistentRead=True,
            )
        ]
        return [run_id for at, run_id in sorted(found) if before is None or at < before]

    def running_runs(self) -> list[str]:
        return [_id_of(i) for i in self._gathered("by_status", f"STATUS#{Status.RUNNING}")]

    # --- creating and appending --------------------------------------------------------

    def _run_item(self, run: RunRecord) -> dict[str, Any]:
        created = _created_sk(run.created_at, run.id)
        item: dict[str, Any] = {
            **run_key(run.id),
            "id": s(run.id),
            "workflow": s(run.workflow),
            "status": s(run.status),
            "created_at": n(run.created_at),
            "updated_at": n(run.updated_at),
            "signal_seq": n(0),
            "summary_at": n(1),
            "created_sk": s(created),
            "status_pk": s(sharded(f"STATUS#{run.status}", run.id)),
            "workflow_pk": s(sharded(f"WF#{run.workflow}", run.id)),
            "all_pk": s(sharded(ALL_RUNS, run.id)),
            "wake_pk": s(sharded(WAKE_PK, run.id)),
            "wake_sk": s(f"{run.created_at:020.6f}"),
            "wake_token": n(1),
        }
        if run.parent_id is not None:
            item["parent_id"] = s(run.parent_id)
            item["parent_pk"] = s(f"PARENT#{run.parent_id}")
        return item

    def _chunk_put(self, run_id: str, entries: Sequence[Entry], written: list[str]) -> dict[str, Any]:
        rows = compact([_elided(e) for e in entries])
        where, value = self._spill(run_id, f"chunk-{entries[0].seq}", rows, INLINE_CHUNK_BYTES, written)
        item = {
            "pk": s(run_pk(run_id)),
            "sk": s(_journal_sk(entries[0].seq)),
            "last": n(entries[-1].seq),
            "entries" + where: s(value),
            WRITE_ID: s(_write_id()),
        }
        tail = compact([entries[-1].kind, entries[-1].name])
        if len(tail.encode("utf-8")) <= TAIL_BYTES:
            item["tail"] = s(tail)
        # The rule: a journal slot is written once. Every writer starts its chunk right after
        # the last chunk it read, so two writers with the same view claim the same key.
        return {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _transact(self, items: list[Any], run_id: str, seq: int, token: str, written: list[str]) -> None:
        """Write the items in one transaction; the last one is the summary carrying
        ``token``. A retry that finds that summary committed is the commit."""
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as e:
            if error_code(e) == "TransactionCanceledException":
                reasons: list[Any] = list(e.response.get("CancellationReasons", []))
                codes = [r.get("Code") for r in reasons]
                if "ConditionalCheckFailed" in codes:
                    old = reasons[-1].get("Item") if reasons else None
                    if codes[:-1] == ["None"] * (len(codes) - 1) and _mine(Lost(old), token):
                        return
                    self._drop(written, old)
                    raise JournalConflict(run_id, seq) from e
            raise LunaflowError(f"the journal of run '{run_id}' could not be written: {e}") from e

    def create_run(
        self,
        run: RunRecord,
        started: Entry,
        signal: FirstSignal | None = None,
        also: Sequence[dict[str, Any]] = (),
    ) -> tuple[RunRecord, bool]:
        """``also``: puts written in the run's transaction (a collection's items), each with
        its own condition; one that fails raises ``AlsoRefused`` and nothing is written."""
        # The run item is journal entry 1 as well (it carries run.started's data, the input
        # included), so a start is one write; chunks begin at entry 2.
        item = self._run_item(run)
        written: list[str] = []
        text_ = compact({"workflow": started.name, "data": started.data, "at": started.at})
        where, value = self._spill(run.id, "started", text_, INLINE_TEXT_BYTES, written)
        item["started" + where] = s(value)
        token = _write_id()
        item[WRITE_ID] = s(token)
        put = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(pk)",  # the id is free
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if signal is None and not also:
            created = conditional(self._db.put_item, **put)
        elif signal is None:
            created = self._create_signalled(put, None, token, also)
        else:
            item["signal_seq"] = n(1)  # the signal is number 1, as its first add_signal would be
            first = self._signal_item(run.id, 1, signal.name, signal.payload, signal.at, True, written)
            created = self._create_signalled(put, first, token, also)
        if not created and not _mine(created, token):
            self._drop(written, created.item)
            existing = self.get_run(run.id)
            if existing is None:
                raise EngineBug(f"run '{run.id}' was refused as existing but cannot be read")
            return existing, False
        return RunRecord(**{**run.__dict__, "journal_len": 1}), True

    def _create_signalled(
        self,
        put: dict[str, Any],
        first: dict[str, Any] | None,
        token: str,
        also: Sequence[dict[str, Any]] = (),
    ) -> Any:
        """Signal-with-start: the run item and its first signal item in one transaction, so
        no crash leaves the run without its signal. The signal item needs no condition of its
        own: it is written only if the run item's holds (the id was free). ``True``, or
        ``Lost`` with the run item as it is (a retry that finds its own ``wid`` committed).
        ``ClientRequestToken`` makes a retry of a committed transaction succeed on AWS."""
        try:
            items: list[Any] = [{"Put": put}]
            if first is not None:
                items.append({"Put": {"TableName": self.table, "Item": first}})
            items += [{"Put": {"TableName": self.table, **a}} for a in also]
            self._db.transact_write_items(TransactItems=items, ClientRequestToken=token)
            return True
        except ClientError as e:
            if error_code(e) == "TransactionCanceledException":
                reasons: list[Any] = list(e.response.get("CancellationReasons", []))
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    return Lost(reasons[0].get("Item"))
                if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons[1:]):
                    raise AlsoRefused() from e
            raise

    def _created_of(self, run_id: str) -> str:
        """The run's ``created_sk`` (fixed at its start), read once per run and kept."""
        known = self._created.get(run_id)
        if known is None:
            got = self._db.get_item(
                TableName=self.table, Key=run_key(run_id), ProjectionExpression="created_sk"
            ).get("Item", {})
            known = str(got.get("created_sk", {}).get("S", _created_sk(0, run_id)))
            if len(self._created) > 1024:
                self._created.clear()
            self._created[run_id] = known
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

    def _put_chunk(self, run_id: str, chunk: dict[str, Any], sets: dict[str, Any]) -> Any:
        """The chunk's conditional put; with values published, in one transaction with their
        items (at most ``MAX_PUBLISHED_KEYS`` + 1 items, under DynamoDB's 100), so the latest
        values never disagree with the journal. True, or ``Lost`` with the slot's item."""
        if not sets:
            return conditional(self._db.put_item, **chunk)
        token = chunk["Item"][WRITE_ID]["S"]
        try:
            items: list[Any] = [{"Put": chunk}, *self._value_items(run_id, sets)]
            self._db.transact_write_items(TransactItems=items, ClientRequestToken=token)
            return True
        except ClientError as e:
            if error_code(e) == "TransactionCanceledException":
                reasons: list[Any] = list(e.response.get("CancellationReasons", []))
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    return Lost(reasons[0].get("Item"))
            raise LunaflowError(f"the journal of run '{run_id}' could not be written: {e}") from e

    def run_values(self, run_id: str) -> dict[str, Any]:
        items = self._partition(run_id, VALUE_SK)
        return {str(i["sk"]["S"]).removeprefix(VALUE_SK): json.loads(i["value"]["S"]) for i in items}

    def find_runs(self, where: Where, *, workflow: str | None = None, limit: int = 1000) -> list[RunRecord]:
        # Every shard of the key's index partition, merged by sort key: an equal value reads
        # newest first and stops at `limit`; a range reads up to MAX_RANGE_READ entries and
        # orders them by created time (the sort key's tail).
        span = published.sort_range(where)
        exact = where.op == "="

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
                Limit=min(limit + 1, 500) if exact else 500,
            ):
                yield item["value_sk"]["S"], item

        matched: list[tuple[str, str]] = []
        merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=exact)
        bound = limit if exact else MAX_RANGE_READ
        for sk_, item in merged:
            value = json.loads(item["value"]["S"])
            if where.holds(value):
                created = sk_[len(published.sort_text(value)) + 1 :]  # the tail after the value's text
                matched.append((created, _id_of(item)))
                if len(matched) >= bound:
                    break
        matched.sort(reverse=True)
        ids = [run_id for _, run_id in matched]
        runs = (
            self._hydrate(ids)
            if workflow is None
            else [r for r in self._hydrate(ids) if r.workflow == workflow]
        )
        return runs[:limit]

    def append(
        self,
        run_id: str,
        expected_len: int,
        entries: Sequence[Entry],
        *,
        update: RunUpdate | None = None,
        timer: TimerSet | None = None,
    ) -> None:
        self._append(run_id, expected_len, entries, update=update, timer=timer)
        if update is not None and (update.status in ENDED or update.status == Status.FAILED):
            # After the end, not in its write (a transaction costs twice): a crash between
            # the two leaves slots the reconciler's sweep frees.
            self._flow.release(run_id)

    def _append(
        self,
        run_id: str,
        expected_len: int,
        entries: Sequence[Entry],
        *,
        update: RunUpdate | None = None,
        timer: TimerSet | None = None,
    ) -> None:
        """A step's commit is one conditional write: the chunk of entries, its key free. A
        status change or a timer then writes the run item's summary, conditional on the
        journal position it summarizes: it holds only while no summary of a later position
        was written (and the run has not ended), so a cancel that lands between the two
        writes wins and the summary never contradicts the journal. With no entries, the
        summary goes in a transaction with a check that the next slot is still free. If the
        process dies between the chunk and the summary, the summary stays behind the journal
        ("running"): the reconciler wakes the run and its replay writes the summary again."""
        update = checked_update(run_id, expected_len, entries, update)
        slot = expected_len + 1
        if entries:
            chunk_written: list[str] = []
            chunk = self._chunk_put(run_id, entries, chunk_written)
            put = self._put_chunk(run_id, chunk, published.latest(entries))
            if not put and not _mine(put, chunk["Item"][WRITE_ID]["S"]):
                self._drop(chunk_written, put.item)
                raise JournalConflict(run_id, slot)
            if run_id in self._done:
                self._done[run_id] |= set(_consumed(entries))
        if update is None and timer is None:
            return
        written: list[str] = []
        position = entries[-1].seq if entries else expected_len
        token = _write_id()
        summary = self._summary(run_id, position, entries, update, timer, written, token)
        # A child's end wakes its parent in the same transaction (twice the write units,
        # for child runs' ends only): no crash between the two can lose the parent's wake.
        woken = [] if update is None or update.wake is None else [{"Update": self._wake_item(update.wake)}]
        if entries and woken:
            update_ = {**summary, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
            self._transact([*woken, {"Update": update_}], run_id, position + 1, token, written)
            return
        if entries:
            saved = conditional(
                self._db.update_item, **summary, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
            if not saved and not _mine(saved, token):
                self._drop(written, saved.item)
                raise JournalConflict(run_id, position + 1)
            return
        check = {
            "TableName": self.table,
            "Key": {"pk": s(run_pk(run_id)), "sk": s(_journal_sk(slot))},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        update_ = {**summary, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        self._transact([{"ConditionCheck": check}, *woken, {"Update": update_}], run_id, slot, token, written)

    def _summary(
        self,
        run_id: str,
        position: int,
        entries: Sequence[Entry],
        update: RunUpdate | None,
        timer: TimerSet | None,
        written: list[str],
        token: str,
    ) -> dict[str, Any]:
        """The run item's update: status, current step, error and result (each text inline
        or in S3), timer, lease and wake-up as the new status implies."""
        names: dict[str, str] = {"#st": "status"}
        values: dict[str, Any] = {
            ":completed": s(Status.COMPLETED),
            ":cancelled": s(Status.CANCELLED),
            ":at": n(position),
            ":wid": s(token),
        }
        sets: list[str] = ["summary_at = :at", f"{WRITE_ID} = :wid"]
        removes: list[str] = []
        ended = update is not None and update.status in ENDED
        if update is not None:
            sets += ["#st = :st", "status_pk = :stpk"]
            values[":st"] = s(update.status)
            values[":stpk"] = s(sharded(f"STATUS#{update.status}", run_id))
            for attr, value in (("current_step", update.current_step), ("error", update.error)):
                placeholder = "#" + attr
                names[placeholder] = attr
                names[placeholder + "_ref"] = attr + REF
                if value is None:
                    removes += [placeholder, placeholder + "_ref"]
                    continue
                where, stored = self._spill(run_id, attr, value, INLINE_TEXT_BYTES, written)
                other = "_ref" if where == "" else ""
                sets.append(f"{placeholder}{'_ref' if where else ''} = :{attr}")
                values[f":{attr}"] = s(stored)
                removes.append(placeholder + other)
            if update.status != Status.RUNNING:
                # A lease is held only while a run is running: parking or ending releases it.
                removes += ["lease_owner", "lease_until"]
            if update.status == Status.COMPLETED:
                # The result lives in the run.completed entry: point at its chunk.
                result_sk = _journal_sk(entries[0].seq) if entries else self._last_chunk_sk(run_id)
                if result_sk is not None:
                    sets.append("result_sk = :rsk")
                    values[":rsk"] = s(result_sk)
        changed = max(
            [e.at for e in entries[-1:]] + ([update.at] if update and update.at is not None else []),
            default=None,
        )
        if changed is not None:  # the last entry's time, or a change no entry records (a failure)
            sets.append("updated_at = :upd")
            values[":upd"] = n(changed)
        if not ended and self._done.get(run_id):
            # Journal-confirmed only: a signal named here is consumed, so the next load
            # leaves it out of its reads.
            sets.append("sig_done = :done")
            values[":done"] = s(compact(_intervals(self._done[run_id])))
        condition = (
            "attribute_exists(pk) AND NOT (#st IN (:completed, :cancelled)) AND "
            f"(attribute_not_exists(summary_at) OR summary_at {'<' if entries else '<='} :at)"
        )
        served = self._tokens.get(run_id)
        if ended:
            removes += ["wake_pk", "wake_sk", "wake_resends"]
        elif update is not None and update.status != Status.RUNNING and served is not None:
            # A park by the lease holder also drops the wake-up it served, unless a newer
            # wake arrived meanwhile: then the park loses, and the run replays for it.
            removes += ["wake_pk", "wake_sk", "wake_resends"]
            condition += " AND wake_token = :served"
            values[":served"] = n(served)
        if ended or (timer is not None and timer.due_ms is None):
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif timer is not None and timer.due_ms is not None:
            sets += ["timer_due = :due", "timer_pk = :tpk", "timer_sk = :tsk"]
            values[":due"] = n(timer.due_ms)
            values[":tpk"] = s(sharded(TIMER_PK, run_id))
            values[":tsk"] = s(f"{timer.due_ms:015d}#{run_id}")
        expression = " ".join(
            part
            for part in (
                "SET " + ", ".join(sets) if sets else "",
                "REMOVE " + ", ".join(removes) if removes else "",
            )
            if part
        )
        return {
            "TableName": self.table,
            "Key": run_key(run_id),
            "UpdateExpression": expression,
            # The rules: the run exists, has not ended, and no summary of a later journal
            # position was written (an equal one: a re-park with no new entries).
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    # --- signals -----------------------------------------------------------------------

    def add_signal(
        self, run_id: str, name: str, payload: Any, at: float, max_backlog: int | None = None
    ) -> tuple[int, bool]:
        # Numbering comes from the run item, so arrival order is exact across senders. The
        # backlog bound is a condition of the same write: the backlog is the signals ever
        # sent less those consumed, and consumed ones only grow, so "fewer sent than the
        # consumed ones counted + the bound" holds at the write whoever else sends. Below
        # the bound in signals ever sent nothing is read; past it, the journal's count.
        bound, consumed = max_backlog, 0
        # The numbering carries this send's id (``sig_wid``), and holds only while the item
        # does not carry it: botocore's retry of a numbering that committed finds its own id
        # and reads its number from the item, instead of taking a second one.
        token = _write_id()
        while True:
            numbered = conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                # Numbering and the wake-up in one write; an ended run's wake-up is dropped by
                # the worker that finds it ended.
                UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at), sig_wid = :wid "
                "ADD signal_seq :one, wake_token :one",
                ConditionExpression="attribute_exists(pk) AND "
                "(attribute_not_exists(sig_wid) OR sig_wid <> :wid)"
                + ("" if bound is None else " AND signal_seq < :cap"),
                ExpressionAttributeValues={
                    ":one": n(1),
                    ":w": s(sharded(WAKE_PK, run_id)),
                    ":at": s(f"{at:020.6f}"),
                    ":wid": s(token),
                    **({} if bound is None else {":cap": n(consumed + bound)}),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if numbered:
                break
            if numbered.item is not None and text(numbered.item.get("sig_wid")) == token:
                numbered = {"Attributes": numbered.item}  # our own numbering, committed
                break
            snap = self.load(run_id)
            if snap is None:
                raise EngineBug(f"signal for missing run '{run_id}'")
            if bound is None or snap.run.status in ENDED:
                bound = None  # an ended run's signals are set aside, not kept waiting
                continue
            counted = len(_consumed(snap.journal or []))
            if counted <= consumed:
                raise SignalBacklogFull(run_id, bound)
            consumed = counted
        item = numbered["Attributes"]
        signal_id = whole(item["signal_seq"])
        live = item["status"]["S"] not in ENDED
        record = self._signal_item(run_id, signal_id, name, payload, at, live, [])
        self._db.put_item(TableName=self.table, Item=record)
        return signal_id, live

    def _signal_item(
        self, run_id: str, signal_id: int, name: str, payload: Any, at: float, live: bool, written: list[str]
    ) -> dict[str, Any]:
        """A signal's item: name and payload inline, or in S3 when large (``written``)."""
        record: dict[str, Any] = {
            "pk": s(run_pk(run_id)),
            "sk": s(_signal_sk(signal_id)),
            "signal_id": n(signal_id),
            "run_id": s(run_id),
            "at": n(at),
            "state": s("pending" if live else "set_aside"),
        }
        encoded = compact(payload)
        if len(name.encode("utf-8")) + len(encoded.encode("utf-8")) <= INLINE_SIGNAL_BYTES:
            record.update({"name": s(name), "payload": s(encoded)})
        else:
            _, key = self._spill(run_id, f"signal-{signal_id}", compact([name, payload]), 0, written)
            record["body_ref"] = s(key)
        return record

    def signals(self, run_id: str) -> list[SignalRecord]:
        snap = self.load(run_id)
        if snap is None:
            return []
        consumed = _consumed(snap.journal or [])
        ended = snap.run.status in ENDED
        return [self._signal_from(i, consumed, ended) for i in self._partition(run_id, "S#")]

    def signal_backlog(self, run_id: str) -> int:
        # Signals ever sent bound the backlog; only near the limit is it counted exactly.
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ProjectionExpression="signal_seq",
            ConsistentRead=True,
        ).get("Item", {})
        sent = whole(item.get("signal_seq"))
        if sent < MAX_SIGNAL_BACKLOG:
            return sent
        return len(self.pending_signals(run_id))

    def pending_signals(self, run_id: str) -> list[Signal]:
        snap = self.load(run_id)
        return [] if snap is None else snap.signals

    # --- timers and wake-ups -----------------------------------------------------------

    def _due(self, now_ms: int | None, limit: int | None = None) -> list[tuple[int, str]]:
        """Runs with a timer (due by ``now_ms``), earliest first, at most ``limit``:
        ``(due_ms, run id)``, read from the timer index's sort key."""
        below = None if now_ms is None else f"{now_ms + 1:015d}#"
        found: list[tuple[int, str]] = []
        for item in self._gathered("timers", TIMER_PK, below=below, page=limit):
            found.append((int(item["timer_sk"]["S"].split("#", 1)[0]), _id_of(item)))
            if limit is not None and len(found) >= limit:
                break
        return found

    def fire_due_timers(self, now_ms: int, limit: int | None = None) -> list[str]:
        fired = []
        for due, run_id in self._due(now_ms, limit):
            if _fired(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) "
                "ADD wake_token :one REMOVE timer_due, timer_pk, timer_sk",
                ConditionExpression="timer_due = :due",  # still this timer (else moved or fired)
                ExpressionAttributeValues={
                    ":due": n(due),
                    ":w": s(sharded(WAKE_PK, run_id)),
                    ":at": s(f"{now_ms / 1000:020.6f}"),
                    ":one": n(1),
                },
            ):
                fired.append(run_id)
        return fired

    def next_due(self) -> int | None:
        return min((due for due, _ in self._due(None, 1)), default=None)

    def timer(self, run_id: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ConsistentRead=True,
            ProjectionExpression="timer_due",
        ).get("Item")
        return None if not item or "timer_due" not in item else whole(item["timer_due"])

    def add_wakeup(self, run_id: str) -> None:
        conditional(self._db.update_item, **self._wake_item(run_id))

    def _wake_item(self, run_id: str) -> dict[str, Any]:
        """The update recording a wake-up on the run's item (alone, or in a child's end)."""
        return {
            "TableName": self.table,
            "Key": run_key(run_id),
            # The time is only set by the first wake: a wake-up waiting on is as old as its first ask.
            "UpdateExpression": "SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) ADD wake_token :one",
            "ConditionExpression": "attribute_exists(pk)",  # a missing run is ignored
            "ExpressionAttributeValues": {
                ":w": s(sharded(WAKE_PK, run_id)),
                ":at": s(f"{self.clock.now():020.6f}"),
                ":one": n(1),
            },
        }

    def wakeups(self) -> list[tuple[str, int]]:
        ids = [_id_of(i) for i in self._gathered("wakes", WAKE_PK)]
        tokens = self._items(ids, "id, wake_token, wake_pk")
        return [(r, whole(tokens[r].get("wake_token"))) for r in ids if "wake_pk" in tokens.get(r, {})]

    def stale_running(self, before: float, now_ms: int, limit: int | None = None) -> list[str]:
        candidates = [
            _id_of(i)
            for i in self._gathered("by_status", f"STATUS#{Status.RUNNING}")
            if num(i.get("updated_at")) < before
        ]
        busy = self.leased(candidates, now_ms)
        free = [run_id for run_id in candidates if run_id not in busy]
        return free if limit is None else free[:limit]

    def wakeups_older_than(self, at: float, limit: int | None = None) -> list[str]:
        """Wake-ups whose next check is due: first asked (or last re-sent by the reconciler,
        which moves them back, ``defer_wake``) before ``at``, oldest first."""
        ids: list[str] = []
        for item in self._gathered("wakes", WAKE_PK, below=f"{at:020.6f}", page=limit):
            ids.append(_id_of(item))
            if limit is not None and len(ids) >= limit:
                break
        return ids

    def clear_wakeup(self, run_id: str, token: int) -> None:
        self.release_wake(run_id, token)

    def drop_entries(self, run_id: str, before: int) -> None:
        """Chunks wholly from seq 2 up to ``before`` are deleted (each with its S3 object, if
        it spilled); a chunk reaching ``before`` stays whole (the executor writes a
        generation's first entry as a chunk of its own, so generations end at chunks')."""
        if before <= 2:
            return
        chunks = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={
                ":pk": s(run_pk(run_id)),
                ":from": s(_journal_sk(2)),
                ":to": s(_journal_sk(before - 1)),
            },
            ConsistentRead=True,
            ProjectionExpression="sk, #last, entries_ref",
            ExpressionAttributeNames={"#last": "last"},
        ).get("Items", [])
        refs: list[str] = []
        for chunk in chunks:
            if whole(chunk.get("last")) >= before:
                continue
            self._db.delete_item(TableName=self.table, Key={"pk": s(run_pk(run_id)), "sk": chunk["sk"]})
            if "entries_ref" in chunk:
                refs.append(str(chunk["entries_ref"]["S"]))
        if refs and self.blobs is not None:
            self.blobs.delete(refs)

    def pin_of(self, run_id: str) -> str | None:
        """The code version the run is pinned to (issue 29.2), if any."""
        item = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ConsistentRead=True, ProjectionExpression="pin"
        ).get("Item")
        return None if not item or "pin" not in item else str(item["pin"]["S"])

    def set_pin(self, run_id: str, version: str | None) -> None:
        """Pin the run to a code version, or (None) unpin it; a missing run is ignored. The pin
        is an attribute of the run item alone: no index carries it."""
        update = (
            {"UpdateExpression": "SET pin = :v", "ExpressionAttributeValues": {":v": s(version)}}
            if version is not None
            else {"UpdateExpression": "REMOVE pin"}
        )
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            ConditionExpression="attribute_exists(pk)",
            **update,
        )

    def progress(self, run_id: str) -> Progress:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ConsistentRead=True,
            ProjectionExpression="wake_pk, wake_sk, wake_resends, lease_owner, lease_until",
        ).get("Item")
        if not item:
            return Progress()
        waiting = "wake_pk" in item and "wake_sk" in item
        return Progress(
            wakeup_at=float(item["wake_sk"]["S"]) if waiting else None,
            wake_resends=whole(item.get("wake_resends")) if waiting else 0,
            lease_owner=item["lease_owner"]["S"] if "lease_owner" in item else None,
            lease_until_ms=whole(item["lease_until"]) if "lease_until" in item else None,
        )

    # --- serving a wake on AWS: read its token, work, release it ------------------------

    def wake_token(self, run_id: str) -> int | None:
        """The run's wake token now (None: no such run). An activation reads it before it
        starts and releases the wake-up with it when done (``release_wake``): a wake-up is
        cleared only by work that finished, never by work that only began."""
        item = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ProjectionExpression="wake_token", ConsistentRead=True
        ).get("Item")
        return None if item is None else whole(item.get("wake_token"))

    def release_wake(self, run_id: str, token: int) -> bool:
        """Drop the wake-up unless a newer wake arrived since ``token``; False when one did
        (it still waits, and needs a prompt)."""
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="REMOVE wake_pk, wake_sk, wake_resends",
                ConditionExpression="wake_token = :token",  # no newer wake arrived
                ExpressionAttributeValues={":token": n(token)},
            )
        )

    def fire_timer(self, run_id: str, now_ms: int) -> bool:
        """The run's timer, if due by ``now_ms``, becomes a wake-up (as ``fire_due_timers``
        does for every run): a run woken by its timer carries no stale timer while it runs,
        and if the activation fails, the wake-up is still there for the reconciler."""
        return _fired(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) "
            "ADD wake_token :one REMOVE timer_due, timer_pk, timer_sk",
            ConditionExpression="timer_due <= :now",
            ExpressionAttributeValues={
                ":now": n(now_ms),
                ":w": s(sharded(WAKE_PK, run_id)),
                ":at": s(f"{now_ms / 1000:020.6f}"),
                ":one": n(1),
            },
        )

    def defer_wake(self, run_id: str, until: float, *, resent: bool = True) -> None:
        """The reconciler looked at this wake-up: look at it again at ``until`` (epoch
        seconds), not at every reconcile, and count the re-send if it made one."""
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="SET wake_sk = :until" + (" ADD wake_resends :one" if resent else ""),
            ConditionExpression="attribute_exists(wake_pk)",  # still waiting
            ExpressionAttributeValues={":until": s(f"{until:020.6f}"), **({":one": n(1)} if resent else {})},
        )

    def waiting(self, run_ids: Sequence[str]) -> set[str]:
        """The runs among ``run_ids`` with a wake-up waiting."""
        return {run_id for run_id, item in self._items(run_ids, "id, wake_pk").items() if "wake_pk" in item}

    def resends(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How often the reconciler has re-sent each run's waiting wake."""
        return {
            run_id: whole(item.get("wake_resends"))
            for run_id, item in self._items(run_ids, "id, wake_resends").items()
        }

    def _items(
        self, run_ids: Sequence[str], projection: str, names: dict[str, str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Run items (some attributes), consistently, 100 at a time."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(run_ids), 100):
            keys: list[Any] = [run_key(run_id) for run_id in dict.fromkeys(run_ids[start : start + 100])]
            while keys:
                request: Any = {
                    "Keys": keys,
                    "ConsistentRead": True,
                    "ProjectionExpression": projection,
                }
                if names:
                    request["ExpressionAttributeNames"] = names
                got: Any = self._db.batch_get_item(RequestItems={self.table: request})
                for item in got.get("Responses", {}).get(self.table, []):
                    found[item["id"]["S"]] = item
                keys = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return found

    # --- flow control (runtime.store.dynamodb_flow) -----------------------------------

    on_admit: Any = None  # told of each run a freed slot admitted (Wakes sets it)

    def _wake_admitted(self, run_id: str) -> None:
        self.add_wakeup(run_id)
        if self.on_admit is not None:
            self.on_admit(run_id)

    def admit(self, run_id: str, wants: Sequence[SlotWant], rank: int) -> Admission:
        return self._flow.admit(run_id, wants, rank)

    def release_slots(self, run_id: str) -> list[str]:
        return self._flow.release(run_id)

    def waiting_for(self, run_id: str) -> Admission | None:
        return self._flow.waiting_for(run_id)

    def reserve_rate(self, rate: Rate, now_ms: int) -> int:
        return self._flow.reserve_rate(rate, now_ms)

    def set_flow_setting(self, name: str, value: str | None) -> list[str]:
        return self._flow.set_setting(name, value)

    def flow_settings(self) -> dict[str, str]:
        return self._flow.settings()

    def slot_views(self, limit: int = 100) -> list[SlotView]:
        return self._flow.views(limit)

    def collect(
        self, run: RunRecord, started: Entry, key: str, spec: Collect, now_ms: int
    ) -> tuple[RunRecord, bool]:
        for _ in range(8):  # a race with another start's new collection: look again
            got = self._flow.collect_into(run, key, spec, now_ms)
            if isinstance(got, str):
                existing = self.get_run(got)
                if existing is not None:
                    return existing, False
                continue
            try:
                record, created = self.create_run(run, started, also=got)
            except AlsoRefused:
                continue
            return record, created
        raise LunaflowError(f"starts of key '{key}' keep racing; start this run again")

    def close_collection(self, run_id: str, spec: Collect, now_ms: int) -> list[Any] | int | None:
        return self._flow.close(run_id, spec, now_ms)

    def sweep_slots(self) -> list[str]:
        """Free the slots of runs that ended, failed or are gone, and fill keys with room:
        the reconciler's backstop for a crash between a run's end and its release."""

        def ended(run_ids: Sequence[str]) -> set[str]:
            found = self._items(run_ids, "id, #st", {"#st": "status"})
            live = {r for r, item in found.items() if item["status"]["S"] not in (*ENDED, Status.FAILED)}
            return set(run_ids) - live

        return self._flow.sweep(ended)

    # --- a run's timer transport (AwsWaker's ledger) ------------------------------------

    def armed_timer(self, run_id: str) -> tuple[int, str] | None:
        """The timer transport armed for the run: ``(due_ms, "sqs" | "schedule")``, as the
        activation's load read it (only the waker changes it), else read now."""
        if run_id in self._armed:
            return self._armed.pop(run_id)
        item = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ProjectionExpression="armed", ConsistentRead=True
        ).get("Item")
        return None if item is None else _armed_from(item)

    def arm_timer(self, run_id: str, armed: tuple[int, str] | None) -> None:
        request: dict[str, Any] = {"TableName": self.table, "Key": run_key(run_id)}
        if armed is None:
            request["UpdateExpression"] = "REMOVE armed"
        else:
            request["UpdateExpression"] = "SET armed = :armed"
            request["ExpressionAttributeValues"] = {":armed": s(compact(list(armed)))}
        conditional(self._db.update_item, **request, ConditionExpression="attribute_exists(pk)")

    # --- leases: one worker advances a run at a time ------------------------------------

    def heartbeat(self, owner: str, now_ms: int) -> None:
        self._db.put_item(
            TableName=self.table,
            Item={
                "pk": s(OWNER_PK),
                "sk": s(owner),
                "beat_ms": n(now_ms),
                # Gone a day after the owner stopped (the table's TTL attribute).
                TTL_ATTRIBUTE: n(now_ms // 1000 + 86_400),
            },
        )

    def _beats(self, owners: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        unique = list(dict.fromkeys(owners))
        for start in range(0, len(unique), 100):
            keys: list[Any] = [{"pk": s(OWNER_PK), "sk": s(o)} for o in unique[start : start + 100]]
            while keys:
                got: Any = self._db.batch_get_item(
                    RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}}
                )
                for item in got.get("Responses", {}).get(self.table, []):
                    found[item["sk"]["S"]] = whole(item["beat_ms"])
                keys = got.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return found

    def _owner_dead(self, owner: str, now_ms: int) -> bool:
        beat = self._beats([owner]).get(owner)
        return beat is not None and beat < now_ms - OWNER_DEAD_AFTER_MS

    def leased(self, run_ids: Sequence[str], now_ms: int) -> set[str]:
        """The runs among ``run_ids`` whose lease is live at ``now_ms``: unexpired, and its
        owner beating (an owner that never beat keeps its lease until it expires)."""
        holders = {
            run_id: (item["lease_owner"]["S"], whole(item["lease_until"]))
            for run_id, item in self._items(run_ids, "id, lease_owner, lease_until").items()
            if "lease_until" in item and whole(item["lease_until"]) >= now_ms
        }
        beats = self._beats([owner for owner, _ in holders.values()])
        return {
            run_id
            for run_id, (owner, _) in holders.items()
            if beats.get(owner) is None or beats[owner] >= now_ms - OWNER_DEAD_AFTER_MS
        }

    def _lease_free(self, run_id: str, now_ms: int) -> bool:
        return run_id not in self.leased([run_id], now_ms)

    def acquire_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> Lease:
        """Take the run's lease. The wake-up that asked for the work stays until the work is
        done: the wake token the lease was taken at is kept (``lease_token``), for releasing
        the wake-up with it afterwards (``release_wake``), so an activation that fails leaves
        it for the reconciler."""
        request = {
            "TableName": self.table,
            "Key": run_key(run_id),
            # The token comes back with the write (no read of its own).
            "UpdateExpression": "SET lease_owner = :me, lease_until = :until, "
            "lease_token = if_not_exists(wake_token, :zero)",
            "ReturnValues": "UPDATED_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        values = {":me": s(owner), ":until": n(now_ms + lease_ms), ":zero": n(0)}
        taken = conditional(
            self._db.update_item,
            **request,
            ConditionExpression="attribute_exists(pk) AND "
            "(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :me)",
            ExpressionAttributeValues={**values, ":now": n(now_ms)},
        )
        if taken:
            self._tokens = {run_id: self._token_of(run_id, taken)}
            return Lease.OK
        old = taken.item
        if old is None:
            return Lease.MISSING
        holder = text(old.get("lease_owner"))
        if holder is None or not self._owner_dead(holder, now_ms):
            return Lease.BUSY
        # The holder stopped beating: take its lease, unless someone moved it meanwhile.
        stolen = conditional(
            self._db.update_item,
            **request,
            ConditionExpression="lease_owner = :holder AND lease_until = :held",
            ExpressionAttributeValues={**values, ":holder": s(holder), ":held": old["lease_until"]},
        )
        if not stolen:
            return Lease.BUSY
        self._tokens = {run_id: self._token_of(run_id, stolen)}
        return Lease.OK

    def _token_of(self, run_id: str, taken: Any) -> int:
        """The token a lease write returned; moto leaves out an attribute it set to the value
        it had (a lease taken again by its owner), which only a read then tells."""
        found = taken.get("Attributes", {}).get("lease_token")
        return whole(found) if found is not None else self.wake_token(run_id) or 0

    def lease_token(self, run_id: str) -> int | None:
        """The wake token this store's last lease on the run was taken at (once)."""
        return self._tokens.pop(run_id, None)

    def renew_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        """Extend ``owner``'s lease to ``now_ms + lease_ms``; False when it is no longer its
        own (it expired and another owner took it)."""
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="SET lease_until = :until",
                ConditionExpression="lease_owner = :me",
                ExpressionAttributeValues={":me": s(owner), ":until": n(now_ms + lease_ms)},
            )
        )

    def release_lease(self, run_id: str, owner: str) -> None:
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="REMOVE lease_owner, lease_until",
            ConditionExpression="lease_owner = :me",
            ExpressionAttributeValues={":me": s(owner)},
        )

    # --- secrets -----------------------------------------------------------------------

    def _secret_backend(self) -> Any:
        if self._secrets is None:
            raise LunaflowError("this store has no secrets backend; pass secrets=SecretsManagerSecrets(...)")
        return self._secrets

    def add_secret(self, name: str, value: str) -> int:
        return int(self._secret_backend().add(name, value))

    def secret(self, name: str, version: int | None = None) -> tuple[int, str] | None:
        found: tuple[int, str] | None = self._secret_backend().get(name, version)
        return found

    def pin_secret(self, run_id: str, name: str, version: int) -> int:
        if conditional(
            self._db.put_item,
            TableName=self.table,
            Item={"pk": s(run_pk(run_id)), "sk": s(f"P#{name}"), "version": n(version)},
            ConditionExpression="attribute_not_exists(pk)",  # a run keeps its first version
        ):
            self._secret_backend().keep(name, version)
            return version
        pinned = self.pinned_secret(run_id, name)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' pin of secret '{name}' vanished")
        if pinned == version:  # this pin, committed by an attempt whose answer was lost
            self._secret_backend().keep(name, version)
        return pinned

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table, Key={"pk": s(run_pk(run_id)), "sk": s(f"P#{name}")}, ConsistentRead=True
        ).get("Item")
        return None if item is None else whole(item["version"])

    def close(self) -> None:
        pass
