"""The log history ``LocalPlatform`` keeps for tests to read (``p.logs``).

Only the harness keeps one: nothing reads a history in ``lunaflow dev`` or on Lambda, where
each line is printed (cut, ``runtime.engine.host.clip``) and gone. The history is bounded
twice: each record's texts are cut to ``MAX_LOG_CHARS``, and the oldest records are dropped
past ``MAX_LOG_RECORDS`` records or ``MAX_LOG_HISTORY_CHARS`` characters in all.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from runtime.engine.host import MAX_LOG_CHARS, clip

MAX_LOG_RECORDS = 10_000
MAX_LOG_HISTORY_CHARS = 8 * 1024 * 1024


class LogHistory:
    """The last log records, oldest first. ``keep=False`` keeps nothing."""

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self._records: deque[tuple[int, dict[str, Any]]] = deque()
        self._chars = 0

    def append(self, record: dict[str, Any]) -> None:
        if not self.keep:
            return
        kept: dict[str, Any] = {}
        size = 0
        for key, value in record.items():
            if isinstance(value, str):
                value = clip(value)
                size += len(value)
            elif value is not None and not isinstance(value, bool | int | float):
                text = json.dumps(value, default=str)
                if len(text) > MAX_LOG_CHARS:
                    value = {"cut": f"{len(text)} characters were not kept"}
                    text = json.dumps(value)
                size += len(text)
            kept[key] = value
        self._records.append((size, kept))
        self._chars += size
        while self._records and (len(self._records) > MAX_LOG_RECORDS or self._chars > MAX_LOG_HISTORY_CHARS):
            self._chars -= self._records.popleft()[0]

    def extend(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.append(record)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (record for _, record in self._records)

    def __len__(self) -> int:
        return len(self._records)
