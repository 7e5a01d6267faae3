"""The Lambda functions (Python 3.12, arm64, one bundle) and what each may touch.

Every function gets its own role with only the actions its handler reaches, each named (no
wildcard actions): the store's item calls on the table (``runtime.store.dynamodb``: gets,
puts, updates, deletes, queries, batch gets, and the condition checks of its transactions;
no Scan, no BatchWriteItem), queries on its indexes, the values bucket's run objects, and
sends to the wake queue. The worker and fetch (a request's eager activation) park runs, so
they create and move runs' timer schedules (``lf-*``, never the declared ``lfs-*`` ones) and
pass the Scheduler role; the others may delete a run's schedule (a cancel), and only the
worker reads the wake queue's backlog (the reconciler). Project code (fetch,
worker, queue) may reach the project's secrets, send to its queues and, when it declares a
database, use the Data API; the console runs no project code. The queue function exists only
when the project handles a queue.

The functions that run project code (fetch, worker, queue) serve through a ``live`` alias:
the API, the wake queue, user queues and the reconcile rule invoke the alias, never the
unqualified function, so new code serves only once the alias moves to its version, which
the deploy gate (``infra/capabilities/gate.py``) holds back until in-flight runs replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import bundling, constants
from infra.capabilities.database import Database
from infra.capabilities.journal import JournalTable
from infra.capabilities.queues import UserQueues
from infra.capabilities.values import ValuesBucket
from infra.capabilities.wake import WakePath
from infra.settings import Settings
from runtime.aws.contract import CODE_PREFIX, DEFAULT_WAKE_THREADS, NAMESPACE, SERVICE, Env, Handler


@dataclass(frozen=True)
class Role:
    """What one handler does with the platform, so its grants follow from it."""

    name: str
    handler: str
    timeout_s: int
    description: str


FETCH = Role("Fetch", Handler.FETCH, constants.FETCH_TIMEOUT_S, "HTTP API -> the project's fetch handler")
WORKER = Role("Worker", Handler.WORKER, constants.WORKER_TIMEOUT_S, "advances runs from the wake queue")
RUNNER = Role("Runner", Handler.RUNNER, constants.WORKER_TIMEOUT_S, "advances the runs a request handed off")
# The runner's events (fetch's hand-offs, functions/runner.py): a failed activation is not
# retried by Lambda (its wake-up is the reconciler's to re-send through the wake queue), and
# an event throttled this long is dropped, the reconciler having re-sent it long before.
RUNNER_RETRIES = 0
RUNNER_EVENT_AGE_S = 15 * 60
QUEUE = Role("Queue", Handler.QUEUE, constants.QUEUE_TIMEOUT_S, 'user queues -> on "queue" handlers')
LIVE_ALIAS = "live"
# Lambda's own START, END and REPORT lines (INFO) cost every invocation ~350 bytes of log
# ingestion and say nothing the metrics and traces do not: the system level is WARN, so only
# its timeouts and crashes are written. Application lines keep INFO (Powertools writes JSON
# whatever the format, and reads AWS_LAMBDA_LOG_LEVEL, which this level sets).
LOG_FORMAT = lambda_.LoggingFormat.JSON
SYSTEM_LOG_LEVEL = lambda_.SystemLogLevel.WARN
APPLICATION_LOG_LEVEL = lambda_.ApplicationLogLevel.INFO
CONSOLE = Role("Console", Handler.CONSOLE, constants.CONSOLE_TIMEOUT_S, "CloudWatch console widgets")


# What runtime/store/dynamodb.py (and the kv, secrets and object services on the same
# table) call: TransactWriteItems is authorized as the Put, Update, Delete and ConditionCheck
# of its items.
TABLE_ACTIONS = [
    f"dynamodb:{a}"
    for a in ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")
]
# runtime/aws/database.py: statements, and transactions around them.
DATA_API_ACTIONS = [
    f"rds-data:{a}"
    for a in ("ExecuteStatement", "BeginTransaction", "CommitTransaction", "RollbackTransaction")
]


def tracing(settings: Settings) -> lambda_.Tracing:
    """X-Ray for the functions: active with ``-c tracing=true``, else none (and no grant)."""
    return lambda_.Tracing.ACTIVE if settings.tracing else lambda_.Tracing.DISABLED


DATABASE_SETTINGS = (Env.DATABASE_ARN, Env.DATABASE_SECRET_ARN, Env.DATABASE_NAME)


def _environment(role: Role, shared: dict[str, str], settings: Settings) -> dict[str, str]:
    """What each function is told beyond what they all share: the worker how many wakes of a
    batch it advances at once and when the reconciler counts a run stuck; fetch how long a
    request advances the runs it started or signalled. The console, which runs no project
    code, is not told of the database: a runtime told of one checks its migrations at start,
    through the Data API the console is not granted."""
    if role is WORKER:
        return {
            **shared,
            Env.WAKE_THREADS: str(DEFAULT_WAKE_THREADS),
            Env.STUCK_AFTER_S: str(settings.stuck_after_minutes * 60),
        }
    if role is FETCH:
        return {**shared, Env.EAGER_MS: str(settings.eager_ms)}
    if role is CONSOLE:
        return {k: v for k, v in shared.items() if k not in DATABASE_SETTINGS}
    return shared


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        project: Path,
        journal: JournalTable,
        values: ValuesBucket,
        wake: WakePath,
        queues: UserQueues,
        secrets: list[str],
        database: Database | None,
        handled_queues: list[str],
        settings: Settings,
        memory_mb: int,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        # Every function runs the project's Lua (infra/memory.py: sized for one state at its bound).
        self.memory_mb = memory_mb
        code = bundling.code(project)
        environment = {
            Env.PROJECT: "project",
            Env.TABLE: journal.table.table_name,
            Env.WAKE_QUEUE_URL: wake.queue.queue_url,
            Env.WAKE_QUEUE_ARN: wake.queue.queue_arn,
            Env.SCHEDULER_GROUP: str(wake.group.name),
            Env.SCHEDULER_ROLE_ARN: wake.role.role_arn,
            Env.VALUES_BUCKET: values.bucket.bucket_name,
            Env.QUEUE_URLS: stack.to_json_string({n: q.queue_url for n, q in queues.queues.items()}),
            Env.SECRETS_PREFIX: f"{stack.stack_name}/",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            # Powertools' Tracer sends no segment when tracing is off (none would be kept).
            "POWERTOOLS_TRACE_DISABLED": "false" if settings.tracing else "true",
        }
        if database is not None:
            environment[Env.DATABASE_ARN] = database.cluster.cluster_arn
            environment[Env.DATABASE_SECRET_ARN] = database.cluster.secret.secret_arn  # type: ignore[union-attr]
            environment[Env.DATABASE_NAME] = database.names[0]
        self.code, self.environment = code, environment
        self.tracing = tracing(settings)
        self.functions: dict[str, lambda_.Function] = {}
        self.live: dict[str, lambda_.Alias] = {}  # role name -> its ``live`` alias (project code only)
        roles = (
            (FETCH, WORKER, RUNNER, QUEUE, CONSOLE) if handled_queues else (FETCH, WORKER, RUNNER, CONSOLE)
        )
        for role in roles:
            fn = lambda_.Function(
                self,
                role.name,
                runtime=constants.lambda_runtime(),
                architecture=lambda_.Architecture.ARM_64,
                code=code,
                handler=role.handler,
                memory_size=memory_mb,
                timeout=Duration.seconds(role.timeout_s),
                # The worker advances a batch's wakes at once (runs woken together: branches).
                environment=_environment(role, environment, settings),
                description=f"lunaflow: {role.description}",
                tracing=tracing(settings),
                logging_format=LOG_FORMAT,
                system_log_level_v2=SYSTEM_LOG_LEVEL,
                application_log_level_v2=APPLICATION_LOG_LEVEL,
                reserved_concurrent_executions=settings.concurrency[role.name],
                log_group=logs.LogGroup(
                    self,
                    f"{role.name}Logs",
                    retention=constants.log_retention(),
                ),
            )
            self.functions[role.name] = fn
            if role is RUNNER:
                self.live[role.name] = lambda_.Alias(
                    self,
                    f"{role.name}Live",
                    alias_name=LIVE_ALIAS,
                    version=fn.current_version,
                    retry_attempts=RUNNER_RETRIES,
                    max_event_age=Duration.seconds(RUNNER_EVENT_AGE_S),
                )
            elif role is not CONSOLE:
                self.live[role.name] = lambda_.Alias(
                    self, f"{role.name}Live", alias_name=LIVE_ALIAS, version=fn.current_version
                )
            self._grant_store(fn, journal)
            values.grant(fn)
            if role in (WORKER, RUNNER):  # a run pinned to older code is advanced on that code, read here
                fn.add_to_role_policy(
                    iam.PolicyStatement(
                        actions=["s3:GetObject"], resources=[values.bucket.arn_for_objects(f"{CODE_PREFIX}*")]
                    )
                )
            self._grant_wakes(fn, wake, role)
            if role is CONSOLE:
                continue  # the console lists, resumes and cancels runs; it runs no project code
            self._grant_secrets(fn, secrets)
            for queue in queues.queues.values():
                fn.add_to_role_policy(
                    iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
                )
            if database is not None:
                self._grant_database(fn, database)

        self.fetch = self.functions[FETCH.name]
        self.worker = self.functions[WORKER.name]
        self.runner = self.functions[RUNNER.name]
        # Fetch hands the runs it began and did not finish to the runner's alias. Its ARN is
        # the function's with the alias's name, not the alias's own reference: the alias
        # waits on the deploy gate, which waits on fetch's new version.
        runner_arn = f"{self.runner.function_arn}:{LIVE_ALIAS}"
        self.fetch.add_environment(Env.RUNNER_ARN, runner_arn)
        self.fetch.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[runner_arn])
        )
        self.queue: lambda_.Function | None = self.functions.get(QUEUE.name)
        self.console = self.functions[CONSOLE.name]
        self.live[WORKER.name].add_event_source(
            sources.SqsEventSource(
                wake.queue,
                batch_size=10,
                report_batch_item_failures=True,
                max_concurrency=settings.wake_max_concurrency,
            )
        )
        for name in handled_queues:  # a send-only queue has no handler to deliver to
            self.live[QUEUE.name].add_event_source(
                sources.SqsEventSource(
                    queues.queues[name],
                    batch_size=10,
                    report_batch_item_failures=True,
                    max_concurrency=settings.queue_max_concurrency,
                )
            )

    @staticmethod
    def _grant_store(fn: lambda_.Function, journal: JournalTable) -> None:
        table = journal.table.table_arn
        fn.add_to_role_policy(iam.PolicyStatement(actions=TABLE_ACTIONS, resources=[table]))
        fn.add_to_role_policy(iam.PolicyStatement(actions=["dynamodb:Query"], resources=[f"{table}/index/*"]))

    @staticmethod
    def _grant_wakes(fn: lambda_.Function, wake: WakePath, role: Role) -> None:
        # Every function wakes runs (start, signal, resume); the reconciler, in the worker,
        # reads the queue's backlog.
        sends = ["sqs:SendMessage", "sqs:GetQueueAttributes"] if role is WORKER else ["sqs:SendMessage"]
        fn.add_to_role_policy(iam.PolicyStatement(actions=sends, resources=[wake.queue.queue_arn]))
        if role not in (WORKER, RUNNER, FETCH):
            # A cancel drops the run's schedule; the worker and a request's eager activation
            # (AwsRuntime.eager, in fetch) park a run and set one.
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["scheduler:DeleteSchedule"], resources=[wake.schedules_arn])
            )
            return
        Functions._grant_timers(fn, wake)

    @staticmethod
    def _grant_database(fn: lambda_.Function, database: Database) -> None:
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=DATA_API_ACTIONS, resources=[database.cluster.cluster_arn])
        )
        secret = database.cluster.secret
        assert secret is not None, "the cluster's credentials are generated"
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[secret.secret_arn])
        )

    @staticmethod
    def _grant_timers(fn: lambda_.Function, wake: WakePath) -> None:
        # A parked run sets, moves or drops its one schedule in the project's group; a
        # cancel anywhere drops it. Schedules carry the Scheduler role, which the function
        # passes on.
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"],
                resources=[wake.schedules_arn],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[wake.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )

    @staticmethod
    def _grant_secrets(fn: lambda_.Function, names: list[str]) -> None:
        if not names:
            return
        stack = Stack.of(fn)
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:UpdateSecretVersionStage"],
                resources=[
                    stack.format_arn(
                        service="secretsmanager",
                        resource="secret",
                        resource_name=f"{stack.stack_name}/{name}-*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for name in names
                ],
            )
        )
