"""``AwsPlatform``: the ``LocalPlatform`` interface on the AWS path (SPEC section 5).

A project runs through the Lambda handlers in ``functions/`` against a moto server process
on loopback (``runtime.aws.motoserver``), on a fake clock:

- the table, the wake queue, the user queues and the Scheduler group are made from the
  definitions the CDK stack uses (``runtime.aws.deployment``);
- ``fetch`` sends an API Gateway v2 event through the fetch handler; ``settle`` plays the
  SQS event source mappings (batches of up to 10 to the worker and queue handlers, what
  succeeded deleted, failures left to their visibility timeout) and EventBridge
  Scheduler (a one-time schedule whose time has come sends its target input to the wake
  queue, then is deleted); once a minute of fake time has passed it plays the reconcile
  rule;
- SQS delays and visibility timeouts follow the fake clock (every request carries it to
  the server), and ``advance`` stops at each time a message or schedule falls due.

Handlers are resolved by the names the stack configures (``contract.Handler``), as Lambda
resolves them, and serve with this harness's runtime: one warm container for every
function, replaced by ``deploy`` and ``restart``. The harness's own calls (``start``,
``signal``, ...) go through that container's run API, as the CLI's ``--aws`` mode does.

A wake the worker fails raises ``WakeFailed`` from the call that settled it (``strict``,
the default), so a test sees the error; a queue message the queue function fails for a
reason of its own (not the handler's error, which is a retry) raises ``DeliveryFailed``
likewise. ``strict=False`` leaves such messages to SQS's redelivery and the reconciler, as
on AWS.
"""

from __future__ import annotations

import base64
import importlib
import json
import random
import shutil
import threading
import uuid
import warnings
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import boto3
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.config import Config

from runtime.aws import container, deployment, schedules
from runtime.aws.contract import (
    FETCH_TIMEOUT_S,
    MAX_WAKE_THREADS,
    QUEUE_TIMEOUT_S,
    RECONCILE_EVENT,
    RECONCILE_MINUTES,
    TICK_TIME,
    WORKER_TIMEOUT_S,
    Handler,
    schedule_name,
)
from runtime.aws.dataapi import SqliteDataApi
from runtime.aws.events import LambdaContext, http_event, sqs_event
from runtime.aws.motoserver import CLOCK_HEADER, MotoServer, at_ms
from runtime.aws.pgdataapi import PgDataApi
from runtime.aws.runner_events import RunnerEvents, runner_arn
from runtime.aws.runtime import AwsRuntime, Clients
from runtime.core.clock import Clock, now_ms
from runtime.engine.schedules import Schedule, iso
from runtime.errors import EngineBug, LunaflowError
from runtime.platform.describe import describe
from runtime.platform.fetch import Response
from runtime.platform.harness import Harness, check_workers, earliest_after, own_folder
from runtime.platform.platform import Platform
from runtime.platform.standins import HttpFn, ObjectFn, ServiceFn, StandinServices
from runtime.services import pgserver
from runtime.services.base import Services
from runtime.services.local import engine
from runtime.store.dynamodb_layout import TTL_ATTRIBUTE
from runtime.store.items import conditional

DEPLOYMENT_FILE = "aws-deployment.json"  # in data_dir: which resources a reopened harness reaches
MAX_ROUNDS = 10_000  # batches one settle delivers before it is taken for a loop


class WakeFailed(LunaflowError):
    """The worker handler failed a wake (``AwsPlatform(strict=True)``)."""


class DeliveryFailed(LunaflowError):
    """The queue function failed a message for a reason of its own, not its handler's error
    (``AwsPlatform(strict=True)``)."""


