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

from runtime.errors import EngineBug, JournalConflict, LunaflowError
from runtime.journal import ENDED, Entry, Kind
from runtime.replay import Signal
from runtime.store.base import RunRecord, RunUpdate, SignalRecord, Snapshot, TimerSet

# The run item sorts just before its signals ("S#..."), so begins_with(sk, "S") reads the
# run and its signals without the journal ("J#...").
RUN_SK = "S"
WAKE_PK = "#WAKE"  # a run asked to advance carries wake_pk/wake_sk (a sparse index)
TIMER_PK = "#TIMER"
ALL_RUNS = "#RUNS"
MAX_TXN_ITEMS = 100

# GSIs: name -> (partition key attribute, sort key attribute)
INDEXES = {
    "by_status": ("status_pk", "created_sk"),
    "by_workflow": ("workflow_pk", "created_sk"),
    "by_parent": ("parent_pk", "created_sk"),
    "all_runs": ("all_pk", "created_sk"),
    "timers": ("timer_pk", "timer_sk"),
    "wakes": ("wake_pk", "wake_sk"),
}


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
                "Projection": {"ProjectionType": "ALL"},
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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def _created_sk(at: float, run_id: str) -> str:
    return f"{at:020.6f}#{run_id}"


def _journal_sk(seq: int) -> str:
    return f"J#{seq:010d}"


def _signal_sk(signal_id: int) -> str:
    return f"S#{signal_id:010d}"


def _run_from(item: dict[str, Any]) -> RunRecord:
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
        journal_len=_int(item.get("journal_len")),
    )


def _entry_from(item: dict[str, Any]) -> Entry:
    return Entry(
        _int(item["seq"]),
        item["kind"]["S"],
        _str(item.get("name")),
        json.loads(item["data"]["S"]),
        _num(item["at"]),
    )


def _signal_from(item: dict[str, Any]) -> SignalRecord:
    consumed = item.get("consumed_seq")
    return SignalRecord(
        id=_int(item["signal_id"]),
        run_id=item["run_id"]["S"],
        name=item["name"]["S"],
        payload=json.loads(item["payload"]["S"]),
        at=_num(item["at"]),
        state=item["state"]["S"],
        consumed_seq=None if consumed is None else _int(consumed),
    )


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
        item = self._db.get_item(
            TableName=self.table, Key={"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)}, ConsistentRead=True
        ).get("Item")
        return None if item is None else _run_from(item)

    def load(self, run_id: str, *, journal: bool) -> Snapshot | None:
        if journal:
            items = list(
                self._query(
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": _s(run_pk(run_id))},
                    ConsistentRead=True,
                )
            )
        else:
            items = list(self._partition(run_id, "S"))
        run = next((_run_from(i) for i in items if i["sk"]["S"] == RUN_SK), None)
        if run is None:
            return None
        signals = [_signal_from(i) for i in items if i["sk"]["S"].startswith("S#")]
        pending = [Signal(x.id, x.name, x.payload, x.at) for x in signals if x.state == "pending"]
        entries = [_entry_from(i) for i in items if i["sk"]["S"].startswith("J#")] if journal else None
        return Snapshot(run, pending, entries)

    def journal(self, run_id: str) -> list[Entry]:
        return [_entry_from(i) for i in self._partition(run_id, "J#")]

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
            "input": _s(_dumps(run.input)),
            "created_at": _n(run.created_at),
            "updated_at": _n(run.updated_at),
            "journal_len": _n(1),
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

    def _entry_put(self, run_id: str, entry: Entry) -> dict[str, Any]:
        item = {
            "pk": _s(run_pk(run_id)),
            "sk": _s(_journal_sk(entry.seq)),
            "seq": _n(entry.seq),
            "kind": _s(entry.kind),
            "data": _s(_dumps(entry.data)),
            "at": _n(entry.at),
        }
        if entry.name is not None:
            item["name"] = _s(entry.name)
        # The rule: a journal slot is written once.
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
        put_run = {
            "Put": {
                "TableName": self.table,
                "Item": self._run_item(run),
                "ConditionExpression": "attribute_not_exists(pk)",  # the run id is free
            }
        }
        try:
            self._transact([put_run, self._entry_put(run.id, started)], run.id, 1)
        except JournalConflict:
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
        for offset, entry in enumerate(entries):
            if entry.seq != expected_len + offset + 1:
                raise EngineBug(f"entry {entry.seq} of run '{run_id}' is out of order")
        names = {"#len": "journal_len"}
        values: dict[str, Any] = {":expected": _n(expected_len), ":new": _n(expected_len + len(entries))}
        sets = ["#len = :new"]
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
                values[":res"] = _s(_dumps(update.result))
        if entries:
            sets.append("updated_at = :upd")
            values[":upd"] = _n(entries[-1].at)
        if ended:
            removes += ["wake_pk", "wake_sk"]
        if update is not None and update.status != "running":
            # A lease is held only while a run is running: parking or ending releases it.
            removes += ["lease_owner", "lease_until"]
        if ended or (timer is not None and timer.due_ms is None):
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif timer is not None and timer.due_ms is not None:
            sets += ["timer_due = :due", "timer_pk = :tpk", "timer_sk = :tsk"]
            values[":due"] = _n(timer.due_ms)
            values[":tpk"] = _s(TIMER_PK)
            values[":tsk"] = _s(f"{timer.due_ms:015d}#{run_id}")
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": _s(run_pk(run_id)), "sk": _s(RUN_SK)},
                    "UpdateExpression": expression,
                    # The rule: nobody appended since this writer read the journal.
                    "ConditionExpression": "#len = :expected",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        items += [self._entry_put(run_id, e) for e in entries]
        consumed = set()
        for e in entries:
            if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None:
                consumed.add(int(e.data["signal_id"]))
                items.append(self._signal_state(run_id, int(e.data["signal_id"]), "consumed", e.seq))
        leftover: list[dict[str, Any]] = []
        if ended:
            # A signal consumed by this very append is not also set aside (one write per item).
            aside = [
                self._signal_state(run_id, s.id, "set_aside", None)
                for s in self.pending_signals(run_id)
                if s.id not in consumed
            ]
            room = MAX_TXN_ITEMS - len(items)
            items, leftover = items + aside[:room], aside[room:]
        if len(items) > MAX_TXN_ITEMS:
            raise EngineBug(f"an append to run '{run_id}' needs {len(items)} writes, over DynamoDB's 100")
        self._transact(items, run_id, expected_len + 1)
        for item in leftover:  # setting aside is bookkeeping: a backlog over one transaction follows it
            self._db.update_item(**item["Update"])

    def _signal_state(self, run_id: str, signal_id: int, state: str, seq: int | None) -> dict[str, Any]:
        values: dict[str, Any] = {":state": _s(state), ":pending": _s("pending")}
        expression = "SET #state = :state"
        if seq is not None:
            expression += ", consumed_seq = :seq"
            values[":seq"] = _n(seq)
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": _s(run_pk(run_id)), "sk": _s(_signal_sk(signal_id))},
                "UpdateExpression": expression,
                "ConditionExpression": "#state = :pending",  # a signal is consumed once
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": values,
            }
        }

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
                "payload": _s(_dumps(payload)),
                "at": _n(at),
                "state": _s("pending" if live else "set_aside"),
            },
        )
        return signal_id, live

    def signals(self, run_id: str) -> list[SignalRecord]:
        return [_signal_from(i) for i in self._partition(run_id, "S#")]

    def pending_signals(self, run_id: str) -> list[Signal]:
        return [Signal(s.id, s.name, s.payload, s.at) for s in self.signals(run_id) if s.state == "pending"]

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
