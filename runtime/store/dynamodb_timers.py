"""Timers and wake-ups on the DynamoDB table: a run's timer and its wake-up are attributes of
its run item, found through the sharded ``timers`` and ``wakes`` indexes; a wake token says
which wake-up an activation served. And the timer transport AwsWaker armed for a run.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from runtime.core.clock import now_ms
from runtime.core.values import compact
from runtime.store.base import Progress
from runtime.store.dynamodb_layout import (
    LIVE_PARTITION,
    STARTS_PK,
    TIMER_PK,
    WAKE_PK,
    _armed_from,
    _id_of,
    run_key,
    sharded,
    wake_up,
)
from runtime.store.dynamodb_reads import Reads
from runtime.store.items import conditional, n, s, whole


def _fired(write: Any, **request: Any) -> bool:
    """Turn a due timer into a wake-up. A retry of a firing that committed finds no timer
    and the wake-up it set: fired all the same (whoever fired it, the wake-up is there)."""
    done = conditional(write, **request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    if done:
        return True
    old = done.item or {}
    return "timer_due" not in old and "wake_pk" in old and "pk" in old


# The runs one look for stranded starts reads at most (``index_stranded_starts``): 100
# BatchGetItem requests, 5,000 RRU, a few seconds of a reconcile's minute.
STARTS_LOOK_BUDGET = 10_000
# How many overdue timers the reconciler reads at most to find ``limit`` of runs with no lease
# live (``fire_due_timers``): runs woken by their timers keep them due while they run.
LEASED_TIMERS_READ = 1_000


log = logging.getLogger(__name__)


class Timers(Reads):
    """Timers and wake-ups: a part of ``DynamoDBStore``."""

    # --- timers and wake-ups -----------------------------------------------------------

    def _due(self, now_ms: int | None, limit: int | None = None) -> list[tuple[int, str]]:
        """Runs with a timer (due by ``now_ms``), earliest first, at most ``limit``:
        ``(due_ms, run id)``, read from the timer index's sort key."""
        below = None if now_ms is None else f"{now_ms + 1:015d}#"
        found: list[tuple[int, str]] = []
        for item in self._gathered("timers", TIMER_PK, below=below, page=limit):
            found.append((int(item["timer_sk"]["S"].split("#", 1)[0]), _id_of(item)))
            if limit is not None and len(found) >= limit:
                break
        return found

    def fire_due_timers(
        self, now_ms: int, limit: int | None = None, *, unleased_at: int | None = None
    ) -> list[str]:
        """Turn the timers due by ``now_ms`` into wake-ups. ``unleased_at`` (the
        reconciler's, the time now): only those of runs with no lease live then. A timer's
        wake leases the run with its timer left due (``MARKABLE``), so a run being advanced
        for its timer shows one; the activation's park or end moves or removes it, and if
        the activation dies, its lease lapses and the timer is fired here. Runs with a live
        lease are passed over by a read of their leases (no write), so however many of them
        come first in the index, the ``limit`` timers fired are ones that need it: the read
        goes up to ``LEASED_TIMERS_READ`` due timers deep."""
        condition, values = "timer_due = :due", {}
        if unleased_at is None:
            due = self._due(now_ms, limit)
        else:
            condition += " AND (attribute_not_exists(lease_until) OR lease_until < :unleased)"
            values[":unleased"] = n(unleased_at)
            deep = self._due(now_ms, None if limit is None else max(limit, LEASED_TIMERS_READ))
            leases = self._items([run_id for _, run_id in deep], "id, lease_until")
            # As the write's condition reads it: any lease unexpired, its owner alive or not.
            held = {r for r, item in leases.items() if whole(item.get("lease_until")) >= unleased_at}
            due = [(d, run_id) for d, run_id in deep if run_id not in held][:limit]
        # Each still this timer (else moved or fired since the index was read).
        return [
            run_id for d, run_id in due if self._fire(run_id, now_ms, condition, {":due": n(d), **values})
        ]

    def _fire(self, run_id: str, now_ms: int, condition: str, values: dict[str, Any]) -> bool:
        """Turn the run's timer into a wake-up, if ``condition`` holds of it."""
        wake_set, wake_add, wake_values = wake_up(run_id, now_ms / 1000)
        return _fired(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression=f"SET {wake_set} ADD {wake_add} REMOVE timer_due, timer_pk, timer_sk",
            ConditionExpression=condition,
            ExpressionAttributeValues={**values, **wake_values},
        )

    def next_due(self) -> int | None:
        return min((due for due, _ in self._due(None, 1)), default=None)

    def timer(self, run_id: str) -> int | None:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ConsistentRead=True,
            ProjectionExpression="timer_due",
        ).get("Item")
        return None if not item or "timer_due" not in item else whole(item["timer_due"])

    def add_wakeup(self, run_id: str) -> None:
        conditional(self._db.update_item, **self._wake_item(run_id))

    def _wake_item(self, run_id: str) -> dict[str, Any]:
        """The update recording a wake-up on the run's item (alone, or in a child's end)."""
        wake_set, wake_add, wake_values = wake_up(run_id, self.clock.now())
        return {
            "TableName": self.table,
            "Key": run_key(run_id),
            "UpdateExpression": f"SET {wake_set} ADD {wake_add}",
            "ConditionExpression": "attribute_exists(pk)",  # a missing run is ignored
            "ExpressionAttributeValues": wake_values,
        }

    def wakeups(self) -> list[tuple[str, int]]:
        ids = [_id_of(i) for i in self._gathered("wakes", WAKE_PK)]
        tokens = self._items(ids, "id, wake_token, wake_pk")
        return [(r, whole(tokens[r].get("wake_token"))) for r in ids if "wake_pk" in tokens.get(r, {})]

    def wakeups_older_than(self, at: float, limit: int | None = None) -> list[str]:
        """Wake-ups whose next check is due: first asked (or last re-sent by the reconciler,
        which moves them back, ``defer_wake``) before ``at``, oldest first."""
        ids: list[str] = []
        for item in self._gathered("wakes", WAKE_PK, below=f"{at:020.6f}", page=limit):
            ids.append(_id_of(item))
            if limit is not None and len(ids) >= limit:
                break
        return ids

    def index_stranded_starts(self, before: float, budget: int = STARTS_LOOK_BUDGET) -> list[str]:
        """Index the pending wake-up of each run created before ``before`` (epoch seconds)
        that still has one: its request died (or its prompt was lost) between the write
        that created it and the park, end or lease that settles it (``create_run``). Such a
        run is in flight, so it is under ``STATUS#live`` by its created time: the runs
        created since the last look (``STARTS_PK``'s ``swept``; with none yet, every live
        run) are read, a page of 100 at a time, at most ``budget`` runs a look, and each one
        found pending is indexed, so the reconciler's look at waiting wake-ups sends it to a
        worker. A look that stops at its budget says so in the log: the next goes on from
        there. Returns the runs indexed.

        A run that parks or ends in its request costs this look an eventually consistent
        read of its item (0.5 RRU) where its wake-up's index entry, in and out, was 2 WRU;
        the mark is one write a look."""
        swept = self._starts_swept()
        upto = f"{before:020.6f}"  # every created_sk of a run created then is above it
        if swept is not None and swept >= upto:
            return []
        indexed: list[str] = []
        reached, looked = upto, 0
        for page in self._unlooked(swept, upto):
            for run_id in self._pending_of(page):
                if self.index_pending_wake(run_id):
                    indexed.append(run_id)
            looked += len(page)
            if looked >= budget:
                reached = str(page[-1]["created_sk"]["S"])
                log.warning(
                    "the look for stranded starts read %d runs and stopped at its budget, at runs "
                    "created at %s; the rule: each look reads at most %d runs started since the last; "
                    "the next look goes on from there (many runs started and still in flight)",
                    looked,
                    reached.split("#", 1)[0],
                    budget,
                )
                break
        conditional(
            self._db.put_item,
            TableName=self.table,
            Item={"pk": s(STARTS_PK), "sk": s(STARTS_PK), "swept": s(reached)},
            # Another reconcile that went as far or further keeps its mark.
            ConditionExpression="attribute_not_exists(swept) OR swept < :reached",
            ExpressionAttributeValues={":reached": s(reached)},
        )
        return indexed

    def unlooked_pending_starts(self) -> list[str]:
        """The runs started since the last look for stranded starts whose wake-up is still
        pending (the test harness's: whether a reconcile has work left)."""
        pages = self._unlooked(self._starts_swept(), None)
        return [run_id for page in pages for run_id in self._pending_of(page)]

    def _starts_swept(self) -> str | None:
        mark = self._db.get_item(
            TableName=self.table, Key={"pk": s(STARTS_PK), "sk": s(STARTS_PK)}, ConsistentRead=True
        ).get("Item")
        return None if mark is None else str(mark["swept"]["S"])

    def _unlooked(self, swept: str | None, upto: str | None) -> Iterator[list[dict[str, Any]]]:
        """The live runs' index entries created after ``swept`` (every one, with None) and
        before ``upto`` (all, with None), oldest first, 100 a page."""
        since = swept if swept is not None else f"{0:020.6f}"
        below = upto if upto is not None else "~"  # above every created_sk
        entries = self._gathered(
            "by_status", LIVE_PARTITION, since=since, below=below, page=100, grow_to=1_000
        )
        while page := [e for e in itertools.islice(entries, 100) if e["created_sk"]["S"] != swept]:
            yield page

    def _pending_of(self, page: list[dict[str, Any]]) -> list[str]:
        """The runs of these index entries whose wake-up is pending (read eventually
        consistently: a pending wake-up is only ever removed, and these are minutes old)."""
        keys = [run_key(_id_of(e)) for e in page]
        return [
            str(item["id"]["S"])
            for item in self._by_key(keys, "id, wake_pk, wake_sk", consistent=False)
            if "wake_sk" in item and "wake_pk" not in item
        ]

    def index_pending_wake(self, run_id: str) -> bool:
        """Index the run's pending wake-up, if it still has one (True then)."""
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="SET wake_pk = :wake_pk",
                ConditionExpression="attribute_exists(wake_sk) AND attribute_not_exists(wake_pk)",
                ExpressionAttributeValues={":wake_pk": s(sharded(WAKE_PK, run_id))},
            )
        )

    def clear_wakeup(self, run_id: str, token: int) -> None:
        self.release_wake(run_id, token)

    def progress(self, run_id: str) -> Progress:
        item = self._db.get_item(
            TableName=self.table,
            Key=run_key(run_id),
            ConsistentRead=True,
            ProjectionExpression="wake_sk, wake_resends, lease_owner, lease_until",
        ).get("Item")
        if not item:
            return Progress()
        waiting = "wake_sk" in item  # indexed, or a start's pending one
        return Progress(
            wakeup_at=float(item["wake_sk"]["S"]) if waiting else None,
            wake_resends=whole(item.get("wake_resends")) if waiting else 0,
            lease_owner=item["lease_owner"]["S"] if "lease_owner" in item else None,
            lease_until_ms=whole(item["lease_until"]) if "lease_until" in item else None,
        )

    # --- serving a wake on AWS: read its token, work, release it ------------------------

    def wake_token(self, run_id: str) -> int | None:
        """The run's wake token now (None: no such run). An activation reads it before it
        starts and releases the wake-up with it when done (``release_wake``): a wake-up is
        cleared only by work that finished, never by work that only began."""
        item = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ProjectionExpression="wake_token", ConsistentRead=True
        ).get("Item")
        return None if item is None else whole(item.get("wake_token"))

    def release_wake(self, run_id: str, token: int) -> bool:
        """Drop the wake-up unless a newer wake arrived since ``token`` or another worker
        holds a live lease on the run; False then (it still waits, and needs a prompt).

        The lease rule keeps a run that is running from losing its wake-up: a worker whose
        lease lapsed while its step ran, and which another worker then took, would otherwise
        drop the wake-up the other is serving (the same token), and if that one died the
        run would be left running with nothing to wake it (the reconciler finds in-flight
        runs by their wake-ups only: ``stale_running``). The caller released its own lease
        first, so a lease still on the item is someone else's."""
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression="REMOVE wake_pk, wake_sk, wake_resends",
                ConditionExpression="wake_token = :token AND "  # no newer wake arrived
                "(attribute_not_exists(lease_until) OR lease_until < :now)",
                ExpressionAttributeValues={":token": n(token), ":now": n(now_ms(self.clock))},
            )
        )

    def defer_wake(self, run_id: str, until: float, *, resent: bool = True) -> None:
        """The reconciler looked at this wake-up: look at it again at ``until`` (epoch
        seconds), not at every reconcile, and count the re-send if it made one."""
        conditional(
            self._db.update_item,
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="SET wake_sk = :until" + (" ADD wake_resends :one" if resent else ""),
            ConditionExpression="attribute_exists(wake_pk)",  # still waiting
            ExpressionAttributeValues={":until": s(f"{until:020.6f}"), **({":one": n(1)} if resent else {})},
        )

    def waiting(self, run_ids: Sequence[str]) -> set[str]:
        """The runs among ``run_ids`` with a wake-up waiting (a start's pending one too)."""
        return {run_id for run_id, item in self._items(run_ids, "id, wake_sk").items() if "wake_sk" in item}

    def resends(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How often the reconciler has re-sent each run's waiting wake."""
        return {
            run_id: whole(item.get("wake_resends"))
            for run_id, item in self._items(run_ids, "id, wake_resends").items()
        }

    # --- a run's timer transport (AwsWaker's ledger) ------------------------------------

    def armed_timer(self, run_id: str) -> tuple[int, str] | None:
        """The timer transport armed for the run: ``(due_ms, "sqs" | "schedule")``, as the
        activation's load read it (only the waker changes it), else read now."""
        if run_id in self._armed:
            return self._armed.pop(run_id)
        item = self._db.get_item(
            TableName=self.table, Key=run_key(run_id), ProjectionExpression="armed", ConsistentRead=True
        ).get("Item")
        return None if item is None else _armed_from(item)

    def arm_timer(self, run_id: str, armed: tuple[int, str] | None) -> None:
        request: dict[str, Any] = {"TableName": self.table, "Key": run_key(run_id)}
        if armed is None:
            request["UpdateExpression"] = "REMOVE armed"
        else:
            request["UpdateExpression"] = "SET armed = :armed"
            request["ExpressionAttributeValues"] = {":armed": s(compact(list(armed)))}
        conditional(self._db.update_item, **request, ConditionExpression="attribute_exists(pk)")
