"""Flow control on the DynamoDB table: slots as conditional sets, lines as sorted items.

- A key's slot item (pk ``#SLOT#<key>``, sk ``K``) holds the runs holding its slots as a string
  set; taking a slot is one conditional ``ADD`` ("fewer than the limit hold it, or I do").
  Its line is the items beside it in the same partition (sk ``W#<rank>#<run>``), so one Query
  reads who is next. Keys spread over partitions as runs' keys do; a keyless limit is one
  item, so it takes about 500 starts a second (a take and a give each), DynamoDB's bound
  for one item (docs/architecture.md, "Flow control").
- A run passing a gate has an item in its own partition (sk ``#F``): what it wants, its rank
  and whether it holds its slots. It is written before any slot is taken, so a crash midway
  leaves a run whose next activation takes the same slots again (the take is idempotent),
  and the reconciler frees the slots of runs that ended (``sweep``).
- A run that finds a key full writes its place in every line it wants, then tries once more:
  a slot freed between its try and its place is seen either by it or by the releaser.
- Settings (pk ``#FLOWSET``) and rate buckets (pk ``#RATE#<key>``, one conditional write per
  reserved start) are items of their own; keys in use are listed under pk ``#SLOTS``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from runtime.core.flow import (
    MAX_COLLECTED_BYTES,
    Admission,
    Collect,
    Rate,
    SlotView,
    SlotWant,
    parse_rate,
    reserve,
    setting_names,
)
from runtime.core.values import compact
from runtime.store.items import conditional, n, num, s, text, whole

TTL_ATTRIBUTE = "expires_at"  # the table's time-to-live attribute (runtime.store.dynamodb's)

FLOW_SK = "#F"
COLLECT_SK = "#C"  # a run's collection (debounce, batch): the inputs, a JSON text each
OPEN_PK = "#COLLECT#"  # pk OPEN_PK + key, sk "K": the run whose collection the key's starts join
COLLECTED_KEPT_S = 7 * 86_400  # a closed collection's items expire (TTL) once its run journaled them
SLOT_PK = "#SLOT#"
SLOTS_PK = "#SLOTS"
SHARD_PK = "#SHARD#"  # pk SHARD_PK + "<nn>#<key>": one shard of a key whose slots are spread
# A key whose code declares a limit of this many slots or more spreads them over items, one per
# SHARD_EVERY (at most MAX_SLOT_SHARDS): an item takes about 1,000 writes a second, and a run
# costs its key two (the take and the give).
SHARD_EVERY = 25
MAX_SLOT_SHARDS = 16
SETTINGS_PK = "#FLOWSET"
RATE_PK = "#RATE#"
RANK_OFFSET = 10**15  # ranks are epoch ms less a priority bonus: kept positive in a sort key
FILL_PAGE = 25


class AlsoRefused(Exception):
    """A run's creation was refused by the condition of an item written with it."""


def _spread(run_id: str) -> int:
    """A stable number of the run (a hash of its id): the shard it tries first."""
    return int(hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8], 16)


