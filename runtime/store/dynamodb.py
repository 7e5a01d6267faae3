"""The store on one DynamoDB table (the design is in docs/architecture.md).

Items of a run share its partition, so one consistent Query reads the run, its journal and
its signals. A journal append is one transaction whose conditions read as rules: "the
journal is still N entries long" on the run item and "the journal slot is free" on each
entry. Conditional-check failures become ``JournalConflict``; nothing else leaks boto3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.clock import Clock, SystemClock
from runtime.core.journal import ENDED, Entry, Kind, Signal, Status
from runtime.core.values import compact
from runtime.errors import EngineBug, JournalConflict, LunaflowError, SignalBacklogFull
from runtime.store.base import (
    OWNER_DEAD_AFTER_MS,
    Lease,
    RunRecord,
    RunUpdate,
    SignalRecord,
    Snapshot,
    TimerSet,
    checked_update,
    current_step,
)
from runtime.store.items import Item, conditional, error_code, n, num, s, text, whole

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

# Sort keys within a run's partition: journal chunks "J#<first seq>" < the run item "K" <
# secret pins "P#..." < signals "S#...". So "sk >= J#<n+1>" reads what was appended after
# entry n, the run and its signals in one Query.
RUN_SK = "K"
OWNER_PK = "#OWNER"  # a lease owner's heartbeat: pk OWNER_PK, sk the owner
WAKE_PK = "#WAKE"  # a run asked to advance carries wake_pk/wake_sk (a sparse index)
TIMER_PK = "#TIMER"
ALL_RUNS = "#RUNS"

# GSIs: name -> (partition key attribute, sort key attribute)
INDEXES = {
    "by_status": ("status_pk", "created_sk"),
    "by_workflow": ("workflow_pk", "created_sk"),
    "by_parent": ("parent_pk", "created_sk"),
    "all_runs": ("all_pk", "created_sk"),
    "timers": ("timer_pk", "timer_sk"),
    "wakes": ("wake_pk", "wake_sk"),
}


# The run attributes the indexes carry. Leases, wake tokens and signal counters are left
# out, so taking a lease or numbering a signal writes no index.
PROJECTED = [
    "id",
    "workflow",
    "status",
    "input",
    "result",
    "error",
    "parent_id",
    "current_step",
    "created_at",
    "updated_at",
    "timer_due",
    "wake_token",
]


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
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": PROJECTED},
            }
            for index, (pk, sk) in INDEXES.items()
        ],
    }


def _with_current_step(run: RunRecord, last: Entry) -> RunRecord:
    current = current_step(run.status, run.current_step, last)
    return run if current == run.current_step else RunRecord(**{**run.__dict__, "current_step": current})


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def run_key(run_id: str) -> Item:
    """The run item's key."""
    return {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)}


def _created_sk(at: float, run_id: str) -> str:
    return f"{at:020.6f}#{run_id}"


def _journal_sk(seq: int) -> str:
    return f"J#{seq:010d}"


def _signal_sk(signal_id: int) -> str:
    return f"S#{signal_id:010d}"


def _started_from(item: dict[str, Any]) -> Entry:
    """Journal entry 1, kept on the run item."""
    started = json.loads(item["started"]["S"])
    return Entry(1, Kind.STARTED, started["workflow"], started["data"], float(started["at"]))


def _run_from(item: dict[str, Any], journal_len: int = 0) -> RunRecord:
    result = text(item.get("result"))
    return RunRecord(
        id=item["id"]["S"],
        workflow=item["workflow"]["S"],
        status=Status(item["status"]["S"]),
        input=json.loads(item["input"]["S"]),
        result=None if result is None else json.loads(result),
        error=text(item.get("error")),
        parent_id=text(item.get("parent_id")),
        current_step=text(item.get("current_step")),
        created_at=num(item.get("created_at")),
        updated_at=num(item.get("updated_at")),
        journal_len=journal_len,
    )


