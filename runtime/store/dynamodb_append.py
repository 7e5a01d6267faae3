"""Creating a run and appending to its journal on the DynamoDB table: the run item, the
journal's chunks, the run item's summary, and the writes and transactions that keep them in
step (the rules are in ``runtime.store.dynamodb``'s docstring and docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from runtime.core import published
from runtime.core.journal import ENDED, Entry, Status
from runtime.core.values import compact
from runtime.errors import EngineBug, JournalConflict, LunaflowError
from runtime.store.base import (
    FirstSignal,
    RunRecord,
    RunUpdate,
    Snapshot,
    TimerSet,
    Unchanged,
    checked_update,
)
from runtime.store.dynamodb_chunks import (
    BATCHES_REF,
    FIRST,
    HEAD,
    HEAD_BYTES,
    HEAD_LAST,
    HEAD_LAYOUT,
    HEAD_LEASE_GROWTH,
    HEAD_MIN_BYTES,
    HEAD_OPEN,
    HEAD_SUMMARY_BYTES,
    JOURNAL_V2,
    HeadWrite,
    Tip,
    after_append,
    batch_element,
    close_head,
    extends,
    extension,
    head_open_at,
    head_room,
    head_rows,
    head_write,
    measured,
    new_chunk,
    seal,
    tail_of,
    tip_of,
    unchanged_check,
)
from runtime.store.dynamodb_expiry import DELETE_THREADS, expiry_parts
from runtime.store.dynamodb_flow import AlsoRefused, DynamoFlow
from runtime.store.dynamodb_layout import (
    CHANGED_AT,
    INLINE_CHUNK_BYTES,
    INLINE_TEXT_BYTES,
    LAYOUT_ATTR,
    NO_RUN_SIGNAL,
    REF,
    RUN_SIGNAL,
    RUN_SIGNAL_N,
    RUN_SIGNAL_ROOM,
    RUN_SK,
    RUNNING_SINCE,
    SIGNAL_LAYOUT,
    STARTED_INLINE_BYTES,
    TIMER_PK,
    TTL_ATTRIBUTE,
    WAKE_PK,
    WRITE_ID,
    _consumed,
    _created_sk,
    _elided,
    _intervals,
    _journal_sk,
    _mine,
    _write_id,
    legacy_partition,
    run_key,
    run_pk,
    run_signal,
    run_signal_mine,
    sharded,
    status_partition,
    wake_up,
)
from runtime.store.dynamodb_reads import Reads, refuse_newer
from runtime.store.dynamodb_spill import _pointed
from runtime.store.dynamodb_ttl import (
    MIN_RETENTION_S,
    PARTITION_READ,
    START_ATTR,
    Ttl,
    expired,
    rows_outside,
    start_of,
    ttl_for,
)
from runtime.store.items import Lost, conditional, error_code, item_bytes, n, s, whole

log = logging.getLogger("lunaflow.store")


class Appends(Reads):
    """Creating runs and appending to their journals: a part of ``DynamoDBStore``."""

    _flow: DynamoFlow
    retention_s: float | None = None

    if TYPE_CHECKING:  # other parts' (runtime.store.dynamodb_signals, _index, _timers)

        def _signal_item(
            self,
            run_id: str,
            signal_id: int,
            name: str,
            payload: Any,
            at: float,
            live: bool,
            written: list[str],
        ) -> dict[str, Any]: ...

        def _value_items(self, run_id: str, sets: dict[str, Any]) -> list[Any]: ...

        def _wake_item(self, run_id: str) -> dict[str, Any]: ...

        def _has_children(self, run_id: str) -> bool: ...

        def register_workflow(self, workflow: str) -> bool: ...

    # --- creating and appending --------------------------------------------------------

    journal_v2: bool = True  # new runs' chunks grow in place (runtime.store.dynamodb_chunks)
    run_head: bool = True  # new runs' first entries go on the run item (``dynamodb_chunks.HEAD``)
    ttl_runs: bool = True  # runs that qualify expire by TTL (runtime.store.dynamodb_ttl)

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
            "workflow_pk": s(sharded(f"WF#{run.workflow}", run.id)),
            "wake_sk": s(f"{run.created_at:020.6f}"),
            "wake_token": n(1),
        }
        # A run its request advances next (``pending_starts``) keeps its wake-up out of the
        # ``wakes`` index: a park or an end there, or a worker's it is handed to, then writes
        # no index (2 index WRU a run). A signal indexes it, and the reconciler does for a
        # run still in flight two minutes on (``Timers.index_stranded_starts``): its request
        # or its worker may have died.
        if not self.pending_starts:
            item["wake_pk"] = s(sharded(WAKE_PK, run.id))
        else:
            self.created_pending.add(run.id)
        # In flight, unless a golden journal's (a completed one: where older code put it).
        partition = status_partition(run.status) or legacy_partition(run.status)
        if partition is not None:
            item["status_pk"] = s(sharded(partition, run.id))
        if run.parent_id is not None:
            item["parent_id"] = s(run.parent_id)
            item["parent_pk"] = s(f"PARENT#{run.parent_id}")
        return item

    def _batch(self, run_id: str, entries: Sequence[Entry], written: list[str]) -> tuple[str, str]:
        """An append's rows as stored: ``_spill``'s ``(attribute suffix, text or S3 key)``."""
        rows = compact([_elided(e) for e in entries])
        return self._spill(run_id, f"chunk-{entries[0].seq}", rows, INLINE_CHUNK_BYTES, written)

    def _chunk_put(self, run_id: str, entries: Sequence[Entry], written: list[str]) -> dict[str, Any]:
        where, value = self._batch(run_id, entries, written)
        item = {
            "pk": s(run_pk(run_id)),
            "sk": s(_journal_sk(entries[0].seq)),
            "last": n(entries[-1].seq),
            "entries" + where: s(value),
            WRITE_ID: s(_write_id()),
        }
        tail = tail_of(entries)
        if tail is not None:
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
        *,
        again: bool = False,
    ) -> tuple[RunRecord, bool]:
        """``also``: puts written in the run's transaction (a collection's items), each with
        its own condition; one that fails raises ``AlsoRefused`` and nothing is written.
        ``again``: a second try, the run item it met having expired meanwhile."""
        # The run item is journal entry 1 as well while it is small (it carries
        # run.started's data, the input included), so a start is one write and chunks begin
        # at entry 2. A larger one is the first chunk, written in the run item's transaction
        # (each item's units twice, once) so every later write of the run item stays cheap.
        self._seeded.pop(run.id, None)  # another run's of this id, or this one's as it was
        given = also  # a second try starts from what the caller gave
        item = self._run_item(run)
        written: list[str] = []
        text_ = compact({"workflow": started.name, "data": started.data, "at": started.at})
        tip = Tip(self.journal_v2, item["created_sk"]["S"])
        if self.journal_v2:
            item[JOURNAL_V2] = n(2)
        if len(text_.encode("utf-8")) <= STARTED_INLINE_BYTES:
            item[FIRST if self.journal_v2 else "started"] = s(text_)
        elif self.journal_v2:
            element = self._element(run.id, [started], written)
            created = item["created_sk"]["S"]
            first_chunk = new_chunk(self.table, run.id, [started], element, _write_id(), None, created)[
                "Item"
            ]
            also = [*also, {"Item": first_chunk}]
            tip = after_append(tip, first_chunk["sk"]["S"], [started], element)
        else:
            # Only with the run item: the transaction's first put holds the condition.
            also = [*also, {"Item": self._chunk_put(run.id, [started], written)["Item"]}]
        token = _write_id()
        item[WRITE_ID] = s(token)
        put = {
            "TableName": self.table,
            "Item": item,
            # The id is free: no run item, or one past its TTL expiry (deleted to its
            # readers; what else it left carries its start: runtime.store.dynamodb_ttl).
            "ConditionExpression": f"attribute_not_exists(pk) OR "
            f"(attribute_exists({TTL_ATTRIBUTE}) AND expires_ms <= :now_ms)",
            "ExpressionAttributeValues": {":now_ms": n(self.clock.now() * 1000)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        first: dict[str, Any] | None = None
        room = item_bytes(item) <= RUN_SIGNAL_ROOM
        if not room:  # no signal rides on it (RUN_SIGNAL_ROOM), and it stays layout 1
            item.update({RUN_SIGNAL: NO_RUN_SIGNAL, LAYOUT_ATTR: n(1)})
        if signal is not None:
            item["signal_seq"] = n(1)  # the signal is number 1, as its first add_signal would be
            on_run = run_signal(signal.name, compact(signal.payload), signal.at, token) if room else None
            if on_run is not None:  # on the run item, as add_signal would put it: one put
                item.update({RUN_SIGNAL: on_run, RUN_SIGNAL_N: n(0), LAYOUT_ATTR: n(SIGNAL_LAYOUT)})
            else:
                first = self._signal_item(run.id, 1, signal.name, signal.payload, signal.at, True, written)
        if self.run_head and FIRST in item and signal is None and not also and room:
            # Its journal's next entries go on it (``dynamodb_chunks.HEAD``), if it has room.
            headed = {**item, HEAD_OPEN: n(1), HEAD_LAST: n(1), LAYOUT_ATTR: n(HEAD_LAYOUT)}
            if head_room(headed) >= HEAD_MIN_BYTES:
                item.update(headed)
                tip = measured(replace(tip, head_open=True), headed)
        if first is None and not also:
            created = conditional(self._db.put_item, **put)
        else:
            created = self._create_signalled(put, first, token, also)
        # A retry of a put that committed finds the start's ``wid``, or (a summary since
        # rewrote that) the signal record it carried, which no later write replaces.
        if not created and not _mine(created, token) and run_signal_mine(created.item or {}, token) is None:
            self._drop(written, created.item)
            existing = self.get_run(run.id)
            if existing is None and expired(created.item, self.clock.now()) and not again:
                return self.create_run(run, started, signal, given, again=True)  # expired meanwhile
            if existing is None:
                raise EngineBug(f"run '{run.id}' was refused as existing but cannot be read")
            return existing, False
        self._keep_tip(run.id, tip)
        self._keep_created(run.id, item["created_sk"]["S"])
        record = RunRecord(**{**run.__dict__, "journal_len": 1})
        if signal is None:
            self.seed(Snapshot(record, [], [started]))
        return record, True

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

    def _put_chunk(self, run_id: str, chunk: dict[str, Any], sets: dict[str, Any]) -> Any:
        """The chunk's conditional put (or, with ``Key``, its update in place); with values
        published, in one transaction with their items (at most ``MAX_PUBLISHED_KEYS`` + 1
        items, under DynamoDB's 100), so the latest values never disagree with the journal.
        True, or ``Lost`` with the chunk's item as it was."""
        in_place = "Key" in chunk
        if not sets:
            return conditional(self._db.update_item if in_place else self._db.put_item, **chunk)
        token = (chunk["ExpressionAttributeValues"][":wid"] if in_place else chunk["Item"][WRITE_ID])["S"]
        try:
            items: list[Any] = [{"Update" if in_place else "Put": chunk}, *self._value_items(run_id, sets)]
            self._db.transact_write_items(TransactItems=items, ClientRequestToken=token)
            return True
        except ClientError as e:
            if error_code(e) == "TransactionCanceledException":
                reasons: list[Any] = list(e.response.get("CancellationReasons", []))
                if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                    return Lost(reasons[0].get("Item"))
            raise LunaflowError(f"the journal of run '{run_id}' could not be written: {e}") from e

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
        ended = update is not None and (update.status in ENDED or update.status == Status.FAILED)
        # After the end, not in its write (a transaction costs twice): a crash between the two
        # leaves slots the reconciler's sweep frees. A run that passed no gate (its activation
        # says so) has nothing to give back: no read.
        if ended and update is not None and update.flow is not False:
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
        tip = self._tip(run_id, expected_len)
        head: HeadWrite | None = None
        if entries and tip.head_open:
            rows = compact([_elided(e) for e in entries])
            texts = [] if update is None else [update.current_step or "", update.error or ""]
            grows = sum(min(len(x), INLINE_TEXT_BYTES) for x in texts) + (HEAD_SUMMARY_BYTES if texts else 0)
            if update is not None and update.status != Status.RUNNING and tip.leased:
                # A park or an end drops the lease in this write. A park's next activation
                # takes one again: counted then, from the item the park returns. A run whose
                # signal and lease both come back may cross 1 KB on those two writes, which
                # costs less than the write closing the head would (bench/aws_cost.py).
                grows -= HEAD_LEASE_GROWTH
            awaits = update is not None and update.status == Status.AWAITING
            head = head_write(tip, entries, rows, bool(published.latest(entries)), grows, awaits)
            if head is None:
                tip = self._close_head(run_id, tip)
        ttl = self._ttl(run_id, tip, entries, update)
        extended = bool(entries) and tip.v2 and extends(tip, entries)
        if tip.expires and not extended and (ttl is None or entries):
            # An end gave the tip a TTL and its summary did not follow (a signal numbered
            # meanwhile, a crash): the run goes on, or ends otherwise, so the chunk must not
            # expire. An extension takes the TTL back (or gives it anew) in its own write;
            # an end that begins a chunk after it gives it its TTL after the summary, as it
            # does every earlier chunk; a summary alone keeps it (the rule in ``_ttl``).
            tip = self._keep_untimed(run_id, tip)
        chunk_sk: str | None = None
        if head is not None:
            pass  # in the run item's write below
        elif entries and tip.v2:
            chunk_sk = self._append_v2(run_id, tip, entries, ttl)
        elif entries:
            chunk_written: list[str] = []
            chunk = self._chunk_put(run_id, entries, chunk_written)
            put = self._put_chunk(run_id, chunk, published.latest(entries))
            if not put and not _mine(put, chunk["Item"][WRITE_ID]["S"]):
                self._drop(chunk_written, put.item)
                raise JournalConflict(run_id, slot)
            chunk_sk = chunk["Item"]["sk"]["S"]
        consumed_before = set(self._done.get(run_id, set()))
        if entries and run_id in self._done:
            self._done[run_id] |= set(_consumed(entries))
        if update is None and timer is None:
            if head is not None:
                self._head_only(run_id, head, slot, consumed_before)
            return
        written: list[str] = []
        position = entries[-1].seq if entries else expected_len
        token = _write_id()
        # A summary alone points at the tip this start wrote (never at a chunk an earlier run
        # of the id left above it: runtime.store.dynamodb_ttl).
        ends_in = chunk_sk or (tip.sk if tip.v2 else None)
        at_head = tip.last if not entries and tip.head_open else None
        summary = self._summary(
            run_id, position, entries, ends_in, update, timer, written, token, ttl, head=head, at_head=at_head
        )
        # A child's end wakes its parent in the same transaction (twice the write units,
        # for child runs' ends only): no crash between the two can lose the parent's wake.
        woken = [] if update is None or update.wake is None else [{"Update": self._wake_item(update.wake)}]
        update_ = {**summary, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        # Entries in the head commit with the summary: a write that loses leaves nothing.
        lost_at = slot if head is not None or at_head is not None else position + 1
        try:
            if (entries or at_head is not None) and woken:
                self._transact([*woken, {"Update": update_}], run_id, lost_at, token, written)
            elif entries or at_head is not None:
                # At the head, the item as written: its size gives the head's room left.
                returned = {"ReturnValues": "ALL_NEW"} if tip.head_open else {}
                saved = conditional(self._db.update_item, **update_, **returned)
                if not saved and not _mine(saved, token):
                    self._drop(written, saved.item)
                    raise JournalConflict(run_id, lost_at)
                if head is not None or at_head is not None:
                    kept = head.tip if head is not None else tip
                    attributes = saved.get("Attributes") if saved else None
                    self._keep_tip(run_id, measured(kept, attributes))
        except JournalConflict:
            if head is not None and run_id in self._done:
                self._done[run_id] = consumed_before
            raise
        if head is not None and woken:
            self._keep_tip(run_id, head.tip)
        if not entries and at_head is None:
            if tip.v2:
                check = unchanged_check(self.table, run_id, tip)
            else:
                check = {
                    "TableName": self.table,
                    "Key": {"pk": s(run_pk(run_id)), "sk": s(_journal_sk(slot))},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            self._transact(
                [{"ConditionCheck": check}, *woken, {"Update": update_}], run_id, slot, token, written
            )
        self._time_earlier(run_id, ttl)  # the summary has committed

    def _head_only(self, run_id: str, head: HeadWrite, slot: int, consumed_before: set[int]) -> None:
        """Entries appended to the open head with no change of the run's summary."""
        token = _write_id()
        sets = [*head.sets, f"{WRITE_ID} = :wid"]
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(head.removes) if head.removes else "")
        saved = conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression=expression,
            ConditionExpression=head.condition,
            ExpressionAttributeValues={**head.values, ":wid": s(token)},
            ReturnValues="ALL_NEW",  # the item's size: the head's room left
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if not saved and not _mine(saved, token):
            if run_id in self._done:
                self._done[run_id] = consumed_before
            raise JournalConflict(run_id, slot)
        self._keep_tip(run_id, measured(head.tip, saved.get("Attributes") if saved else None))

    def _close_head(self, run_id: str, tip: Tip) -> Tip:
        """Close the open head at the entry read, so the append puts the next chunk."""
        if not conditional(self._db.update_item, **close_head(self.table, run_id, tip)):
            raise JournalConflict(run_id, tip.last + 1)
        closed = replace(tip, head_open=False)
        self._keep_tip(run_id, closed)
        return closed

    def _time_earlier(self, run_id: str, ttl: Ttl | None) -> None:
        """Give the journal's earlier chunks the end's chunk TTL, once the end's summary has
        committed: before it, a run whose summary then failed (a signal numbered meanwhile)
        and that went on could lose its journal to TTL. Each write holds on the chunk being
        this start's (a new run of the id, after the expiry, writes over it). A process that
        dies before them leaves those chunks without a TTL: no reader of a later run of the
        id reads them (``dynamodb_ttl.of_another_start``), and a write of that run's goes
        over each; a write that fails is logged and left, as that."""
        if ttl is None or not ttl.earlier:
            return

        def give(sk: str) -> None:
            try:
                conditional(
                    self._db.update_item,
                    TableName=self.table,
                    Key={"pk": s(run_pk(run_id)), "sk": s(sk)},
                    UpdateExpression=f"SET {TTL_ATTRIBUTE} = :ttl_at",
                    ConditionExpression=f"{START_ATTR} = :start",
                    ExpressionAttributeValues={":ttl_at": n(ttl.chunk_at), ":start": start_of(ttl.start)},
                )
            except (ClientError, BotoCoreError) as e:
                log.warning(
                    "run '%s' ended, and its journal chunk '%s' could not be given its expiry "
                    "(%s): a run's earlier chunks take theirs after its end, so this one stays "
                    "in the table after the run is deleted; no run reads it, and deleting the "
                    "item by hand reclaims its storage",
                    run_id,
                    sk,
                    e,
                )

        # A few at once, as the sweep deletes: the end's activation waits for them.
        with ThreadPoolExecutor(max_workers=min(DELETE_THREADS, len(ttl.earlier))) as pool:
            list(pool.map(give, ttl.earlier))

    def _ttl(self, run_id: str, tip: Tip, entries: Sequence[Entry], update: RunUpdate | None) -> Ttl | None:
        """The TTL a completing run's end gives it (``runtime.store.dynamodb_ttl``), from a
        consistent read of its partition; None: the sweep deletes it."""
        if update is None or update.status != Status.COMPLETED or not tip.v2 or not self.ttl_runs:
            return None
        if self.retention_s is None or self.retention_s < MIN_RETENTION_S:
            return None
        # The end goes into the journal's last chunk, or begins one after it (the first, J#2,
        # when the input is on the run item); a summary alone follows the chunk its end wrote.
        if not entries and tip.sk is None:
            return None
        end_chunk = tip.sk if not entries or extends(tip, entries) else None
        texts = [update.current_step or "", update.error or ""]
        spills = any(len(t.encode("utf-8")) > INLINE_TEXT_BYTES for t in texts) or (
            bool(entries) and len(compact([_elided(e) for e in entries]).encode("utf-8")) > INLINE_CHUNK_BYTES
        )
        partition = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": s(run_pk(run_id))},
            ConsistentRead=True,
            Limit=PARTITION_READ,
        )
        if "LastEvaluatedKey" in partition:
            return None  # more items than an end of two writes reaches
        items, now = partition.get("Items", []), self.clock.now()
        if any(rows_outside(head_rows(i)) for i in items if i["sk"]["S"] == RUN_SK):
            return None  # the head records what lives outside the partition (a child, a value)
        ttl = ttl_for(items, end_chunk, entries, spills, self.retention_s, now, self._rows)
        chunk_ttl = next((whole(i.get(TTL_ATTRIBUTE)) for i in items if i["sk"]["S"] == end_chunk), 0)
        if ttl is not None and not entries and chunk_ttl < ttl.at + MIN_RETENTION_S:
            # A summary alone (the end's chunk written before, its summary lost): only a
            # chunk that end gave a TTL well after this one's goes with the run item.
            return None
        # A child names its parent: a parent goes after its children (the sweep's rule). The
        # engine journals a child before it starts it, so the journal says so first; the
        # index (eventually consistent) covers a child the journal does not record.
        return None if ttl is None or self._has_children(run_id) else ttl

    def _keep_untimed(self, run_id: str, tip: Tip) -> Tip:
        """Take back the TTL an end gave the tip chunk (a rare write: its end's summary
        failed, and the run did not end as TTL's)."""
        assert tip.sk is not None
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key={"pk": s(run_pk(run_id)), "sk": s(tip.sk)},
            UpdateExpression=f"REMOVE {TTL_ATTRIBUTE}",
            # The chunk as read: of this start, at this entry (else another writer moved
            # on, and the append's own condition answers).
            ConditionExpression=f"{START_ATTR} = :start AND #last = :seen",
            ExpressionAttributeNames={"#last": "last"},
            ExpressionAttributeValues={":start": start_of(tip.created), ":seen": n(tip.last)},
        )
        untimed = replace(tip, expires=0)
        self._keep_tip(run_id, untimed)
        return untimed

    def _tip(self, run_id: str, expected_len: int) -> Tip:
        """The journal's tip at entry ``expected_len``: as this store last read or wrote it,
        else read (the run item and its last chunk). A v2 journal past that entry is a
        conflict; an older run's tip only says it is one (its appends take a slot each)."""
        known = self._tips.get(run_id)
        start = self._created.get(run_id)
        # Of this start of the run (a run deleted at its expiry may start again under its
        # id), as a read before the append (the engine's load, a cancel's get_run) left it.
        this_start = known is not None and (start is None or known.created == start)
        if known is not None and this_start and (known.last == expected_len or not known.v2):
            return known
        run_item, chunk = self._run_and_tip(run_id)
        if run_item is None:
            return Tip(False, "")  # gone: the slot rule and the summary's condition answer
        refuse_newer(run_id, run_item)  # a cancel or a resume appends without a load
        tip = tip_of(run_item, chunk)
        if tip.v2 and tip.last != expected_len:
            raise JournalConflict(run_id, expected_len + 1)
        return tip

    def _element(self, run_id: str, entries: Sequence[Entry], written: list[str]) -> dict[str, str]:
        """An append's rows as one element of a v2 chunk: inline, or a key in S3."""
        where, value = self._batch(run_id, entries, written)
        return batch_element(value, spilled=bool(where))

    def _append_v2(self, run_id: str, tip: Tip, entries: Sequence[Entry], ttl: Ttl | None = None) -> str:
        """Append to a v2 journal (the rule: ``runtime.store.dynamodb_chunks``); the key of
        the chunk that holds the entries now. ``ttl``: the chunk takes the run's expiry."""
        slot = tip.last + 1
        written: list[str] = []
        element = self._element(run_id, entries, written)
        token = _write_id()
        if extends(tip, entries):
            assert tip.sk is not None
            more = None if ttl is None else ttl.chunk_parts()
            request, chunk_sk = extension(self.table, run_id, tip, entries, element, token, more), tip.sk
        else:
            # A generation starts a chunk: an open tip is closed first, at the entry read.
            opened = tip.sk is not None and not tip.sealed
            if opened and not conditional(self._db.update_item, **seal(self.table, run_id, tip)):
                self._drop(written, None)
                raise JournalConflict(run_id, slot)
            more_attrs = None if ttl is None else ttl.chunk_attrs()
            request = new_chunk(self.table, run_id, entries, element, token, more_attrs, tip.created)
            chunk_sk = request["Item"]["sk"]["S"]
        done = self._put_chunk(run_id, request, published.latest(entries))
        if not done and not _mine(done, token):
            self._drop(written, done.item)
            raise JournalConflict(run_id, slot)
        self._keep_tip(
            run_id, after_append(tip, chunk_sk, entries, element, 0 if ttl is None else ttl.chunk_at)
        )
        return chunk_sk

    def _summary(
        self,
        run_id: str,
        position: int,
        entries: Sequence[Entry],
        chunk_sk: str | None,
        update: RunUpdate | None,
        timer: TimerSet | None,
        written: list[str],
        token: str,
        ttl: Ttl | None = None,
        *,
        head: HeadWrite | None = None,
        at_head: int | None = None,
    ) -> dict[str, Any]:
        """The run item's update: status, current step, error and result (each text inline
        or in S3), timer, lease and wake-up as the new status implies; ``ttl``: the run
        expires by TTL, not filed for the sweep. ``head``: the entries go in the run item's
        head in this write; ``at_head``: no entries, and the head is open at that entry."""
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
            sets.append("#st = :st")
            values[":st"] = s(update.status)
            partition = status_partition(update.status)
            if partition is None and update.workflow is not None and self.register_workflow(update.workflow):
                # Completed: it leaves the status index (one index delete, not a move's two)
                # and is listed under its workflow's name, recorded first.
                removes.append("status_pk")
            else:
                partition = partition or legacy_partition(update.status)
                assert partition is not None, update.status
                sets.append("status_pk = :stpk")
                values[":stpk"] = s(sharded(partition, run_id))
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
                removes += ["lease_owner", "lease_until", RUNNING_SINCE]
            if update.status == Status.COMPLETED and head is None and at_head is None:
                # The result lives in the run.completed entry: point at its chunk.
                result_sk = chunk_sk or self._last_chunk_sk(run_id)
                if result_sk is not None:
                    sets.append("result_sk = :rsk")
                    values[":rsk"] = s(result_sk)
        changed = max(
            [e.at for e in entries[-1:]] + ([update.at] if update and update.at is not None else []),
            default=None,
        )
        if changed is not None:  # the last entry's time, or a change no entry records (a failure)
            sets.append(f"{CHANGED_AT} = :upd")
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
        if head is not None:
            sets += head.sets
            removes += head.removes
            values.update(head.values)
            condition += " AND " + head.condition
        elif at_head is not None:
            condition += " AND " + head_open_at()
            values[":hseen"] = n(at_head)
        adds: list[str] = []
        if update is not None and update.woken:
            # As add_wakeup writes it, in this write.
            wake_set, wake_add, wake_values = wake_up(run_id, self.clock.now())
            sets.append(wake_set)
            adds.append(wake_add)
            values.update(wake_values)
        elif (
            update is not None
            and update.status == Status.RUNNING
            and timer is not None
            and timer.due_ms is None
        ):
            # A run going on with its timer cleared (a continue_as_new) keeps something to
            # wake it if this activation dies: its lease may have been taken at that timer
            # (``MARKABLE``), its only backstop. A wake-up, with no new token: this
            # activation's own park still holds.
            wake_set, _, wake_values = wake_up(run_id, self.clock.now())
            sets.append(wake_set)
            values.update({k: v for k, v in wake_values.items() if k != ":wake_one"})
        if ttl is not None:
            # Deleted by TTL (runtime.store.dynamodb_ttl): out of the timers index, and the
            # write holds only while no signal was numbered since the end read the run.
            sets += [f"{TTL_ATTRIBUTE} = :ttl_at", "expires_ms = :ttl_ms"]
            values.update({":ttl_at": n(ttl.at), ":ttl_ms": n(ttl.at_ms), ":ttl_seq": n(ttl.signal_seq)})
            condition += " AND signal_seq = :ttl_seq"
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif ended and self.retention_s is not None:
            # Filed to expire (runtime.store.dynamodb_expiry) in the index its timer leaves.
            expiry, expiry_values = expiry_parts(run_id, self.clock.now() + self.retention_s)
            sets.append(expiry)
            values.update(expiry_values)
            removes.append("timer_due")
        elif ended or (timer is not None and timer.due_ms is None):
            removes += ["timer_due", "timer_pk", "timer_sk"]
        elif timer is not None and timer.due_ms is not None:
            sets += ["timer_due = :due", "timer_pk = :tpk", "timer_sk = :tsk"]
            values[":due"] = n(timer.due_ms)
            values[":tpk"] = s(sharded(TIMER_PK, run_id))
            values[":tsk"] = s(f"{timer.due_ms:015d}#{run_id}")
        if timer is not None and not isinstance(timer.armed, Unchanged):
            if timer.armed is None:
                removes.append("armed")
            else:
                sets.append("armed = :armed")
                values[":armed"] = s(compact(list(timer.armed)))
        expression = " ".join(
            part
            for part in (
                "SET " + ", ".join(sets) if sets else "",
                "REMOVE " + ", ".join(removes) if removes else "",
                "ADD " + ", ".join(adds) if adds else "",
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

    def drop_entries(self, run_id: str, before: int) -> None:
        """Chunks wholly from seq 2 up to ``before`` are deleted (each with its S3 object, if
        it spilled); a chunk reaching ``before`` stays whole (the executor writes a
        generation's first entry as a chunk of its own, so generations end at chunks')."""
        if before <= 2:
            return
        # The head first (entries 2 on, on the run item): what is left is a suffix.
        held = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ProjectionExpression=HEAD_LAST, ConsistentRead=True
        ).get("Item", {})
        if 2 <= whole(held.get(HEAD_LAST)) < before:
            self._db.update_item(
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression=f"REMOVE {HEAD}, {HEAD_BYTES}",
                ConditionExpression=f"{HEAD_LAST} < :before",
                ExpressionAttributeValues={":before": n(before)},
            )
        chunks = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={
                ":pk": s(run_pk(run_id)),
                ":from": s(_journal_sk(2)),
                ":to": s(_journal_sk(before - 1)),
            },
            ConsistentRead=True,
            ProjectionExpression=f"sk, #last, entries_ref, {BATCHES_REF}",
            ExpressionAttributeNames={"#last": "last"},
        ).get("Items", [])
        refs: list[str] = []
        # Oldest first, one at a time: a drop cut short leaves a suffix of the journal, which
        # a load reads as whole (``dynamodb_reads._whole``); a hole in the middle it refuses.
        for chunk in chunks:
            if whole(chunk.get("last")) >= before:
                continue
            self._db.delete_item(TableName=self.table, Key={"pk": s(run_pk(run_id)), "sk": chunk["sk"]})
            refs += sorted(_pointed(chunk))
        if refs and self.blobs is not None:
            self.blobs.delete(refs)
