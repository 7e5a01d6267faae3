"""``AwsRuntime``: the platform on AWS, as the Lambda handlers use it.

Built once per Lambda container from ``AwsConfig`` (environment variables) and boto3
clients. It holds one ``Platform`` over the DynamoDB store, the AWS waker and services;
the worker's coroutine cache lives as long as the container, so a warm invocation skips
the replay.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from runtime.aws.config import AwsConfig
from runtime.aws.contract import CLIENT_SERVICES, FETCH_TIMEOUT_S, LAZY_CLIENT_SERVICES, WORKER_TIMEOUT_S
from runtime.aws.database import DataApiDatabases
from runtime.aws.invocation import LONGEST_STEP_MS, SAFETY_S, SAVE_S
from runtime.aws.secrets import SecretsManagerSecrets
from runtime.aws.services import AwsServices
from runtime.aws.versions import BucketSnapshots, RunItemPins
from runtime.aws.wake import AwsWaker, wake_message
from runtime.core.clock import Clock, SystemClock, now_ms
from runtime.engine.executor import ActivationDeadline
from runtime.engine.observe import Observer
from runtime.engine.schedules import parse_iso
from runtime.engine.worker import Worker
from runtime.platform.fetch import Failure, Response
from runtime.platform.platform import LeaseTerms, Platform
from runtime.platform.schedules import Fired, fire_tick
from runtime.services.base import Services
from runtime.services.deadline import refuse_late
from runtime.store.base import Lease
from runtime.store.blobs import Blobs
from runtime.store.dynamodb import DynamoDBStore

log = logging.getLogger("lunaflow.aws")

# A hand-off's invocation (fetch -> the runner) is answered once Lambda has queued the event:
# one slow or throttled is better given up within seconds for the wake queue (the fallback)
# than retried with botocore's defaults (5 attempts, 60 s timeouts) inside the request's 29 s.
HAND_OFF_CLIENT = Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=2, read_timeout=3)
LEASE_MS = 30_000  # a run's lease lasts this long past its last renewal
RENEW_S = 10.0  # a working invocation renews its lease this often: a dead one frees the run within 30 s
BUSY_FIRST_S = 10  # a wake that found the run busy comes back after this, doubling each time
RECONCILE_LIMIT = 100  # wake-ups one reconcile re-sends at most
RECONCILE_AFTER_S = 60.0  # a wake-up waiting this long is taken for lost
STALE_RUNNING_S = 300.0  # a run left running this long, with no live lease, is woken
# A start still pending this long after its creation lost its request (which ends within
# FETCH_TIMEOUT_S) or its prompt; the margin over that is the status index's lag.
STRANDED_AFTER_S = 120.0
RESEND_MAX_PAUSES = 15  # a re-sent wake-up is looked at again after 1, 2, 4... minutes, at most 15
# A request's starts and signals are advanced where the request landed (``AwsRuntime.fetch``,
# for at most ``AwsConfig.eager_ms`` in all) only while the request has this long left.
EAGER_SPARE_MS = 5_000
# A step run where the request landed ends this long before the request's budget, so its
# outcome is saved within it.
EAGER_SAVE_S = 0.1


def busy_delay_s(tries: int) -> int:
    """How long a wake that found its run busy ``tries`` times before waits: 10 s (past the
    time a dead holder is taken for dead), doubling, at most SQS's 15 minutes."""
    return int(min(900, BUSY_FIRST_S * 2**tries))


@dataclass(frozen=True)
class Clients:
    dynamodb: Any
    sqs: Any
    scheduler: Any
    secretsmanager: Any
    s3: Any = None
    rds_data: Any = None
    lambda_: Any = None  # the runner's invocations (None: every wake goes to the wake queue)

    @classmethod
    def from_botocore(cls, session: Any) -> Clients:
        """From a botocore session (the Lambda handlers: no boto3 import)."""
        made: dict[str, Any] = {name: session.create_client(name) for name in CLIENT_SERVICES}
        made.update({name: LazyClient(session, name, HAND_OFF_CLIENT) for name in LAZY_CLIENT_SERVICES})
        return cls(**{_field(name): client for name, client in made.items()})

    @classmethod
    def from_session(cls, session: Any) -> Clients:
        return cls(
            dynamodb=session.client("dynamodb"),
            sqs=session.client("sqs"),
            scheduler=session.client("scheduler"),
            secretsmanager=session.client("secretsmanager"),
            s3=session.client("s3"),
            rds_data=session.client("rds-data"),
        )


