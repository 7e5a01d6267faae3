"""Repair by query (issue 29.3): resume, retry or cancel every run a search selects, after a
preview that replays each against the current code and says which would diverge.

``lunaflow resume|retry|cancel --status failed --workflow settle-sale --since 2026-11-01``
and the console's search results come here, so both select and act alike:

- **Select** (``select``): by status, workflow, the time a run started and the values it
  published (``--where``), through the store's indexes (SQLite searches in SQL; DynamoDB
  reads its status and workflow index, newest first, at most ``MAX_BULK`` runs).
- **Preview** (``preview``): which selected runs the action applies to (resume: failed runs;
  retry: runs waiting out a step's backoff; cancel: every run not ended) and, for resume
  and retry, which of them the current code would not replay (``Executor.check``, replay
  only, nothing written): resuming those would fail them again at once, so they are left.
- **Act** (``act``): in batches, each run alone (one refused run does not stop the rest).
  Nothing is recorded between batches because the selection is the record: a run acted on
  no longer matches (a resumed run is not failed, a cancelled one has ended), so running
  the same command again after an interruption acts on what is left, and on nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from runtime.core.journal import ENDED, RESUMABLE, Status
from runtime.core.published import Where
from runtime.engine.worker import Worker
from runtime.errors import LunaflowError
from runtime.platform.check import check_run
from runtime.platform.runs import Runs
from runtime.platform.why import when
from runtime.store.base import IndexedSearch, RunFilter, RunRecord

ACTIONS = ("resume", "retry", "cancel")
MAX_BULK = 10_000  # runs one command selects; a larger repair is several, narrowed by time
BATCH = 100  # runs acted on between two progress reports


@dataclass(frozen=True)
class Selection:
    """Which runs: every given criterion must hold."""

    status: str | None = None
    workflow: str | None = None
    id_prefix: str | None = None  # a run id, or the start of ids
    since: float | None = None  # started at or after (epoch seconds)
    until: float | None = None  # started before
    where: tuple[Where, ...] = ()

    def describe(self) -> str:
        parts = [f"status {self.status}" if self.status else "any status"]
        if self.id_prefix:
            parts.append(f"ids starting {self.id_prefix!r}")
        if self.workflow:
            parts.append(f"workflow {self.workflow}")
        if self.since is not None:
            parts.append(f"started since {when(self.since)}")
        if self.until is not None:
            parts.append(f"started before {when(self.until)}")
        parts += [f"value {w}" for w in self.where]
        return ", ".join(parts)


def select(runs: Runs, selection: Selection, *, limit: int = MAX_BULK) -> list[RunRecord]:
    """The runs matching ``selection``, newest first, at most ``limit``."""
    store = runs.store
    if selection.where:
        # The status and workflow narrow the index lookup itself; what else there is to check
        # (more values, an id, a time) thins what it gives, so it reads past `limit` then.
        later = len(selection.where) > 1 or bool(selection.id_prefix)
        later = later or selection.since is not None or selection.until is not None
        found = runs.find(
            selection.where[0],
            workflow=selection.workflow,
            status=selection.status,
            limit=max(limit, MAX_BULK) if later else limit,
        )
    elif isinstance(store, IndexedSearch):
        where = RunFilter(
            workflow=selection.workflow,
            id_prefix=selection.id_prefix,
            since=selection.since,
            until=selection.until,
        )
        found = store.search_runs(where, status=selection.status, offset=0, limit=limit)
    else:
        found = runs.runs(status=selection.status, workflow=selection.workflow, limit=limit)
    return [r for r in found if _holds(runs, selection, r)][:limit]


def count_in_backoff(runs: Runs, selection: Selection, *, limit: int) -> tuple[int, bool]:
    """How many of the selection's sleeping runs wait out a step's backoff (what a retry
    would be asked of), over its newest ``limit`` sleeping runs; and whether it has more."""
    if selection.status not in (None, Status.SLEEPING):
        return 0, False
    sleeping = select(runs, replace(selection, status=Status.SLEEPING), limit=limit + 1)
    return sum(runs.waiting_out_backoff(r) for r in sleeping[:limit]), len(sleeping) > limit


def _holds(runs: Runs, s: Selection, r: RunRecord) -> bool:
    if s.status is not None and r.status != s.status:
        return False
    if s.workflow is not None and r.workflow != s.workflow:
        return False
    if s.id_prefix and not r.id.startswith(s.id_prefix):
        return False
    if s.since is not None and r.created_at < s.since:
        return False
    if s.until is not None and r.created_at >= s.until:
        return False
    if len(s.where) > 1:
        values = runs.store.run_values(r.id)
        return all(w.holds(values.get(w.key)) for w in s.where[1:])
    return True


def applies(runs: Runs, action: str, run: RunRecord) -> str | None:
    """None if ``action`` applies to the run as listed, else why not."""
    if action == "resume" and run.status not in RESUMABLE:
        return f"is {run.status}; resume applies to failed runs"
    if action == "retry" and not runs.waiting_out_backoff(run):
        # A wf:sleep or a rate's turn sleeps too, and retry now would refuse it.
        what = "sleeping, not in a step's backoff" if run.status == Status.SLEEPING else run.status
        return f"is {what}; retry applies to a run waiting out a step's backoff"
    if action == "cancel" and run.status in ENDED:
        return f"has ended ({run.status})"
    return None


@dataclass
class Preview:
    action: str
    selection: Selection
    todo: list[RunRecord] = field(default_factory=list)  # the runs the action will be asked of
    skipped: dict[str, str] = field(default_factory=dict)  # run id -> why not
    diverging: dict[str, str] = field(default_factory=dict)  # run id -> the divergence (left out)
    capped: bool = False  # the selection reached MAX_BULK: narrow it, then run again

    def summary(self) -> str:
        verb = {"resume": "resumed", "retry": "retried", "cancel": "cancelled"}[self.action]
        text = f"{len(self.todo)} run(s) would be {verb} ({self.selection.describe()})"
        if self.diverging:
            text += f"; {len(self.diverging)} left out: the current code would not replay them"
        if self.skipped:
            text += f"; {len(self.skipped)} matched but the action does not apply to them"
        if self.capped:
            text += f"; the selection stopped at {MAX_BULK} runs: narrow it (--since, --until) for the rest"
        return text


def preview(
    runs: Runs, action: str, selection: Selection, worker: Worker | None, *, limit: int = MAX_BULK
) -> Preview:
    """What ``act`` would do: ``worker`` (the current code) replays each run a resume or retry
    would hand to it; without one (no code: ``lunaflow`` against a data folder alone) none
    is checked."""
    if action not in ACTIONS:
        raise LunaflowError(f"unknown action {action!r}; a repair resumes, retries or cancels runs")
    found = select(runs, selection, limit=limit)
    out = Preview(action, selection, capped=len(found) >= limit)
    for run in found:
        why = applies(runs, action, run)
        if why is not None:
            out.skipped[run.id] = why
            continue
        if action != "cancel" and worker is not None:
            verdict = check_run(worker, run)
            if verdict.newer:  # not this code's to resume or retry
                out.skipped[run.id] = verdict.message
                continue
            if verdict.diverges:
                out.diverging[run.id] = verdict.message
                continue
        out.todo.append(run)
    return out


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # run id -> the refusal (it moved meanwhile)


def act(
    runs: Runs,
    action: str,
    todo: Sequence[RunRecord],
    *,
    batch: int = BATCH,
    progress: Callable[[Outcome, int], None] | None = None,
) -> Outcome:
    """Ask ``action`` of each run, ``batch`` at a time, reporting after each batch."""
    out = Outcome()
    do = {"resume": runs.resume, "retry": runs.retry, "cancel": runs.cancel}[action]
    for start in range(0, len(todo), batch):
        for run in todo[start : start + batch]:
            try:
                do(run.id)
            except LunaflowError as refused:  # it moved since the preview: say so, go on
                out.refused[run.id] = str(refused)
                continue
            out.done.append(run.id)
        if progress is not None:
            progress(out, len(todo))
    return out
