"""The DynamoDB store's table (``runtime.store.dynamodb``): its keys and sort keys, the
index shards, the indexes and the CreateTable request, and how items encode what they hold
(journal rows, consumed signals, write ids). Constants and pure functions only;
``runtime.store.dynamodb`` re-exports the names other code imports from it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any

from runtime.core.journal import Entry, Kind, Status
from runtime.errors import EngineBug
from runtime.store.base import RunRecord, SignalRecord
from runtime.store.items import Item, n, num, s, text, whole

# Sort keys within a run's partition: journal chunks "J#<first seq>" < the run item "K" <
# secret pins "P#..." < signals "S#...". So "sk >= J#<n+1>" reads what was appended after
# entry n, the run and its signals in one Query.
RUN_SK = "K"
# A value the run published: sk `#V#<key>`, before every other item of the run's partition,
# so no read of its journal, run item or signals (`sk >= J#...`, `BETWEEN J# AND K`) meets it.
VALUE_SK = "#V#"
# A run item's ``lv``: the run layout needed to read its run, set by a later lunaflow when it
# writes a run in a way this code would misread (a signal where this code does not look).
# This code reads runs up to LAYOUT (no ``lv``: 1) and refuses a run needing more, writing
# nothing, rather than misread it: a rollback then leaves such runs whole and waiting for
# the newer code, and any later layout change can rely on it. Layout 2: a signal may live on
# the run item (RUN_SIGNAL below), where code of layout 1 does not look. Layout 3: journal
# entries may live on the run item (its head, ``dynamodb_chunks.HEAD``), where code of
# layout 2 does not look; only a run created with a head says so (a write never lowers it).
LAYOUT_ATTR = "lv"
LAYOUT = 3
SIGNAL_LAYOUT = 2  # what a signal riding on the run item needs


def needed_layout(run_item: Item) -> int:
    """The run layout a run item says its run needs; above LAYOUT, this code refuses it."""
    return whole(run_item.get(LAYOUT_ATTR))


OWNER_PK = "#OWNER"  # a lease owner's heartbeat: pk OWNER_PK, sk the owner
# A run asked to advance carries wake_pk/wake_sk (a sparse index: an item is in it only
# with both). A start whose own request advances it carries wake_sk alone, a wake-up
# *pending* (``Appends.create_run``): in no index, so a park or end in that request (or in
# the worker it hands the run to) writes none. A signal indexes it, and the reconciler does
# for a run still in flight two minutes on (``Timers.index_stranded_starts``).
WAKE_PK = "#WAKE"
# The reconciler's mark of how far it has looked for stranded starts: pk and sk STARTS_PK,
# ``swept`` the created_sk of the newest run looked at.
STARTS_PK = "#STARTS"
TIMER_PK = "#TIMER"
EXPIRE_PK = "#EXPIRE"  # an ended run's expiry, in the timers index beside the timers
CANCEL_PK = "#CANCEL"  # a cancel's intent until its cascade is done: pk CANCEL_PK, sk the run
# The names of the workflows runs were completed of (pk and sk WORKFLOWS_PK, a string set
# ``names``): a list of completed runs, or of every run, reads the ``by_workflow`` index under
# each of them, since a completed run is in no status partition (``status_partition``).
WORKFLOWS_PK = "#WORKFLOWS"
# The ``all_runs`` index's partition. Runs written before stop 47 carry it; new runs do not
# (an entry written at the start and deleted at the expiry was 2 index WRU a run), and a
# list of every run reads every status partition instead (``STATUS_PARTITIONS``). The index
# stays in the table for the entries old runs have until they expire, and for older code.
ALL_RUNS = "#RUNS"
# The index partitions every run shares (all runs, a status, a workflow, the timers, the
# wake-ups) are split in SHARDS, the run's by a hash of its id: one index partition takes
# about 1,000 writes a second, and time-ordered sort keys keep DynamoDB from splitting it.
# A list reads every shard and merges them in order (``_gathered``).
SHARDS = 16
TTL_ATTRIBUTE = "expires_at"  # the table's time-to-live attribute (kv entries, owner beats)

# What an item holds inline; a larger text goes to S3 and the item holds its key (under the
# attribute's name + REF). An item is at most 400 KB with its attribute names: the run item
# carries up to three texts (started, error, current step), a signal item a payload
# of up to 256 KiB and its name. DynamoDB bills writes by the KB and S3 by the request, so
# past a few KB S3 is the cheaper home too; 64 KiB keeps the values most runs use inline.
INLINE_CHUNK_BYTES = 64 * 1024
INLINE_TEXT_BYTES = 32 * 1024
# Journal entry 1 (run.started, the input with it) lives on the run item while its text is
# at most this; a larger one is the run's first chunk (``J#0000000001``), written with the
# run item. Every write to the run item (its lease, each summary, a signal's number, a
# wake-up) costs the item's size in KB: an input of a few KB on it would make each of them
# cost several write units, so the run item keeps to about 1 KB.
STARTED_INLINE_BYTES = 400
INLINE_SIGNAL_BYTES = 320 * 1024
REF = "_ref"
# The ``entries_ref`` of the first chunk of a run whose chunks grow in place
# (``runtime.store.dynamodb_chunks``): no object has this key, so code from before that layout,
# which reads entry 1 there, refuses the run saying the value is missing.
OLDER_CODE_REFUSED = "lunaflow-journal-v2 (this run is read by lunaflow from stop 46 on)"
# A chunk's last entry (kind and name) is kept beside it while short, so reading a run's
# current step never fetches a chunk from S3.
TAIL_BYTES = 1024
# Where a journal entry's value lives when its chunk does not hold it.
IN_SIGNAL = "signal"  # wait.done's payload: the signal item it consumed
# The id of the last conditional write to an item (its start, a chunk, a summary). A write
# whose answer was lost is sent again by botocore, and that retry fails its own condition
# ("the slot is free", "no later summary"): the item as it is (ReturnValuesOnCondition-
# CheckFailure) carrying the write's own id says the write committed, not that another
# writer won (docs/architecture.md, "Retried writes").
WRITE_ID = "wid"


def _write_id() -> str:
    return secrets.token_hex(8)


def _mine(lost: Any, token: str) -> bool:
    """Whether a conditional write that failed its condition finds its own committed write."""
    item = getattr(lost, "item", None)
    return item is not None and text(item.get(WRITE_ID)) == token


def shard(run_id: str) -> int:
    """The index shard of a run (stable: a hash of its id)."""
    return int(hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8], 16) % SHARDS


def sharded(key: str, run_id: str) -> str:
    """An index partition key as a run writes it: ``<key>#<shard, 2 digits>``."""
    return f"{key}#{shard(run_id):02d}"


