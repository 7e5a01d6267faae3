"""Reaching a deployed stack from a laptop: the CLI's ``--aws`` mode reads the stack's
CloudFormation outputs (what ``cdk deploy`` printed) to find its table, queue and timers."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from runtime.aws.config import AwsConfig
from runtime.aws.contract import REQUIRED_OUTPUTS, Output
from runtime.errors import LunaflowError


def config_from_stack(cloudformation: Any, stack: str, project: str) -> AwsConfig:
    try:
        found = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as e:
        reason = e.response.get("Error", {}).get("Message", e)
        raise LunaflowError(
            f"stack '{stack}' could not be read ({reason}); deploy it with `npx cdk deploy`, or name it "
            "with --stack (default: lunaflow-<project folder name>)"
        ) from e
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found[0].get("Outputs", [])}
    missing = [k for k in REQUIRED_OUTPUTS if k not in outputs]
    if missing:
        raise LunaflowError(f"stack '{stack}' has no output {', '.join(missing)}; is it a lunaflow stack?")
    return AwsConfig(
        project=project,
        table=outputs[Output.TABLE_NAME],
        wake_queue_url=outputs[Output.WAKE_QUEUE_URL],
        wake_queue_arn=outputs[Output.WAKE_QUEUE_ARN],
        scheduler_group=outputs[Output.SCHEDULER_GROUP],
        scheduler_role_arn=outputs[Output.SCHEDULER_ROLE_ARN],
        values_bucket=outputs[Output.VALUES_BUCKET],
        secrets_prefix=f"{stack}/",
    )
