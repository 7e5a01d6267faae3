"""Runs that DynamoDB's own TTL deletes (``[runs] retention``). Pure functions: the store's
writes (``runtime.store.dynamodb_append``, ``_signals``) and reads (``_reads``, ``_index``)
apply them.

The reconciler's sweep (``runtime.store.dynamodb_expiry``) deletes an expired run with a
mark, a read of its partition and a delete per item: 3 write units and 3 index deletes for
a run of one chunk. TTL deletes for nothing, but in no order and up to a few days late. A
completed run whose partition at its end is only the run item and its journal's chunks
takes TTL instead: the end's own two writes give the run item and the chunk the end writes
to ``expires_at`` (the table's TTL attribute), and the sweep never files it. The journal's
earlier chunks (a run of more than a few steps: chunks hold about 700 bytes) take theirs
after the end's summary has committed, one conditional write each (``Ttl.earlier``), where
the sweep would have deleted each: a crash before them leaves those chunks without a TTL
(storage, not meaning: below), never a run whose journal expires while it goes on. Any
other run (a journal of more than ``MAX_CHUNKS`` chunks, a chunk of older code's without a
start, a signal of its own item, a published value, a secret pin, a child or a parent, an
S3 object, a cancel) is swept as before.

What keeps a run id safe when its items go in any order:
- A run item past its expiry (``expires_ms``, which TTL's whole seconds round up) is gone
  to every reader, and a start of its id writes over it. Deleted or not, it reads as
  deleted from its expiry on, as a swept run does.
- Every chunk and signal item this code writes carries its run's start (``START_ATTR``: the
  time in the run item's ``created_sk``, a number of a few bytes), which no write removes:
  a reader drops an item of another start than the run item it read, so a new run of the
  id never reads what an old one left, whatever TTL has deleted yet, and its own writes go
  over it. What could still go wrong is storage, not meaning: an item left without a TTL.
- The chunk expires ``CHUNK_SLACK_S`` after the run item: a crash between the end's chunk
  and its summary leaves a run the reconciler finishes long before its journal could go,
  and a run that then goes on or ends otherwise takes the chunk's TTL back.
- A signal numbered on the run item before its end but not yet written as an item would
  outlive it without a TTL: the end's summary holds only while ``signal_seq`` is the one
  the end read, and a signal numbered after it finds ``expires_at`` on the run item and
  gives its item the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runtime.core.journal import Entry, Kind
from runtime.store.dynamodb_layout import RUN_SK, TTL_ATTRIBUTE, run_signal_id
from runtime.store.dynamodb_spill import _pointed
from runtime.store.items import Item, n, num, text, whole

CHUNK_PREFIX = "J#"  # a journal chunk's sort key (``dynamodb_layout._journal_sk``)
START_ATTR = "xc"  # on a run's chunks and signal items: its start (``start_of``)
# TTL deletes up to a few days late and a run item past its expiry reads as deleted at once,
# but a run that ends moments before its retention would be gone before anyone read it: a
# retention under a day keeps the sweep, whose deletes follow the expiry within minutes.
MIN_RETENTION_S = 86_400.0
CHUNK_SLACK_S = 7 * 86_400.0
# Kinds whose runs leave something besides the partition's two items (a child run, a
# published value's item).
OUTSIDE = frozenset({Kind.CHILD_STARTED, Kind.VALUE_SET})
# A journal of more chunks than this is swept: the end gives each earlier chunk its TTL in a
# write of its own (a few at once), and reads them all first, so this bounds what the end
# adds to its activation (a chunk holds about 700 bytes of entries: some 100 steps).
MAX_CHUNKS = 16
# The end's read of the partition stops here: the run item, its chunks, one more to tell
# "more than that" (the run is then swept).
PARTITION_READ = MAX_CHUNKS + 2


def expired(run_item: Item | None, now: float) -> bool:
    """Whether a run item is past its TTL expiry: deleted, to every reader. Its expiry to
    the millisecond (``expires_ms``, as the sweep's runs and SQLite have it), which TTL's
    whole seconds round up."""
    if run_item is None or TTL_ATTRIBUTE not in run_item:
        return False
    at_ms = run_item.get("expires_ms")
    return (num(at_ms) / 1000 if at_ms else num(run_item[TTL_ATTRIBUTE])) <= now


def start_of(created_sk: str) -> Item:
    """The ``START_ATTR`` of a run's items: the time its ``created_sk`` begins with."""
    return {"N": str(Decimal(created_sk.split("#", 1)[0]))}


def of_another_start(item: Item, run_item: Item) -> bool:
    """Whether ``item`` (of the run's partition) was left by an earlier run of the id."""
    start, created = item.get(START_ATTR), text(run_item.get("created_sk"))
    return (
        start is not None and created is not None and Decimal(start["N"]) != Decimal(start_of(created)["N"])
    )


def own(items: Iterable[Item], now: float, run_item: Item | None = None) -> list[Item]:
    """A read of a run's partition as it stands for its readers: nothing if its run item
    (among ``items``, or ``run_item`` read before) is past its expiry, and without the items
    an earlier run of the id left. No run item: nothing of a run is there."""
    items = list(items)
    if run_item is None:
        run_item = next((i for i in items if i["sk"]["S"] == RUN_SK), None)
    if run_item is None or expired(run_item, now):
        return []
    # A signal item numbered past the run item's count, or with the number of the signal
    # the run item holds, is of no signal of this run either: older code (a rollback, a
    # deploy switching over) may have written one for a TTL'd run without its start.
    sent, riding = whole(run_item.get("signal_seq")), run_signal_id(run_item)
    return [
        i
        for i in items
        if not of_another_start(i, run_item)
        and not ("signal_id" in i and (whole(i["signal_id"]) > sent or whole(i["signal_id"]) == riding))
    ]


@dataclass(frozen=True)
class Ttl:
    """What the end of a run that TTL deletes writes: its expiry on the run item, that +
    ``CHUNK_SLACK_S`` and the start on its chunk, and the ``signal_seq`` its summary holds
    on. ``earlier``: the journal's other chunks, which take the chunk's TTL once the end's
    summary has committed."""

    at_ms: int
    start: str
    signal_seq: int
    earlier: tuple[str, ...] = ()

    @property
    def at(self) -> int:
        """The expiry in whole epoch seconds, as TTL reads it: never before ``at_ms``."""
        return int(math.ceil(self.at_ms / 1000))

    @property
    def chunk_at(self) -> int:
        """The TTL of the run's other items: ``CHUNK_SLACK_S`` after the run item's."""
        return self.at + int(CHUNK_SLACK_S)

    def chunk_parts(self) -> tuple[str, dict[str, Any]]:
        """The SET (and its values) that gives the end's chunk its expiry and its start."""
        return (
            f"{TTL_ATTRIBUTE} = :ttl_at, {START_ATTR} = :ttl_start",
            {":ttl_at": n(self.chunk_at), ":ttl_start": start_of(self.start)},
        )

    def chunk_attrs(self) -> dict[str, Any]:
        """The same, as a new chunk's attributes."""
        return {TTL_ATTRIBUTE: n(self.chunk_at), START_ATTR: start_of(self.start)}


def ttl_for(
    partition: Sequence[Item],
    end_chunk: str | None,
    entries: Sequence[Entry],
    spills: bool,
    retention_s: float | None,
    now: float,
    rows_of: Callable[[Item], Iterable[Sequence[Any]]],
) -> Ttl | None:
    """The TTL of a run that completes with ``entries``, from a consistent read of its
    partition (at most ``PARTITION_READ`` items) before the end's writes; None if it is
    swept instead. ``end_chunk``: the chunk the entries extend, the journal's last (None:
    they start a chunk after every one read); ``spills``: whether the end writes anything to
    S3; ``rows_of``: a chunk's rows."""
    if retention_s is None or retention_s < MIN_RETENTION_S or spills:
        return None
    if any(e.kind in OUTSIDE for e in entries):
        return None
    run_item = next((i for i in partition if i["sk"]["S"] == RUN_SK), None)
    others = [i for i in partition if i is not run_item]
    if run_item is None or "parent_id" in run_item or _pointed(run_item):
        return None
    keys = [i["sk"]["S"] for i in others]
    if not all(k.startswith(CHUNK_PREFIX) for k in keys) or len(keys) > MAX_CHUNKS:
        return None  # a signal's own item, a pin, a published value, a gate; or a long journal
    if end_chunk is not None and keys[-1:] != [end_chunk]:
        return None
    for chunk in others:
        if _pointed(chunk) or of_another_start(chunk, run_item) or rows_outside(rows_of(chunk)):
            return None
        if chunk["sk"]["S"] != end_chunk and START_ATTR not in chunk:
            return None  # older code's: the write that gives it its TTL holds on its start
    sent = whole(run_item.get("signal_seq"))
    if sent > 1 or (sent == 1 and run_signal_id(run_item) != 1):
        return None  # a signal of its own item, or one numbered and not yet written
    earlier = tuple(k for k in keys if k != end_chunk)
    return Ttl(int((now + retention_s) * 1000), str(run_item["created_sk"]["S"]), sent, earlier)


def rows_outside(rows: Iterable[Sequence[Any]]) -> bool:
    """Whether a chunk's rows record something that lives outside the partition."""
    return any(row[1] in OUTSIDE for row in rows)
