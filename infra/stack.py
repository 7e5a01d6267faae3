"""The stack of one lunaflow project: each capability is a construct; this wires them."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra import constants, memory
from infra.bundling import digest
from infra.capabilities.alarms import Alarms
from infra.capabilities.api import FunctionUrlIngress, HttpApi
from infra.capabilities.console import Console
from infra.capabilities.database import Database
from infra.capabilities.functions import Functions
from infra.capabilities.gate import DeployGate
from infra.capabilities.journal import JournalTable
from infra.capabilities.queues import UserQueues
from infra.capabilities.schedules import Schedules
from infra.capabilities.values import ValuesBucket
from infra.capabilities.wake import WakePath
from infra.settings import Settings
from runtime.aws.contract import RECONCILE_EVENT, WARM_EVENT, Output
from runtime.aws.invocation import too_long as steps_too_long
from runtime.platform.describe import describe
from runtime.store.dynamodb import INDEXES


class ProjectError(Exception):
    pass


class LunaflowStack(Stack):
    def __init__(self, scope: Construct, id: str, *, project: Path, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        needs = describe(project)
        too_long = steps_too_long(needs.root)
        if too_long:
            raise ProjectError("\n".join(too_long))
        refused = memory.too_large(needs.root, needs.memory_bytes)
        if refused:
            raise ProjectError(refused)
        self.secrets = needs.secrets
        if len(needs.databases) > 1:
            raise ProjectError(
                f"project {needs.name} declares databases {', '.join(needs.databases)}; a deployment "
                "has one Aurora database — merge them into one database with several tables"
            )
        self.journal = JournalTable(self, "Journal")
        self.values = ValuesBucket(self, "Values")
        self.wake = WakePath(self, "Wake")
        self.queues = UserQueues(self, "Queues", needs)
        self.schedules = Schedules(self, "Schedules", needs, self.wake)
        self.settings = Settings.from_context(self.node)
        self.database = (
            Database(
                self,
                "Database",
                needs.databases,
                deletion_protection=self.settings.database_deletion_protection,
            )
            if needs.databases
            else None
        )
        self.functions = Functions(
            self,
            "Functions",
            project=needs.root,
            journal=self.journal,
            values=self.values,
            wake=self.wake,
            queues=self.queues,
            secrets=needs.secrets,
            database=self.database,
            handled_queues=needs.queues,
            settings=self.settings,
            memory_mb=memory.function_memory_mb(needs.memory_bytes),
        )
        self.gate = DeployGate(
            self,
            "DeployGate",
            functions=self.functions,
            journal=self.journal,
            values=self.values,
            digest=digest(needs.root),
            version=needs.version,
            force=self.settings.force,
        )
        fetch = self.functions.live["Fetch"]
        self.api: HttpApi | FunctionUrlIngress = (
            FunctionUrlIngress(self, "Url", fetch)
            if self.settings.ingress == "url"
            else HttpApi(self, "Http", fetch)
        )
        events.Rule(
            self,
            "Reconcile",
            schedule=events.Schedule.rate(Duration.minutes(constants.RECONCILE_MINUTES)),
            targets=[
                targets.LambdaFunction(
                    self.functions.live["Worker"], event=events.RuleTargetInput.from_object(RECONCILE_EVENT)
                ),
                targets.LambdaFunction(
                    self.functions.live["Runner"], event=events.RuleTargetInput.from_object(WARM_EVENT)
                ),
            ],
            description="Re-send wakes that waited over a minute (a lost message heals); keep a runner warm",
        )
        self.schedules.grant_console(self.functions.console)
        self.console = Console(
            self, "Console", console=self.functions.console, functions=self.functions.functions
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            functions=self.functions.functions,
            dead_letters={"wake": self.wake.dead_letters, **self.queues.dead_letters},
            wake_queue=self.wake.queue,
            table=self.journal.table,
            indexes=list(INDEXES),
            email=self.settings.alarm_email,
        )
        CfnOutput(self, Output.API_URL, value=self.api.url, description="The project's HTTP endpoint")
        CfnOutput(
            self, Output.TABLE_NAME, value=self.journal.table.table_name, description="Runs and journals"
        )
        CfnOutput(self, Output.DASHBOARD_URL, value=self.console.url, description="The console in CloudWatch")
        CfnOutput(
            self, "AlarmTopicArn", value=self.alarms.topic.topic_arn, description="Every alarm's action"
        )
        CfnOutput(self, Output.WAKE_QUEUE_URL, value=self.wake.queue.queue_url)
        CfnOutput(self, Output.WAKE_QUEUE_ARN, value=self.wake.queue.queue_arn)
        CfnOutput(self, Output.SCHEDULER_GROUP, value=str(self.wake.group.name))
        CfnOutput(self, Output.SCHEDULER_ROLE_ARN, value=self.wake.role.role_arn)
        CfnOutput(
            self,
            Output.VALUES_BUCKET,
            value=self.values.bucket.bucket_name,
            description="Values too large for an item",
        )
