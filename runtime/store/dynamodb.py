"""The store on one DynamoDB table (the design is in docs/architecture.md).

Items of a run share its partition, so one consistent Query reads the run, its journal and
its signals. A journal append is one transaction whose conditions read as rules: "the
journal is still N entries long" on the run item and "the journal slot is free" on each
entry. Conditional-check failures become ``JournalConflict``; nothing else leaks boto3.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.journal import ENDED, Entry, Kind
from runtime.core.replay import Signal
from runtime.core.values import compact
from runtime.errors import EngineBug, JournalConflict, LunaflowError
from runtime.store.base import RunRecord, RunUpdate, SignalRecord, Snapshot, TimerSet, current_step

# Sort keys within a run's partition: journal chunks "J#<first seq>" < the run item "K" <
# secret pins "P#..." < signals "S#...". So "sk >= J#<n+1>" reads what was appended after
# entry n, the run and its signals in one Query.
RUN_SK = "K"
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


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _num(attr: dict[str, str] | None) -> float:
    return float(Decimal(attr["N"])) if attr else 0.0


def _int(attr: dict[str, str] | None) -> int:
    return int(Decimal(attr["N"])) if attr else 0


def _str(attr: dict[str, str] | None) -> str | None:
    return attr["S"] if attr else None


def _with_current_step(run: RunRecord, last: Entry) -> RunRecord:
    current = current_step(run.status, run.current_step, last)
    return run if current == run.current_step else RunRecord(**{**run.__dict__, "current_step": current})


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


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
    result = _str(item.get("result"))
    return RunRecord(
        id=item["id"]["S"],
        workflow=item["workflow"]["S"],
        status=item["status"]["S"],
        input=json.loads(item["input"]["S"]),
        result=None if result is None else json.loads(result),
        error=_str(item.get("error")),
        parent_id=_str(item.get("parent_id")),
        current_step=_str(item.get("current_step")),
        created_at=_num(item.get("created_at")),
        updated_at=_num(item.get("updated_at")),
        journal_len=journal_len,
    )


def _entries_from(chunk: dict[str, Any]) -> list[Entry]:
    """A journal chunk holds the entries of one append: ``[[seq, kind, name, data, at], ...]``."""
    return [Entry(int(e[0]), str(e[1]), e[2], e[3], float(e[4])) for e in json.loads(chunk["entries"]["S"])]


def _chunk_text(entries: Sequence[Entry]) -> str:
    return compact([[e.seq, e.kind, e.name, e.data, e.at] for e in entries])


def _signal_from(item: dict[str, Any], consumed: dict[int, int], ended: bool) -> SignalRecord:
    """A signal's state is read from the journal, not stored: consumed if a wait.done names
    it, set aside if the run has ended (or had when it arrived), pending otherwise."""
    signal_id = _int(item["signal_id"])
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
        at=_num(item["at"]),
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

    def __init__(self, client: Any, table: str, *, secrets: Any = None) -> None:
        self._db = client
        self.table = table
        self._secrets = secrets

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
            ExpressionAttributeValues={":pk": _s(run_pk(run_id)), ":prefix": _s(prefix)},
            ConsistentRead=True,
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        # Newest first between the journal and the run item: the run, then its last chunk.
        items = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :j AND :k",
            ExpressionAttributeValues={":pk": _s(run_pk(run_id)), ":j": _s("J#"), ":k": _s(RUN_SK)},
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
        run = _run_from(run_item, _int(chunk["last"]))
        return _with_current_step(run, _entries_from(chunk)[-1])

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        start = _journal_sk((after or 0) + 1)
        items = list(
            self._query(
                KeyConditionExpression="pk = :pk AND sk >= :from",
                ExpressionAttributeValues={":pk": _s(run_pk(run_id)), ":from": _s(start)},
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
            ExpressionAttributeValues={":v": _s(value)},
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
                ExpressionAttributeValues={":p": _s(f"PARENT#{run_id}")},
            )
        ]

    def running_runs(self) -> list[str]:
        return [r.id for r in reversed(self.list_runs(status="running", limit=1_000_000))]

    # --- creating and appending --------------------------------------------------------

    def _run_item(self, run: RunRecord) -> dict[str, Any]:
        created = _created_sk(run.created_at, run.id)
        item: dict[str, Any] = {
            "pk": _s(run_pk(run.id)),
            "sk": _s(RUN_SK),
            "id": _s(run.id),
            "workflow": _s(run.workflow),
            "status": _s(run.status),
            "input": _s(compact(run.input)),
            "created_at": _n(run.created_at),
            "updated_at": _n(run.updated_at),
            "signal_seq": _n(0),
            "created_sk": _s(created),
            "status_pk": _s(f"STATUS#{run.status}"),
            "workflow_pk": _s(f"WF#{run.workflow}"),
            "all_pk": _s(ALL_RUNS),
            "wake_pk": _s(WAKE_PK),
            "wake_sk": _s(f"{run.created_at:020.6f}"),
            "wake_token": _n(1),
        }
        if run.parent_id is not None:
            item["parent_id"] = _s(run.parent_id)
            item["parent_pk"] = _s(f"PARENT#{run.parent_id}")
        return item

    def _chunk_put(self, run_id: str, entries: Sequence[Entry]) -> dict[str, Any]:
        item = {
            "pk": _s(run_pk(run_id)),
            "sk": _s(_journal_sk(entries[0].seq)),
            "last": _n(entries[-1].seq),
            "entries": _s(_chunk_text(entries)),
        }
        # The rule: a journal slot is written once. Every writer starts its chunk right after
        # the last chunk it read, so two writers with the same view claim the same key.
        return {
            "Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        }

    def _wake_update(self, run_id: str, at: float) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                "UpdateExpression": "SET wake_pk = :w, wake_sk = :at ADD wake_token :one",
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": {":w": _s(WAKE_PK), ":at": _s(f"{at:020.6f}"), ":one": _n(1)},
            }
        }

    def _transact(self, items: list[dict[str, Any]], run_id: str, seq: int) -> None:
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code == "TransactionCanceledException":
                reasons = [r.get("Code") for r in e.response.get("CancellationReasons", [])]
                if "ConditionalCheckFailed" in reasons:
                    raise JournalConflict(run_id, seq) from e
            raise LunaflowError(f"the journal of run '{run_id}' could not be written: {e}") from e

    def create_run(self, run: RunRecord, started: Entry) -> tuple[RunRecord, bool]:
        # The run item is journal entry 1 as well (it carries run.started's data), so a
        # start is one write; chunks begin at entry 2.
        item = self._run_item(run)
        item["started"] = _s(compact({"workflow": started.name, "data": started.data, "at": started.at}))
        try:
            self._db.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",  # the id is free
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            existing = self.get_run(run.id)
            if existing is None:
                raise EngineBug(f"run '{run.id}' was refused as existing but cannot be read") from None
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
        change or a timer adds the run item's update in the same transaction (and, with no
        entries, a check that the next slot is still free)."""
        for offset, entry in enumerate(entries):
            if entry.seq != expected_len + offset + 1:
                raise EngineBug(f"entry {entry.seq} of run '{run_id}' is out of order")
        slot = expected_len + 1
        if update is not None and update.progress_only:
            update = None
        if update is None and timer is None:
            if not entries:
                return
            try:
                self._db.put_item(**self._chunk_put(run_id, entries)["Put"])
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    raise JournalConflict(run_id, slot) from e
                raise
            return
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        ended = update is not None and update.status in ENDED
        if update is not None:
            names.update({"#st": "status", "#cur": "current_step", "#err": "error", "#res": "result"})
            sets += ["#st = :st", "status_pk = :stpk"]
            values[":st"] = _s(update.status)
            values[":stpk"] = _s(f"STATUS#{update.status}")
            for attr, value in (("#cur", update.current_step), ("#err", update.error)):
                if value is None:
                    removes.append(attr)
                else:
                    sets.append(f"{attr} = {attr.replace('#', ':')}")
                    values[attr.replace("#", ":")] = _s(value)
            if update.result is None:
                removes.append("#res")
            else:
                sets.append("#res = :res")
                values[":res"] = _s(compact(update.result))
            if update.status != "running":
                # A lease is held only while a run is running: parking or ending releases it.
                removes += ["lease_owner", "lease_until"]
        if entries:
            sets.append("updated_at = :upd")
            values[":upd"] = _n(entries[-1].at)
        if ended:
            removes += ["wake_pk", "wake_sk"]
        if ended or (timer is not None and timer.due_ms is None):
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif timer is not None and timer.due_ms is not None:
            sets += ["timer_due = :due", "timer_pk = :tpk", "timer_sk = :tsk"]
            values[":due"] = _n(timer.due_ms)
            values[":tpk"] = _s(TIMER_PK)
            values[":tsk"] = _s(f"{timer.due_ms:015d}#{run_id}")
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
            "Key": {"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
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
                    "Key": {"pk": _s(run_pk(run_id)), "sk": _s(_journal_sk(slot))},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            self._transact([check, {"Update": run_update}], run_id, slot)
            return
        # The journal first, then the run item: the journal is the truth and the run item a
        # summary of it. Two plain writes cost half a transaction; if the process dies between
        # them, the run stays "running" and the reconciler wakes it, and replay writes the
        # summary again.
        try:
            self._db.put_item(**self._chunk_put(run_id, entries)["Put"])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise JournalConflict(run_id, slot) from e
            raise
        self._db.update_item(**run_update)

    # --- signals -----------------------------------------------------------------------

    def add_signal(self, run_id: str, name: str, payload: Any, at: float) -> tuple[int, bool]:
        # Numbering comes from the run item, so arrival order is exact across senders.
        try:
            item = self._db.update_item(
                TableName=self.table,
                Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                # Numbering and the wake-up in one write; an ended run's wake-up is dropped by
                # the worker that finds it ended.
                UpdateExpression="SET wake_pk = :w, wake_sk = :at ADD signal_seq :one, wake_token :one",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":one": _n(1), ":w": _s(WAKE_PK), ":at": _s(f"{at:020.6f}")},
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise EngineBug(f"signal for missing run '{run_id}'") from e
            raise
        signal_id = _int(item["signal_seq"])
        live = item["status"]["S"] not in ENDED
        self._db.put_item(
            TableName=self.table,
            Item={
                "pk": _s(run_pk(run_id)),
                "sk": _s(_signal_sk(signal_id)),
                "signal_id": _n(signal_id),
                "run_id": _s(run_id),
                "name": _s(name),
                "payload": _s(compact(payload)),
                "at": _n(at),
                "state": _s("pending" if live else "set_aside"),
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
            Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
            ProjectionExpression="signal_seq",
            ConsistentRead=True,
        ).get("Item", {})
        sent = _int(item.get("signal_seq"))
        if sent < MAX_SIGNAL_BACKLOG:
            return sent
        return len(self.pending_signals(run_id))

    def pending_signals(self, run_id: str) -> list[Signal]:
        snap = self.load(run_id)
        return [] if snap is None else snap.signals

    # --- timers and wake-ups -----------------------------------------------------------

    def _due(self, now_ms: int | None) -> list[dict[str, Any]]:
        condition = "timer_pk = :t"
        values = {":t": _s(TIMER_PK)}
        if now_ms is not None:
            condition += " AND timer_sk <= :now"
            values[":now"] = _s(f"{now_ms:015d}#\uffff")
        return list(
            self._query(
                IndexName="timers", KeyConditionExpression=condition, ExpressionAttributeValues=values
            )
        )

    def fire_due_timers(self, now_ms: int) -> list[str]:
        fired = []
        for item in self._due(now_ms):
            run_id = item["id"]["S"]
            try:
                self._db.update_item(
                    TableName=self.table,
                    Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                    UpdateExpression="SET wake_pk = :w, wake_sk = :at ADD wake_token :one "
                    "REMOVE timer_due, timer_pk, timer_sk",
                    ConditionExpression="timer_due = :due",  # still this timer
                    ExpressionAttributeValues={
                        ":due": item["timer_due"],
                        ":w": _s(WAKE_PK),
                        ":at": _s(f"{now_ms / 1000:020.6f}"),
                        ":one": _n(1),
                    },
                )
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    continue  # moved or fired by someone else
                raise
            fired.append(run_id)
        return fired

    def next_due(self) -> int | None:
        items = self._due(None)
        return min((_int(i["timer_due"]) for i in items), default=None)

    def timer(self, run_id: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table,
            Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
            ConsistentRead=True,
            ProjectionExpression="timer_due",
        ).get("Item")
        return None if not item or "timer_due" not in item else _int(item["timer_due"])

    def wake(self, run_id: str) -> None:
        try:
            self._db.update_item(**self._wake_update(run_id, time.time())["Update"])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def wakeups(self) -> list[tuple[str, int]]:
        items = self._query(
            IndexName="wakes",
            KeyConditionExpression="wake_pk = :p",
            ExpressionAttributeValues={":p": _s(WAKE_PK)},
        )
        return [(i["id"]["S"], _int(i["wake_token"])) for i in items]

    def stale_running(self, before: float) -> list[str]:
        """Runs left running since before ``before`` (epoch seconds) with no live lease: an
        activation died between its journal write and its summary, or before it parked."""
        now_ms = int(time.time() * 1000)
        out = []
        for run in self.list_runs(status="running", limit=10_000):
            if run.updated_at >= before:
                continue
            item = self._db.get_item(
                TableName=self.table,
                Key={"pk": _s(run_pk(run.id)), "sk": _s(RUN_SK)},
                ProjectionExpression="lease_until",
            ).get("Item", {})
            if "lease_until" not in item or _int(item["lease_until"]) < now_ms:
                out.append(run.id)
        return out

    def wakeups_older_than(self, at: float) -> list[str]:
        """Runs whose wake-up has waited since before ``at`` (epoch seconds): the reconciler's list."""
        items = self._query(
            IndexName="wakes",
            KeyConditionExpression="wake_pk = :p AND wake_sk < :at",
            ExpressionAttributeValues={":p": _s(WAKE_PK), ":at": _s(f"{at:020.6f}")},
        )
        return [i["id"]["S"] for i in items]

    def clear_wakeup(self, run_id: str, token: int) -> None:
        try:
            self._db.update_item(
                TableName=self.table,
                Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                UpdateExpression="REMOVE wake_pk, wake_sk",
                ConditionExpression="wake_token = :token",  # no newer wake arrived
                ExpressionAttributeValues={":token": _n(token)},
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    # --- leases (the AWS worker's: one invocation advances a run at a time) --------------

    def acquire_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> str:
        """Take the run's lease: "ok", "busy" (another owner's lease is live) or "missing".
        Taking it also clears the run's wake-up: the work it asked for is now being done."""
        try:
            self._db.update_item(
                TableName=self.table,
                Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                UpdateExpression="SET lease_owner = :me, lease_until = :until REMOVE wake_pk, wake_sk",
                ConditionExpression="attribute_exists(pk) AND "
                "(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :me)",
                ExpressionAttributeValues={
                    ":me": _s(owner),
                    ":until": _n(now_ms + lease_ms),
                    ":now": _n(now_ms),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return "busy" if e.response.get("Item") else "missing"
        return "ok"

    def release_lease(self, run_id: str, owner: str) -> None:
        try:
            self._db.update_item(
                TableName=self.table,
                Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                UpdateExpression="REMOVE lease_owner, lease_until",
                ConditionExpression="lease_owner = :me",
                ExpressionAttributeValues={":me": _s(owner)},
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

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
        try:
            self._db.put_item(
                TableName=self.table,
                Item={"pk": _s(run_pk(run_id)), "sk": _s(f"P#{name}"), "version": _n(version)},
                ConditionExpression="attribute_not_exists(pk)",  # a run keeps its first version
            )
            self._secret_backend().keep(name, version)
            return version
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        pinned = self.pinned_secret(run_id, name)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' pin of secret '{name}' vanished")
        return pinned

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table, Key={"pk": _s(run_pk(run_id)), "sk": _s(f"P#{name}")}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _int(item["version"])

    def close(self) -> None:
        pass
