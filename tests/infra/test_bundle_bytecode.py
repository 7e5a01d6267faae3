"""Bytecode in the Lambda bundle (issue 31.4, infra/bundling.py ``compile_bytecode``).

Lambda's /var/task is read-only: a bundle without .pyc files compiles every module it imports
on every cold start. Bundling compiles the whole bundle with a CPython of Lambda's minor
version (``constants.PYTHON_VERSION``), as unchecked-hash .pyc files (zip entries keep times to
2 s, so timestamp ones would be rechecked and thrown away) that name /var/task, not the
temporary folder bundling ran in: the asset hash is taken from the output, so two bundles of
the same inputs must be byte for byte the same. Without such a Python, bundling says so in one
line and ships source only.

The tests that need CPython 3.12 skip, saying why, where this machine has none (these
machines have 3.12.1 under pyenv); the fallback and the interpreter search run everywhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import FileSystem

from conftest import QUEUE_PROJECT, TINY_REQUIREMENTS, Synth
from infra import bundling, constants

VERSION = constants.PYTHON_VERSION
TAG = f"cpython-{VERSION.replace('.', '')}"
# Modules every handler loads: the handlers, their shared runtime, and the engine's core.
CORE = [
    "functions/fetch.py",
    "functions/worker.py",
    "functions/console.py",
    "functions/queue.py",
    "functions/gate.py",
    "functions/_runtime.py",
    "runtime/engine/sandbox.py",
]
MESSAGE = "lunaflow bundling:"

# Run by Lambda's CPython (a .pyc's code objects load only there): each .py under the folder,
# what its .pyc's header says and the file name its code carries.
READ_PYCS = r"""
import importlib.util, json, marshal, sys
from pathlib import Path
root = Path(sys.argv[1])
out = {}
for source in sorted(root.rglob("*.py")):
    pyc = Path(importlib.util.cache_from_source(str(source)))
    rel = source.relative_to(root).as_posix()
    if not pyc.is_file():
        out[rel] = None
        continue
    data = pyc.read_bytes()
    out[rel] = {
        "magic": data[:4] == importlib.util.MAGIC_NUMBER,
        "flags": int.from_bytes(data[4:8], "little"),
        "hash": data[8:16] == importlib.util.source_hash(source.read_bytes()),
        "filename": marshal.loads(data[16:]).co_filename,
    }
print(json.dumps(out))
"""


def pyc_of(source: Path) -> Path:
    return source.parent / "__pycache__" / f"{source.stem}.{TAG}.pyc"


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def python() -> str:
    """This machine's CPython of Lambda's minor version, found as bundling finds it."""
    found, why = bundling.lambda_python()
    if found is None:
        pytest.skip(f"no CPython {VERSION} here, so bundling ships no bytecode ({why})")
    return found


@pytest.fixture(scope="module")
def asset(auction: Synth, python: str) -> Path:
    """The auction's bundle as `cdk synth` leaves it in the cloud assembly."""
    folder = auction.asset_dir(auction.functions()["Fetch"])
    assert folder.is_dir(), folder
    return folder


@pytest.fixture(scope="module")
def pycs(asset: Path, python: str) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-I", "-c", READ_PYCS, str(asset)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_asset_holds_lambdas_bytecode_beside_every_module(asset: Path, pycs: dict[str, Any]) -> None:
    """Each handler, the engine, the wheels: every .py of the bundle has its
    __pycache__/<name>.cpython-312.pyc, and there is no other bytecode."""
    for module in CORE:
        assert pyc_of(asset / module).is_file(), module
    assert [name for name, pyc in pycs.items() if pyc is None] == []
    assert len(pycs) > 500  # the wheels' modules too, not only ours
    foreign = [p for p in asset.rglob("*.pyc") if not p.name.endswith(f".{TAG}.pyc")]
    assert foreign == []
    # About 7.6 MB for the 13 MB of sources (the zip Lambda fetches: about 4 MB -> 7.5 MB).
    assert sum(p.stat().st_size for p in asset.rglob("*.pyc")) < 10e6


def test_the_bytecode_is_unchecked_hash_and_matches_its_source(pycs: dict[str, Any]) -> None:
    """Header flags 0b01: hash-based, source not checked, so Lambda uses the .pyc as it is
    whatever time the zip gave its source; the hash is the source's, the magic Lambda's."""
    assert pycs
    wrong = {
        name: pyc for name, pyc in pycs.items() if not (pyc["magic"] and pyc["hash"] and pyc["flags"] == 0b01)
    }
    assert wrong == {}


def test_the_bytecode_names_lambdas_path_not_the_bundling_folder(pycs: dict[str, Any]) -> None:
    """Tracebacks on Lambda show /var/task/...; the folder bundling ran in (a new temporary one
    each synth) appears nowhere, or it would change the asset hash on every synth."""
    wrong = {name: pyc["filename"] for name, pyc in pycs.items() if pyc["filename"] != f"/var/task/{name}"}
    assert wrong == {}


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory, python: str) -> Iterator[tuple[Path, Path]]:
    """The same inputs bundled twice, into folders of different names and depths."""
    root = tmp_path_factory.mktemp("twice")
    one, two = root / "one", root / "a" / "much-longer-folder-name" / "two"
    for out in (one, two):
        bundling.bundle(out, QUEUE_PROJECT, TINY_REQUIREMENTS)
    yield one, two


