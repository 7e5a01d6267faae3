"""Lists and searches on the DynamoDB store's indexes: runs by status, workflow and parent,
each index partition read over its shards and merged; the values runs publish (``wf:set``),
kept beside the run and found through the ``by_value`` index; and a list's run items read
back (the indexes carry keys only).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from runtime.core import published
from runtime.core.journal import Status
from runtime.core.published import Where
from runtime.core.values import compact
from runtime.errors import LunaflowError
from runtime.store.base import UNREADABLE_RUN, RunRecord
from runtime.store.dynamodb_layout import (
    ALL_RUNS,
    INDEXES,
    REF,
    SHARDS,
    VALUE_SK,
    _created_sk,
    _id_of,
    _journal_sk,
    _result_of,
    run_key,
    run_pk,
    sharded,
)
from runtime.store.dynamodb_reads import Reads
from runtime.store.items import num, s, text

# Index entries a search by a number range reads before it orders them newest first.
MAX_RANGE_READ = 5000


class _Unreadable:
    """A value a list could not read, and why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Index(Reads):
    """Lists, searches and published values: a part of ``DynamoDBStore``."""

    _created: dict[str, str]

    if TYPE_CHECKING:  # another part's (runtime.store.dynamodb_leases)

        def leased(self, run_ids: Sequence[str], now_ms: int) -> set[str]: ...

    # --- lists: an index's entries, then the run items they name -----------------------

    def _index(self, index: str, key: str, value: str, **more: Any) -> Iterator[dict[str, Any]]:
        return self._query(
            IndexName=index,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key},
            ExpressionAttributeValues={":v": s(value)},
            **more,
        )

    def _gathered(
        self,
        index: str,
        base: str,
        *,
        newest_first: bool = False,
        below: str | None = None,
        page: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """An index's entries under a sharded partition key, every shard's merged in sort
        key order (ties by run): each shard is one Query, read a page at a time, as far as
        the caller goes. ``below``: sort keys less than it only."""
        pk, sk = INDEXES[index]
        condition = "#k = :v" + ("" if below is None else " AND #s < :below")
        names = {"#k": pk, **({} if below is None else {"#s": sk})}

        def one(n_: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
            values = {":v": s(f"{base}#{n_:02d}"), **({} if below is None else {":below": s(below)})}
            more: dict[str, Any] = {} if page is None else {"Limit": page}
            for item in self._query(
                IndexName=index,
                KeyConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ScanIndexForward=not newest_first,
                **more,
            ):
                yield item[sk]["S"], item["pk"]["S"], item

        merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=newest_first)
        return (item for _, _, item in merged)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        if status is not None:
            index, base = "by_status", f"STATUS#{status}"
        elif workflow is not None:
            index, base = "by_workflow", f"WF#{workflow}"
        else:
            index, base = "all_runs", ALL_RUNS
        ids: list[str] = []
        # A shard holds about limit / SHARDS of the newest: pages of twice that (a shard that
        # runs out reads its next page) keep a list from reading SHARDS times its length.
        page = min(limit, max(25, 2 * limit // SHARDS))
        for item in self._gathered(index, base, newest_first=True, page=page):
            ids.append(_id_of(item))
            if len(ids) >= limit:
                break
        runs = self._hydrate(ids)
        # A status list is read from an index a moment behind the table: keep what still holds.
        return [
            r
            for r in runs
            if (status is None or r.status == status) and (workflow is None or r.workflow == workflow)
        ]

    def _hydrate(self, ids: list[str]) -> list[RunRecord]:
        """The run items themselves, in the order given (the indexes carry no values)."""
        found = {item["id"]["S"]: item for item in self._by_key([run_key(run_id) for run_id in ids])}
        results = self._results([item for item in found.values() if "result_sk" in item])
        # Inputs too large for their run items are their first chunks: read them together.
        firsts = {
            chunk["pk"]["S"].removeprefix("RUN#"): chunk
            for chunk in self._by_key(
                [
                    {"pk": item["pk"], "sk": s(_journal_sk(1))}
                    for run_id, item in found.items()
                    if "started" not in item and "started" + REF not in item and run_id not in self._firsts
                ]
            )
        }
        return [self._listed(found[r], results.get(r), firsts.get(r)) for r in ids if r in found]

    def _listed(self, item: dict[str, Any], result: Any, first: dict[str, Any] | None = None) -> RunRecord:
        """A run as a list shows it. One whose value cannot be read (an object missing from
        the bucket) is listed with what its item holds and the reason as its error, so one
        broken run never hides the others."""
        try:
            if isinstance(result, _Unreadable):
                raise LunaflowError(result.reason)
            return self._run_from(item, result=result, first=first)
        except LunaflowError as e:
            return RunRecord(
                id=item["id"]["S"],
                workflow=item["workflow"]["S"],
                status=Status(item["status"]["S"]),
                input=None,
                error=f"{UNREADABLE_RUN}: {e}",
                parent_id=text(item.get("parent_id")),
                created_at=num(item.get("created_at")),
                updated_at=num(item.get("updated_at")),
            )

    def _results(self, run_items: list[dict[str, Any]]) -> dict[str, Any]:
        """Completed runs' results, from the chunks their run items point at."""
        out: dict[str, Any] = {}
        for chunk in self._by_key([{"pk": i["pk"], "sk": i["result_sk"]} for i in run_items]):
            run_id = chunk["pk"]["S"].removeprefix("RUN#")
            try:
                out[run_id] = _result_of(self._rows(chunk))
            except LunaflowError as e:
                out[run_id] = _Unreadable(str(e))  # its chunk is missing from the bucket
        return out

    def children(self, run_id: str) -> list[str]:
        return [_id_of(i) for i in self._index("by_parent", "parent_pk", f"PARENT#{run_id}")]

    def running_runs(self) -> list[str]:
        return [_id_of(i) for i in self._gathered("by_status", f"STATUS#{Status.RUNNING}")]

    def stale_running(self, before: float, now_ms: int, limit: int | None = None) -> list[str]:
        candidates = [
            _id_of(i)
            for i in self._gathered("by_status", f"STATUS#{Status.RUNNING}")
            if num(i.get("updated_at")) < before
        ]
        busy = self.leased(candidates, now_ms)
        free = [run_id for run_id in candidates if run_id not in busy]
        return free if limit is None else free[:limit]

    # --- values runs publish (wf:set): items beside the run, the by_value index --------

    def _created_of(self, run_id: str) -> str:
        """The run's ``created_sk`` (fixed at its start), read once per run and kept."""
        known = self._created.get(run_id)
        if known is None:
            got = self._db.get_item(
                TableName=self.table, Key=run_key(run_id), ProjectionExpression="created_sk"
            ).get("Item", {})
            known = str(got.get("created_sk", {}).get("S", _created_sk(0, run_id)))
            if len(self._created) > 1024:
                self._created.clear()
            self._created[run_id] = known
        return known

    def _value_items(self, run_id: str, sets: dict[str, Any]) -> list[Any]:
        created = self._created_of(run_id)
        return [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        "pk": s(run_pk(run_id)),
                        "sk": s(VALUE_SK + key),
                        "value": s(compact(value)),
                        "value_pk": s(sharded(f"VAL#{key}", run_id)),
                        "value_sk": s(f"{published.sort_text(value)}#{created}"),
                    },
                }
            }
            for key, value in sets.items()
        ]

    def run_values(self, run_id: str) -> dict[str, Any]:
        items = self._partition(run_id, VALUE_SK)
        return {str(i["sk"]["S"]).removeprefix(VALUE_SK): json.loads(i["value"]["S"]) for i in items}

    def find_runs(self, where: Where, *, workflow: str | None = None, limit: int = 1000) -> list[RunRecord]:
        # Every shard of the key's index partition, merged by sort key: an equal value reads
        # newest first and stops at `limit`; a range reads up to MAX_RANGE_READ entries and
        # orders them by created time (the sort key's tail).
        span = published.sort_range(where)
        exact = where.op == "="

        def one(n_: int) -> Iterator[tuple[str, dict[str, Any]]]:
            values: dict[str, Any] = {":v": s(f"VAL#{where.key}#{n_:02d}")}
            condition = "value_pk = :v"
            if span is not None:
                low, high = span
                values[":a"], values[":b"] = s(low + "#" if exact else low), s(high + "#~")
                condition += " AND value_sk BETWEEN :a AND :b"
            for item in self._query(
                IndexName="by_value",
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                ScanIndexForward=not exact,
                Limit=min(limit + 1, 500) if exact else 500,
            ):
                yield item["value_sk"]["S"], item

        matched: list[tuple[str, str]] = []
        merged = heapq.merge(*(one(n_) for n_ in range(SHARDS)), reverse=exact)
        bound = limit if exact else MAX_RANGE_READ
        for sk_, item in merged:
            value = json.loads(item["value"]["S"])
            if where.holds(value):
                created = sk_[len(published.sort_text(value)) + 1 :]  # the tail after the value's text
                matched.append((created, _id_of(item)))
                if len(matched) >= bound:
                    break
        matched.sort(reverse=True)
        ids = [run_id for _, run_id in matched]
        runs = (
            self._hydrate(ids)
            if workflow is None
            else [r for r in self._hydrate(ids) if r.workflow == workflow]
        )
        return runs[:limit]
