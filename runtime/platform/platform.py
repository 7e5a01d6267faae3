"""The platform: the run API (start, get, signal, cancel, resume), deploys, the worker loop
and secret pinning. ``lunaflow dev``, the Lambda handlers and the test harness all stand on
this one class; they differ in store, clock, services and how they schedule work.

One sequence advances a run wherever it runs (``Platform.advance``): take the run's lease
(where several workers may reach it), use a worker whose code is current, advance, release
the lease unless the park or end released it, clear the wake-up that asked for it.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.clock import Clock, now_ms
from runtime.core.flow import Collect
from runtime.core.journal import Status
from runtime.engine.code import Code
from runtime.engine.executor import ActivationDeadline
from runtime.engine.observe import Observer
from runtime.engine.project import ProjectSource
from runtime.engine.redact import Redactor
from runtime.engine.wake import Waker
from runtime.engine.worker import Worker, WorkerSetup
from runtime.errors import EngineBug, InvalidInput, UnknownWorkflow
from runtime.platform import fetch
from runtime.platform.check import check_run, check_runs
from runtime.platform.fetch import Failure, Response
from runtime.platform.logs import LogHistory
from runtime.platform.runs import Runs
from runtime.platform.versions import Pins, Snapshots, Versions
from runtime.services.base import ServiceError, Services
from runtime.store.base import Lease, RunRecord, Store

log = logging.getLogger("lunaflow")

MAX_WORK_ITEMS = 1_000_000
EXPIRE_BATCH = 100  # runs deleted per sweep (a sweep's write lock, an invocation's time)


@dataclass(frozen=True)
class LeaseTerms:
    """Advance under a lease: where several workers (threads, processes, invocations) may
    reach one run, the lease makes one of them advance it at a time."""

    owner: str
    lease_ms: int


class Platform(Runs):
    def __init__(
        self,
        project: str | Path,
        store: Store,
        clock: Clock,
        *,
        services: Services | None = None,
        cache_size: int = 256,
        read_only: bool = False,
        waker: Waker | None = None,
        observer: Observer | None = None,
        keep_logs: bool = False,
    ) -> None:
        super().__init__(store, clock, waker, observer)
        # lunaflow check replays with the project's code but must write nothing: no
        # migration, no secret pin (its store and services are read-only as well).
        self.read_only = read_only
        self.services = services
        # Only the test harness reads a history of the scripts' log lines.
        self.logs = LogHistory(keep=keep_logs)
        self.redactor = Redactor()  # every secret value handed to Lua, kept out of errors and logs
        self.setup = WorkerSetup(
            store=store,
            clock=clock,
            wakes=self.wakes,
            observer=self.observer,
            api=self,
            services=services,
            logs=self.logs.append,
            cache_size=cache_size,
            redactor=self.redactor,
        )
        self.source = ProjectSource.read(project)
        store.retention_s = self.source.retention_s
        worker = self.new_worker()
        self.accept(worker)
        self.worker = worker
        # Runs pinned to older code (issue 29.2): off unless the platform keeps them
        # (``keep_versions``); without, a run the new code cannot replay fails as before.
        self.versions: Versions | None = None
        self._used = threading.local()  # the worker the last activation on this thread ran on
        self._rounds: list[Worker] = []  # run_until_idle's workers, when runs advance at once

    def keep_versions(self, pins: Pins, snapshots: Snapshots) -> None:
        """Pin runs a deploy's code would not replay to the code they ran on (versions.py)."""
        self.versions = Versions(pins, snapshots, lambda source: Worker(source, self.setup))

    # --- code --------------------------------------------------------------------------

    @property
    def code(self) -> Code:
        return self.worker.code

    def new_worker(self) -> Worker:
        return Worker(self.source, self.setup)

    def deploy(self, project: str | Path) -> None:
        """Load new code; in-flight runs replay on it at their next wake."""
        self.install(self.load(project))

    def load(self, project: str | Path) -> Worker:
        """New code in a worker of its own, not serving yet: raises if the project is
        refused, and can be checked against in-flight runs before ``install``."""
        return Worker(ProjectSource.read(project), self.setup)

    def install(self, worker: Worker, diverging: list[str] | None = None) -> list[str]:
        """Serve ``worker``'s code from now on; other workers are replaced as they are
        next lent out (``fresh``). Its migrations apply first: if one fails, this raises
        and the old code keeps serving on the old schema. Where versions are kept, the
        in-flight runs the new code would not replay (``diverging``, else found here) are
        pinned to the code they ran on; returns those newly pinned."""
        self.accept(worker)
        pinned = self.pin_diverging(worker, self.worker, diverging)
        self.source, self.worker = worker.source, worker
        self.store.retention_s = worker.source.retention_s
        return pinned

    def pin_diverging(self, new: Worker, old: Worker, diverging: list[str] | None = None) -> list[str]:
        """Where versions are kept and ``new``'s code asks for it (``[deploys] pin_runs``): pin
        the in-flight runs ``new`` would not replay (``diverging``, else found here) to
        ``old``'s code, saved first. Runs pinned already stay on their version."""
        if self.versions is None or not new.source.pin_runs or new.source.digest == old.source.digest:
            return []
        if diverging is None:
            diverging = [v.run_id for v in check_runs(new, self.store) if v.diverges]
        pinned = [r for r in diverging if self.versions.pinned(r) is None]
        self.versions.pin({r: old.source.digest for r in pinned}, keep=old)
        return pinned

    def migrate(self, run_id: str) -> str:
        """Move a pinned run to the current code, once that code replays it (``lunaflow
        migrate``); the version it leaves. Refused, naming the divergence, otherwise."""
        run = self.get(run_id)
        version = None if self.versions is None else self.versions.pinned(run_id)
        if version is None or self.versions is None:
            raise InvalidInput(
                f"run '{run_id}' is not pinned to older code: it runs on the current code already"
            )
        verdict = check_run(self.fresh(self.worker), run)
        if verdict.diverges:
            raise InvalidInput(
                f"run '{run_id}' cannot move to the current code ({self.source.digest}): {verdict.message}; "
                f"it keeps running on code {version} until code that replays it is deployed"
            )
        self.versions.unpin(run_id)
        self.wakes.wake(run_id)  # a parked run is looked at again on the current code
        return version

    def accept(self, worker: Worker) -> None:
        """What accepting ``worker``'s code does to services: open what its scripts declared
        and apply their pending migrations (``Services.declare``). Loading alone
        (``load``, a read-only platform) changes nothing."""
        if self.read_only or self.services is None:
            return
        for d in worker.declarations:
            try:
                self.services.declare(d.kind, d.name, d.opts, worker.project_root)
            except ServiceError as e:
                raise d.refused(worker.source.name, e) from e

    def fresh(self, worker: Worker) -> Worker:
        """The worker itself, or a new one if its Lua state ran out of memory or its code
        is older than the platform's."""
        if worker.code.tainted or worker.source is not self.source:
            return self.new_worker()
        return worker

    # --- runs --------------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        input_value: Any = None,
        *,
        id: str | None = None,
        parent_id: str | None = None,
        changes: tuple[str, ...] | None = None,
        timeout: str | float | None = None,
        signal: str | None = None,
        payload: Any = None,
        code: str | None = None,
        collect: Collect | None = None,
    ) -> RunRecord:
        if workflow not in self.worker.code.workflows:
            raise UnknownWorkflow(workflow)
        known = self.source.changes if changes is None else changes
        if timeout is None:
            timeout = self.worker.code.timeouts.get(workflow)  # the workflow's own default
        return super().start(
            workflow,
            input_value,
            id=id,
            parent_id=parent_id,
            changes=known,
            timeout=timeout,
            signal=signal,
            payload=payload,
            code=code or self.source.digest,
            collect=collect or self.worker.code.collects.get(workflow),
        )

    # --- work --------------------------------------------------------------------------

    def recover(self) -> None:
        """After a crash: a cancel's cascade cut short is finished, and runs left ``running``
        were mid-activation, so they advance again."""
        self.finish_cancels()
        for run_id in self.store.running_runs():
            self.wakes.wake(run_id)

    def advance(
        self,
        run_id: str,
        *,
        worker: Worker | None = None,
        lease: LeaseTerms | None = None,
        deadline: ActivationDeadline | None = None,
        token: int | None = None,
    ) -> Lease:
        """Advance one run: ``Lease.OK`` once done, ``BUSY`` when another worker holds its
        lease (the wake-up stays for later), ``MISSING`` when there is no such run.

        ``worker`` is one the caller already made current (a pool's); by default the
        platform's own. ``deadline`` bounds the activation by a Lambda's end (see
        ``Executor.advance``); an eager one leaves a run pinned to other code to a worker
        (``BUSY``). ``token`` is the wake-up being served, cleared when done."""
        if lease is not None:
            taken = self.store.acquire_lease(run_id, lease.owner, now_ms(self.clock), lease.lease_ms)
            if taken == Lease.BUSY:
                return taken
            if taken == Lease.MISSING:
                self._served(run_id, token)
                return taken
        # Pins are looked up only while the code keeps them (a read per activation on AWS):
        # code deployed without [deploys] pin_runs runs every run, pinned before or not.
        keeping = self.versions is not None and self.source.pin_runs
        version = self.versions.pinned(run_id) if keeping and self.versions is not None else None
        if version is not None and self.versions is not None and version != self.source.digest:
            if deadline is not None and deadline.eager:
                return Lease.BUSY  # its code is a worker's to fetch: not a request's work
            with self.versions.lend(version) as old:
                if old is not None:
                    status = self._advance_on(old, run_id, lease, deadline)
                    if status in (Status.COMPLETED, Status.CANCELLED) or status is None:
                        self.versions.unpin(run_id)  # its code may retire
                    self._served(run_id, token)
                    return Lease.OK
            log.warning(
                "run %s is pinned to code %s, which is not kept here; it runs on the current code",
                run_id,
                version,
            )
        if worker is None:
            worker = self.worker = self.fresh(self.worker)
        self._advance_on(worker, run_id, lease, deadline)
        self._served(run_id, token)
        return Lease.OK

    def _advance_on(
        self, worker: Worker, run_id: str, lease: LeaseTerms | None, deadline: ActivationDeadline | None
    ) -> Status | None:
        self._used.worker = worker
        try:
            return worker.executor.advance(run_id, worker.code, deadline=deadline)
        finally:
            # Parking and ending release the lease in the same write; any other way out of
            # the activation (out of time, a conflict, nothing to do, an error) releases it here.
            if lease is not None and not worker.executor.parked_or_ended:
                self.store.release_lease(run_id, lease.owner)

    def used_worker(self) -> Worker:
        """The worker the last activation on this thread ran on (an older version's for a
        pinned run)."""
        used: Worker | None = getattr(self._used, "worker", None)
        return used or self.worker

    def _served(self, run_id: str, token: int | None) -> None:
        if token is not None:
            self.store.clear_wakeup(run_id, token)

    def expire_runs(self, limit: int = EXPIRE_BATCH) -> list[str]:
        """Delete up to ``limit`` ended runs kept past their retention (``[runs] retention``
        of the code that ended them); returns their ids."""
        if self.read_only:
            return []
        gone = self.store.expire(self.clock.now(), limit)
        if self.versions is not None:
            # A run of the id started later runs on the current code: the pins of deleted
            # runs go, and where pins can be listed (locally), those a crash between a sweep
            # and its unpin left behind.
            listed = self.versions.pins.all() or {}
            stale = [r for r in gone if self.versions.pinned(r)]
            stale += [r for r in listed if r not in gone and self.store.get_run(r) is None]
            if stale:
                self.versions.unpin(*stale)
        return gone

    def run_until_idle(self, workers: int = 1) -> int:
        """Fire due timers and advance every woken run until nothing is left. Returns the
        number of activations. With ``workers`` above 1 the runs woken together advance at
        once, each on a worker of its own (as ``lunaflow dev``'s run workers and concurrent
        Lambda invocations do), so branches' effects overlap; then the next woken ones."""
        done = 0
        self.expire_runs()
        while True:
            self.store.fire_due_timers(now_ms(self.clock))
            work = self.store.wakeups()
            if not work:
                delivered = 0 if self.services is None else self.services.run_due(self.worker)
                if not delivered:
                    return done
                done += delivered
                continue
            if workers > 1 and len(work) > 1:
                self._advance_at_once(work, workers)
                done += len(work)
            else:
                for run_id, token in work:
                    self.advance(run_id, token=token)
                    done += 1
            if done > MAX_WORK_ITEMS:
                raise EngineBug("the worker loop did not settle after a million activations")

    def _advance_at_once(self, work: list[tuple[str, int]], workers: int) -> None:
        """One round of woken runs, each advanced on a thread with a worker (a Lua state) of
        its own. A round holds each run once, so no two threads advance one run; a run woken
        meanwhile waits for the next round, its wake-up kept by the token logic."""
        from concurrent.futures import ThreadPoolExecutor

        pool = self._round_workers(min(workers, len(work)))
        lent: queue.SimpleQueue[Worker] = queue.SimpleQueue()
        for w in pool:
            lent.put(w)

        def one(item: tuple[str, int]) -> None:
            worker = lent.get()
            try:
                self.advance(item[0], worker=worker, token=item[1])
            finally:
                lent.put(worker)

        with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="lunaflow-round") as threads:
            for future in [threads.submit(one, item) for item in work]:
                future.result()

    def _round_workers(self, n: int) -> list[Worker]:
        """``n`` workers for a round, kept between rounds and made current (``fresh``)."""
        kept = [self.fresh(w) for w in self._rounds[:n]]
        kept += [self.new_worker() for _ in range(n - len(kept))]
        self._rounds = kept
        return kept

    def fetch(self, request: dict[str, Any], worker: Worker | None = None) -> tuple[Response, Failure | None]:
        """Run the fetch handler; ``InvalidInput`` for a request that is not text. A body over
        the limit is answered 413 here too, as ``lunaflow dev`` and API Gateway's fetch
        function answer it before they call this (``LocalPlatform`` does not)."""
        fetch.check_text(request)
        size = fetch.body_bytes(request)
        if size > fetch.MAX_BODY_BYTES:
            return fetch.body_too_large(size), None
        if worker is None:
            worker = self.worker = self.fresh(self.worker)
        response, failure = fetch.handle(worker.code, request)
        if failure is not None:  # logged by whoever serves the request
            redact = self.redactor.text
            failure = Failure(
                failure.request_id, redact(failure.message), redact(failure.traceback or "") or None
            )
        return response, failure

    # --- secrets -----------------------------------------------------------------------

    def secret(self, name: str, run_id: str | None) -> str:
        """The secret's latest value, or for a run the version it first resolved."""
        latest = self.store.secret(name)
        if latest is None:
            raise InvalidInput(
                f"secret '{name}' is not set; set it with `lunaflow secret set {name} VALUE` "
                "(or p.set_secret in tests)"
            )
        if run_id is None:
            return latest[1]
        if self.read_only:
            pinned_version = self.store.pinned_secret(run_id, name)
            found = latest if pinned_version is None else self.store.secret(name, pinned_version)
            return (found or latest)[1]
        version = self.store.pin_secret(run_id, name, latest[0])
        pinned = self.store.secret(name, version)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' is pinned to missing version {version} of secret '{name}'")
        return pinned[1]

    def close(self) -> None:
        self.store.close()
        if self.services is not None:
            self.services.close()
