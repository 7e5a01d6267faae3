"""Journal chunks that grow in place (runs created with ``JOURNAL_V2`` on the run item): the
tip of a run's journal, the rule that picks where an append goes, and the requests that
write it. Pure functions: ``runtime.store.dynamodb_append`` sends what they build.

A run's journal is a row of chunk items (``J#<first seq>``). Older runs write a chunk per
append. A run created with ``jv = 2`` keeps appending to its last chunk, the tip, while the
tip holds fewer than ``SEAL_BYTES`` of rows, and starts a new chunk after it once it holds
more. Every append then costs about what it did (an item of a KB or so), while a run has a
chunk per KB of journal instead of one per append, and deleting it at its expiry writes
that many items.

The rule two writers with the same view of the journal must agree on, so that one of them
loses: whether the tip is closed (``sealed``) is part of the view, so both either extend
the tip in place, conditional on ``last`` being the entry they read and the tip still
open, or both put the next chunk, conditional on its key being free. The write that takes
a tip to ``SEAL_BYTES`` or more seals it in the same write, so the rule is in the data (a
later release with another size agrees with this one); a sealed tip is never extended
again, so the next chunk's key is the only place the next entry can go. A generation's
first entry (``run.continued``) starts a chunk of its own: its writer first seals an open
tip (conditional on its ``last``), which fails any extension from the same view, then puts
the next chunk as any writer at a sealed tip does. The first chunk (``J#1``, a large input)
is sealed when written: it is kept with every generation.

Code from before this layout cannot read such a run: its run item has no ``started`` (the
input is ``first``) and its first chunk's ``entries_ref`` names an object no bucket has, so
older code refuses to load it (an error it reports, never a crash of its lists) instead of
appending at a slot the new rule does not check (a deploy switching functions over, or a
rollback: ``docs/operations.md``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from runtime.core.journal import Entry, Kind
from runtime.core.values import compact
from runtime.store.dynamodb_layout import (
    OLDER_CODE_REFUSED,
    REF,
    RUN_SIGNAL,
    TAIL_BYTES,
    TTL_ATTRIBUTE,
    WRITE_ID,
    _journal_sk,
    run_key,
    run_pk,
)
from runtime.store.dynamodb_ttl import START_ATTR, start_of
from runtime.store.items import item_bytes, n, s, whole

JOURNAL_V2 = "jv"  # on the run item: 2 for a journal whose chunks grow in place
FIRST = "first"  # a v2 run item's journal entry 1 while small (older runs: ``started``)
# A tip holding this many bytes of rows or more is full. An extension costs the whole item
# (a write unit per KB): below 1 KB with the item's keys and a step's rows of a few hundred
# bytes, most appends stay one unit.
SEAL_BYTES = 700
ROWS = "rows"  # a v2 chunk's batches, one per append: the rows' JSON, or SPILLED + an S3 key
BATCHES_REF = "batches_ref"  # a v2 chunk's S3 keys (a string set), for the deletes
SPILLED = "@"  # a batch's JSON always starts with "["
SEALED = "sealed"
FIRST_CHUNK = _journal_sk(1)
# The run item's head (runs created with ``HEAD_OPEN``, layout ``HEAD_LAYOUT``): entries 2
# on, while they are few, kept on the run item itself, a batch per append (``ROWS``' form,
# never spilled), so an append that moves the run (a park, an end) is one write, not a chunk
# and a summary. ``HEAD_LAST``: its last entry (1 with no batch); ``HEAD_BYTES``: its rows'
# bytes. While the head is open every writer appends there, conditional on ``HEAD_LAST``
# being the entry it read and the head still open; a write whose batch leaves too little
# room for another closes it (``REMOVE hopen``, in the data as a chunk's seal), and so does a
# writer whose entries do not go there (no room, a generation's first entry, values
# published) before it puts the next chunk, ``J#<HEAD_LAST + 1>``, as at any sealed tip.
HEAD = "head"
HEAD_LAST = "hl"
HEAD_BYTES = "hb"
HEAD_OPEN = "hopen"
HEAD_LAYOUT = 3  # code before the head reads such a run as entry 1 and chunks: it refuses it
# Every write of the run item costs its size (a write unit per KB), so the head takes a
# batch only while the item stays under ``HEAD_ITEM_BYTES`` with it and with what it may
# still gain from other writers: a signal riding on it with its wake-up (unless one rides
# already) and a lease (unless held) (``head_room``, from the item as last read or written).
# A run created with less room than ``HEAD_MIN_BYTES`` has no head; a head holds at most
# ``HEAD_MAX_BYTES`` of rows. The write after which another batch like its own (or of
# ``HEAD_NEXT_BYTES``, the smaller) would not fit closes it, so the next append goes to a
# chunk in one write; a batch that fits the item as it is, but not with what it may gain,
# goes in and closes it, unless its write parks the run awaiting a signal (one may ride on
# the item next). Only a batch the item cannot take makes its writer close the head in a
# write of its own. Which write closes is this code's choice, not a rule two writers must
# share: the condition (``hl = :seen``, the head open) is the only arbiter.
HEAD_ITEM_BYTES = 1024
HEAD_SIGNAL_GROWTH = 200
HEAD_LEASE_GROWTH = 80
HEAD_MIN_BYTES = 120
HEAD_MAX_BYTES = 600
HEAD_BATCH_BYTES = 12  # a batch's overhead in the item beside its rows' text
HEAD_NEXT_BYTES = 100
HEAD_SUMMARY_BYTES = 40  # what a summary in the same write adds beside its status texts, about


def head_growth(run_item: dict[str, Any]) -> int:
    """The bytes other writers may still add to the run item (a signal, a lease)."""
    growth = 0 if RUN_SIGNAL in run_item else HEAD_SIGNAL_GROWTH
    return growth + (0 if "lease_owner" in run_item else HEAD_LEASE_GROWTH)


def head_room(run_item: dict[str, Any]) -> int:
    """The bytes the run item may still take in its head's writes (negative: none)."""
    return HEAD_ITEM_BYTES - item_bytes(run_item) - head_growth(run_item)


