"""The deploy gate inside ``cdk deploy``: a custom resource, served by a function holding
the new code's bundle (``functions/gate.py``), that replays every in-flight run's journal
read-only; the functions' ``live`` aliases depend on it, so they move to the new versions
only after it answers SUCCESS. A divergence answers FAILED and CloudFormation rolls the
update back: the aliases never moved, so no run met the new code.

Order on an update: the functions' code and their new versions, then the check (its
properties name the versions and the code's digest, so it runs on every code change), then
the aliases. The check's function reads the table's items and the values bucket's objects;
it writes only run items' pins and each version's code (``[deploys] pin_runs``).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, CustomResource, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import constants
from infra.capabilities.functions import APPLICATION_LOG_LEVEL, LOG_FORMAT, SYSTEM_LOG_LEVEL, Functions
from infra.capabilities.journal import JournalTable
from infra.capabilities.values import ValuesBucket
from runtime.aws.contract import CODE_PREFIX, GATE_SERVICE_TIMEOUT_S, GATE_TIMEOUT_S, Env, Handler
from runtime.store.blobs import PREFIX

READ_ACTIONS = [f"dynamodb:{a}" for a in ("GetItem", "BatchGetItem", "Query")]
RESOURCE_TYPE = "Custom::LunaflowDeployGate"
REPORT_OUTPUT = "DeployGateReport"


class DeployGate(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        functions: Functions,
        journal: JournalTable,
        values: ValuesBucket,
        digest: str,
        version: str,
        force: bool,
    ) -> None:
        super().__init__(scope, id)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=constants.lambda_runtime(),
            architecture=lambda_.Architecture.ARM_64,
            code=functions.code,
            handler=Handler.GATE,
            memory_size=functions.memory_mb,
            timeout=Duration.seconds(GATE_TIMEOUT_S),
            environment={**functions.environment, Env.CODE_DIGEST: digest},
            description="lunaflow: the deploy gate (replays in-flight runs on the new code)",
            tracing=functions.tracing,
            logging_format=LOG_FORMAT,
            system_log_level_v2=SYSTEM_LOG_LEVEL,
            application_log_level_v2=APPLICATION_LOG_LEVEL,
            log_group=logs.LogGroup(self, "Logs", retention=constants.log_retention()),
        )
        table = journal.table.table_arn
        self.function.add_to_role_policy(iam.PolicyStatement(actions=READ_ACTIONS, resources=[table]))
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:Query"], resources=[f"{table}/index/*"])
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[values.bucket.arn_for_objects(f"{PREFIX}*")]
            )
        )
        # Pins (the run item's pin attribute) and each version's code: [deploys] pin_runs.
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[table])
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[values.bucket.arn_for_objects(f"{CODE_PREFIX}*")],
            )
        )
        self.resource = CustomResource(
            self,
            "Check",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            service_timeout=Duration.seconds(GATE_SERVICE_TIMEOUT_S),
            properties={
                "CodeDigest": digest,
                # The project's version (its scripts and settings): an update's old value names
                # the code runs may be pinned to (runtime/aws/versions.py).
                "ProjectDigest": version,
                "Versions": {name: alias.version.version for name, alias in functions.live.items()},
                "Force": "true" if force else "false",
            },
        )
        for alias in functions.live.values():
            alias.node.add_dependency(self.resource)
        CfnOutput(
            scope,
            REPORT_OUTPUT,
            value=self.resource.get_att_string("Report"),
            description="What the deploy gate found (with -c force=true: which runs the deploy breaks)",
        )
