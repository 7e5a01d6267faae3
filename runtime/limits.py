"""Every limit the platform enforces, in one place (docs/reliability_limits.md has the table)."""

from __future__ import annotations

from runtime.bounds import MAX_JOURNAL_ENTRIES, MAX_SIGNAL_BACKLOG
from runtime.durations import MAX_MS
from runtime.fetch import MAX_BODY_BYTES
from runtime.ids import MAX_RUN_ID_BYTES
from runtime.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_INSTRUCTIONS, DEFAULT_MEMORY_BYTES
from runtime.values import MAX_VALUE_BYTES

__all__ = [
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_MEMORY_BYTES",
    "MAX_BODY_BYTES",
    "MAX_JOURNAL_ENTRIES",
    "MAX_MS",
    "MAX_RUN_ID_BYTES",
    "MAX_SIGNAL_BACKLOG",
    "MAX_VALUE_BYTES",
]