class AwsPlatform(Harness):
    def __init__(
        self,
        project: str | Path,
        data_dir: str | Path | None = None,
        *,
        services: dict[str, ServiceFn] | None = None,
        objects: ObjectFn | None = None,
        http: HttpFn | None = None,
        endpoint_url: str | None = None,
        region: str = "eu-west-1",
        strict: bool = True,
        worker_timeout_s: float = WORKER_TIMEOUT_S,
        cache_size: int = 256,
        clock: Clock | None = None,
        workers: int = 1,
        runner: bool = True,
    ) -> None:
        """``endpoint_url``: a server started by ``runtime.aws.motoserver`` (default: one per
        Python process, started on first use). ``data_dir`` keeps the deployment's names, so
        a harness opened again on it (and the same server) reaches the same resources.
        ``workers``: how many wakes of one SQS batch the worker function advances at once
        (``LUNAFLOW_WAKE_THREADS``; the stack deploys 10), each on a Lua state of its own.
        ``runner``: the fetch function hands the runs it does not finish to the runner, as the
        stack deploys it (``runtime.aws.runner_events``); False: to the wake queue, as a stack
        from before it did."""
        super().__init__(clock)
        self.workers = check_workers(workers)
        self.runner = runner
        self.runner_events: RunnerEvents | None = None
        self.project = Path(project)
        self.region = region
        self.strict = strict
        self.worker_timeout_s = worker_timeout_s
        self.cache_size = cache_size
        self.endpoint = endpoint_url or MotoServer.shared().endpoint
        _check_server(self.endpoint)
        self._own_dir = data_dir is None
        self.data_dir = own_folder("lunaflow-aws-") if data_dir is None else Path(data_dir)
        if self._own_dir:
            pgserver.scratch(self.data_dir / "db")  # its Data API's databases go with it
        self.names = deployment.Names(self._suffix())
        self._standins = (services, objects, http)
        # Databases live where LocalPlatform keeps them: on the data folder's PostgreSQL
        # (DATA/db/pg), or DATA/db/<name>.sqlite when LUNAFLOW_DATABASES=sqlite.
        self.databases: SqliteDataApi | PgDataApi = (
            PgDataApi(self.data_dir / "db") if engine() == "postgres" else SqliteDataApi(self.data_dir / "db")
        )
        self.clients = self.new_clients()
        self.invoking: list[Handler] = []  # the functions running now (a step body can ask which)
        self._containers: weakref.WeakSet[AwsRuntime] = weakref.WeakSet()
        self.config = self._deploy_resources(self.project)
        self._last_reconcile = self._clock.now()
        self.runtime = self.container(self.project)
        self.settle()

    # --- the deployment ----------------------------------------------------------------

    def _suffix(self) -> str:
        record = self.data_dir / DEPLOYMENT_FILE
        if record.exists():
            known = json.loads(record.read_text(encoding="utf-8"))
            if known.get("endpoint") == self.endpoint and known.get("region") == self.region:
                return str(known["suffix"])
        suffix = uuid.uuid4().hex[:12]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(
            json.dumps({"suffix": suffix, "endpoint": self.endpoint, "region": self.region}), encoding="utf-8"
        )
        return suffix

    def _deploy_resources(self, project: Path) -> Any:
        needs = describe(project)
        self._handled_queues = sorted(needs.queues)
        config = deployment.create(self.clients, self.names, project, needs.queue_settings)
        if self.runner:
            arn = runner_arn(self.region, self.names.suffix)
            url = deployment.runner_events_queue(self.clients.sqs, self.names)
            # A client of its own: these requests are Lambda's, not the functions' own.
            self.runner_events = RunnerEvents(self.client("sqs"), url, arn)
            self.clients = replace(self.clients, lambda_=self.runner_events)
            config = replace(config, runner_arn=arn)
        deployment.sync_schedules(self.clients, config, needs.schedules)
        if needs.databases:  # Aurora's Data API, answered over SQLite files (moto runs no SQL)
            config = replace(
                config,
                database_resource_arn=self.databases.resource_arn,
                database_secret_arn=self.databases.secret_arn,
            )
        return config

    def client(self, service: str) -> Any:
        """A boto3 client of the moto server whose requests carry the fake clock."""
        with _SESSION_LOCK:  # a session is not thread-safe; its clients are
            made = _session(self.region).client(
                service,
                endpoint_url=self.endpoint,
                config=Config(retries={"max_attempts": 1}),
            )

        def stamp(request: Any, **_: Any) -> None:
            request.headers[CLOCK_HEADER] = str(now_ms(self._clock))

        made.meta.events.register("before-send", stamp)
        return made

    def new_clients(self) -> Clients:
        return Clients(
            dynamodb=self.client("dynamodb"),
            sqs=self.client("sqs"),
            scheduler=self.client("scheduler"),
            secretsmanager=self.client("secretsmanager"),
            s3=self.client("s3"),
            rds_data=self.databases,
        )

    def container(self, project: Path, *, owner: str | None = None) -> AwsRuntime:
        """A fresh Lambda container for this deployment: its own Lua state and coroutine
        cache (the harness keeps one; tests may make more, as concurrent invocations). It
        shares the harness's clients (boto3 clients are thread-safe; making one costs
        tens of milliseconds)."""
        services, objects, http = self._standins

        def standins(real: Services) -> Services:
            return StandinServices(real, services=services, objects=objects, http=http)

        threads = min(self.workers, MAX_WAKE_THREADS)
        config = replace(self.config, project=str(project), wake_threads=threads)
        made = AwsRuntime(
            config,
            self.clients,
            clock=self._clock,
            owner=owner,
            services=standins,
            cache_size=self.cache_size,
            keep_logs=True,
        )
        self._containers.add(made)
        return made

    @property
    def platform(self) -> Platform:  # type: ignore[override]
        return self.runtime.platform

    # --- Lambda ------------------------------------------------------------------------

    def invoke(
        self, handler: Handler, event: dict[str, Any], timeout_s: float, rt: AwsRuntime | None = None
    ) -> Any:
        """Call a function's handler as Lambda does: resolved by name, with a context whose
        remaining time counts down from ``timeout_s``, serving with ``rt`` (default: this
        harness's container)."""
        module, name = str(handler).rsplit(".", 1)
        fn = getattr(importlib.import_module(module), name)
        context = LambdaContext(
            function_name=f"{self.names.table}-{module.rsplit('.', 1)[-1]}",
            timeout_s=timeout_s,
            region=self.region,
        )
        with container.serving(rt or self.runtime), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "No application metrics")
            self.invoking.append(handler)
            try:
                return fn(event, context)
            finally:
                self.invoking.remove(handler)

    def fetch(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> Response:
        event = http_event(method, path, body, headers, query, now_s=self._clock.now())
        answer = self.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S)
        self.settle()
        return _response(answer)

    def deliver(
        self, queue_url: str, queue_arn: str, handler: Handler, timeout_s: float, rt: AwsRuntime | None = None
    ) -> int:
        """One batch from the queue to its function, as an event source mapping with partial
        batch responses: what succeeded is deleted, failures wait out their visibility
        timeout. Returns how many messages were delivered."""
        sqs = self.clients.sqs
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            return 0
        failed: set[str]
        crashed: Exception | None = None
        try:
            answer = self.invoke(handler, sqs_event(got, queue_arn, self.region), timeout_s, rt)
            failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
        except Exception as e:  # the whole batch failed: Lambda leaves every message to SQS
            failed = {m["MessageId"] for m in got}
            if not isinstance(e, BatchProcessingError):  # not its records' failures: its own
                crashed = e
        for m in got:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        if failed and handler == Handler.WORKER and self.strict:
            raise WakeFailed(self._failure_text([m for m in got if m["MessageId"] in failed]))
        if failed and handler == Handler.QUEUE and self.strict:
            # A handler's own error is a retry; an error of the platform is never swallowed.
            broken = self._delivery_errors(rt or self.runtime, failed)
            if crashed is not None:
                broken.append(f"{type(crashed).__name__}: {crashed}")
            if broken:
                raise DeliveryFailed(
                    f"the queue function failed: {broken[-1]}; AwsPlatform(strict=False) leaves "
                    "such messages to SQS's redelivery instead"
                ) from crashed
        return len(got)

    def deliver_hand_offs(self, rt: AwsRuntime | None = None) -> int:
        """Lambda's asynchronous invocations of the runner: each queued hand-off to the
        runner's handler, an invocation each, gone whatever its outcome (no retries: the
        reconciler heals a failed one). Returns how many were delivered."""
        if self.runner_events is None:
            return 0
        events = self.runner_events.take()
        for event in events:
            try:
                self.invoke(Handler.RUNNER, event, self.worker_timeout_s, rt)
            except Exception as e:
                if self.strict:
                    raise WakeFailed(
                        f"the runner failed the hand-off of run {str(event.get('run_id'))!r}: {e}; "
                        "AwsPlatform(strict=False) leaves failed hand-offs to the reconciler instead"
                    ) from e
        return len(events)

    def _delivery_errors(self, rt: AwsRuntime, message_ids: set[str]) -> list[str]:
        """The errors the queue function logged for these messages (not their handlers' own)."""
        return [
            str(r["message"])
            for r in rt.platform.logs
            if r.get("level") == "error" and r.get("message_id") in message_ids
        ]

    def _failure_text(self, messages: list[dict[str, Any]]) -> str:
        errors = [r for r in self.platform.logs if r.get("level") == "error"]
        runs = [_run_of(m["Body"]) for m in messages]
        last = errors[-1]["message"] if errors else "see the log"
        return (
            f"the worker failed the wake of run(s) {', '.join(repr(r) for r in runs)}: {last}; "
            "AwsPlatform(strict=False) leaves failed wakes to SQS and the reconciler instead"
        )

    def fire_due_schedules(self) -> int:
        """Scheduler: every one-time schedule of the group whose time has come sends its
        target input to its target queue, earliest first; ``ActionAfterCompletion=DELETE``
        removes it."""
        scheduler, group, now = self.clients.scheduler, self.config.scheduler_group, now_ms(self._clock)
        due = []
        for summary in _pages(scheduler.list_schedules, "Schedules", GroupName=group):
            schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=group)
            at = at_ms(schedule["ScheduleExpression"])
            if (schedule.get("State") or "ENABLED") == "ENABLED" and at is not None and at <= now:
                due.append((at, schedule))
        for _, schedule in sorted(due, key=lambda d: d[0]):
            target = schedule["Target"]
            url = self.clients.sqs.get_queue_url(QueueName=target["Arn"].rsplit(":", 1)[-1])["QueueUrl"]
            self.clients.sqs.send_message(QueueUrl=url, MessageBody=target["Input"])
            if schedule.get("ActionAfterCompletion") == "DELETE":
                scheduler.delete_schedule(Name=schedule["Name"], GroupName=group)
        return len(due)

    def _fire(self, schedule: Schedule, tick_ms: int, *, now: bool = False) -> None:
        """A declared schedule's tick, as EventBridge Scheduler sends it: its target input,
        the scheduled time filled in, to its target queue (the worker starts the run). A
        disabled (paused) schedule sends nothing; a trigger (``now``) is the message
        ``lunaflow schedule trigger --aws`` sends."""
        if now:
            self.schedule_control.trigger(schedule, tick_ms)
            return
        scheduler, group = self.clients.scheduler, self.config.scheduler_group
        found = scheduler.get_schedule(Name=schedule_name(schedule.name), GroupName=group)
        if (found.get("State") or "ENABLED") != "ENABLED":
            return
        target = found["Target"]
        url = self.clients.sqs.get_queue_url(QueueName=target["Arn"].rsplit(":", 1)[-1])["QueueUrl"]
        body = target["Input"].replace(TICK_TIME, iso(tick_ms))
        self.clients.sqs.send_message(QueueUrl=url, MessageBody=body)

    @property
    def schedule_control(self) -> schedules.AwsSchedules:
        return schedules.AwsSchedules(self.clients.scheduler, self.clients.sqs, self.config)

    def reconcile(self) -> Any:
        """The reconcile rule's invocation of the worker."""
        self._last_reconcile = self._clock.now()
        return self.invoke(Handler.WORKER, dict(RECONCILE_EVENT), self.worker_timeout_s)

    # --- settling and time -------------------------------------------------------------

    def settle(self) -> None:
        if self._clock.now() - self._last_reconcile >= RECONCILE_MINUTES * 60:
            self.reconcile()
            self.delete_expired_items()
        for _ in range(MAX_ROUNDS):
            done = self._due_schedules() + self.deliver_hand_offs()
            done += self.deliver(
                self.config.wake_queue_url, self.config.wake_queue_arn, Handler.WORKER, self.worker_timeout_s
            )
            for name in self._handled_queues:
                url = self.config.queue_urls[name]
                done += self.deliver(url, _arn_of(url, self.region), Handler.QUEUE, QUEUE_TIMEOUT_S)
            if not done:
                return
        raise EngineBug(f"the AWS harness did not settle after {MAX_ROUNDS} batches")

    def delete_expired_items(self) -> int:
        """DynamoDB's TTL, which moto does not play: delete the items whose ``expires_at``
        has passed, in no order (as TTL does, a few at a time, whatever they belong to).
        Returns how many."""
        db = self.client("dynamodb")
        now = {"N": repr(self._clock.now())}
        expiring = {
            "ExpressionAttributeNames": {"#ttl": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":now": now},
        }
        found: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "TableName": self.names.table,
            "FilterExpression": "#ttl <= :now",
            "ProjectionExpression": "pk, sk",
            **expiring,
        }
        while True:
            page = db.scan(**request)
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        random.Random(now["N"]).shuffle(found)
        for item in found:
            # TTL passes over an item whose expiry was moved or removed since it looked.
            conditional(
                db.delete_item,
                TableName=self.names.table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                ConditionExpression="#ttl <= :now",
                **expiring,
            )
        return len(found)

    def _due_schedules(self) -> int:
        schedule_ms = self._next()["schedule_ms"]
        return (
            self.fire_due_schedules() if schedule_ms is not None and schedule_ms <= now_ms(self._clock) else 0
        )

    def _next(self) -> dict[str, Any]:
        queues = [self.names.wake_queue] + [_name_of(self.config.queue_urls[q]) for q in self._handled_queues]
        if self.runner_events is not None:
            queues.append(self.names.runner_events)
        url = (
            f"{self.endpoint}/_lunaflow/next?region={self.region}&group={self.config.scheduler_group}"
            f"&queues={','.join(queues)}&now={now_ms(self._clock)}"
        )
        with urlopen(url, timeout=30) as answer:
            found: dict[str, Any] = json.loads(answer.read())
        return found

    def _move_clock(self, to_ms: int) -> None:
        super()._move_clock(to_ms)
        # Time moves in jumps here: a container working through the jump would have kept
        # renewing its lease all along, so it renews it at the new time at once.
        for rt in list(self._containers):
            if rt.working:
                rt.beat_now()

    def _next_due(self, until_ms: int) -> int | None:
        found = self._next()
        now = now_ms(self._clock)
        sooner = earliest_after(now, [found["message_ms"], found["schedule_ms"]])
        heal_ms = int((self._last_reconcile + RECONCILE_MINUTES * 60) * 1000)
        # The reconciler's next look is a stop only if it comes first, within the advance,
        # and has work: asking is a read of every index shard, which a stop a message or a
        # schedule makes anyway does not need (a paced run's advance makes one a second),
        # nor an advance that ends before the look (a test's many one-second steps).
        first = sooner is None or heal_ms < sooner
        if now < heal_ms <= until_ms and first and self._healing_left():
            return heal_ms
        return sooner

    def _healing_left(self) -> bool:
        """Whether the reconciler may have work: a wake-up not served, a start whose request
        left its wake-up pending, a timer past due (a worker that took its wake died), or a
        run left running that it lists (``stale_running``: items older code wrote; a run the
        current code writes has its wake-up, or its due timer, while it runs)."""
        store = self.runtime.store
        now = now_ms(self._clock)
        due = store.next_due()
        return (
            bool(store.wakeups())
            or bool(store.unlooked_pending_starts())
            or (due is not None and due <= now - int(self.runtime.reconcile_after_s * 1000))
            or bool(store.stale_running(float("inf"), now))
        )

    # --- code and containers -----------------------------------------------------------

    def deploy(self, project: str | Path) -> None:
        """New code in every container; in-flight runs continue on it. A refused project
        raises here and changes nothing (a queue it added may stay, unused)."""
        path = Path(project)
        before = self.config, self._handled_queues
        try:
            self.config = self._deploy_resources(path)
            runtime = self.container(path)
        except BaseException:
            self.config, self._handled_queues = before
            raise
        runtime.platform.logs.extend(self.runtime.platform.logs)  # a deploy keeps the log; a restart drops it
        # What the deploy gate does before the aliases move: with [deploys] pin_runs, the runs
        # the new code would not replay are pinned to the code that served them until now.
        runtime.platform.pin_diverging(runtime.platform.worker, self.runtime.platform.worker)
        if runtime.snapshots is not None:
            runtime.snapshots.save(runtime.platform.source)
        self.project, self.runtime = path, runtime
        self.settle()

    def restart(self) -> None:
        """A new container: every in-memory state dropped, the deployment's data kept."""
        self.runtime = self.container(self.project)
        self.settle()

    def close(self) -> None:
        if isinstance(self.databases, PgDataApi):
            self.databases.close()
        if self._own_dir:
            deployment.remove(self.clients, self.config)
            if self.runner_events is not None:
                deployment.remove_queue(self.clients.sqs, self.runner_events.queue_url)
            pgserver.discard(self.data_dir / "db")
            shutil.rmtree(self.data_dir, ignore_errors=True)


