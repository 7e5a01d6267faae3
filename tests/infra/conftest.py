"""Offline ``cdk synth`` of lunaflow stacks, once per test session (synthesis is slow).

``auction`` synthesizes examples/auction exactly as ``cdk synth`` does (``infra.app.build``:
the stack, cdk-nag, local aarch64 bundling of the real requirements). ``queue_project``
synthesizes tests/projects/infra_queue (a user queue, a send-only queue, a secret); its
bundle installs one tiny wheel instead of the real requirements, since its tests look at the
template, not the asset. Its synthesis may fail cdk-nag: the template is still written, so
it is read from the cloud assembly and the failure is kept for the test that asks for it.

There is deliberately no tests/infra/__init__.py: with one, pytest would import this folder
as the package ``infra`` and shadow the CDK app's ``infra`` package.

``Synth`` wraps one synthesized stack with the lookups the tests share; ``render`` turns
CloudFormation intrinsics into readable strings (``<Ref:X>``, ``<GetAtt:X.Arn>``, joins
concatenated) so policies, environments and the dashboard body compare as text.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from constructs import IConstruct  # noqa: E402

from infra import constants  # noqa: E402
from infra.app import build  # noqa: E402
from infra.stack import LunaflowStack  # noqa: E402

REPO = constants.REPO_ROOT
AUCTION = REPO / "examples" / "auction"
QUEUE_PROJECT = REPO / "tests" / "projects" / "infra_queue"
QUEUE_STACK = "lunaflow-infra-queue"
# The operator's settings as `cdk deploy -c name=value` passes them (strings), on the queue project.
QUEUE_SETTINGS = {
    "alarmEmail": "ops@example.com",
    "queueConcurrency": "30",
    "queueMaxConcurrency": "15",
    "consoleConcurrency": "none",
    "tracing": "true",
}
TINY_REQUIREMENTS = ["six==1.17.0"]  # a small pure-Python wheel: pip runs, quickly


def render(value: Any) -> Any:
    """CloudFormation value -> the same value with intrinsics as readable strings."""
    if isinstance(value, list):
        return [render(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return f"<Ref:{value['Ref']}>"
        if set(value) == {"Fn::GetAtt"}:
            target, attribute = value["Fn::GetAtt"]
            return f"<GetAtt:{target}.{attribute}>"
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(render(p)) for p in parts)
        return {k: render(v) for k, v in value.items()}
    return value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass
class Synth:
    stack: LunaflowStack
    outdir: Path
    template: dict[str, Any]
    error: Exception | None  # what app.synth() raised (cdk-nag), if anything

    @property
    def assertions(self) -> Template:
        return Template.from_json(self.template)

    @property
    def name(self) -> str:
        return self.stack.stack_name

    def id(self, construct: IConstruct) -> str:
        """The logical id of a construct's CloudFormation resource."""
        child = construct.node.default_child or construct
        return str(self.stack.resolve(self.stack.get_logical_id(child)))  # type: ignore[arg-type]

    def resource(self, logical_id: str) -> dict[str, Any]:
        resource: dict[str, Any] = self.template["Resources"][logical_id]
        return resource

    def props(self, logical_id: str) -> dict[str, Any]:
        return render(self.resource(logical_id).get("Properties", {}))  # type: ignore[no-any-return]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        """Logical id -> rendered properties of every resource of one type."""
        return {
            k: render(v.get("Properties", {}))
            for k, v in self.template["Resources"].items()
            if v["Type"] == kind
        }

    def functions(self) -> dict[str, str]:
        """Role name (Fetch, Worker, Queue, Console) -> the function's logical id."""
        return {name: self.id(fn) for name, fn in self.stack.functions.functions.items()}

    def role_statements(self, role_logical_id: str) -> list[dict[str, Any]]:
        """Every statement of every inline policy attached to a role, rendered."""
        statements: list[dict[str, Any]] = []
        for props in self.of_type("AWS::IAM::Policy").values():
            if f"<Ref:{role_logical_id}>" in props["Roles"]:
                statements.extend(props["PolicyDocument"]["Statement"])
        for policy in self.props(role_logical_id).get("Policies", []):
            statements.extend(policy["PolicyDocument"]["Statement"])
        return statements

    def function_role(self, function_logical_id: str) -> str:
        role = self.props(function_logical_id)["Role"]
        assert role.startswith("<GetAtt:") and role.endswith(".Arn>"), role
        return str(role[len("<GetAtt:") : -len(".Arn>")])

    def function_statements(self, function_logical_id: str) -> list[dict[str, Any]]:
        return self.role_statements(self.function_role(function_logical_id))

    def asset_dir(self, function_logical_id: str) -> Path:
        """The bundled asset folder in the cloud assembly that a function's code points at."""
        key = self.resource(function_logical_id)["Properties"]["Code"]["S3Key"]
        assert key.endswith(".zip"), key
        return self.outdir / f"asset.{key[: -len('.zip')]}"


def _synth(outdir: Path, context: dict[str, str], requirements: list[str] | None) -> Synth:
    with pytest.MonkeyPatch.context() as mp:
        # An account or region from the developer's shell would change the template's ARNs.
        mp.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
        mp.delenv("CDK_DEFAULT_REGION", raising=False)
        if requirements is not None:
            mp.setattr(constants, "BUNDLE_SOURCE", requirements)
        app = App(outdir=str(outdir), context=context)
        stack = build(app)
        error: Exception | None = None
        try:
            app.synth()
        except Exception as e:  # cdk-nag findings make synth raise; the template is written first
            error = e
    template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text(encoding="utf-8"))
    return Synth(stack=stack, outdir=outdir, template=template, error=error)


@pytest.fixture(scope="session")
def auction(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """examples/auction, synthesized as `cdk synth` does it (real bundle, cdk-nag on)."""
    synth = _synth(tmp_path_factory.mktemp("cdk-auction"), {"project": "examples/auction"}, None)
    if synth.error is not None:
        raise synth.error
    yield synth


@pytest.fixture(scope="session")
def queue_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """tests/projects/infra_queue: on "queue" ("emails"), queue "audit" (send only), secret
    "api-key"; synthesized with an alarm email and concurrency settings (QUEUE_SETTINGS)."""
    yield _synth(
        tmp_path_factory.mktemp("cdk-queue"),
        {"project": "tests/projects/infra_queue", "stack": QUEUE_STACK, **QUEUE_SETTINGS},
        TINY_REQUIREMENTS,
    )


@pytest.fixture(scope="session")
def schedules_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """tests/projects/infra_schedules: three schedules (a cron in Europe/Paris with an input, a
    15-minute rate with a start, a weekday cron)."""
    yield _synth(
        tmp_path_factory.mktemp("cdk-schedules"),
        {"project": "tests/projects/infra_schedules", "stack": "lunaflow-infra-schedules"},
        TINY_REQUIREMENTS,
    )


@pytest.fixture(scope="session")
def eager_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """tests/projects/aws_eager (runs advanced where their request lands), synthesized."""
    yield _synth(
        tmp_path_factory.mktemp("cdk-eager"),
        {"project": "tests/projects/aws_eager", "stack": "lunaflow-infra-eager"},
        TINY_REQUIREMENTS,
    )