def slot_shards(declared: int) -> int:
    return max(1, min(MAX_SLOT_SHARDS, declared // SHARD_EVERY))


def _waiter_sk(rank: int, run_id: str) -> str:
    return f"W#{rank + RANK_OFFSET:020d}#{run_id}"


class DynamoFlow:
    """The flow control half of ``DynamoDBStore`` (which hands it its client and table)."""

    def __init__(
        self,
        db: Any,
        table: str,
        run_pk: Callable[[str], str],
        wake: Callable[[str], None],
    ) -> None:
        self._db = db
        self.table = table
        self._run_pk = run_pk
        self._wake = wake  # records the wake-up and tells the store's listener
        self._shard_counts: dict[str, int] = {}  # fixed per key once its item exists

    # --- items ---------------------------------------------------------------------------

    def _get(self, pk: str, sk: str, projection: str | None = None) -> dict[str, Any] | None:
        req: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"pk": s(pk), "sk": s(sk)},
            "ConsistentRead": True,
        }
        if projection:
            req["ProjectionExpression"] = projection
        item = self._db.get_item(**req).get("Item")
        return item or None

    def _delete(self, pk: str, sk: str) -> None:
        self._db.delete_item(TableName=self.table, Key={"pk": s(pk), "sk": s(sk)})

    def _flow_item(self, run_id: str) -> dict[str, Any] | None:
        return self._get(self._run_pk(run_id), FLOW_SK)

    @staticmethod
    def _wants(item: dict[str, Any]) -> list[SlotWant]:
        return [SlotWant(k, int(lim), name) for k, lim, name in json.loads(text(item["wants"]) or "[]")]

    def settings(self) -> dict[str, str]:
        out: dict[str, str] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": s(SETTINGS_PK)},
            "ConsistentRead": True,
        }
        while True:
            page = self._db.query(**kwargs)
            for item in page.get("Items", []):
                out[str(text(item["sk"]))] = str(text(item["value"]))
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _limit(self, want: SlotWant, settings: dict[str, str]) -> int:
        for name in setting_names(want):
            if name in settings:
                return int(settings[name])
        return want.limit

    # --- slots ---------------------------------------------------------------------------

    def _shards(self, want: SlotWant) -> int:
        """How many items hold the key's slots: fixed when the key is first seen (from the
        limit its code declared), kept on the key's item and remembered here."""
        known = self._shard_counts.get(want.key)
        if known is None:
            kept = self._get(SLOT_PK + want.key, "K", "shards")
            if kept is not None and "shards" in kept:  # a read, not a write, per container and key
                known = whole(kept["shards"])
                self._shard_counts[want.key] = known
                return known
            got = self._db.update_item(
                TableName=self.table,
                Key={"pk": s(SLOT_PK + want.key), "sk": s("K")},
                UpdateExpression="SET declared = :d, lname = :name, shards = if_not_exists(shards, :s)",
                ExpressionAttributeValues={
                    ":d": n(want.limit),
                    ":name": s(want.name),
                    ":s": n(slot_shards(want.limit)),
                },
                ReturnValues="ALL_OLD",
            )
            old = got.get("Attributes", {})
            if not old:  # the key's first item: list the key (once) for the console and the sweep
                self._db.put_item(TableName=self.table, Item={"pk": s(SLOTS_PK), "sk": s(want.key)})
            known = whole(old["shards"]) if "shards" in old else slot_shards(want.limit)
            self._shard_counts[want.key] = known
        return known

    def _shard_key(self, key: str, shard: int, shards: int) -> dict[str, Any]:
        pk = SLOT_PK + key if shards == 1 else f"{SHARD_PK}{shard:02d}#{key}"
        return {"pk": s(pk), "sk": s("K")}

    def _add(self, run_id: str, key: dict[str, Any], cap: int, want: SlotWant | None = None) -> bool:
        """Add the run to a slot item's holders if it has room. ``want``: the item is the
        key's own, which keeps the limit the code declares (in the same write)."""
        values: dict[str, Any] = {":r": {"SS": [run_id]}, ":run": s(run_id), ":lim": n(cap)}
        update = "ADD holders :r"
        if want is not None:
            update += " SET declared = :d, lname = :name"
            values.update({":d": n(want.limit), ":name": s(want.name)})
        return bool(
            conditional(
                self._db.update_item,
                TableName=self.table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=(
                    "attribute_not_exists(holders) OR size(holders) < :lim OR contains(holders, :run)"
                ),
                ExpressionAttributeValues=values,
            )
        )

    def _take(self, run_id: str, want: SlotWant, limit: int, again: bool) -> int | None:
        """Take a slot of the key: the shard it is in, or None when the key is full. A run
        tries its own shard first, then the next ones (``again``: a run that may hold one
        already, from an admission a crash cut short, finds it first)."""
        shards = self._shards(want)
        if shards == 1:
            return 0 if self._add(run_id, self._shard_key(want.key, 0, 1), limit, want) else None
        if again:
            held = self._held_in(run_id, want.key, shards)
            if held is not None:
                return held
        first = _spread(run_id) % shards
        for j in range(shards):
            i = (first + j) % shards
            cap = limit // shards + (1 if i < limit % shards else 0)
            if cap and self._add(run_id, self._shard_key(want.key, i, shards), cap):
                return i
        return None

    def _held_in(self, run_id: str, key: str, shards: int) -> int | None:
        for i, holders in enumerate(self._shard_holders(key, shards)):
            if run_id in holders:
                return i
        return None

    def _shard_holders(self, key: str, shards: int) -> list[set[str]]:
        keys = [self._shard_key(key, i, shards) for i in range(shards)]
        got: dict[str, set[str]] = {}
        while keys:
            page = self._db.batch_get_item(RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}})
            for item in page.get("Responses", {}).get(self.table, []):
                got[str(text(item["pk"]))] = set(item.get("holders", {}).get("SS", []))
            keys = page.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return [got.get(str(self._shard_key(key, i, shards)["pk"]["S"]), set()) for i in range(shards)]

    def _give(self, run_id: str, key: str, shard_: int | None = None) -> None:
        shards = self._shard_counts.get(key) or self._meta_shards(key)
        if shards > 1 and shard_ is None:
            shard_ = self._held_in(run_id, key, shards)
            if shard_ is None:
                return
        self._db.update_item(
            TableName=self.table,
            Key=self._shard_key(key, shard_ or 0, shards),
            UpdateExpression="DELETE holders :r",
            ExpressionAttributeValues={":r": {"SS": [run_id]}},
        )

    def _meta_shards(self, key: str) -> int:
        item = self._get(SLOT_PK + key, "K", "shards") or {}
        found = whole(item.get("shards")) or 1
        self._shard_counts[key] = found
        return found

    def _take_all(
        self, run_id: str, wants: Sequence[SlotWant], settings: dict[str, str], again: bool = False
    ) -> dict[str, int] | SlotWant:
        """Take a slot of every key, or none (what was taken is given back): the shard taken
        of each key, or the first key without room."""
        taken: dict[str, int] = {}
        for w in wants:
            got = self._take(run_id, w, self._limit(w, settings), again)
            if got is None:
                for key, i in taken.items():
                    self._give(run_id, key, i)
                return w
            taken[w.key] = got
        return taken

    def _holding(
        self, run_id: str, wants: Sequence[SlotWant], rank: int, taken: dict[str, int], placed: bool = True
    ) -> None:
        if placed:  # its places in line go
            for w in wants:
                self._delete(SLOT_PK + w.key, _waiter_sk(rank, run_id))
        self._db.update_item(
            TableName=self.table,
            Key={"pk": s(self._run_pk(run_id)), "sk": s(FLOW_SK)},
            UpdateExpression="SET holding = :t, shard_of = :m",
            ExpressionAttributeValues={
                ":t": {"BOOL": True},
                ":m": {"M": {k: n(i) for k, i in taken.items()}},
            },
        )

    def _slot(self, key: str) -> tuple[set[str], int, str]:
        """The key's holders (of every shard), its declared limit and its setting's name."""
        item = self._get(SLOT_PK + key, "K") or {}
        shards = whole(item.get("shards")) or 1
        self._shard_counts[key] = shards
        holders = set(item.get("holders", {}).get("SS", []))
        if shards > 1:
            holders = set().union(*self._shard_holders(key, shards))
        return holders, whole(item.get("declared")) or 1, text(item.get("lname")) or key

    def _place(self, key: str, rank: int, run_id: str) -> int:
        page = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":p": s(SLOT_PK + key),
                ":lo": s("W#"),
                ":hi": s(_waiter_sk(rank, run_id)),
            },
            Select="COUNT",
            ConsistentRead=True,
        )
        return int(page.get("Count", 1))

    def admit(self, run_id: str, wants: Sequence[SlotWant], rank: int) -> Admission:
        item = self._flow_item(run_id)
        if item is not None and item.get("holding", {}).get("BOOL"):
            return Admission(True)
        if item is None:
            self._db.put_item(
                TableName=self.table,
                Item={
                    "pk": s(self._run_pk(run_id)),
                    "sk": s(FLOW_SK),
                    "wants": s(json.dumps([[w.key, w.limit, w.name] for w in wants])),
                    "rank": n(rank),
                    "holding": {"BOOL": False},
                },
            )
        else:
            rank = whole(item.get("rank"))
        settings = self.settings()
        taken = self._take_all(run_id, wants, settings, again=item is not None)
        if isinstance(taken, dict):
            self._holding(run_id, wants, rank, taken, placed=item is not None)
            return Admission(True)
        for w in wants:
            self._db.put_item(
                TableName=self.table,
                Item={"pk": s(SLOT_PK + w.key), "sk": s(_waiter_sk(rank, run_id)), "run": s(run_id)},
            )
        # Placed in line: try once more, so a slot freed since the first try is not missed.
        blocked = self._take_all(run_id, wants, settings)
        if isinstance(blocked, dict):
            self._holding(run_id, wants, rank, blocked)
            return Admission(True)
        holders, _, _ = self._slot(blocked.key)
        return Admission(
            False,
            blocked.key,
            len(holders),
            self._limit(blocked, settings),
            self._place(blocked.key, rank, run_id),
        )

    def waiting_for(self, run_id: str) -> Admission | None:
        item = self._flow_item(run_id)
        if item is None or item.get("holding", {}).get("BOOL"):
            return None
        rank, settings = whole(item.get("rank")), self.settings()
        for w in self._wants(item):
            holders, _, _ = self._slot(w.key)
            limit = self._limit(w, settings)
            if len(holders - {run_id}) >= limit:
                return Admission(False, w.key, len(holders), limit, self._place(w.key, rank, run_id))
        return Admission(False)

    def fill(self, key: str) -> list[str]:
        """Hand the key's free slots to its line, best rank first (see SQLite's ``fill``)."""
        admitted: list[str] = []
        settings = self.settings()
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :w)",
                "ExpressionAttributeValues": {":p": s(SLOT_PK + key), ":w": s("W#")},
                "ConsistentRead": True,
                "Limit": FILL_PAGE,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = self._db.query(**kwargs)
            for waiter in page.get("Items", []):
                run_id = str(text(waiter["run"]))
                item = self._flow_item(run_id)
                if item is None:  # a run that ended left its place behind
                    self._delete(SLOT_PK + key, str(text(waiter["sk"])))
                    continue
                wants = self._wants(item)
                blocked = self._take_all(run_id, wants, settings)
                if isinstance(blocked, dict):
                    self._holding(run_id, wants, whole(item.get("rank")), blocked)
                    self._wake(run_id)
                    admitted.append(run_id)
                elif blocked.key == key:
                    return admitted
            start = page.get("LastEvaluatedKey")
            if not start:
                return admitted

    # --- debounce and batching -------------------------------------------------------

    def collect_into(self, run: Any, key: str, spec: Collect, now_ms: int) -> str | list[dict[str, Any]]:
        """Add ``run.input`` to the open collection of ``key``: the id of the run it joined;
        or the items that open a new collection with ``run`` (written with the run's creation,
        the key's item conditional on the collection it replaces)."""
        event = compact(run.input)
        size = len(event.encode("utf-8")) + 1
        open_item = self._get(OPEN_PK + key, "K")
        replaced = None if open_item is None else str(text(open_item["run"]))
        if replaced is not None:
            added = conditional(
                self._db.update_item,
                TableName=self.table,
                Key={"pk": s(self._run_pk(replaced)), "sk": s(COLLECT_SK)},
                UpdateExpression="SET events = list_append(events, :e), bytes = bytes + :b, "
                "#c = #c + :one, last_ms = :now",
                ConditionExpression="closed = :f AND #c < :size AND bytes <= :room",
                ExpressionAttributeNames={"#c": "count"},
                ExpressionAttributeValues={
                    ":e": {"L": [s(event)]},
                    ":b": n(size),
                    ":one": n(1),
                    ":now": n(now_ms),
                    ":f": {"BOOL": False},
                    ":size": n(spec.size),
                    ":room": n(MAX_COLLECTED_BYTES - size),
                },
                ReturnValues="UPDATED_NEW",
            )
            if added:
                count = whole(added.get("Attributes", {}).get("count")) if isinstance(added, dict) else 0
                if spec.kind == "batch" and count >= spec.size:
                    self._wake(replaced)  # full: it closes now
                return replaced
            # Closed, gone, or full: a full one closes now, and a new collection replaces it.
            if conditional(
                self._db.update_item,
                TableName=self.table,
                Key={"pk": s(self._run_pk(replaced)), "sk": s(COLLECT_SK)},
                UpdateExpression="SET closed = :t",
                ConditionExpression="closed = :f",
                ExpressionAttributeValues={":t": {"BOOL": True}, ":f": {"BOOL": False}},
            ):
                self._wake(replaced)
        opened: dict[str, Any] = {"Item": {"pk": s(OPEN_PK + key), "sk": s("K"), "run": s(run.id)}}
        if replaced is None:
            opened["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            opened["ConditionExpression"] = "#r = :old"
            opened["ExpressionAttributeNames"] = {"#r": "run"}
            opened["ExpressionAttributeValues"] = {":old": s(replaced)}
        items = {
            "pk": s(self._run_pk(run.id)),
            "sk": s(COLLECT_SK),
            "key": s(key),
            "events": {"L": [s(event)]},
            "bytes": n(size + 1),
            "count": n(1),
            "first_ms": n(now_ms),
            "last_ms": n(now_ms),
            "closed": {"BOOL": False},
        }
        return [{"Item": items}, opened]

    def close(self, run_id: str, spec: Collect, now_ms: int) -> list[Any] | int | None:
        while True:
            item = self._get(self._run_pk(run_id), COLLECT_SK)
            if item is None:
                return None
            events = [json.loads(str(text(e))) for e in item.get("events", {}).get("L", [])]
            if item.get("closed", {}).get("BOOL"):
                return events
            first, last, count = (
                whole(item.get("first_ms")),
                whole(item.get("last_ms")),
                whole(item.get("count")),
            )
            due = spec.due(first, last, count)
            if now_ms < due:
                return due
            closed = conditional(
                self._db.update_item,
                TableName=self.table,
                Key={"pk": s(self._run_pk(run_id)), "sk": s(COLLECT_SK)},
                UpdateExpression=f"SET closed = :t, {TTL_ATTRIBUTE} = :exp",
                ConditionExpression="closed = :f AND last_ms = :last",  # no start slipped in
                ExpressionAttributeValues={
                    ":t": {"BOOL": True},
                    ":f": {"BOOL": False},
                    ":last": n(last),
                    ":exp": n(now_ms // 1000 + COLLECTED_KEPT_S),
                },
            )
            if closed:
                self._drop_open(str(text(item["key"])), run_id)
                return events

    def _drop_open(self, key: str, run_id: str) -> None:
        conditional(
            self._db.delete_item,
            TableName=self.table,
            Key={"pk": s(OPEN_PK + key), "sk": s("K")},
            ConditionExpression="#r = :me",
            ExpressionAttributeNames={"#r": "run"},
            ExpressionAttributeValues={":me": s(run_id)},
        )

    def _end_collection(self, item: dict[str, Any]) -> None:
        """A run that ends while collecting (cancelled): its key's starts open a new one."""
        run_id = str(text(item["pk"])).removeprefix("RUN#")
        if not item.get("closed", {}).get("BOOL"):
            self._drop_open(str(text(item["key"])), run_id)
        self._delete(self._run_pk(run_id), COLLECT_SK)

    def release(self, run_id: str) -> list[str]:
        # The run's gate items, "#C" (a collection) and "#F" (its slots), in one read.
        found = {
            str(text(i["sk"])): i
            for i in self._db.query(
                TableName=self.table,
                KeyConditionExpression="pk = :p AND sk BETWEEN :c AND :f",
                ExpressionAttributeValues={
                    ":p": s(self._run_pk(run_id)),
                    ":c": s(COLLECT_SK),
                    ":f": s(FLOW_SK),
                },
                ConsistentRead=True,
            ).get("Items", [])
        }
        if COLLECT_SK in found:
            self._end_collection(found[COLLECT_SK])
        item = found.get(FLOW_SK)
        if item is None:
            return []
        wants, rank = self._wants(item), whole(item.get("rank"))
        holding = bool(item.get("holding", {}).get("BOOL"))
        shard_of = {k: whole(v) for k, v in item.get("shard_of", {}).get("M", {}).items()}
        for w in wants:
            self._give(run_id, w.key, shard_of.get(w.key))
            if not holding:  # it ended in line (cancelled): its places go
                self._delete(SLOT_PK + w.key, _waiter_sk(rank, run_id))
        self._delete(self._run_pk(run_id), FLOW_SK)
        admitted: list[str] = []
        for w in wants:
            admitted += self.fill(w.key)
        return admitted

    def keys(self) -> list[str]:
        out: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": s(SLOTS_PK)},
        }
        while True:
            page = self._db.query(**kwargs)
            out += [str(text(i["sk"])) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def sweep(self, ended: Callable[[Sequence[str]], set[str]]) -> list[str]:
        """The reconciler's pass: free the slots of runs that ended (a crash between a run's
        end and its release), drop places of runs gone, and fill every key with room."""
        admitted: list[str] = []
        for key in self.keys():
            holders, _, _ = self._slot(key)
            for run_id in sorted(ended(sorted(holders))):
                admitted += self.release(run_id)
                self._give(run_id, key)  # a holder with no gate item left (a half release)
            admitted += self.fill(key)
        return admitted

    def line(self, key: str, limit: int = 20) -> tuple[list[str], int]:
        page = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND begins_with(sk, :w)",
            ExpressionAttributeValues={":p": s(SLOT_PK + key), ":w": s("W#")},
            ConsistentRead=True,
        )
        items = page.get("Items", [])
        return [str(text(i["run"])) for i in items[:limit]], len(items)

    def views(self, limit: int) -> list[SlotView]:
        settings, out = self.settings(), []
        for key in self.keys():
            holders, declared, name = self._slot(key)
            waiting, queued = self.line(key)
            if holders or queued:
                limit_ = self._limit(SlotWant(key, declared, name), settings)
                out.append(SlotView(key, limit_, len(holders), queued, sorted(holders)[:20], waiting))
        out.sort(key=lambda v: (-v.queued, -v.in_use, v.key))
        return out[:limit]

    # --- settings and rates --------------------------------------------------------------

    def set_setting(self, name: str, value: str | None) -> list[str]:
        key = {"pk": s(SETTINGS_PK), "sk": s(name)}
        if value is None:
            self._db.delete_item(TableName=self.table, Key=key)
        else:
            self._db.put_item(TableName=self.table, Item={**key, "value": s(value)})
        if name.startswith("rate:"):
            return []
        admitted: list[str] = []
        for k in self.keys():
            if k == name or self._slot(k)[2] == name:
                admitted += self.fill(k)
        return admitted

    def reserve_rate(self, rate: Rate, now_ms: int) -> int:
        setting = self._get(SETTINGS_PK, f"rate:{rate.key}")
        if setting is not None:
            limit, period = parse_rate(text(setting["value"]), f"the setting rate:{rate.key}")
            rate = Rate(rate.key, limit, period)
        key = {"pk": s(RATE_PK + rate.key), "sk": s("K")}
        while True:
            item = self._get(RATE_PK + rate.key, "K")
            old = None if item is None else num(item.get("tat"))
            go_at, tat = reserve(old, now_ms, rate)
            cond: dict[str, Any] = (
                {"ConditionExpression": "attribute_not_exists(pk)"}
                if item is None
                else {"ConditionExpression": "tat = :old", "ExpressionAttributeValues": {":old": item["tat"]}}
            )
            if conditional(self._db.put_item, TableName=self.table, Item={**key, "tat": n(tat)}, **cond):
                return go_at