# The status index's partitions. A run in flight (running, sleeping, awaiting) sits in one,
# ``STATUS#live``, from its start to its end, so moving between those statuses writes no
# index (a key move is a delete and a put: 2 index WRU, and a fan-out run moved 3 times);
# a failed run (it waits for a resume, often long) and a cancelled one sit under their
# status. A completed run leaves the index (its end removes the key: 1 index WRU, not a
# move's 2, and its expiry has one entry fewer to delete) and is listed from ``by_workflow``,
# every run's entry from its start to its expiry: the runs there in no status partition.
# A list of one in-flight status reads the live runs and keeps that status's. Items older
# code wrote keep ``STATUS#<status>`` for every status (``STATUS#completed`` too) until their
# next status change moves them (``legacy_partition``: read, never written).
LIVE = "live"
LIVE_PARTITION = f"STATUS#{LIVE}"
IN_FLIGHT = frozenset({Status.RUNNING, Status.SLEEPING, Status.AWAITING})


def wake_up(run_id: str, at_s: float) -> tuple[str, str, dict[str, Any]]:
    """The parts of a run item's update that record a wake-up: the SET of its index key and
    of the time of its first ask (a later ask keeps it, so a wake-up waiting on is as old as
    that), the ADD of a new wake token, and their values. Every writer of a wake-up uses
    them: a start or signal, a child's end, a fired timer, a resume's own write."""
    return (
        "wake_pk = :wake_pk, wake_sk = if_not_exists(wake_sk, :wake_at)",
        "wake_token :wake_one",
        {":wake_pk": s(sharded(WAKE_PK, run_id)), ":wake_at": s(f"{at_s:020.6f}"), ":wake_one": n(1)},
    )


# Every partition of the status index, the live one first: a run not completed is in exactly
# one (an index a moment behind the table may list it in two), and so is a completed run
# older code ended (``STATUS#completed``).
STATUS_PARTITIONS = (
    f"STATUS#{LIVE}",
    *(f"STATUS#{status}" for status in Status if status not in IN_FLIGHT),
    *(f"STATUS#{status}" for status in Status if status in IN_FLIGHT),  # items older code wrote
)


def status_partition(status: str) -> str | None:
    """The status index's partition (unsharded) a run of ``status`` is listed under: none
    for a completed run (``by_workflow`` lists it)."""
    if status == Status.COMPLETED:
        return None
    return f"STATUS#{LIVE}" if status in IN_FLIGHT else f"STATUS#{status}"


