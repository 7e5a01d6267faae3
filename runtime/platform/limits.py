"""Every limit the platform enforces, in one place (docs/reliability_limits.md has the table)."""

from __future__ import annotations

from runtime.core.bounds import (
    GENERATIONS_KEPT,
    MAX_BRANCHES,
    MAX_CHILDREN_PER_RUN,
    MAX_JOURNAL_ENTRIES,
    MAX_PUBLISHED_KEY_BYTES,
    MAX_PUBLISHED_KEYS,
    MAX_PUBLISHED_VALUE_BYTES,
    MAX_SIGNAL_BACKLOG,
)
from runtime.core.durations import MAX_MS
from runtime.core.flow import MAX_COLLECTED, MAX_COLLECTED_BYTES, MAX_LIMIT
from runtime.core.ids import MAX_RUN_ID_BYTES
from runtime.core.replay import DEFAULT_CLEANUP_MS, MAX_CLEANUP_STEPS, MAX_STARTS
from runtime.core.values import MAX_VALUE_BYTES
from runtime.engine.host import MAX_LOG_CHARS
from runtime.engine.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_INSTRUCTIONS, DEFAULT_MEMORY_BYTES
from runtime.platform.fetch import MAX_BODY_BYTES, MAX_RESPONSE_BYTES
from runtime.platform.logs import MAX_LOG_HISTORY_CHARS, MAX_LOG_RECORDS
from runtime.services.builtins import DEFAULT_HTTP_TIMEOUT_S
from runtime.services.keys import MAX_KEY_BYTES
from runtime.services.queues import MAX_ATTEMPTS, MAX_RETRY_DELAY_S

__all__ = [
    "GENERATIONS_KEPT",
    "MAX_ATTEMPTS",
    "MAX_BRANCHES",
    "MAX_CHILDREN_PER_RUN",
    "MAX_COLLECTED",
    "MAX_COLLECTED_BYTES",
    "MAX_LIMIT",
    "DEFAULT_CLEANUP_MS",
    "MAX_CLEANUP_STEPS",
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_HTTP_TIMEOUT_S",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_MEMORY_BYTES",
    "MAX_BODY_BYTES",
    "MAX_JOURNAL_ENTRIES",
    "MAX_KEY_BYTES",
    "MAX_LOG_CHARS",
    "MAX_LOG_HISTORY_CHARS",
    "MAX_LOG_RECORDS",
    "MAX_MS",
    "MAX_PUBLISHED_KEYS",
    "MAX_PUBLISHED_KEY_BYTES",
    "MAX_PUBLISHED_VALUE_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_RETRY_DELAY_S",
    "MAX_RUN_ID_BYTES",
    "MAX_SIGNAL_BACKLOG",
    "MAX_STARTS",
    "MAX_VALUE_BYTES",
]
