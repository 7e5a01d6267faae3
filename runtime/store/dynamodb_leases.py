"""Leases on the DynamoDB table: one worker advances a run at a time. A lease is attributes
of the run item; owners beat their hearts in items of their own (pk ``OWNER_PK``), so a dead
owner's leases are free before they expire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.store.base import OWNER_DEAD_AFTER_MS, Lease
from runtime.store.dynamodb_layout import OWNER_PK, TTL_ATTRIBUTE, run_key
from runtime.store.dynamodb_reads import Reads
from runtime.store.items import conditional, n, s, text, whole

# The lease rule a taker's write holds to: no lease, a lapsed one, or the taker's own (its
# owner taking it again, or its own write sent again by botocore after a lost answer).
FREE_OR_MINE = "(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :me)"


class Leases(Reads):
    """Leases and owners' heartbeats: a part of ``DynamoDBStore``."""

    if TYPE_CHECKING:  # another part's (runtime.store.dynamodb_timers)

        def wake_token(self, run_id: str) -> int | None: ...

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
        keys = [{"pk": s(OWNER_PK), "sk": s(o)} for o in dict.fromkeys(owners)]
        return {item["sk"]["S"]: whole(item["beat_ms"]) for item in self._by_key(keys)}

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
            ConditionExpression=f"attribute_exists(pk) AND {FREE_OR_MINE}",
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

    def take_served_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        """An eager activation's lease, taken where its replay meets a step it may run: only
        while the lease is free (or already this owner's: a retried write that committed)
        and the run's wake token is still the one its load read (``serving_loaded``), so no
        wake-up came that its replay did not see. The served token stays the loaded one."""
        served = self._tokens.get(run_id)
        if not served:
            return False
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="SET lease_owner = :me, lease_until = :until, lease_token = :served",
                ConditionExpression=f"attribute_exists(pk) AND wake_token = :served AND {FREE_OR_MINE}",
                ExpressionAttributeValues={
                    ":me": s(owner),
                    ":until": n(now_ms + lease_ms),
                    ":now": n(now_ms),
                    ":served": n(served),
                },
            )
        )

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
