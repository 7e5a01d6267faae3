"""Reloading a project under ``lunaflow dev`` when its files change.

A thread polls the modification times and sizes of what loading reads: every ``.lua`` file
(scripts and modules; not ``tests/``), everything under ``migrations/`` and
``lunaflow.toml``. Polling costs a ``stat`` per file every ``POLL_S`` and needs no
dependency; a change is acted on once two polls agree, so an editor's save in several
writes is loaded once.

A change is loaded as a deploy is (``Platform.load``), which changes nothing: if the project
is refused, the old code keeps serving and the reason is printed (it names file and line).
Otherwise every in-flight run is replayed on the new code without effects (``lunaflow
check``'s ``Executor.check``) and those that would diverge are printed, before the new code
serves anything; then ``Platform.install`` applies its new migrations (together, in one
transaction per database) and serves it — or, if a migration fails, rolls it back and
refuses the code, the old code serving on the old schema. One line says which. A run that
would diverge fails with the journal divergence when it next runs, as after any deploy, and
can be resumed once fixed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from runtime.core.journal import ENDED, Status
from runtime.dev.check import check_run
from runtime.engine.worker import Worker
from runtime.errors import LunaflowError
from runtime.platform.platform import Platform

log = logging.getLogger("lunaflow.dev")

POLL_S = 0.3
MAX_CHECKED_RUNS = 1000  # in-flight runs replayed after a change; more are left to `lunaflow check`

Snapshot = dict[str, tuple[int, int]]


def watched_files(root: Path, skip: Path | None = None) -> Snapshot:
    """What loading the project reads, by relative path: (modification time, size)."""
    found: Snapshot = {}
    candidates = [*root.rglob("*.lua"), root / "lunaflow.toml"]
    migrations = root / "migrations"
    if migrations.is_dir():
        candidates += [p for p in migrations.rglob("*") if p.is_file()]
    for path in candidates:
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or (
            len(rel.parts) > 1 and rel.parts[0] == "tests"
        ):
            continue
        if skip is not None and path.is_relative_to(skip):
            continue
        try:
            st = path.stat()
        except OSError:  # gone between listing and reading
            continue
        found[rel.as_posix()] = (st.st_mtime_ns, st.st_size)
    return found


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


class Reloader:
    """Watches ``root`` and loads changes into ``platform``; ``say`` prints a line."""

    def __init__(
        self, platform: Platform, root: Path, say: Callable[[str], None], skip: Path | None = None
    ) -> None:
        self.platform = platform
        self.root = root
        self.say = say
        self.skip = skip.resolve() if skip is not None else None
        self.seen = watched_files(root, self.skip)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lunaflow-reload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        pending: Snapshot | None = None
        while not self._stop.wait(POLL_S):
            try:
                now = watched_files(self.root, self.skip)
                if now == self.seen:
                    pending = None
                elif now == pending:  # two polls agree: the writes are done
                    names = changed(self.seen, now)
                    self.seen, pending = now, None
                    self.reload(names)
                else:
                    pending = now
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("reloading the project failed; the old code keeps serving")

    def reload(self, names: list[str]) -> bool:
        """Load the project again; True when the new code is live."""
        what = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        try:
            worker = self.platform.load(self.root)
        except LunaflowError as e:
            self.say(f"{what} changed, but the project was refused; the old code keeps serving: {e}")
            return False
        diverging = self._diverging(worker)
        try:
            # Its migrations first: a failed one refuses the code. With [deploys] pin_runs,
            # the diverging runs stay on the code they ran on.
            pinned = self.platform.install(worker, diverging)
        except LunaflowError as e:
            self.say(f"{what} changed, but the project was refused; the old code keeps serving: {e}")
            return False
        note = f"; {len(diverging)} in-flight run(s) would diverge (listed above)" if diverging else ""
        if pinned:
            note = (
                f"; {len(pinned)} in-flight run(s) it would not replay keep running on the code they ran on "
                f"(pinned: lunaflow migrate RUN_ID moves one once the code replays it)"
            )
        self.say(f"reloaded {what}: the new code is live{note}")
        return True

    def _diverging(self, worker: Worker) -> list[str]:
        """Print each in-flight run the new code would fail with a journal divergence."""
        store = self.platform.store
        runs = [
            run
            for status in Status
            if status not in ENDED
            for run in store.list_runs(status=status, limit=MAX_CHECKED_RUNS + 1)
        ]
        if len(runs) > MAX_CHECKED_RUNS:
            self.say(
                f"more than {MAX_CHECKED_RUNS} runs are in flight; only the newest {MAX_CHECKED_RUNS} were "
                f"checked against the new code (`lunaflow check {self.root}` checks them all)"
            )
        found: list[str] = []
        pins = worker.source.pin_runs
        for run in runs[:MAX_CHECKED_RUNS]:
            verdict = check_run(worker, run)
            if verdict.diverges:
                found.append(verdict.run_id)
                then = (
                    "it keeps running on the code it ran on (pinned)"
                    if pins
                    else "it fails with this when it next runs (fix the code, then resume it)"
                )
                self.say(
                    f"run {verdict.run_id} ({verdict.workflow}, {verdict.status}) would diverge on the new "
                    f"code: {verdict.message}; {then}"
                )
        return found
