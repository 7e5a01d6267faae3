"""The store on one DynamoDB table (the design is in docs/architecture.md).

Items of a run share its partition, so one consistent Query reads the run, its journal and
its signals. An append is one conditional write whose condition reads as a rule: "the
journal slot is free"; a park or an end writes the slot and the run item's summary in one
transaction, the summary conditional on "the run has not ended". Conditional-check failures
become ``JournalConflict``; nothing else leaks boto3.

Every value is stored once: an input in journal entry 1 (the run item's ``started`` while
small, else the run's first chunk, so run-item writes stay cheap), a step's values in its
chunk, a signal's payload in its signal item (a ``wait.done`` that consumed it points
there), a run's result in its ``run.completed`` entry (the run item points at that chunk).
A text too large for an item goes to S3 (``runtime.store.blobs``) and the
item holds its key.

The store is one class, ``DynamoDBStore``, made of parts by concern, each a module of its own:
``dynamodb_layout`` (keys, shards, indexes, the table, item encodings), ``dynamodb_spill``
(texts inline or in S3), ``dynamodb_reads`` (the shared state, item reads, loading a run),
``dynamodb_append`` (creating runs, appending to journals), ``dynamodb_index`` (lists,
searches, published values), ``dynamodb_signals``, ``dynamodb_timers`` (timers, wake-ups),
``dynamodb_leases``, and ``dynamodb_flow`` (flow control, a helper object). This module
composes them and holds the rest: cancel intents, pins, secrets. It re-exports the layout's
names other code imports from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.core.clock import Clock, SystemClock
from runtime.core.flow import Admission, Collect, Rate, SlotView, SlotWant
from runtime.core.journal import ENDED, Entry, Status
from runtime.errors import EngineBug, LunaflowError
from runtime.store.base import RunRecord
from runtime.store.blobs import Blobs
from runtime.store.dynamodb_append import Appends
from runtime.store.dynamodb_chunks import Tip
from runtime.store.dynamodb_expiry import Expiry
from runtime.store.dynamodb_flow import AlsoRefused, DynamoFlow
from runtime.store.dynamodb_index import MAX_RANGE_READ, Index
from runtime.store.dynamodb_layout import (
    ALL_RUNS,
    CANCEL_PK,
    IN_SIGNAL,
    INDEXES,
    INLINE_CHUNK_BYTES,
    INLINE_SIGNAL_BYTES,
    INLINE_TEXT_BYTES,
    OWNER_PK,
    PROJECTIONS,
    REF,
    RUN_SK,
    SHARDS,
    TAIL_BYTES,
    TIMER_PK,
    TTL_ATTRIBUTE,
    VALUE_SK,
    WAKE_PK,
    WRITE_ID,
    run_key,
    run_pk,
    shard,
    sharded,
    table_definition,
)
from runtime.store.dynamodb_leases import Leases
from runtime.store.dynamodb_reads import Activation
from runtime.store.dynamodb_signals import Signals
from runtime.store.dynamodb_timers import Timers
from runtime.store.dynamodb_ttl import START_ATTR, of_another_start, start_of
from runtime.store.items import conditional, n, num, s, whole

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

__all__ = [
    "ALL_RUNS",
    "CANCEL_PK",
    "IN_SIGNAL",
    "INDEXES",
    "INLINE_CHUNK_BYTES",
    "INLINE_SIGNAL_BYTES",
    "INLINE_TEXT_BYTES",
    "MAX_RANGE_READ",
    "OWNER_PK",
    "PROJECTIONS",
    "REF",
    "RUN_SK",
    "SHARDS",
    "TAIL_BYTES",
    "TIMER_PK",
    "TTL_ATTRIBUTE",
    "VALUE_SK",
    "WAKE_PK",
    "WRITE_ID",
    "DynamoDBStore",
    "run_key",
    "run_pk",
    "shard",
    "sharded",
    "table_definition",
]


class DynamoDBStore(Appends, Index, Signals, Timers, Leases, Expiry):
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
        self._here = Activation()  # each thread's activation's (the worker runs several)
        self._created: dict[str, str] = {}  # runs' created_sk, which value items sort by
        self._workflows: set[str] = set()  # workflow names known recorded (register_workflow)
        self._workflows_read_at = float("-inf")
        self._firsts: dict[tuple[str, str], Entry] = {}  # inputs read from runs' first chunks (never change)
        self._tips: dict[str, Tip] = {}  # runs' journal tips (runtime.store.dynamodb_chunks)
        self._flow = DynamoFlow(client, table, run_pk, self._wake_admitted)

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

    # --- pins: a run's code version (a secret's pins are below) ------------------------

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
        # A pin carries its run's start: one an earlier run of the id left (a TTL'd run's,
        # runtime.store.dynamodb_ttl) is no pin of this run, which writes over it.
        start = start_of(self._created_of(run_id))
        if conditional(
            self._db.put_item,
            TableName=self.table,
            Item={"pk": s(run_pk(run_id)), "sk": s(f"P#{name}"), "version": n(version), START_ATTR: start},
            # A run keeps its first version.
            ConditionExpression=f"attribute_not_exists(pk) OR ({START_ATTR} <> :start)",
            ExpressionAttributeValues={":start": start},
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
        if item is None or of_another_start(item, {"created_sk": s(self._created_of(run_id))}):
            return None
        return whole(item["version"])

    def close(self) -> None:
        pass