def _field(service: str) -> str:
    """The ``Clients`` field of a botocore service name (``lambda`` is a Python keyword)."""
    return "lambda_" if service == "lambda" else service.replace("-", "_")


class LazyClient:
    """A botocore client made on its first call: loading a service's model and making its
    client is tens of milliseconds of a cold start, spent only by a container that calls it."""

    def __init__(self, session: Any, service: str, config: Config | None = None) -> None:
        self._session, self._service, self._config = session, service, config
        self._made: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        with self._lock:
            if self._made is None:
                self._made = self._session.create_client(self._service, config=self._config)
        return getattr(self._made, name)


class AwsRuntime:
    def __init__(
        self,
        config: AwsConfig,
        clients: Clients,
        *,
        clock: Clock | None = None,
        observer: Observer | None = None,
        owner: str | None = None,
        services: Callable[[Services], Services] | None = None,
        cache_size: int = 256,
        keep_logs: bool = False,
        read_only: bool = False,
    ) -> None:
        """``services`` wraps the AWS services (the harness's stand-ins); ``keep_logs`` keeps
        a bounded log history for tests to read (a Lambda prints each line and keeps none);
        ``read_only`` (``lunaflow check --aws``) loads the code without accepting it: no
        migration runs on the database and no secret is pinned."""
        self.config = config
        self.clients = clients
        self.clock = clock or SystemClock()
        self.owner = owner or f"lambda-{uuid.uuid4()}"
        self.stuck: list[str] = []  # the runs the last reconcile found stuck (the StuckRuns metric)
        self.swept: list[str] = []  # the runs the last reconcile admitted to slots a crash had left held
        self.stranded: list[str] = []  # the starts whose pending wake-up the last reconcile indexed
        self.expired: list[str] = []  # the runs the last reconcile deleted at their expiry
        self._holding: set[str] = set()  # the runs whose leases this container renews
        self._lock = threading.Lock()
        self._idle: list[Worker] = []  # Lua states lent to the wakes of a batch advanced at once
        # The lease and reconcile timings (a bench shortens them to heal within seconds).
        self.lease_ms, self.renew_s = LEASE_MS, RENEW_S
        self.reconcile_after_s, self.stale_running_s = RECONCILE_AFTER_S, STALE_RUNNING_S
        self.stranded_after_s = STRANDED_AFTER_S
        self.eager_ms = config.eager_ms  # 0: every start and signal goes to the worker
        secrets = SecretsManagerSecrets(
            clients.secretsmanager, clients.dynamodb, config.table, prefix=config.secrets_prefix
        )
        blobs = None if clients.s3 is None else Blobs(clients.s3, config.values_bucket)
        self.store = DynamoDBStore(
            clients.dynamodb, config.table, secrets=secrets, clock=self.clock, blobs=blobs
        )
        self.waker = AwsWaker(
            clients.sqs,
            clients.scheduler,
            self.clock,
            queue_url=config.wake_queue_url,
            queue_arn=config.wake_queue_arn,
            group=config.scheduler_group,
            role_arn=config.scheduler_role_arn,
            ledger=self.store,
            invoker=clients.lambda_ if config.runner_arn else None,
            runner_arn=config.runner_arn,
        )
        for client in (clients.dynamodb, clients.sqs, clients.rds_data):
            events = getattr(getattr(client, "meta", None), "events", None)
            if events is not None:  # the harness's Data API stand-in has none
                events.register("before-send", refuse_late)
        databases: DataApiDatabases | None = None
        if config.database_resource_arn and config.database_secret_arn and clients.rds_data is not None:
            databases = DataApiDatabases(
                clients.rds_data, config.database_resource_arn, config.database_secret_arn
            )
        self.databases = databases  # what `lunaflow check --aws` reads pending migrations from
        # Kept unwrapped: the queue function hides a failed message through these even when
        # the platform sees them through the harness's stand-ins.
        self.aws_services = AwsServices(
            dynamodb=clients.dynamodb,
            table=config.table,
            sqs=clients.sqs,
            queue_urls=config.queue_urls,
            clock=self.clock,
            databases=databases,
        )
        self.platform = Platform(
            config.project,
            self.store,
            self.clock,
            services=self.aws_services if services is None else services(self.aws_services),
            waker=self.waker,
            observer=observer,
            cache_size=cache_size,
            keep_logs=keep_logs,
            read_only=read_only,
        )
        if blobs is not None:
            self.snapshots: BucketSnapshots | None = BucketSnapshots(blobs)
            self.platform.keep_versions(RunItemPins(self.store), self.snapshots)
        else:
            self.snapshots = None

    # --- the worker --------------------------------------------------------------------

    def advance(
        self,
        run_id: str,
        *,
        remaining_ms: int | None = None,
        reason: str = "wake",
        due_ms: int | None = None,
        tries: int = 0,
        worker: Worker | None = None,
    ) -> str:
        """Serve one wake: "done", "busy" (another live invocation holds the run; the wake
        comes back later), "early" (a timer's wake before its time, sent back for the rest),
        or "missing". ``worker``: one lent (``lend``) to a wake advanced beside others;
        by default the platform's own.

        The wake-up it serves is released only when the activation is done, with the token
        the lease was taken at, so one that fails is still there for the reconciler, and a
        wake that arrived meanwhile is prompted."""
        now = now_ms(self.clock)
        if due_ms is not None and due_ms > now:
            self.waker.early(run_id, due_ms)
            return "early"
        # A timer's wake writes nothing before its lease: the lease marks the run running at
        # its due timer, which stays (in the timers index) until the park or end moves it,
        # the crash backstop the reconciler fires (``fire_due_timers``). It was a write
        # turning the timer into a wake-up (1 WRU, 2 index WRU) and the wake-up's removal
        # (1 index WRU).
        left_ms = WORKER_TIMEOUT_S * 1000 if remaining_ms is None else remaining_ms
        started = time.monotonic()
        deadline = ActivationDeadline(
            at=started + left_ms / 1000 - SAFETY_S,
            steps_until=started + left_ms / 1000 - SAVE_S,
            longest_step_ms=LONGEST_STEP_MS,
        )
        prompts = self.waker.prompts
        try:
            with self.holding(run_id):
                outcome = self.platform.advance(
                    run_id, worker=worker, lease=LeaseTerms(self.owner, self.lease_ms), deadline=deadline
                )
        except Exception as e:
            self.log_error(f"advancing run '{run_id}' failed: {e}", traceback.format_exc(), run=run_id)
            raise
        token = self.store.lease_token(run_id)
        if outcome == Lease.BUSY:
            # Its holder prompts the run when it is done if this wake is still waiting; this
            # one only covers the holder dying, so it waits instead of bouncing.
            self.waker.send(wake_message(run_id, "busy", tries=tries + 1), busy_delay_s(tries))
            return "busy"
        if outcome == Lease.MISSING:
            return "missing"
        # A park or an end dropped the wake-up it served in the same write; an activation
        # that wrote neither (the run was ended or failed, or out of time) releases it here.
        written = self.platform.used_worker().executor.parked_or_ended
        released = written or token is None or self.store.release_wake(run_id, token)
        if not released and self.waker.prompts == prompts:
            self.waker.prompt(run_id)  # a signal (or a timer) came while it ran
        return "done"

    @contextmanager
    def holding(self, run_id: str) -> Iterator[None]:
        """While the block runs, keep renewing this container's lease on the run (if it
        takes it): a live invocation keeps the run however long its step takes; a dead one
        stops renewing and the run is free ``LEASE_MS`` later."""
        stop = threading.Event()

        def keep_renewing() -> None:
            while not stop.wait(self.renew_s):
                self._renew(run_id)

        renewer = threading.Thread(target=keep_renewing, name="lunaflow-lease", daemon=True)
        renewer.start()
        with self._lock:
            self._holding.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self._holding.discard(run_id)
            stop.set()
            renewer.join()

    @property
    def working(self) -> bool:
        return bool(self._holding)

    def beat_now(self) -> None:
        """Renew the leases now (the harness, whose clock moves in jumps)."""
        with self._lock:
            held = sorted(self._holding)
        for run_id in held:
            self._renew(run_id)

    @contextmanager
    def lend(self) -> Iterator[Worker]:
        """A worker (a Lua state with the code) for one of the wakes this invocation advances
        at once: kept for the container's later invocations, made current before each use."""
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        worker = self.platform.new_worker() if kept is None else self.platform.fresh(kept)
        try:
            yield worker
        finally:
            with self._lock:
                self._idle.append(worker)

    def _renew(self, run_id: str) -> None:
        try:
            self.store.renew_lease(run_id, self.owner, now_ms(self.clock), self.lease_ms)
        except Exception:  # a missed renewal only shortens the lease's life
            log.warning("renewing the lease of run %s failed", run_id, exc_info=True)

    def tick(self, schedule: str, tick: str, *, trigger: bool = False) -> Fired | None:
        """A declared schedule's EventBridge tick (``tick``: its scheduled time, ISO 8601
        UTC) or a ``trigger``: start the tick's run, or join it if a retried delivery started
        it already. A tick of a schedule the deployed code no longer declares is dropped
        (None)."""
        worker = self.platform.worker = self.platform.fresh(self.platform.worker)
        declared = worker.schedules.get(schedule)
        if declared is None:
            return None
        return fire_tick(self.platform, declared, parse_iso(tick), trigger=trigger)

    def reconcile(self, *, limit: int = RECONCILE_LIMIT) -> list[str]:
        """Heal what a lost message, a failed activation or a dead invocation left behind, a
        bounded batch at a time: wake-ups that waited over a minute (a pending signal, a
        timer that fired, a start), timers overdue by a minute that never fired, and runs
        left running with no live lease. Runs whose wake is being served (a live lease) are
        skipped; each re-sent wake-up is looked at again only after a growing pause, so a
        backlog is never re-sent every minute; and while the wake queue holds a backlog, the
        wakes are queued rather than lost, so only ``limit`` less the backlog are re-sent.
        Returns the runs woken. First it finishes the cascade of any cancel whose intent has
        waited over a minute (the process cancelling died part-way)."""
        now = self.clock.now()
        now_at = now_ms(self.clock)
        after_s = self.reconcile_after_s
        self.platform.finish_cancels(before=now - after_s, limit=limit)
        try:
            self.expired = self.platform.expire_runs(limit)
        except Exception:  # deleting expired runs must not hold back the healing below
            log.exception("deleting expired runs failed; the next reconcile tries again")
            self.expired = []
        # Slots a crash left held by runs that ended are freed, and keys with room filled
        # (the admitted runs' wake-ups are recorded and prompted as they are admitted).
        self.swept = self.store.sweep_slots()
        # A start whose request died before its park has its pending wake-up indexed here;
        # the look at waiting wake-ups sends it on (below, or a reconcile later: the index
        # lags the write).
        try:
            self.stranded = self.store.index_stranded_starts(now - self.stranded_after_s)
        except Exception:  # must not hold back the healing below
            log.exception("the look for stranded starts failed; the next reconcile tries again")
            self.stranded = []
        overdue = self.store.fire_due_timers(now_at - int(after_s * 1000), limit, unleased_at=now_at)
        waiting = self.store.wakeups_older_than(now - after_s, limit)
        # A run left running with a wake-up waiting is the wake-ups' business (and their
        # pause); one without gets a wake-up, which then follows the same rules.
        left = self.store.stale_running(now - self.stale_running_s, now_at, limit)
        asked = self.store.waiting(left)
        stranded = [run_id for run_id in left if run_id not in asked]
        for run_id in stranded:
            self.store.add_wakeup(run_id)
        candidates = list(dict.fromkeys([*waiting, *overdue, *stranded]))[:limit]
        serving = self.store.leased(candidates, now_at)
        budget = max(0, limit - self.waker.backlog()) if candidates else 0
        woken = [run_id for run_id in candidates if run_id not in serving][:budget]
        resent = self.store.resends(woken)
        # A wake-up's pauses double from a minute: after k re-sends it has waited about
        # after_s * 2**k since it should have moved. Past the setting it is stuck.
        self.stuck = [r for r in woken if after_s * 2 ** resent.get(r, 0) >= self.config.stuck_after_s]
        self.waker.prompt_many(woken)
        for run_id in woken:
            pause = min(after_s * RESEND_MAX_PAUSES, after_s * 2 ** resent.get(run_id, 0))
            self.store.defer_wake(run_id, now + pause)
        for run_id in serving:  # being served: look again a pause later, nothing re-sent
            self.store.defer_wake(run_id, now + after_s, resent=False)
        return woken

    # --- requests and user queues ------------------------------------------------------

    def fetch(
        self, request: dict[str, Any], remaining_ms: int | None = None
    ) -> tuple[Response, Failure | None]:
        """Serve a request; then advance the runs it started or signalled right here (the
        wake message to the worker, its invocation and its lease spared) as far as a park
        or an end with no effect between, and prompt the worker for the rest."""
        held: list[str] = []
        began = time.monotonic()
        try:
            # The runs its handler starts are advanced below: their wake-ups wait unindexed
            # (``DynamoDBStore.create_run``), so a park or an end here writes no index. Not
            # when no time is left for that: a lost prompt would then wait for the look.
            self.store.pending_starts = self.eager_ms > 0 and (
                remaining_ms is None or remaining_ms > EAGER_SPARE_MS
            )
            self.store.created_pending = set()
            with self.waker.holding() as held:
                response, failure = self.platform.fetch(request)
        finally:
            self.store.pending_starts = False
            # What the handler spent is gone from the invocation: the budget counts from here.
            spent_ms = int((time.monotonic() - began) * 1000)
            try:
                self._eager(held, None if remaining_ms is None else remaining_ms - spent_ms)
            finally:
                self.store.unseed()  # what this request's starts wrote is no later one's
        if failure is not None:
            self.log_error(failure.message, failure.traceback, request_id=failure.request_id)
        return response, failure

    def _eager(self, run_ids: list[str], remaining_ms: int | None) -> None:
        started = time.monotonic()
        left_ms = FETCH_TIMEOUT_S * 1000 if remaining_ms is None else remaining_ms
        unfinished: list[str] = []
        try:
            self._advance_eagerly(run_ids, started, left_ms, unfinished)
        finally:
            self.waker.hand_off(unfinished)

    def _advance_eagerly(self, run_ids: list[str], started: float, left_ms: int, left: list[str]) -> None:
        """Each run in turn, for what is left of the budget; ``left`` collects the runs not
        finished (handed off after the last)."""
        for run_id in dict.fromkeys(run_ids):
            spent_ms = int((time.monotonic() - started) * 1000)
            budget_ms = min(self.eager_ms - spent_ms, left_ms - spent_ms - EAGER_SPARE_MS)
            done = False
            if budget_ms <= 0:
                if run_id in self.store.created_pending:
                    # Its wake-up was written pending for an activation that has no time
                    # left here: indexed now, a lost prompt is re-sent after a minute.
                    self.store.index_pending_wake(run_id)
            else:
                try:
                    done = self.eager(run_id, budget_ms, left_ms - spent_ms)
                except Exception as e:  # the worker does it, as it would have
                    self.log_error(
                        f"advancing run '{run_id}' eagerly failed: {e}", traceback.format_exc(), run=run_id
                    )
            if not done:
                left.append(run_id)

    def eager(self, run_id: str, budget_ms: int, left_ms: int) -> bool:
        """Advance the run with no lease, writing only a park or an end reached with no effect
        between (``ActivationDeadline.eager``); False when it is left to a worker (its
        wake-up, recorded with the start or the signal, still waits for one). A worker that
        takes the run meanwhile is safe: whichever writes a journal slot first wins it, and
        the park holds only while no newer wake-up came (the token this load read).

        A step whose timeout fits the budget runs here: the lease is taken at it, only while
        free and at the token the load read (``take_served_lease``), and the activation goes
        on as a worker's would until a park, an end, or the budget's end (saved, the lease
        dropped, and left to the request's hand-offs). Any other step is left to the worker
        untouched.
        ``left_ms``: the time the invocation has left."""
        ends = time.monotonic() + budget_ms / 1000
        tried: list[bool] = []

        # No renewal: the lease outlasts the invocation, whose end bounds the activation
        # whatever its steps do (a step's timeout ends it within the budget in all but a
        # hung AWS call, docs/architecture.md), and lapses soon after it if it is killed.
        lease_ms = max(self.lease_ms, left_ms + 1_000)

        def take_lease() -> bool:
            tried.append(True)  # before the write: one whose answer is lost may have committed
            try:
                return self.store.take_served_lease(run_id, self.owner, now_ms(self.clock), lease_ms)
            except (ClientError, BotoCoreError):
                return False  # handed off; the lease, if it was taken, is dropped below

        deadline = ActivationDeadline(
            at=ends,
            steps_until=ends - EAGER_SAVE_S,  # a step's outcome is saved within the budget
            longest_step_ms=LONGEST_STEP_MS,
            eager=True,
            take_lease=take_lease,
        )
        woken: list[str] = []
        self.store.serving_loaded = True
        try:
            # Its prompts wait until the lease is dropped: a worker woken at once finds the
            # run free, not busy for 10 s.
            with self.waker.holding() as woken:
                outcome = self.platform.advance(run_id, deadline=deadline)
        finally:
            self.store.serving_loaded = False
            self.store.lease_token(run_id)  # this activation's, not a later one's
            # A park or an end dropped the lease in its write; any other way out (its time's
            # end after a step, a conflict, an error, a lost answer) drops it here (a no-op
            # unless this container holds it).
            if tried and not self.platform.used_worker().executor.parked_or_ended:
                try:
                    self.store.release_lease(run_id, self.owner)
                except (ClientError, BotoCoreError):
                    log.warning("dropping run %s's lease failed; it lapses in 30 s", run_id, exc_info=True)
            # What it woke besides the run itself (a child it started, a parent its end
            # wakes) goes to the wake queue, where a batch takes a parent's many wakes on one
            # thread instead of one invocation each. The run itself, saved at its time's end
            # or moved under it, is left to the request's hand-offs (``_eager``), within
            # their cap on the runner's invocations.
            for other in dict.fromkeys(woken):
                if other != run_id:
                    self.waker.prompt(other)
        # Parked or ended here, and not woken since; else a worker's.
        executor = self.platform.used_worker().executor
        return outcome == Lease.OK and executor.parked_or_ended and run_id not in woken

    def log_error(self, message: str, tb: str | None, *, run: str | None = None, **more: Any) -> None:
        """Keep an error in the platform's log, as ``lunaflow dev`` and the harness show them
        (the handlers write it to CloudWatch as well)."""
        self.platform.logs.append({"level": "error", "message": message, "traceback": tb, "run": run, **more})

    def deliver(self, queue: str, message: dict[str, Any]) -> str | None:
        """Run ``on "queue"``'s handler on one message; None on success, else the error."""
        worker = self.platform.worker = self.platform.fresh(self.platform.worker)
        if not worker.has_queue_handler(queue):
            return f'this project has no on "queue" ("{queue}", ...) handler'
        return worker.call_queue_handler(queue, message)