def _entries_from(chunk: dict[str, Any]) -> list[Entry]:
    """A journal chunk holds the entries of one append: ``[[seq, kind, name, data, at], ...]``."""
    return [Entry(int(e[0]), Kind(e[1]), e[2], e[3], float(e[4])) for e in json.loads(chunk["entries"]["S"])]


def _chunk_text(entries: Sequence[Entry]) -> str:
    return compact([[e.seq, e.kind, e.name, e.data, e.at] for e in entries])


def _signal_from(item: dict[str, Any], consumed: dict[int, int], ended: bool) -> SignalRecord:
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
    return SignalRecord(
        id=signal_id,
        run_id=item["run_id"]["S"],
        name=item["name"]["S"],
        payload=json.loads(item["payload"]["S"]),
        at=num(item["at"]),
        state=state,
        consumed_seq=seq,
    )


def _consumed(entries: Sequence[Entry]) -> dict[int, int]:
    return {
        int(e.data["signal_id"]): e.seq
        for e in entries
        if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None
    }


class DynamoDBStore:
    """``runtime.store.base.Store`` on DynamoDB. ``client`` is a boto3 DynamoDB client;
    ``secrets`` (optional) holds secret versions, e.g. ``SecretsManagerSecrets``."""

    def __init__(
        self, client: DynamoDBClient, table: str, *, secrets: Any = None, clock: Clock | None = None
    ) -> None:
        self._db = client
        self.table = table
        self._secrets = secrets
        self.clock: Clock = clock or SystemClock()

    # --- reading -----------------------------------------------------------------------

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
            return _run_from(run_item, 1)
        run = _run_from(run_item, whole(chunk["last"]))
        return _with_current_step(run, _entries_from(chunk)[-1])

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        start = _journal_sk((after or 0) + 1)
        items = list(
            self._query(
                KeyConditionExpression="pk = :pk AND sk >= :from",
                ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":from": s(start)},
                ConsistentRead=True,
            )
        )
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        if run_item is None:
            return None
        entries = [e for i in items if i["sk"]["S"].startswith("J#") for e in _entries_from(i)]
        if not after:
            entries.insert(0, _started_from(run_item))
        length = entries[-1].seq if entries else after or 0
        run = _run_from(run_item, length)
        if entries:
            run = _with_current_step(run, entries[-1])
        consumed = _consumed(entries)
        ended = run.status in ENDED
        pending = [
            Signal(x.id, x.name, x.payload, x.at)
            for x in (_signal_from(i, consumed, ended) for i in items if i["sk"]["S"].startswith("S#"))
            if x.state == "pending"
        ]
        return Snapshot(run, pending, entries)

    def journal(self, run_id: str) -> list[Entry]:
        snap = self.load(run_id)
        return [] if snap is None else snap.journal

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        if status is not None:
            index, key, value = "by_status", "status_pk", f"STATUS#{status}"
        elif workflow is not None:
            index, key, value = "by_workflow", "workflow_pk", f"WF#{workflow}"
        else:
            index, key, value = "all_runs", "all_pk", ALL_RUNS
        out: list[RunRecord] = []
        for item in self._query(
            IndexName=index,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key},
            ExpressionAttributeValues={":v": s(value)},
            ScanIndexForward=False,
        ):
            run = _run_from(item)
            if workflow is not None and run.workflow != workflow:
                continue
            out.append(run)
            if len(out) >= limit:
                break
        return out

    def children(self, run_id: str) -> list[str]:
        return [
            i["id"]["S"]
            for i in self._query(
                IndexName="by_parent",
                KeyConditionExpression="parent_pk = :p",
                ExpressionAttributeValues={":p": s(f"PARENT#{run_id}")},
            )
        ]

    def running_runs(self) -> list[str]:
        return [r.id for r in reversed(self.list_runs(status="running", limit=1_000_000))]

    # --- creating and appending --------------------------------------------------------

    def _run_item(self, run: RunRecord) -> dict[str, Any]:
        created = _created_sk(run.created_at, run.id)
        item: dict[str, Any] = {
            **run_key(run.id),
            "id": s(run.id),
            "workflow": s(run.workflow),
            "status": s(run.status),
            "input": s(compact(run.input)),
            "created_at": n(run.created_at),
            "updated_at": n(run.updated_at),
            "signal_seq": n(0),
            "created_sk": s(created),
            "status_pk": s(f"STATUS#{run.status}"),
            "workflow_pk": s(f"WF#{run.workflow}"),
            "all_pk": s(ALL_RUNS),
            "wake_pk": s(WAKE_PK),
            "wake_sk": s(f"{run.created_at:020.6f}"),
            "wake_token": n(1),
        }
        if run.parent_id is not None:
            item["parent_id"] = s(run.parent_id)
            item["parent_pk"] = s(f"PARENT#{run.parent_id}")
        return item

    def _chunk_put(self, run_id: str, entries: Sequence[Entry]) -> dict[str, Any]:
        item = {
            "pk": s(run_pk(run_id)),
            "sk": s(_journal_sk(entries[0].seq)),
            "last": n(entries[-1].seq),
            "entries": s(_chunk_text(entries)),
        }
        # The rule: a journal slot is written once. Every writer starts its chunk right after
        # the last chunk it read, so two writers with the same view claim the same key.
        return {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}

    def _put_chunk(self, run_id: str, entries: Sequence[Entry], slot: int) -> None:
        if not conditional(self._db.put_item, **self._chunk_put(run_id, entries)):
            raise JournalConflict(run_id, slot)

    def _transact(self, items: list[Any], run_id: str, seq: int) -> None:
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as e:
            if error_code(e) == "TransactionCanceledException":
                reasons = [r.get("Code") for r in e.response.get("CancellationReasons", [])]
                if "ConditionalCheckFailed" in reasons:
                    raise JournalConflict(run_id, seq) from e
            raise LunaflowError(f"the journal of run '{run_id}' could not be written: {e}") from e

    def create_run(self, run: RunRecord, started: Entry) -> tuple[RunRecord, bool]:
        # The run item is journal entry 1 as well (it carries run.started's data), so a
        # start is one write; chunks begin at entry 2.
        item = self._run_item(run)
        item["started"] = s(compact({"workflow": started.name, "data": started.data, "at": started.at}))
        created = conditional(
            self._db.put_item,
            TableName=self.table,
            Item=item,
            ConditionExpression="attribute_not_exists(pk)",  # the id is free
        )
        if not created:
            existing = self.get_run(run.id)
            if existing is None:
                raise EngineBug(f"run '{run.id}' was refused as existing but cannot be read")
            return existing, False
        return RunRecord(**{**run.__dict__, "journal_len": 1}), True

    def append(
        self,
        run_id: str,
        expected_len: int,
        entries: Sequence[Entry],
        *,
        update: RunUpdate | None = None,
        timer: TimerSet | None = None,
    ) -> None:
        """One conditional write per append: the chunk of entries, its key free. A status
        change or a timer adds the run item's update (and, with no entries, a check in the
        same transaction that the next slot is still free)."""
        update = checked_update(run_id, expected_len, entries, update)
        slot = expected_len + 1
        if update is None and timer is None:
            if entries:
                self._put_chunk(run_id, entries, slot)
            return
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        ended = update is not None and update.status in ENDED
        if update is not None:
            names.update({"#st": "status", "#cur": "current_step", "#err": "error", "#res": "result"})
            sets += ["#st = :st", "status_pk = :stpk"]
            values[":st"] = s(update.status)
            values[":stpk"] = s(f"STATUS#{update.status}")
            for attr, value in (("#cur", update.current_step), ("#err", update.error)):
                if value is None:
                    removes.append(attr)
                else:
                    sets.append(f"{attr} = {attr.replace('#', ':')}")
                    values[attr.replace("#", ":")] = s(value)
            if update.result is None:
                removes.append("#res")
            else:
                sets.append("#res = :res")
                values[":res"] = s(compact(update.result))
            if update.status != Status.RUNNING:
                # A lease is held only while a run is running: parking or ending releases it.
                removes += ["lease_owner", "lease_until"]
        if entries:
            sets.append("updated_at = :upd")
            values[":upd"] = n(entries[-1].at)
        if ended:
            removes += ["wake_pk", "wake_sk"]
        if ended or (timer is not None and timer.due_ms is None):
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif timer is not None and timer.due_ms is not None:
            sets += ["timer_due = :due", "timer_pk = :tpk", "timer_sk = :tsk"]
            values[":due"] = n(timer.due_ms)
            values[":tpk"] = s(TIMER_PK)
            values[":tsk"] = s(f"{timer.due_ms:015d}#{run_id}")
        expression = " ".join(
            part
            for part in (
                "SET " + ", ".join(sets) if sets else "",
                "REMOVE " + ", ".join(removes) if removes else "",
            )
            if part
        )
        run_update: dict[str, Any] = {
            "TableName": self.table,
            "Key": run_key(run_id),
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)",
        }
        if names:
            run_update["ExpressionAttributeNames"] = names
        if values:
            run_update["ExpressionAttributeValues"] = values
        if not entries:
            # No entries, but the update must still lose to anyone who appended meanwhile.
            check = {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": {"pk": s(run_pk(run_id)), "sk": s(_journal_sk(slot))},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            self._transact([check, {"Update": run_update}], run_id, slot)
            return
        # The journal first, then the run item: the journal is the truth and the run item a
        # summary of it. Two plain writes cost half a transaction; if the process dies between
        # them, the run stays "running" and the reconciler wakes it, and replay writes the
        # summary again.
        self._put_chunk(run_id, entries, slot)
        self._db.update_item(**run_update)

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
        while True:
            numbered = conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                # Numbering and the wake-up in one write; an ended run's wake-up is dropped by
                # the worker that finds it ended.
                UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) "
                "ADD signal_seq :one, wake_token :one",
                ConditionExpression="attribute_exists(pk)"
                + ("" if bound is None else " AND signal_seq < :cap"),
                ExpressionAttributeValues={
                    ":one": n(1),
                    ":w": s(WAKE_PK),
                    ":at": s(f"{at:020.6f}"),
                    **({} if bound is None else {":cap": n(consumed + bound)}),
                },
                ReturnValues="ALL_NEW",
            )
            if numbered:
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
        self._db.put_item(
            TableName=self.table,
            Item={
                "pk": s(run_pk(run_id)),
                "sk": s(_signal_sk(signal_id)),
                "signal_id": n(signal_id),
                "run_id": s(run_id),
                "name": s(name),
                "payload": s(compact(payload)),
                "at": n(at),
                "state": s("pending" if live else "set_aside"),
            },
        )
        return signal_id, live

    def signals(self, run_id: str) -> list[SignalRecord]:
        snap = self.load(run_id)
        if snap is None:
            return []
        consumed = _consumed(snap.journal or [])
        ended = snap.run.status in ENDED
        return [_signal_from(i, consumed, ended) for i in self._partition(run_id, "S#")]

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

    def _due(self, now_ms: int | None) -> list[dict[str, Any]]:
        condition = "timer_pk = :t"
        values = {":t": s(TIMER_PK)}
        if now_ms is not None:
            condition += " AND timer_sk <= :now"
            values[":now"] = s(f"{now_ms:015d}#\uffff")
        return list(
            self._query(
                IndexName="timers", KeyConditionExpression=condition, ExpressionAttributeValues=values
            )
        )

    def fire_due_timers(self, now_ms: int) -> list[str]:
        fired = []
        for item in self._due(now_ms):
            run_id = item["id"]["S"]
            if conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) "
                "ADD wake_token :one REMOVE timer_due, timer_pk, timer_sk",
                ConditionExpression="timer_due = :due",  # still this timer (else moved or fired)
                ExpressionAttributeValues={
                    ":due": item["timer_due"],
                    ":w": s(WAKE_PK),
                    ":at": s(f"{now_ms / 1000:020.6f}"),
                    ":one": n(1),
                },
            ):
                fired.append(run_id)
        return fired

    def next_due(self) -> int | None:
        items = self._due(None)
        return min((whole(i["timer_due"]) for i in items), default=None)

    def timer(self, run_id: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ConsistentRead=True,
            ProjectionExpression="timer_due",
        ).get("Item")
        return None if not item or "timer_due" not in item else whole(item["timer_due"])

    def add_wakeup(self, run_id: str) -> None:
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            # The time is only set by the first wake: a wake-up waiting on is as old as its first ask.
            UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at) ADD wake_token :one",
            ConditionExpression="attribute_exists(pk)",  # a missing run is ignored
            ExpressionAttributeValues={
                ":w": s(WAKE_PK),
                ":at": s(f"{self.clock.now():020.6f}"),
                ":one": n(1),
            },
        )

    def wakeups(self) -> list[tuple[str, int]]:
        items = self._query(
            IndexName="wakes",
            KeyConditionExpression="wake_pk = :p",
            ExpressionAttributeValues={":p": s(WAKE_PK)},
        )
        return [(i["id"]["S"], whole(i["wake_token"])) for i in items]

    def stale_running(self, before: float, now_ms: int) -> list[str]:
        out = []
        for run in self.list_runs(status="running", limit=10_000):
            if run.updated_at >= before:
                continue
            if self._lease_free(run.id, now_ms):
                out.append(run.id)
        return out

    def wakeups_older_than(self, at: float) -> list[str]:
        items = self._query(
            IndexName="wakes",
            KeyConditionExpression="wake_pk = :p AND wake_sk < :at",
            ExpressionAttributeValues={":p": s(WAKE_PK), ":at": s(f"{at:020.6f}")},
        )
        return [i["id"]["S"] for i in items]

    def clear_wakeup(self, run_id: str, token: int) -> None:
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="REMOVE wake_pk, wake_sk",
            ConditionExpression="wake_token = :token",  # no newer wake arrived
            ExpressionAttributeValues={":token": n(token)},
        )

    # --- leases: one worker advances a run at a time ------------------------------------

    def heartbeat(self, owner: str, now_ms: int) -> None:
        self._db.put_item(
            TableName=self.table,
            Item={
                "pk": s(OWNER_PK),
                "sk": s(owner),
                "beat_ms": n(now_ms),
                # Gone a day after the owner stopped (the table's TTL attribute).
                "expires_at": n(now_ms // 1000 + 86_400),
            },
        )

    def _owner_dead(self, owner: str, now_ms: int) -> bool:
        item = self._db.get_item(
            TableName=self.table, Key={"pk": s(OWNER_PK), "sk": s(owner)}, ConsistentRead=True
        ).get("Item")
        return item is not None and whole(item["beat_ms"]) < now_ms - OWNER_DEAD_AFTER_MS

    def _lease_free(self, run_id: str, now_ms: int) -> bool:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ProjectionExpression="lease_owner, lease_until",
            ConsistentRead=True,
        ).get("Item", {})
        if "lease_until" not in item or whole(item["lease_until"]) < now_ms:
            return True
        return self._owner_dead(item["lease_owner"]["S"], now_ms)

    def acquire_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> Lease:
        """Taking the lease also clears the run's wake-up: the work it asked for is now
        being done."""
        request = {
            "TableName": self.table,
            "Key": run_key(run_id),
            "UpdateExpression": "SET lease_owner = :me, lease_until = :until REMOVE wake_pk, wake_sk",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        values = {":me": s(owner), ":until": n(now_ms + lease_ms)}
        taken = conditional(
            self._db.update_item,
            **request,
            ConditionExpression="attribute_exists(pk) AND "
            "(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :me)",
            ExpressionAttributeValues={**values, ":now": n(now_ms)},
        )
        if taken:
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
        return Lease.OK if stolen else Lease.BUSY

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
        return pinned

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table, Key={"pk": s(run_pk(run_id)), "sk": s(f"P#{name}")}, ConsistentRead=True
        ).get("Item")
        return None if item is None else whole(item["version"])

    def close(self) -> None:
        pass
