"""Issue 21, point 5: the ``--aws`` commands with no AWS region or no credentials print one
line saying what is missing and how to give it, and exit 1; no botocore traceback.

Both cases fail before any request leaves the machine (no region: no endpoint to build; no
credentials: nothing to sign with), and the instance metadata lookup is turned off, so the
test sends nothing anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT, worktree_env

AUCTION = str(ROOT / "examples" / "auction")

COMMANDS = [
    ["runs", "--aws", "-p", AUCTION],
    ["show", "sale-lot-42", "--aws", "-p", AUCTION],
    ["check", AUCTION, "--aws"],
    ["signal", "sale-lot-42", "paid", "--aws", "-p", AUCTION],
    ["secret", "set", "api-key", "v", "--aws", "-p", AUCTION],
    ["deploy", AUCTION, "--dry-run"],
]


def _no_aws_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in worktree_env().items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        HOME=str(tmp_path),
        **extra,
    )
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_no_region_is_one_line_and_exit_1(args: list[str], tmp_path: Path) -> None:
    done = _run(args, _no_aws_env(tmp_path), ROOT)
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "no AWS region" in lines[0] and "AWS_REGION" in lines[0], lines[0]


@pytest.mark.parametrize("args", COMMANDS[:3], ids=lambda a: a[0])
def test_no_credentials_is_one_line_and_exit_1(args: list[str], tmp_path: Path) -> None:
    done = _run(args, _no_aws_env(tmp_path, AWS_DEFAULT_REGION="eu-west-1"), ROOT)
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "no AWS credentials" in lines[0] and "aws configure" in lines[0], lines[0]


def test_the_environment_really_has_no_aws_settings(tmp_path: Path) -> None:
    """The two tests above would pass vacuously if boto3 found settings elsewhere."""
    env = _no_aws_env(tmp_path)
    assert not any(k in env for k in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID"))
    assert not os.path.exists(env["AWS_CONFIG_FILE"])


@pytest.mark.parametrize("folder", ["my_shop", "auction.v2", "shop 2"])
def test_aws_commands_look_for_the_stack_cdk_deploy_names(folder: str, tmp_path: Path) -> None:
    """``cdk deploy`` names the stack of a folder ``my_shop`` ``lunaflow-my-shop`` (what
    CloudFormation refuses made '-'); ``--aws`` looked for ``lunaflow-my_shop``, a stack that
    cannot exist."""
    from infra.app import stack_name

    project = tmp_path / folder
    project.mkdir()
    (project / "main.lua").write_text('workflow "w" (function(wf) return 1 end)\n', encoding="utf-8")
    done = _run(["runs", "--aws", "-p", str(project)], _no_aws_env(tmp_path), ROOT)
    assert done.returncode == 1, (done.returncode, done.stderr)
    expected = stack_name(project)
    assert expected == "lunaflow-" + folder.replace("_", "-").replace(".", "-").replace(" ", "-")
    assert f"stack '{expected}'" in done.stderr, done.stderr
