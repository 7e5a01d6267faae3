"""Per-run bounds, kept free of imports so any layer may use them (runtime.platform.limits lists all)."""

MAX_JOURNAL_ENTRIES = 100_000  # per run; each step attempt takes two entries
MAX_SIGNAL_BACKLOG = 10_000  # unconsumed signals per run
MAX_CHILDREN_PER_RUN = 10_000  # wf:child calls per run (each journals up to three entries)
