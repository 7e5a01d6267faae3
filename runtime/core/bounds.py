"""Per-run bounds, kept free of imports so any layer may use them (runtime.platform.limits lists all)."""

MAX_JOURNAL_ENTRIES = 100_000  # per run; each step attempt takes two entries
MAX_SIGNAL_BACKLOG = 10_000  # unconsumed signals per run
MAX_CHILDREN_PER_RUN = 10_000  # wf:child calls per run (each journals up to three entries)
# Branches one wf:map or wf:all_of call runs or waits for (MAX_BRANCHES in the prelude, which
# enforces it: tests/limits/test_limits_table.py checks the two agree through its message).
MAX_BRANCHES = 1_000
# wf:continue_as_new: the generations whose entries a run's journal keeps (the current one
# and the nine before it); older ones are dropped when a new one starts, entry 1 kept.
GENERATIONS_KEPT = 10
# Values a run publishes with wf:set (runtime.core.published): keys per run, a key's bytes,
# a string value's bytes. Small, so the latest values live beside the run and index cheaply.
MAX_PUBLISHED_KEYS = 32
MAX_PUBLISHED_KEY_BYTES = 64
MAX_PUBLISHED_VALUE_BYTES = 256
