"""Retention on the DynamoDB table: the write that ends a run files it in the ``timers``
index under ``EXPIRE_PK`` at the time it expires (its end + ``[runs] retention``), and the
reconciler's ``expire`` deletes a due run whole: its partition's other items (journal
chunks, signals, values, pins) first, the run item last, then its S3 objects.

The run item goes last so that a run id names either the run it named or nothing: a crash
part-way leaves the run item and its index entry, and the next sweep finishes. Its delete is
conditional on the expiry it read and on the signals numbered: a signal that reached the run
meanwhile (numbered on the run item before its own item is written) keeps the run for the
next sweep, which deletes that signal's item too. DynamoDB's own TTL is not used for runs:
it deletes items in no order, and a run item gone before its chunks would let a new run of
that id read the old journal.
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any

from runtime.core.journal import ENDED, Status
from runtime.errors import LunaflowError
from runtime.store.dynamodb_layout import CANCEL_PK, EXPIRE_PK, RUN_SK, _id_of, run_key, run_pk, sharded
from runtime.store.dynamodb_reads import Reads
from runtime.store.dynamodb_spill import _pointed
from runtime.store.items import conditional, n, s, text

if TYPE_CHECKING:
    from collections.abc import Iterator

# A run kept past its expiry (a child whose parent still runs, an unfinished cascade) is
# looked at again this much later.
EXPIRY_PUT_OFF_S = 86_400.0
BATCH_DELETES = 25  # BatchWriteItem's most requests
BATCH_TRIES = 8


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

    if TYPE_CHECKING:  # another part's (runtime.store.dynamodb_index)

        def _gathered(
            self,
            index: str,
            base: str,
            *,
            newest_first: bool = False,
            below: str | None = None,
            page: int | None = None,
        ) -> Iterator[dict[str, Any]]: ...

        _created: dict[str, str]

    def expire(self, now: float, limit: int = 100) -> list[str]:
        below = f"{int(now * 1000) + 1:015d}#"
        entries = self._gathered("timers", EXPIRE_PK, below=below, page=limit)
        gone: list[str] = []
        for run_id in [_id_of(entry) for entry in itertools.islice(entries, limit)]:
            # Eventually consistent: the run ended a day or more ago, and what may reach it
            # since (a signal, set aside) is guarded by the run item's delete and the signal's
            # own write, not by this read.
            items = list(
                self._query(
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": s(run_pk(run_id))},
                )
            )
            item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
            if item is None or "expires_ms" not in item or text(item.get("status")) not in ENDED:
                continue  # gone, or moved since the index was read
            if self._kept_for_others(item, run_id):
                self._put_off(run_id, item, now + EXPIRY_PUT_OFF_S)
            elif self._delete_run(run_id, item, [i for i in items if i is not item]):
                gone.append(run_id)
        return gone

    def _kept_for_others(self, item: dict[str, Any], run_id: str) -> bool:
        """A parent in flight may still read this child's result; a cancelled run's
        unfinished cascade still reads the run (it cascades only below a cancelled root)."""
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

    def _put_off(self, run_id: str, item: dict[str, Any], at_s: float) -> None:
        expression, values = expiry_parts(run_id, at_s)
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression=f"SET {expression}",
            ConditionExpression="expires_ms = :was",
            ExpressionAttributeValues={**values, ":was": item["expires_ms"]},
        )

    def _delete_run(self, run_id: str, item: dict[str, Any], others: list[dict[str, Any]]) -> bool:
        """The partition's ``others`` items, then the run item (``item``, as read), then
        their S3 objects. False when the run item changed since it was read."""
        refs: set[str] = set()
        for other in others:
            refs |= _pointed(other)
        self._delete_items([{"pk": other["pk"], "sk": other["sk"]} for other in others])
        self._unlink(refs)
        seq = item.get("signal_seq")
        numbered = "signal_seq = :seq" if seq is not None else "attribute_not_exists(signal_seq)"
        deleted = conditional(
            self._db.delete_item,
            TableName=self.table,
            Key=run_key(run_id),
            ConditionExpression=f"expires_ms = :was AND {numbered}",
            ExpressionAttributeValues={
                ":was": item["expires_ms"],
                **({":seq": seq} if seq is not None else {}),
            },
        )
        if not deleted:
            return False  # a signal arrived, or the run was put off: the next sweep
        self._unlink(_pointed(item))
        self._created.pop(run_id, None)
        return True

    def _delete_items(self, keys: list[dict[str, Any]]) -> None:
        """Delete ``keys``, 25 to a ``BatchWriteItem`` (the same write units as one by one, a
        round trip each 25); what DynamoDB leaves unprocessed is sent again after a pause,
        and raises if it stays (the run item is then not deleted: the next sweep goes on)."""
        for first in range(0, len(keys), BATCH_DELETES):
            pending: list[Any] = [
                {"DeleteRequest": {"Key": key}} for key in keys[first : first + BATCH_DELETES]
            ]
            for attempt in range(BATCH_TRIES):
                left = self._db.batch_write_item(RequestItems={self.table: pending})
                pending = left.get("UnprocessedItems", {}).get(self.table, [])
                if not pending:
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0))
            else:
                raise LunaflowError(
                    f"DynamoDB left {len(pending)} deletes of an expired run unprocessed after "
                    f"{BATCH_TRIES} tries (table {self.table} throttled); the next sweep deletes them"
                )

    def _unlink(self, refs: set[str]) -> None:
        """The S3 objects of deleted items (a crash before this leaves objects nothing points
        to: storage, not meaning)."""
        if refs and self.blobs is not None:
            self.blobs.delete(sorted(refs))