def test_two_bundles_of_the_same_inputs_are_byte_identical(twice: tuple[Path, Path]) -> None:
    """The asset hash is the output's: bytecode that differed between two synths (a path, an
    order) would upload the bundle and update every function on each deploy."""
    one, two = twice
    first, second = files(one), files(two)
    compiled = [name for name in first if name.endswith(f".{TAG}.pyc")]
    assert "functions/__pycache__/fetch.cpython-312.pyc" in compiled
    assert len(compiled) == len([name for name in first if name.endswith(".py")])
    assert sorted(first) == sorted(second)
    assert [name for name in first if first[name] != second[name]] == []
    assert FileSystem.fingerprint(str(one)) == FileSystem.fingerprint(str(two))


def test_the_deploy_gates_digest_ignores_bytecode(tmp_path: Path) -> None:
    """digest() hashes the code the bundle runs, from its sources: bytecode beside them (a
    developer's, any Python's) must not move it, while a changed source does."""
    project = tmp_path / "project"
    shutil.copytree(QUEUE_PROJECT, project)
    before = bundling.digest(project)
    (project / "__pycache__").mkdir(exist_ok=True)
    (project / "__pycache__" / f"helper.{TAG}.pyc").write_bytes(b"bytecode")
    (project / "stray.pyc").write_bytes(b"bytecode")
    assert bundling.digest(project) == before
    (project / "helper.py").write_text("x = 1\n", encoding="utf-8")
    assert bundling.digest(project) != before  # the control


# --- without CPython 3.12 --------------------------------------------------------------------


def test_without_python_312_the_bundle_ships_source_only_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Bundling must not fail for want of an optimisation: it ships the sources and prints one
    line saying what, why and the fix."""
    monkeypatch.setenv(bundling.PYTHON_VARIABLE, str(tmp_path / "no-such-python"))
    out = tmp_path / "out"
    bundling.bundle(out, QUEUE_PROJECT, TINY_REQUIREMENTS)
    assert (out / "functions" / "fetch.py").is_file()
    assert (out / "runtime" / "engine" / "sandbox.py").is_file()
    assert list(out.rglob("*.pyc")) == [] and list(out.rglob("__pycache__")) == []
    said = [line for line in capfd.readouterr().err.splitlines() if MESSAGE in line]
    assert len(said) == 1, said
    (line,) = said
    assert "source only" in line and f"no CPython {VERSION} found" in line
    assert f"{bundling.PYTHON_VARIABLE}={tmp_path / 'no-such-python'}: not found" in line
    assert f"Install CPython {VERSION} or set {bundling.PYTHON_VARIABLE}" in line


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_the_search_refuses_other_pythons_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyenv shim on PATH with no 3.12 selected exits 127; an empty pyenv has no version: no
    interpreter, and the reason names each place looked at. The override, when set, is the
    only one tried: a 3.11 is refused."""
    shim = script(
        tmp_path / "bin" / f"python{VERSION}",
        f"echo 'pyenv: python{VERSION}: command not found' >&2; exit 127",
    )
    monkeypatch.setenv("PATH", str(shim.parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.delenv(bundling.PYTHON_VARIABLE, raising=False)
    found, why = bundling.lambda_python()
    assert found is None
    assert why == (
        f"{bundling.PYTHON_VARIABLE} unset; python{VERSION} on PATH: exits 127 (pyenv: python{VERSION}: "
        f"command not found); pyenv's {tmp_path / 'pyenv' / 'versions'}/{VERSION}.*: not found"
    )
    other = script(tmp_path / "other" / "python", "echo cpython 3.11")
    monkeypatch.setenv(bundling.PYTHON_VARIABLE, str(other))
    assert bundling.lambda_python() == (None, f"{bundling.PYTHON_VARIABLE}={other}: is cpython 3.11")


def test_the_search_falls_through_to_the_newest_working_pyenv_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str
) -> None:
    """PATH's python3.12 is a shim that fails; pyenv's 3.12.10 is checked before 3.12.9 (not
    sorted as text) and refused for not being 3.12; 3.12.9 is the real one."""
    script(tmp_path / "bin" / f"python{VERSION}", "exit 127")
    versions = tmp_path / "pyenv" / "versions"
    newest = script(versions / f"{VERSION}.10" / "bin" / f"python{VERSION}", "echo cpython 3.13")
    real = script(versions / f"{VERSION}.9" / "bin" / f"python{VERSION}", f'exec "{python}" "$@"')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.delenv(bundling.PYTHON_VARIABLE, raising=False)
    assert bundling.lambda_python() == (str(real), "")
    newest.unlink()
    script(newest, f'exec "{python}" "$@"')
    assert bundling.lambda_python() == (str(newest), "")
    monkeypatch.setenv(bundling.PYTHON_VARIABLE, str(real))  # the override wins over the search
    assert bundling.lambda_python() == (str(real), "")
