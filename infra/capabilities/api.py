"""The way HTTP reaches the fetch function: an API Gateway HTTP API (every route, with
throttling and access logs), or with ``-c ingress=url`` a Lambda Function URL (no charge per
request of its own; no throttle but the function's reserved concurrency; no access log)."""

from __future__ import annotations

from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import constants

ACCESS_LOG_FORMAT = (
    '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","time":"$context.requestTime",'
    '"method":"$context.httpMethod","path":"$context.path","status":"$context.status",'
    '"latency":"$context.responseLatency","integrationError":"$context.integrationErrorMessage"}'
)


class HttpApi(Construct):
    def __init__(self, scope: Construct, id: str, fetch: lambda_.IFunction) -> None:
        super().__init__(scope, id)
        self.api = apigw.HttpApi(
            self,
            "Api",
            default_integration=integrations.HttpLambdaIntegration("Fetch", fetch),
            description='lunaflow: the project\'s on "fetch" routes and signals',
        )
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=constants.log_retention())
        stage = self.api.default_stage.node.default_child  # type: ignore[union-attr]
        assert isinstance(stage, apigw.CfnStage)
        stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn, format=ACCESS_LOG_FORMAT
        )
        stage.default_route_settings = apigw.CfnStage.RouteSettingsProperty(
            throttling_burst_limit=constants.API_THROTTLE_BURST,
            throttling_rate_limit=constants.API_THROTTLE_RATE,
        )

    @property
    def url(self) -> str:
        return str(self.api.api_endpoint)


class FunctionUrlIngress(Construct):
    """A public Function URL on the fetch function's live alias. Like the HTTP API it asks no
    credentials (the project's fetch handler decides who may do what); it carries the same
    payload (format 2.0), so the handler is the same."""

    def __init__(self, scope: Construct, id: str, fetch: lambda_.IFunction) -> None:
        super().__init__(scope, id)
        self.function_url = lambda_.FunctionUrl(
            self, "Url", function=fetch, auth_type=lambda_.FunctionUrlAuthType.NONE
        )

    @property
    def url(self) -> str:
        return str(self.function_url.url)
