"""Bundling the Lambda code without Docker: pip installs the manylinux aarch64 wheels pinned
in infra/bundle.lock (each with its hash; refresh with ``python3 -m infra.lock``) into the
asset folder beside runtime/, functions/ and the project. The asset hash is taken from the
output, so a changed dependency or script is never deployed stale."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra import constants


@jsii.implements(ILocalBundling)
class LocalBundler:
    def __init__(self, project: Path, requirements: Path | list[str]) -> None:
        self.project = project
        self.requirements = requirements

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        bundle(Path(output_dir), self.project, self.requirements)
        return True


def bundle(out: Path, project: Path, requirements: Path | list[str]) -> None:
    """Fill ``out`` with the wheels, the engine, the handlers and the project (as ``project/``).
    ``requirements`` is a lock file (every distribution pinned with its hash: nothing else is
    resolved, a changed wheel is refused) or a list of requirements."""
    if isinstance(requirements, Path):
        wanted = ["--require-hashes", "--no-deps", "--requirement", str(requirements)]
    else:
        wanted = list(requirements)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            # Byte code from this machine's Python would change the asset hash on every synth,
            # and Lambda's Python 3.12 would not read it anyway.
            "--no-compile",
            *constants.pip_wheel_args(),
            "--target",
            str(out),
            *wanted,
        ],
        check=True,
    )
    trim(out)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".lunaflow", "tests")
    for package in ("runtime", "functions"):
        shutil.copytree(constants.REPO_ROOT / package, out / package, ignore=ignore, dirs_exist_ok=True)
    shutil.copytree(project, out / "project", ignore=ignore, dirs_exist_ok=True)


def trim(out: Path) -> None:
    """Leave out what no handler loads: lupa's other Lua builds (the engine imports
    ``lupa.lua54`` alone) and botocore's models of services no client is made for."""
    for build in (out / "lupa").glob("*.so"):
        if build.name.split(".")[0] != constants.LUA_BUILD:
            build.unlink()
    models = out / "botocore" / "data"
    if models.is_dir():
        for service in models.iterdir():
            if service.is_dir() and service.name not in constants.BOTOCORE_SERVICES:
                shutil.rmtree(service)


def code(project: Path) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(constants.REPO_ROOT / "functions"),  # the source path only seeds the asset; bundling fills it
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused-local-bundling"),
            local=LocalBundler(project, constants.BUNDLE_SOURCE),
        ),
    )


def digest(project: Path) -> str:
    """A hash of what the bundle runs as code (the engine, the handlers, the project's files,
    the lock): the deploy gate compares the one its resource was given with the one its own
    bundle was built with, to tell a forward update from a rollback."""
    h = hashlib.sha256()
    roots = [("runtime", constants.REPO_ROOT / "runtime"), ("functions", constants.REPO_ROOT / "functions")]
    roots.append(("project", project))
    for label, root in roots:
        for path in sorted(root.rglob("*")):
            parts = path.relative_to(root).parts
            if not path.is_file() or any(p in ("__pycache__", ".lunaflow", "tests") for p in parts):
                continue
            if path.suffix == ".pyc":
                continue
            h.update(f"{label}/{'/'.join(parts)}\0".encode())
            h.update(path.read_bytes())
    if isinstance(constants.BUNDLE_SOURCE, Path):
        h.update(constants.BUNDLE_SOURCE.read_bytes())
    else:
        h.update("\n".join(constants.BUNDLE_SOURCE).encode())
    return h.hexdigest()[:32]
