"""The ``lunaflow`` command as a real process, on the worktree's code.

``cli(*args)`` runs ``python -m runtime.cli ARGS`` from the repository root (so
``runtime`` is this checkout's, whatever the virtualenv has installed), stdin closed,
output captured, bounded in time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI_S = 60.0  # bound on one command


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout ---\n{self.out[-3000:]}\n--- stderr ---\n{self.err[-3000:]}"


def worktree_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess that must run this checkout: ``runtime`` from the
    repository root first on the path, this interpreter's folder first on PATH (so a bare
    ``lunaflow`` or ``python3`` in a shell command is the virtualenv's)."""
    env = {k: v for k, v in os.environ.items() if k != "LUNAFLOW_PROJECT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **(extra or {})}


def cli(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = CLI_S,
) -> Done:
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        env=worktree_env(env),
    )
    return Done(proc.returncode, proc.stdout, proc.stderr)


def in_process(args: list[str]) -> Done:
    """``cli.main(args)`` in this process, its output captured: for a module-scoped fixture,
    which has no ``monkeypatch`` (a real process would import the code again, seconds a call)."""
    import io

    import pytest
    from rich.console import Console

    from runtime import cli as command

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(command.output, "out", Console(file=out, highlight=False, soft_wrap=True, width=400))
        m.setattr(command.output, "err", Console(file=err, highlight=False, soft_wrap=True, width=400))
        code = command.main(args)
    return Done(code, out.getvalue(), err.getvalue())


def copy_kept(source: Path, target: Path) -> Path:
    """A copy of a folder with its owners and modes kept (``cp -a``): a PostgreSQL cluster in
    it belongs to the server's own user when the tests run as root."""
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    return target
