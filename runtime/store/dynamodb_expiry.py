"""Retention on the DynamoDB table: the write that ends a run files it in the ``timers``
index under ``EXPIRE_PK`` at the time it expires (its end + ``[runs] retention``), and the
reconciler's ``expire`` deletes a due run whole.

A sweep first marks the run item (``deleting``), conditional on the expiry it read: from
then on no signal item is written for the run (a set-aside signal's item is written with a
check on the run item of the same start and no mark, ``runtime.store.dynamodb_signals``),
and no sweep puts it off. Then it reads the partition consistently, deletes every other item
(journal chunks, signals, values, pins, flow items), then the run item, then the S3 objects.
The run item goes last, so a run id never names a run item of one run beside items of
another: a crash after the mark leaves the marked run item and its index entry, and the next
sweep finishes (until then a reader may find the run with part of its journal gone).
A run of one chunk and nothing else is not filed here: DynamoDB's TTL deletes it
(``runtime.store.dynamodb_ttl``, which says how its readers stay safe with TTL's any order).
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from runtime.core.journal import ENDED, Status
from runtime.store.dynamodb_layout import CANCEL_PK, EXPIRE_PK, RUN_SK, _id_of, run_key, run_pk, sharded
from runtime.store.dynamodb_reads import Reads
from runtime.store.dynamodb_spill import _pointed
from runtime.store.items import conditional, n, s, text

if TYPE_CHECKING:
    pass

# A run kept past its expiry (a child whose parent still runs, an unfinished cascade) is
# looked at again this much later.
EXPIRY_PUT_OFF_S = 86_400.0
DELETING = "deleting"  # on a run item a sweep has begun to delete (its mark)
DELETE_THREADS = 8  # deletes of one run's items at once


def expiry_sk(run_id: str, at_s: float) -> str:
    """The ``timers`` index sort key of a run that expires at ``at_s`` (epoch seconds)."""
    return f"{int(at_s * 1000):015d}#{run_id}"


def expiry_parts(run_id: str, at_s: float) -> tuple[str, dict[str, Any]]:
    """The SET of an ending write that files the run to expire at ``at_s``, and its values."""
    return (
        "timer_pk = :xpk, timer_sk = :xsk, expires_ms = :xms",
        {
            ":xpk": s(sharded(EXPIRE_PK, run_id)),
            ":xsk": s(expiry_sk(run_id, at_s)),
            ":xms": n(int(at_s * 1000)),
        },
    )


class Expiry(Reads):
    """Deleting expired runs: a part of ``DynamoDBStore``."""

    retention_s: float | None = None

    def expire(self, now: float, limit: int = 100) -> list[str]:
        below = f"{int(now * 1000) + 1:015d}#"
        entries = self._gathered("timers", EXPIRE_PK, below=below, page=limit)
        gone: list[str] = []
        due: list[tuple[str, dict[str, Any]]] = []
        for run_id in [_id_of(entry) for entry in itertools.islice(entries, limit)]:
            # Eventually consistent: what it decides is checked by the mark's condition.
            item = self._db.get_item(TableName=self.table, Key=run_key(run_id)).get("Item")
            if item is None or "expires_ms" not in item or text(item.get("status")) not in ENDED:
                continue  # gone, or moved since the index was read
            if DELETING in item:  # a sweep that marked it died part-way: finish it
                self._finish(run_id)
                gone.append(run_id)
            else:
                due.append((run_id, item))
        # Passes until one deletes nothing: a parent due with its children goes in a pass
        # after theirs. What is left is put off.
        while due:
            kept = [(run_id, item) for run_id, item in due if self._kept_for_others(item, run_id)]
            held = {run_id for run_id, _ in kept}
            for run_id, item in due:
                if run_id not in held and self._mark(run_id, item):
                    self._finish(run_id)
                    gone.append(run_id)
            if len(kept) == len(due):
                break
            due = kept
        for run_id, item in due:
            self._put_off(run_id, item, now + EXPIRY_PUT_OFF_S)
        return gone

    def _kept_for_others(self, item: dict[str, Any], run_id: str) -> bool:
        """A run's children go first, whatever their status (a child's end wakes its parent,
        a failed child may be resumed to its end, and a new run of the parent's id would join
        the old children, whose ids derive from it); a parent in flight may still read this
        child's result; a cancelled run's unfinished cascade still reads the run (it
        cascades only below a cancelled root)."""
        if self._has_children(run_id):
            return True
        parent_id = text(item.get("parent_id"))
        if parent_id is not None:
            parent = self._db.get_item(
                TableName=self.table,
                Key=run_key(parent_id),
                ConsistentRead=True,
                ProjectionExpression="#st",
                ExpressionAttributeNames={"#st": "status"},
            ).get("Item")
            if parent is not None and text(parent.get("status")) not in ENDED:
                return True
        if text(item.get("status")) != Status.CANCELLED:
            return False  # a run that completed never cascades a cancel (Runs._cancel_tree)
        cancel = self._db.get_item(
            TableName=self.table, Key={"pk": s(CANCEL_PK), "sk": s(run_id)}, ConsistentRead=True
        ).get("Item")
        return cancel is not None

    def _has_children(self, run_id: str) -> bool:
        # The index is eventually consistent: a child deleted a moment ago may still be
        # listed (its parent then waits a day more), and none is created after its parent's
        # end, a day and more before this.
        found = self._db.query(
            TableName=self.table,
            IndexName="by_parent",
            KeyConditionExpression="parent_pk = :p",
            ExpressionAttributeValues={":p": s(f"PARENT#{run_id}")},
            Limit=1,
        )
        return bool(found.get("Items"))

    def _put_off(self, run_id: str, item: dict[str, Any], at_s: float) -> None:
        expression, values = expiry_parts(run_id, at_s)
        self._unmarked_update(run_id, item, expression, values)

    def _mark(self, run_id: str, item: dict[str, Any]) -> bool:
        """Mark the run item as being deleted, if it is still the expiry this sweep read and
        not put off since. From the mark on, no signal item is written for the run
        (runtime.store.dynamodb_signals) and no sweep puts it off: what the partition holds
        after it is all there is to delete, and a crash after it is finished by the next."""
        return self._unmarked_update(run_id, item, f"{DELETING} = :t", {":t": n(1)})

    def _unmarked_update(self, run_id: str, item: dict[str, Any], sets: str, values: dict[str, Any]) -> bool:
        """SET ``sets`` on the run item while it has the expiry this sweep read and no mark."""
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression=f"SET {sets}",
                ConditionExpression=f"expires_ms = :was AND attribute_not_exists({DELETING})",
                ExpressionAttributeValues={**values, ":was": item["expires_ms"]},
            )
        )

    def _finish(self, run_id: str) -> None:
        """Delete a marked run: its partition's other items, then the run item, then the S3
        objects they pointed to."""
        items = self._partition_items(run_id, consistent=True)
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
        self._delete_items([i for i in items if i is not run_item])
        if run_item is not None:
            conditional(
                self._db.delete_item,
                TableName=self.table,
                Key=run_key(run_id),
                ConditionExpression=f"attribute_exists({DELETING})",
            )
            self._unlink(_pointed(run_item))
        self._created.pop(run_id, None)
        self._tips.pop(run_id, None)

    def _partition_items(self, run_id: str, *, consistent: bool) -> list[dict[str, Any]]:
        return list(
            self._query(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": s(run_pk(run_id))},
                ConsistentRead=consistent,
            )
        )

    def _delete_items(self, items: list[dict[str, Any]]) -> None:
        """Delete ``items`` (DeleteItem each: the functions are not granted BatchWriteItem),
        a few at once, then the S3 objects they pointed to."""
        refs: set[str] = set()
        for i in items:
            refs |= _pointed(i)

        def delete(i: dict[str, Any]) -> None:
            self._db.delete_item(TableName=self.table, Key={"pk": i["pk"], "sk": i["sk"]})

        if len(items) <= 1:
            for i in items:
                delete(i)
        else:
            with ThreadPoolExecutor(max_workers=min(DELETE_THREADS, len(items))) as pool:
                list(pool.map(delete, items))
        self._unlink(refs)

    def _unlink(self, refs: set[str]) -> None:
        """The S3 objects of deleted items (a crash before this leaves objects nothing points
        to: storage, not meaning)."""
        if refs and self.blobs is not None:
            self.blobs.delete(sorted(refs))
