"""Bundling the Lambda code without Docker: pip installs the manylinux aarch64 wheels pinned
in infra/bundle.lock (each with its hash; refresh with ``python3 -m infra.lock``) into the
asset folder beside runtime/, functions/ and the project, and a CPython of Lambda's minor
version compiles the whole folder to bytecode (Lambda's /var/task is read-only: a bundle
without bytecode compiles every module it imports on every cold start). The asset hash is
taken from the output, so a changed dependency or script is never deployed stale."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra import constants

# The interpreter that compiles the bundle's bytecode, when set (alone: nothing else is tried).
PYTHON_VARIABLE = "LUNAFLOW_BUNDLE_PYTHON"
# Where Lambda unpacks the bundle: the path the bytecode names (tracebacks show it), in place of
# the temporary folder bundling ran in, which changes every synth and would change the hash.
TASK_ROOT = "/var/task"


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
            # pip would compile with this machine's Python, which Lambda's may not be, and with
            # timestamps; compile_bytecode() does it for Lambda's Python below.
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
    compile_bytecode(out)


def compile_bytecode(out: Path) -> bool:
    """Compile every .py in ``out`` with a CPython of Lambda's minor version (bytecode depends
    on that alone, not on the CPU), as unchecked-hash .pyc files: zip entries keep times to
    2 s, so timestamp ones would be checked against their sources and thrown away; these are
    used as they are. They name ``/var/task/...``, not ``out``, so two bundles of the same
    inputs are byte for byte the same wherever they were built. Without such a Python, prints
    one line saying so and leaves the bundle as source only. Returns whether it compiled."""
    python, why = lambda_python()
    if python is None:
        print(
            f"lunaflow bundling: the Lambda bundle ships source only, without bytecode, so every "
            f"cold start compiles its modules (more than twice as slow to start): no CPython "
            f"{constants.PYTHON_VERSION} found ({why}). Install CPython {constants.PYTHON_VERSION} "
            f"or set {PYTHON_VARIABLE} to one.",
            file=sys.stderr,
            flush=True,
        )
        return False
    # No PYTHON* setting of this shell (PYTHONPYCACHEPREFIX would move the files, PYTHONOPTIMIZE
    # rename them); a fixed hash seed, so nothing the compiler orders by hash varies between runs.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    command = [python, "-s", "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash"]
    done = subprocess.run(
        [*command, "-s", str(out), "-p", TASK_ROOT, str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        failed = re.findall(r"^\*\*\* Error compiling '([^']+)'", done.stdout, re.M)
        if not failed:
            raise RuntimeError(f"{python} -m compileall failed on {out}:\n{done.stdout}{done.stderr}")
        names = [Path(f).relative_to(out).as_posix() if Path(f).is_relative_to(out) else f for f in failed]
        print(
            f"lunaflow bundling: CPython {constants.PYTHON_VERSION} could not compile {len(names)} "
            f"of the bundle's files, shipped as source only (Lambda's Python refuses them too, if "
            f"they are imported): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}",
            file=sys.stderr,
            flush=True,
        )
    return True


def lambda_python() -> tuple[str | None, str]:
    """A CPython of Lambda's minor version (``constants.PYTHON_VERSION``) to compile with: the
    one ``LUNAFLOW_BUNDLE_PYTHON`` names (a path or a command; when set, nothing else is
    tried), else ``python3.12`` on PATH, else the newest 3.12 in pyenv's versions folder. Each
    is run to check what it is (a pyenv shim on PATH may have no 3.12 selected). Returns its
    path and "", or None and why none would do."""
    version = constants.PYTHON_VERSION
    command = f"python{version}"
    override = os.environ.get(PYTHON_VARIABLE)
    candidates: list[tuple[str, str | None]] = []  # (what it is, its path or None)
    reasons: list[str] = []
    if override:
        candidates.append((f"{PYTHON_VARIABLE}={override}", shutil.which(override)))
    else:
        reasons.append(f"{PYTHON_VARIABLE} unset")
        candidates.append((f"{command} on PATH", shutil.which(command)))
        versions = Path(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")) / "versions"
        found = [v / "bin" / command for v in versions.glob(f"{version}.*")]
        found = sorted((p for p in found if p.is_file()), key=_version_key, reverse=True)
        candidates += [(str(p), str(p)) for p in found]
        if not found:
            candidates.append((f"pyenv's {versions}/{version}.*", None))
    for label, path in candidates:
        problem = "not found" if path is None else _not_lambdas_python(path, version)
        if problem is None:
            assert path is not None
            return path, ""
        reasons.append(f"{label}: {problem}")
    return None, "; ".join(reasons)


def _version_key(python: Path) -> list[int]:
    """pyenv's .../versions/3.12.10/bin/python3.12 -> [3, 12, 10]: 3.12.10 sorts after 3.12.9."""
    return [int(n) for n in re.findall(r"\d+", python.parent.parent.name)]


def _not_lambdas_python(path: str, version: str) -> str | None:
    """Why the interpreter at ``path`` is not a CPython ``version``, or None if it is."""
    probe = "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"
    try:
        done = subprocess.run([path, "-I", "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"does not run ({e})"
    if done.returncode != 0:
        said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "")
        return f"exits {done.returncode}" + (f" ({said})" if said else "")
    got = done.stdout.strip()
    return None if got == f"cpython {version}" else f"is {got or 'silent'}"


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