def legacy_partition(status: str) -> str | None:
    """Where items older code wrote list a run of ``status``, when that is not where new
    ones do (an in-flight status, and completed)."""
    return f"STATUS#{status}" if status in IN_FLIGHT or status == Status.COMPLETED else None


# When a summary last changed the run: the by_status index carries ``updated_at`` (its
# entries once read by the reconciler), so rewriting it would rewrite the run's index entry
# (1 index WRU) with every status change. The start writes ``updated_at``; each later change
# writes ``changed_at``, which no index carries; a reader takes the later of the two.
CHANGED_AT = "changed_at"
# When a worker's lease marked the run running (``runtime.store.dynamodb_leases``): kept by
# later leases until a summary of another status removes it, and read as a change.
RUNNING_SINCE = "running_since"


def changed_at(item: dict[str, Any]) -> float:
    """When the run item's run last changed (epoch seconds)."""
    return max(num(item.get("updated_at")), num(item.get(CHANGED_AT)), num(item.get(RUNNING_SINCE)))


# GSIs: name -> (partition key attribute, sort key attribute)
INDEXES = {
    "by_status": ("status_pk", "created_sk"),
    "by_workflow": ("workflow_pk", "created_sk"),
    "by_parent": ("parent_pk", "created_sk"),
    "all_runs": ("all_pk", "created_sk"),
    "timers": ("timer_pk", "timer_sk"),
    "wakes": ("wake_pk", "wake_sk"),
    # Values runs publish (wf:set): one item per run and key, `VAL#<key>#<shard>`, sorted by
    # the value's order-preserving text then the run's created time (runtime.core.published).
    "by_value": ("value_pk", "value_sk"),
}


# What each index carries besides the keys: what its queries read and nothing else. An
# index entry is written again whenever an attribute it carries changes (and twice when its
# key moves), so the indexes carry keys only (the run id is the table key's) and the lists
# read run items themselves. The status index carries updated_at, which the reconciler read
# for items older code wrote (``STATUS#running``); a projection cannot change on a deployed
# index, so it stays, and later changes go to CHANGED_AT.
PROJECTIONS: dict[str, list[str]] = {
    "by_status": ["updated_at"],
    "by_workflow": [],
    "by_parent": [],
    "all_runs": [],
    "timers": [],
    "wakes": [],
    "by_value": ["value"],  # a search checks the value itself (a string may hold '#')
}


def _projection(index: str) -> dict[str, Any]:
    attrs = PROJECTIONS[index]
    if not attrs:
        return {"ProjectionType": "KEYS_ONLY"}
    return {"ProjectionType": "INCLUDE", "NonKeyAttributes": attrs}


def table_definition(name: str) -> dict[str, Any]:
    """The CreateTable request for the store's table (tests, and the CDK stack mirrors it)."""
    attrs = {"pk", "sk"} | {a for pair in INDEXES.values() for a in pair}
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in sorted(attrs)],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": pk, "KeyType": "HASH"},
                    {"AttributeName": sk, "KeyType": "RANGE"},
                ],
                "Projection": _projection(index),
            }
            for index, (pk, sk) in INDEXES.items()
        ],
    }


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def _id_of(item: dict[str, Any]) -> str:
    """The run id of an index entry (its table key: indexes carry no other attribute)."""
    return str(item["pk"]["S"]).removeprefix("RUN#")


def run_key(run_id: str) -> Item:
    """The run item's key."""
    return {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)}


def _created_sk(at: float, run_id: str) -> str:
    return f"{at:020.6f}#{run_id}"


def _journal_sk(seq: int) -> str:
    return f"J#{seq:010d}"


def _signal_sk(signal_id: int) -> str:
    return f"S#{signal_id:010d}"


# A signal on the run item (layout 2). The first small signal a run is sent rides on the
# write that numbers it instead of an item of its own: 1 WRU less a signal and 1 less at
# the run's expiry, and a load at that signal reads no second range. Only the first
# numbering that carries one sets it (``if_not_exists``), recording the number before its
# own (RUN_SIGNAL_N), so whoever numbered earlier signals (older code, a larger signal) each
# number has one home: the run item or its ``S#`` item. A consumed one stays (its wait.done
# reads its payload there), and every run-item write costs the item's size in KB: a record
# is at most about 150 bytes (RUN_SIGNAL_BYTES of name and payload), and a run item created
# over RUN_SIGNAL_ROOM bytes (with a UUID id, an input over about 80 bytes of JSON) is
# created with ``NO_RUN_SIGNAL`` in its place, which no numbering replaces: a record never
# takes a run item over 1 KB (one created at RUN_SIGNAL_ROOM reaches about 985 bytes with a
# record, a lease, a timer and a wake-up).
RUN_SIGNAL = "sigr"
RUN_SIGNAL_N = "sigr_n"
RUN_SIGNAL_BYTES = 96
RUN_SIGNAL_ROOM = 530
# An empty map, not a NULL: the numbering's condition reads ``sigr.wid``, and a path into
# a map that lacks the key is plainly a missing attribute (its comparison false).
NO_RUN_SIGNAL: Item = {"M": {}}