# --- helpers -------------------------------------------------------------------------------


_SESSION_LOCK = threading.Lock()
_SESSIONS: dict[str, Any] = {}


def _session(region: str) -> Any:
    """One boto3 session per region for every harness: its loaders are shared, so a client
    after the first costs a few milliseconds instead of eighty."""
    if region not in _SESSIONS:
        _SESSIONS[region] = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
        )
    return _SESSIONS[region]


def _check_server(endpoint: str) -> None:
    try:
        with urlopen(f"{endpoint}/_lunaflow/ping", timeout=10) as answer:
            ok = json.loads(answer.read()).get("lunaflow") is True
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise LunaflowError(
            f"{endpoint} is not a lunaflow moto server; start one with `python -m runtime.aws.motoserver` "
            "(it prints its port), or leave endpoint_url out and the harness starts one"
        )


def _response(answer: dict[str, Any]) -> Response:
    body = answer.get("body") or ""
    if answer.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8", "replace")
    headers = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
    return Response(int(answer.get("statusCode", 200)), headers, str(body))


def _run_of(body: str) -> str:
    try:
        return str(json.loads(body).get("run_id"))
    except (ValueError, AttributeError):
        return body[:80]


def _name_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _arn_of(url: str, region: str) -> str:
    return f"arn:aws:sqs:{region}:{deployment.ACCOUNT}:{_name_of(url)}"


def _pages(call: Any, key: str, **request: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = call(**request)
        out += page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return out
        request["NextToken"] = token