def measured(tip: Tip, run_item: dict[str, Any] | None) -> Tip:
    """``tip`` with the head's room as ``run_item`` (read, or returned by a write) has it;
    only for an open head, the one place it is used (a run item's size is not free to
    measure on every read of every run)."""
    if not run_item or HEAD_OPEN not in run_item:
        return tip
    leased = "lease_owner" in run_item
    return replace(tip, room=head_room(run_item), leased=leased, growth=head_growth(run_item))


@dataclass(frozen=True)
class Tip:
    """The end of a run's journal as a writer saw it: the last chunk's key (None while the
    journal is entry 1 on the run item), its last entry, its rows' size, and whether it
    was sealed. ``v2``: False for a run of the older layout (a chunk per append)."""

    v2: bool
    created: str  # the run's created_sk: a run deleted and started again is another
    sk: str | None = None
    last: int = 1
    size: int = 0
    # Closed to extensions: its writer marked it so (in the data, not by this code's
    # SEAL_BYTES, so two releases with different sizes agree).
    sealed: bool = False
    # The chunk's TTL (``expires_at``, epoch seconds; 0: none): a run's end gave it one
    # (``runtime.store.dynamodb_ttl``), which any end without a TTL takes back.
    expires: int = 0
    # The journal ends in the run item's head, still open (``sk`` None, ``last`` its last
    # entry, ``size`` its bytes): the next append extends it there.
    head_open: bool = False
    room: int = 0  # the bytes of rows the open head may still take (``head_room``)
    leased: bool = False  # the item holds a lease (a park or an end removes it)
    growth: int = 0  # what ``room`` keeps for other writers (``head_growth``)


def journal_v2(run_item: dict[str, Any]) -> bool:
    """Whether the run item's journal grows in place (a run started since stop 46)."""
    return whole(run_item.get(JOURNAL_V2)) >= 2


def tip_of(run_item: dict[str, Any], chunk: dict[str, Any] | None) -> Tip:
    """The tip a read of the run item and its last chunk (by key) sees."""
    created = str(run_item.get("created_sk", {}).get("S", ""))
    v2 = journal_v2(run_item)
    if chunk is None:
        last, size = whole(run_item.get(HEAD_LAST)) or 1, whole(run_item.get(HEAD_BYTES))
        return measured(Tip(v2, created, last=last, size=size, head_open=HEAD_OPEN in run_item), run_item)
    return Tip(
        v2,
        created,
        str(chunk["sk"]["S"]),
        whole(chunk.get("last")),
        whole(chunk.get("bytes")),
        SEALED in chunk,
        whole(chunk.get(TTL_ATTRIBUTE)),
    )


def extends(tip: Tip, entries: Sequence[Entry]) -> bool:
    """Whether an append at ``tip`` goes into it (else into a new chunk after it)."""
    return tip.sk is not None and not tip.sealed and entries[0].kind != Kind.CONTINUED


def closes(size: int, sk: str) -> bool:
    """Whether a chunk of ``size`` bytes of rows is sealed by the write that makes it so. The
    first chunk (entry 1, a large input) is sealed at once: ``drop_entries`` keeps it with
    every generation, so it must hold nothing else."""
    return size >= SEAL_BYTES or sk == FIRST_CHUNK


def batch_element(text: str, spilled: bool) -> dict[str, str]:
    """An append's rows as a chunk's element: their JSON, or ``SPILLED`` + the S3 key."""
    return s(SPILLED + text) if spilled else s(text)