def run_signal(name: str, encoded: str, at: float, token: str) -> Item | None:
    """The run item's record of a signal (``encoded``: its payload as JSON), or None when
    it is too large to ride there."""
    if len(name.encode("utf-8")) + len(encoded.encode("utf-8")) > RUN_SIGNAL_BYTES:
        return None
    return {"M": {"name": s(name), "payload": s(encoded), "at": n(at), WRITE_ID: s(token)}}


def run_signal_id(run_item: Item) -> int | None:
    """The number of the signal the run item holds, if it holds one."""
    record = run_item.get(RUN_SIGNAL, {}).get("M", {})
    return whole(run_item.get(RUN_SIGNAL_N)) + 1 if "name" in record else None


def run_signal_mine(run_item: Item, token: str) -> int | None:
    """The number of the signal the run item holds if the write ``token`` put it there."""
    record = run_item.get(RUN_SIGNAL, {}).get("M", {})
    return run_signal_id(run_item) if text(record.get(WRITE_ID)) == token else None


def run_signal_item(run_id: str, run_item: Item) -> Item | None:
    """The run item's signal as its own item would hold it: a reader takes either alike. Its
    state is read as any signal's (set aside if the run has ended: an ended run never goes
    on), so it is written as pending."""
    signal_id = run_signal_id(run_item)
    if signal_id is None:
        return None
    record = run_item[RUN_SIGNAL]["M"]
    return {
        "pk": s(run_pk(run_id)),
        "sk": s(_signal_sk(signal_id)),
        "signal_id": n(signal_id),
        "run_id": s(run_id),
        "at": record["at"],
        "state": s("pending"),
        "name": record["name"],
        "payload": record["payload"],
    }


def _elided(entry: Entry) -> list[Any]:
    """An entry as its chunk stores it: ``[seq, kind, name, data, at]``, and a sixth element
    naming where a value the chunk leaves out lives (``{"payload": "signal"}``)."""
    row: list[Any] = [entry.seq, entry.kind, entry.name, entry.data, entry.at]
    if entry.kind == Kind.WAIT_DONE and entry.data.get("signal_id") is not None:
        row[3] = {k: v for k, v in entry.data.items() if k != "payload"}
        row.append({"payload": IN_SIGNAL})
    return row


def _filled(row: list[Any], run: RunRecord, signals: dict[int, SignalRecord]) -> Entry:
    """A stored entry with the value its chunk left out put back from where it lives."""
    data = row[3]
    if len(row) > 5:
        data = dict(data)
        for field, where in row[5].items():
            if where == IN_SIGNAL:
                found = signals.get(int(data["signal_id"]))
                if found is None:
                    raise EngineBug(
                        f"run '{run.id}' entry {row[0]} consumed signal {data['signal_id']}, which is missing"
                    )
                data[field] = found.payload
    return Entry(int(row[0]), Kind(row[1]), row[2], data, float(row[4]))


def _result_of(rows: list[list[Any]]) -> Any:
    """The result in a chunk's run.completed entry (None without one)."""
    ends = [row for row in rows if row[1] == Kind.COMPLETED]
    return ends[-1][3].get("result") if ends else None


def _armed_from(item: dict[str, Any]) -> tuple[int, str] | None:
    if "armed" not in item:
        return None
    due, how = json.loads(item["armed"]["S"])
    return int(due), str(how)


def _intervals(ids: set[int]) -> list[list[int]]:
    """Signal ids as sorted ``[first, last]`` runs: what the run item keeps of its consumed
    signals (``sig_done``), a few numbers however many were consumed in order."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _ids(intervals: list[list[int]]) -> set[int]:
    return {i for first, last in intervals for i in range(first, last + 1)}


def _consumed(entries: Sequence[Entry]) -> dict[int, int]:
    return {
        int(e.data["signal_id"]): e.seq
        for e in entries
        if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None
    }
