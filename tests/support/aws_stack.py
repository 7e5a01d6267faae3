"""An ``AwsPlatform``'s deployment behind a CloudFormation stack, so a CLI process given
``--aws --stack NAME`` finds it through the stack's outputs, as it finds one `cdk deploy`
made; and the environment that reaches the harness's moto server."""

from __future__ import annotations

import json

from runtime.aws.contract import Output
from runtime.testing import AwsPlatform


def put_behind_stack(p: AwsPlatform, name: str) -> None:
    outputs = {
        Output.TABLE_NAME: p.config.table,
        Output.WAKE_QUEUE_URL: p.config.wake_queue_url,
        Output.WAKE_QUEUE_ARN: p.config.wake_queue_arn,
        Output.SCHEDULER_GROUP: p.config.scheduler_group,
        Output.SCHEDULER_ROLE_ARN: p.config.scheduler_role_arn,
        Output.VALUES_BUCKET: p.config.values_bucket,
    }
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {str(k): {"Value": v} for k, v in outputs.items()},
    }
    p.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def moto_env(p: AwsPlatform) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": p.endpoint,
        "AWS_REGION": p.region,
        "AWS_DEFAULT_REGION": p.region,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
