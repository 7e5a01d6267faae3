"""``cdk synth`` / ``cdk deploy`` entry point: ``-c project=path`` picks the project."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, Python puts infra/ first on the path; the repository root is wanted.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from aws_cdk import App, Environment  # noqa: E402

from infra import constants  # noqa: E402
from infra.nag import check  # noqa: E402
from infra.stack import LunaflowStack  # noqa: E402
from runtime.aws import contract  # noqa: E402


def stack_name(project: Path) -> str:
    """lunaflow-<folder> (``runtime.aws.contract.stack_name``, which the CLI's ``--aws`` reads)."""
    return contract.stack_name(project.name)


def build(app: App) -> LunaflowStack:
    project = Path(str(app.node.try_get_context("project") or constants.DEFAULT_PROJECT))
    if not project.is_absolute():
        project = constants.REPO_ROOT / project
    name = str(app.node.try_get_context("stack") or stack_name(project))
    env = Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
    )
    stack = LunaflowStack(app, name, project=project, env=env)
    check(app, stack)
    return stack


if __name__ == "__main__":
    app = App(outdir=os.environ.get("LUNAFLOW_CDK_OUT"))
    build(app)
    app.synth()