def tail_of(entries: Sequence[Entry]) -> str | None:
    """The last entry's kind and name as a chunk keeps them (``tail``), when short: a read
    of the run's current step then needs no rows (and no S3)."""
    tail = compact([entries[-1].kind, entries[-1].name])
    return tail if len(tail.encode("utf-8")) <= TAIL_BYTES else None


def new_chunk(
    table: str,
    run_id: str,
    entries: Sequence[Entry],
    element: dict[str, str],
    token: str,
    more: dict[str, Any] | None = None,
    start: str | None = None,
) -> dict[str, Any]:
    """The put of a chunk starting at ``entries[0]``: its key must be free, or hold what an
    earlier run of the id left. ``start``: the run's ``created_sk``, whose time the chunk
    carries (``runtime.store.dynamodb_ttl``); ``more``: attributes it carries besides (a
    TTL'd end's)."""
    sk, size = _journal_sk(entries[0].seq), len(element["S"].encode("utf-8"))
    item: dict[str, Any] = {
        "pk": s(run_pk(run_id)),
        "sk": s(sk),
        "last": n(entries[-1].seq),
        ROWS: {"L": [element]},
        "bytes": n(size),
        WRITE_ID: s(token),
    }
    if closes(size, sk):
        item[SEALED] = n(1)
    if sk == FIRST_CHUNK:
        # Older code reads entry 1 from here (its ``entries``): this key, in no bucket,
        # makes it refuse the run with an error it reports ("value ... is missing").
        item["entries" + REF] = s(OLDER_CODE_REFUSED)
    if element["S"].startswith(SPILLED):
        item[BATCHES_REF] = {"SS": [element["S"][1:]]}
    tail = tail_of(entries)
    if tail is not None:
        item["tail"] = s(tail)
    if start:
        item[START_ATTR] = start_of(start)
    item.update(more or {})
    return {
        "TableName": table,
        "Item": item,
        **free_slot(start),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def free_slot(start: str | None) -> dict[str, Any]:
    """The condition that a chunk's key is free: no item, or one of another start of the run
    (what a TTL'd run left, which its readers no longer see)."""
    if not start:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {
        "ConditionExpression": f"attribute_not_exists(pk) OR "
        f"(attribute_exists({START_ATTR}) AND {START_ATTR} <> :start)",
        "ExpressionAttributeValues": {":start": start_of(start)},
    }


def extension(
    table: str,
    run_id: str,
    tip: Tip,
    entries: Sequence[Entry],
    element: dict[str, str],
    token: str,
    more: tuple[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The update that appends ``entries`` to the tip: it holds while the tip's last entry
    is the one the writer read and nobody sealed it. ``more``: a SET and its values the
    write carries besides (a TTL'd end's)."""
    assert tip.sk is not None
    size = len(element["S"].encode("utf-8"))
    sets = [
        "#rows = list_append(#rows, :batch)",
        "#last = :last",
        "#bytes = #bytes + :size",
        f"{WRITE_ID} = :wid",
    ]
    values: dict[str, Any] = {
        ":batch": {"L": [element]},
        ":last": n(entries[-1].seq),
        ":size": n(size),
        ":wid": s(token),
        ":seen": n(tip.last),
    }
    if closes(tip.size + size, tip.sk):
        sets.append(f"{SEALED} = :yes")
        values[":yes"] = n(1)
    removes: list[str] = []
    if more is not None:
        sets.append(more[0])
        values.update(more[1])
    elif tip.expires:
        removes.append(TTL_ATTRIBUTE)  # the run did not end as TTL's after all
    tail = tail_of(entries)
    if tail is None:
        removes.append("tail")
    else:
        sets.append("tail = :tail")
        values[":tail"] = s(tail)
    adds: list[str] = []
    if element["S"].startswith(SPILLED):
        adds.append(f"{BATCHES_REF} :ref")
        values[":ref"] = {"SS": [element["S"][1:]]}
    expression = "SET " + ", ".join(sets)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    if adds:
        expression += " ADD " + ", ".join(adds)
    return {
        "TableName": table,
        "Key": {"pk": s(run_pk(run_id)), "sk": s(tip.sk)},
        "UpdateExpression": expression,
        "ConditionExpression": f"#last = :seen AND attribute_not_exists({SEALED})",
        "ExpressionAttributeNames": {"#rows": ROWS, "#last": "last", "#bytes": "bytes"},
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def seal(table: str, run_id: str, tip: Tip) -> dict[str, Any]:
    """The update that closes the tip to extensions (before a generation's first chunk)."""
    assert tip.sk is not None
    return {
        "TableName": table,
        "Key": {"pk": s(run_pk(run_id)), "sk": s(tip.sk)},
        "UpdateExpression": f"SET {SEALED} = :yes",
        "ConditionExpression": "#last = :seen",
        "ExpressionAttributeNames": {"#last": "last"},
        "ExpressionAttributeValues": {":yes": n(1), ":seen": n(tip.last)},
    }


def unchanged_check(table: str, run_id: str, tip: Tip) -> dict[str, Any]:
    """A transaction's check that nothing was appended after the tip: the tip's last entry is
    still the one read and it is not sealed, or, at a full tip (or none), the next chunk's
    key is free."""
    if tip.sk is not None and not tip.sealed:
        return {
            "TableName": table,
            "Key": {"pk": s(run_pk(run_id)), "sk": s(tip.sk)},
            "ConditionExpression": f"#last = :seen AND attribute_not_exists({SEALED})",
            "ExpressionAttributeNames": {"#last": "last"},
            "ExpressionAttributeValues": {":seen": n(tip.last)},
        }
    key = {"pk": s(run_pk(run_id)), "sk": s(_journal_sk(tip.last + 1))}
    return {"TableName": table, "Key": key, **free_slot(tip.created)}


@dataclass(frozen=True)
class HeadWrite:
    """An append's part of a run-item update that puts its entries in the open head."""

    sets: list[str]
    removes: list[str]
    values: dict[str, Any]
    condition: str
    tip: Tip  # the tip once it committed


def head_write(
    tip: Tip, entries: Sequence[Entry], rows: str, published: bool, summary: int = 0, awaits: bool = False
) -> HeadWrite | None:
    """The update parts appending ``rows`` (the entries' JSON) to the open head at ``tip``;
    None when they do not go there (the writer closes the head first, ``close_head``).
    ``summary``: the bytes a summary in the same write adds, about (negative: it removes
    more, a lease); ``awaits``: the write parks the run awaiting a signal, which may ride on
    the item next."""
    assert tip.head_open
    size = len(rows.encode("utf-8")) + HEAD_BATCH_BYTES
    total = tip.size + size
    if entries[0].kind == Kind.CONTINUED or published or total > HEAD_MAX_BYTES:
        return None
    left = tip.room - size - summary
    if left < 0 and (awaits or tip.room + tip.growth - size - summary < 0):
        return None  # no room, not even in the item as it is now (and no signal is awaited)
    # Closed by this write when another batch like it (or of ``HEAD_NEXT_BYTES``, the
    # smaller) would not fit after it, so the next append goes to a chunk in one write; a
    # batch that fits the item now but not what it may gain goes in and closes it.
    next_ = min(size, HEAD_NEXT_BYTES)
    closed = left < next_ or total + next_ > HEAD_MAX_BYTES
    values = {
        ":hbatch": {"L": [s(rows)]},
        ":hnone": {"L": []},
        ":hlast": n(entries[-1].seq),
        ":hbytes": n(total),
        ":hseen": n(tip.last),
    }
    sets = [
        f"{HEAD} = list_append(if_not_exists({HEAD}, :hnone), :hbatch)",
        f"{HEAD_LAST} = :hlast",
        f"{HEAD_BYTES} = :hbytes",
    ]
    after = replace(tip, last=entries[-1].seq, size=total, head_open=not closed, room=left)
    return HeadWrite(sets, [HEAD_OPEN] if closed else [], values, head_open_at(), after)


def head_open_at() -> str:
    """The condition that the head is open at the entry read (``:hseen``)."""
    return f"attribute_exists({HEAD_OPEN}) AND {HEAD_LAST} = :hseen"


def close_head(table: str, run_id: str, tip: Tip) -> dict[str, Any]:
    """The update that closes the open head at the entry read, before a chunk after it."""
    return {
        "TableName": table,
        "Key": run_key(run_id),
        "UpdateExpression": f"REMOVE {HEAD_OPEN}",
        "ConditionExpression": head_open_at(),
        "ExpressionAttributeValues": {":hseen": n(tip.last)},
    }


def head_rows(run_item: dict[str, Any]) -> list[list[Any]]:
    """The rows the run item's head holds (entries 2 on), in order."""
    return [row for batch in run_item.get(HEAD, {}).get("L", []) for row in json.loads(batch["S"])]


def after_append(
    tip: Tip, chunk_sk: str, entries: Sequence[Entry], element: dict[str, str], expires: int = 0
) -> Tip:
    """The tip once ``entries`` were appended in chunk ``chunk_sk`` (with the TTL
    ``expires``, or none)."""
    size = len(element["S"].encode("utf-8"))
    if chunk_sk == tip.sk:
        size += tip.size
    return Tip(tip.v2, tip.created, chunk_sk, entries[-1].seq, size, closes(size, chunk_sk), expires)
