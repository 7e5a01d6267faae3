"""Leases on the DynamoDB table: one worker advances a run at a time. A lease is attributes
of the run item; owners beat their hearts in items of their own (pk ``OWNER_PK``), so a dead
owner's leases are free before they expire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.core.journal import Status
from runtime.store.base import OWNER_DEAD_AFTER_MS, Lease
from runtime.store.dynamodb_layout import (
    IN_FLIGHT,
    LIVE_PARTITION,
    OWNER_PK,
    RUNNING_SINCE,
    TTL_ATTRIBUTE,
    run_key,
    sharded,
)
from runtime.store.dynamodb_reads import Reads
from runtime.store.items import conditional, n, s, text, whole

# The lease rule a taker's write holds to: no lease, a lapsed one, or the taker's own (its
# owner taking it again, or its own write sent again by botocore after a lost answer).
FREE_OR_MINE = "(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :me)"

# A lease marks a run running (``acquire_lease``) only while it is in flight and something
# asks for the work: a wake-up (indexed, or a start's pending one: ``wake_sk`` is in both),
# or a timer that is due (a timer's wake: the lease leaves the timer as it is, in the timers
# index, so the lease is the wake's only write). Then a crash before its park or end leaves
# the run running with that wake-up (a pending one is indexed by the reconciler's look at
# new runs, ``index_stranded_starts``) or that due timer, which the reconciler fires once it
# is overdue and no lease is live (``fire_due_timers``).
MARKABLE = "#st IN (:running, :sleeping, :awaiting) AND (attribute_exists(wake_sk) OR timer_due <= :now)"


def _markable(item: dict[str, Any], now_ms: int) -> bool:
    """Whether a lease write may mark the run item as it is (``MARKABLE``, read back)."""
    due = item.get("timer_due")
    asked = "wake_sk" in item or (due is not None and whole(due) <= now_ms)
    return text(item.get("status")) in IN_FLIGHT and asked


def _marking(run_id: str, now_ms: int) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The SET and REMOVE of a lease's write that marks the run running, with its names and
    values (those of ``MARKABLE`` too):
    - its status, and its status index entry under the live partition (where a run of the
      current code already is: a run older code wrote moves there as its intent's summary
      moved it, else a list of it as running would miss it while it runs);
    - when it began running (``RUNNING_SINCE``), kept by a later lease while it has not
      parked or ended, so a run whose activations crash one after another is still seen
      running since the first (``runtime.platform.why``'s stuck);
    - no current step: the one its park named (a wait, a sleep) is over, and a running
      run's step is its journal's last intent, which a read derives
      (``runtime.store.base.current_step``); a list, which reads run items alone, shows it
      running with no step.
    The wake-up stays as it is: a start's pending one (``create_run``) is indexed by the
    reconciler if the run is still in flight two minutes after its start
    (``index_stranded_starts``), so a run whose activation dies is found either way."""
    sets = (
        f"#st = :running, status_pk = :live, {RUNNING_SINCE} = if_not_exists({RUNNING_SINCE}, :at) "
        "REMOVE current_step, current_step_ref"
    )
    values = {
        ":running": s(Status.RUNNING),
        ":sleeping": s(Status.SLEEPING),
        ":awaiting": s(Status.AWAITING),
        ":live": s(sharded(LIVE_PARTITION, run_id)),
        ":at": n(now_ms / 1000),
    }
    return sets, {"#st": "status"}, values


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
        it for the reconciler.

        A run in flight with a wake-up waiting is marked running by the same write
        (``_marking``): the activation that holds it is advancing it, and its load then reads
        it running, so the step it resumes at is progress and its intent writes no summary
        of its own (a parked run woken by its signal or its timer saved that write). A park
        or an end writes its status as ever; one that crashes first leaves the run running
        with its wake-up, which the reconciler serves. A failed or ended run, or one with no
        wake-up (a wake come twice, or after the work it asked for was done), is leased
        without the mark, by a second write: so no crash leaves a run marked with nothing to
        wake it."""
        request = {
            "TableName": self.table,
            "Key": run_key(run_id),
            # The token comes back with the write (no read of its own, and no read units: a
            # write's return values are free). The whole item, because ``UPDATED_NEW`` may
            # leave out an attribute set to the value it had (moto does), and a timer's wake
            # takes the lease at the token the last one was taken at.
            "UpdateExpression": "SET lease_owner = :me, lease_until = :until, "
            "lease_token = if_not_exists(wake_token, :zero)",
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        values = {":me": s(owner), ":until": n(now_ms + lease_ms), ":zero": n(0)}
        sets, names, marks = _marking(run_id, now_ms)
        marked = {**request, "UpdateExpression": f"{request['UpdateExpression']}, {sets}"}
        markable = MARKABLE
        taken = conditional(
            self._db.update_item,
            **marked,
            ConditionExpression=f"attribute_exists(pk) AND {FREE_OR_MINE} AND {markable}",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={**values, **marks, ":now": n(now_ms)},
        )
        old = None if taken else taken.item
        if old is not None and not _markable(old, now_ms):
            taken = conditional(
                self._db.update_item,
                **request,
                ConditionExpression=f"attribute_exists(pk) AND {FREE_OR_MINE}",
                ExpressionAttributeValues={**values, ":now": n(now_ms)},
            )
            old = None if taken else taken.item
            marked, markable, names, marks = request, "attribute_exists(pk)", {}, {}
        if taken:
            self._tokens = {run_id: self._token_of(run_id, taken)}
            return Lease.OK
        if old is None:
            return Lease.MISSING
        holder = text(old.get("lease_owner"))
        if holder is None or not self._owner_dead(holder, now_ms):
            return Lease.BUSY
        # The holder stopped beating: take its lease, unless someone moved it meanwhile. A
        # lease already this write's own (this owner, this expiry to the millisecond) is
        # botocore sending it again after its answer was lost, and holds too.
        stolen = conditional(
            self._db.update_item,
            **marked,
            ConditionExpression="((lease_owner = :holder AND lease_until = :held) OR "
            f"(lease_owner = :me AND lease_until = :until)) AND {markable}",
            **({"ExpressionAttributeNames": names} if names else {}),
            ExpressionAttributeValues={
                **values,
                **marks,
                ":holder": s(holder),
                ":held": old["lease_until"],
                **({":now": n(now_ms)} if names else {}),
            },
        )
        if not stolen:
            return Lease.BUSY
        self._tokens = {run_id: self._token_of(run_id, stolen)}
        return Lease.OK

    def take_served_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> bool:
        """An eager activation's lease, taken where its replay meets a step it may run: only
        while the lease is free (or already this owner's: a retried write that committed)
        and the run's wake token is still the one its load read (``serving_loaded``), so no
        wake-up came that its replay did not see. The served token stays the loaded one.
        The same write marks the run running, as ``acquire_lease`` does, so the step's intent
        writes no summary; and only while the run is in flight with its wake-up: a worker
        that parked or ended it since the load dropped the wake-up and left the token as it
        was, and the request then leaves the run alone."""
        served = self._tokens.get(run_id)
        if not served:
            return False
        sets, names, marks = _marking(run_id, now_ms)
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression=f"SET lease_owner = :me, lease_until = :until, lease_token = :served, "
                f"{sets}",
                ConditionExpression=f"attribute_exists(pk) AND wake_token = :served AND {FREE_OR_MINE} "
                f"AND {MARKABLE}",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    ":me": s(owner),
                    ":until": n(now_ms + lease_ms),
                    ":now": n(now_ms),
                    ":served": n(served),
                    **marks,
                },
            )
        )

    def _token_of(self, run_id: str, taken: Any) -> int:
        """The token a lease write returned (``ALL_NEW``: always there; a read only if an
        answer ever lacks it)."""
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
