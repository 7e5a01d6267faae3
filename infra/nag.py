"""cdk-nag's AwsSolutions checks at every synth; each acknowledged finding has its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Token, Validations
from cdk_nag import AwsSolutionsChecks

from infra.stack import LunaflowStack
from runtime.aws.contract import TIMER_PREFIX

PYTHON_312 = (
    "Python 3.12 is chosen deliberately: the bundle's wheels (lupa for aarch64) are built for cp312, and "
    "moving a runtime that replays journals is a tested change, not an automatic one"
)
BASIC_EXECUTION = (
    "AWSLambdaBasicExecutionRole only lets a function write its own CloudWatch Logs; it is AWS's "
    "least-privilege logging grant"
)
XRAY = (
    "X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions; tracing needs '*'"
)
TABLE_INDEXES = (
    "read/write on the journal table includes its indexes (runs by status, workflow, parent; timers; "
    "wakes; published values), which the console, the CLI and the reconciler query; the wildcard covers "
    "only this table's indexes"
)
SCHEDULES = (
    "a run's timer schedule is named from its run id, unknown at deploy time; the wildcard is limited "
    "to this stack's own schedule group and the runs' lf- names (not the declared lfs- schedules)"
)
NO_AUTHORIZER = (
    'the API is the project\'s public HTTP surface; its on "fetch" handler decides who may do what '
    "(e.g. with Jwt.verify), as a Cloudflare Worker's fetch handler would"
)
SECRET_SUFFIX = (
    "Secrets Manager appends six random characters to every secret's ARN, so a grant on one named "
    "secret must end in '-*'; the wildcard matches only that secret's own versions"
)
VALUES_OBJECTS = (
    "values are S3 objects keyed by a hash of their run's id, unknown at deploy time; the wildcard is "
    "limited to the values bucket's runs/ prefix, with put, get and delete only"
)
CODE_OBJECTS = (
    "each code version a pinned run may need is one S3 object named by the version's hash, unknown "
    "at deploy time; the wildcard is limited to the values bucket's code/ prefix: the worker and the "
    "runner read, the deploy gate reads and writes"
)
VALUES_ACCESS_LOGS = (
    "the values bucket is read and written only by this stack's functions, which log every run "
    "activation; S3 server access logs would repeat each journal read at another bucket's cost"
)
NO_ROTATION = (
    "the Aurora credentials are used only by the RDS Data API from Lambda; rotating them needs a "
    "rotation function in the VPC, which a project adds with cluster.add_rotation_single_user() when it "
    "needs it"
)
DELETION_PROTECTION = (
    "deletion protection is a deployment setting (-c databaseDeletionProtection=true), off by default so "
    "that cdk destroy ends cleanly; the cluster's removal policy keeps a final snapshot either way"
)


def _shown(value: str, pseudo: str) -> str:
    """How cdk-nag prints an ARN part: a pseudo parameter while unresolved, else the value
    (``cdk synth`` with a configured region resolves it; a test synth does not)."""
    return f"<{pseudo}>" if Token.is_unresolved(value) else value


def accepted(stack: LunaflowStack) -> dict[str, str]:
    """Rule ids (as cdk-nag names them) -> why they do not apply."""
    table = stack.get_logical_id(stack.journal.table.node.default_child)  # type: ignore[arg-type]
    bucket = stack.get_logical_id(stack.values.bucket.node.default_child)  # type: ignore[arg-type]
    region = _shown(stack.region, "AWS::Region")
    account = _shown(stack.account, "AWS::AccountId")
    group = f"{stack.stack_name}-timers"
    schedules = f"arn:<AWS::Partition>:scheduler:{region}:{account}:schedule/{group}/{TIMER_PREFIX}*"
    rules = {
        "AwsSolutions::AwsSolutions-L1": PYTHON_312,
        "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AWSLambdaBasicExecutionRole]": BASIC_EXECUTION,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::<{table}.Arn>/index/*]": TABLE_INDEXES,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::{schedules}]": SCHEDULES,
        "AwsSolutions::AwsSolutions-APIG4": NO_AUTHORIZER,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket}.Arn>/runs/*]": VALUES_OBJECTS,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket}.Arn>/code/*]": CODE_OBJECTS,
        "AwsSolutions::AwsSolutions-S1": VALUES_ACCESS_LOGS,
    }
    if stack.settings.tracing:
        rules["AwsSolutions::AwsSolutions-IAM5[Resource::*]"] = XRAY
    if stack.database is not None:
        rules["AwsSolutions::AwsSolutions-SMG4"] = NO_ROTATION
        if not stack.settings.database_deletion_protection:
            rules["AwsSolutions::AwsSolutions-RDS10"] = DELETION_PROTECTION
    for name in stack.secrets:
        arn = f"arn:<AWS::Partition>:secretsmanager:{region}:{account}:secret:{stack.stack_name}/{name}-*"
        rules[f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn}]"] = SECRET_SUFFIX
    return rules


def check(app: App, stack: LunaflowStack) -> None:
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    for rule, reason in accepted(stack).items():
        Validations.of(stack).acknowledge(Acknowledgment(id=rule, reason=reason))
