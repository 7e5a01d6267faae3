"""Signals on the DynamoDB table: numbered on the run item (the backlog bound a condition of
that same write), an item each in the run's partition (a large one's name and payload in
S3) or, the first small one a run is sent, on the run item with its number
(``RUN_SIGNAL``); their state read from the journal rather than stored.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from typing import Any

from botocore.exceptions import ClientError

from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.journal import ENDED, Signal
from runtime.core.values import compact
from runtime.errors import EngineBug, NoSuchRun, SignalBacklogFull
from runtime.store.base import SignalRecord
from runtime.store.dynamodb_expiry import DELETING, expiry_parts
from runtime.store.dynamodb_layout import (
    INLINE_SIGNAL_BYTES,
    LAYOUT_ATTR,
    RUN_SIGNAL,
    RUN_SIGNAL_N,
    RUN_SK,
    SIGNAL_LAYOUT,
    TTL_ATTRIBUTE,
    WAKE_PK,
    WRITE_ID,
    _consumed,
    _signal_sk,
    _write_id,
    run_key,
    run_pk,
    run_signal,
    run_signal_item,
    run_signal_mine,
    sharded,
)
from runtime.store.dynamodb_reads import Reads
from runtime.store.dynamodb_ttl import START_ATTR, Ttl, expired, own, start_of
from runtime.store.items import conditional, error_code, n, num, s, text, whole

# A set-aside signal's item write, sent again when another write to the run item conflicts.
SIGNAL_ITEM_TRIES = 3


class Signals(Reads):
    """Signals: a part of ``DynamoDBStore``."""

    # --- signals -----------------------------------------------------------------------

    def _signal_from(
        self,
        item: dict[str, Any],
        consumed: dict[int, int],
        ended: bool,
        dropped: AbstractSet[int] = frozenset(),
    ) -> SignalRecord:
        """A signal's state is read from the journal, not stored: consumed if a wait.done names
        it (or named it in a generation since dropped: ``dropped``, from the run item's
        ``sig_done``), set aside if the run has ended (or had when it arrived), pending
        otherwise."""
        signal_id = whole(item["signal_id"])
        seq = consumed.get(signal_id)
        if seq is not None or signal_id in dropped:
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

    def add_signal(
        self,
        run_id: str,
        name: str,
        payload: Any,
        at: float,
        max_backlog: int | None = None,
        *,
        workflow: str | None = None,
    ) -> tuple[int, bool]:
        # Numbering comes from the run item, so arrival order is exact across senders. The
        # backlog bound is a condition of the same write: the backlog is the signals ever
        # sent less those consumed, and consumed ones only grow, so "fewer sent than the
        # consumed ones counted + the bound" holds at the write whoever else sends. Below
        # the bound in signals ever sent nothing is read; past it, the journal's count.
        self._seeded.pop(run_id, None)  # its activation here must read the run, with it
        bound, consumed = max_backlog, 0
        # The numbering carries this send's id (``sig_wid``), and holds only while the item
        # does not carry it: botocore's retry of a numbering that committed finds its own id
        # and reads its number from the item, instead of taking a second one.
        token = _write_id()
        encoded = compact(payload)
        # A small signal rides on its numbering (RUN_SIGNAL) if it is the run's first to:
        # one write in all. Its state is read as any signal's: set aside if the run has
        # ended (an ended run never goes on). The record carries the write's id, so a retry
        # finds its own record even when another send numbered between its two attempts.
        record = run_signal(name, encoded, at, token)
        on_run = record is not None
        while True:
            numbered = conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                # Numbering and the wake-up in one write; an ended run's wake-up is dropped by
                # the worker that finds it ended.
                UpdateExpression="SET wake_pk = :w, wake_sk = if_not_exists(wake_sk, :at), sig_wid = :wid, "
                "sig_at = :sat"
                + (
                    f", {RUN_SIGNAL} = if_not_exists({RUN_SIGNAL}, :rec), "
                    f"{RUN_SIGNAL_N} = if_not_exists({RUN_SIGNAL_N}, signal_seq), "
                    f"{LAYOUT_ATTR} = if_not_exists({LAYOUT_ATTR}, :layout)"
                    if on_run
                    else ""
                )
                + " ADD signal_seq :one, wake_token :one",
                # The run's existence and workflow are conditions too: a sender reads nothing
                # before this write (a missing run, or a handle of another workflow, is refused
                # by it, and nothing is written).
                # A run past its TTL expiry is deleted to its readers: no signal is numbered.
                ConditionExpression=f"attribute_exists(pk) AND (attribute_not_exists({TTL_ATTRIBUTE}) "
                "OR expires_ms > :now_ms) AND (attribute_not_exists(sig_wid) OR sig_wid <> :wid)"
                + ("" if workflow is None else " AND workflow = :wf")
                + ("" if bound is None else " AND signal_seq < :cap")
                + (f" AND NOT ({RUN_SIGNAL}.{WRITE_ID} = :wid)" if on_run else ""),
                ExpressionAttributeValues={
                    ":one": n(1),
                    ":w": s(sharded(WAKE_PK, run_id)),
                    ":at": s(f"{at:020.6f}"),
                    ":wid": s(token),
                    ":sat": n(int(at * 1000)),
                    ":now_ms": n(self.clock.now() * 1000),
                    **({} if workflow is None else {":wf": s(workflow)}),
                    **({} if bound is None else {":cap": n(consumed + bound)}),
                    **({":rec": record, ":layout": n(SIGNAL_LAYOUT)} if on_run else {}),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if numbered:
                break
            old = numbered.item
            if old is not None and (text(old.get("sig_wid")) == token or run_signal_mine(old, token)):
                numbered = {"Attributes": old}  # our own numbering, committed
                break
            if (
                numbered.item is None
                or expired(numbered.item, self.clock.now())
                or (workflow is not None and text(numbered.item.get("workflow")) != workflow)
            ):
                raise NoSuchRun(run_id, workflow)
            snap = self.load(run_id)
            if snap is None:
                raise EngineBug(f"signal for missing run '{run_id}'")
            if bound is None or snap.run.status in ENDED:
                bound = None  # an ended run's signals are set aside, not kept waiting
                continue
            # Consumed: the load leaves in ``_done`` what the journal's wait.dones name and what
            # the run item's sig_done names (generations continue_as_new dropped took their
            # wait.dones with them).
            counted = len(self._done.get(run_id, set()))
            if counted <= consumed:
                raise SignalBacklogFull(run_id, bound)
            consumed = counted
        item = numbered["Attributes"]
        live = item["status"]["S"] not in ENDED
        on_run_id = run_signal_mine(item, token)
        if on_run_id is not None:
            return on_run_id, live  # on the run item: it goes with it, even at an expiry
        signal_id = whole(item["signal_seq"])
        written: list[str] = []
        record_item = self._signal_item(run_id, signal_id, name, payload, at, live, written)
        record_item[START_ATTR] = start_of(str(item["created_sk"]["S"]))  # whose signal it is
        if TTL_ATTRIBUTE in item:
            # The run ended to be deleted by TTL: its signal goes with it, in any order, and
            # is not read as a signal of a later run of the id (runtime.store.dynamodb_ttl).
            ended_ttl = Ttl(whole(item[TTL_ATTRIBUTE]) * 1000, str(item["created_sk"]["S"]), 0)
            record_item.update(ended_ttl.chunk_attrs())
        if "expires_ms" not in item:
            self._db.put_item(TableName=self.table, Item=record_item)
            return signal_id, live
        # A run filed to expire may be deleted between the numbering and this write: the item
        # is written only with the run item it was numbered on still there (the same start)
        # and not marked for deletion, or it would outlive its run and be read as a signal of
        # the next run of this id (runtime.store.dynamodb_expiry).
        check: dict[str, Any] = {
            "TableName": self.table,
            "Key": run_key(run_id),
            "ConditionExpression": f"created_sk = :c AND attribute_not_exists({DELETING})",
            "ExpressionAttributeValues": {":c": item["created_sk"]},
        }
        if TTL_ATTRIBUTE in item and written:
            # Its payload is an S3 object, which TTL would not delete: the run goes back to
            # the sweep (filed at its expiry, as an end without TTL files it).
            expiry, values = expiry_parts(run_id, whole(item["expires_ms"]) / 1000)
            check["UpdateExpression"] = f"SET {expiry} REMOVE {TTL_ATTRIBUTE}"
            # Not once it has expired: it is deleted to its readers, and stays so.
            check["ConditionExpression"] += " AND expires_ms > :now_ms"
            check["ExpressionAttributeValues"] = {
                **check["ExpressionAttributeValues"],
                **values,
                ":now_ms": n(self.clock.now() * 1000),
            }
        request: list[Any] = [
            {"Update" if "UpdateExpression" in check else "ConditionCheck": check},
            {"Put": {"TableName": self.table, "Item": record_item}},
        ]
        for attempt in range(SIGNAL_ITEM_TRIES):
            try:
                self._db.transact_write_items(TransactItems=request)
                break
            except ClientError as e:
                reasons = e.response.get("CancellationReasons") or [{}]
                if error_code(e) != "TransactionCanceledException":
                    raise
                if reasons[0].get("Code") == "ConditionalCheckFailed":
                    self._drop(written, None)
                    raise NoSuchRun(run_id, workflow) from None
                if attempt == SIGNAL_ITEM_TRIES - 1:
                    raise  # a conflict each time (the put is the same item: safe to send again)
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
        dropped = self._done.get(run_id, set()) - set(consumed)  # what the load found in sig_done
        ended = snap.run.status in ENDED
        # The run item and the signal items in one range (``RUN_SK`` sorts before ``S#``):
        # the first signal may be on the run item.
        items: list[dict[str, Any]] = []
        for item in own(
            self._query(
                KeyConditionExpression="pk = :pk AND sk >= :run",
                ExpressionAttributeValues={":pk": s(run_pk(run_id)), ":run": s(RUN_SK)},
                ConsistentRead=True,
            ),
            self.clock.now(),
        ):
            if item["sk"]["S"] == RUN_SK:
                on_run = run_signal_item(run_id, item)
                items += [] if on_run is None else [on_run]
            elif item["sk"]["S"].startswith("S#"):
                items.append(item)
        items.sort(key=lambda i: str(i["sk"]["S"]))
        return [self._signal_from(i, consumed, ended, dropped) for i in items]

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
