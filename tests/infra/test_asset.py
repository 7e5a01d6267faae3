"""The Lambda bundle (infra/bundling.py): what the asset folder holds, that its handlers import,
and that its hash follows its contents, so a changed script or dependency is never deployed
stale and an unchanged one is not re-uploaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import FileSystem
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import AUCTION, QUEUE_PROJECT, REPO, Synth
from infra import bundling, constants
from runtime.aws.contract import CLIENT_SERVICES, Handler
from runtime.platform.describe import describe

EM_AARCH64 = 183
NOT_SHIPPED = {"__pycache__", ".lunaflow", "tests"}
BYTECODE = ["__pycache__", "*.pyc"]


def shipped_files(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of the files bundle() copies from a source folder."""
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not NOT_SHIPPED & set(rel.parts) and path.suffix != ".pyc":
            out[rel.as_posix()] = path.read_bytes()
    return out


def elf_machine(path: Path) -> tuple[int, int]:
    """(ELF class, e_machine) of a shared object: (2, 183) is 64-bit aarch64."""
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    assert head[5] == 1, f"{path} is not little-endian"
    return head[4], int.from_bytes(head[18:20], "little")


@pytest.fixture(scope="module")
def asset(auction: Synth) -> Path:
    fetch = auction.functions()["Fetch"]
    folder = auction.asset_dir(fetch)
    assert folder.is_dir(), folder
    return folder


# --- what the asset holds -----------------------------------------------------------------------


def test_all_functions_run_the_one_bundled_asset(auction: Synth, asset: Path) -> None:
    """One bundle (engine, handlers, wheels, project) serves every function."""
    keys = {auction.resource(fn)["Properties"]["Code"]["S3Key"] for fn in auction.functions().values()}
    assert keys == {f"{asset.name.removeprefix('asset.')}.zip"}


def test_asset_holds_lupas_aarch64_wheel_for_cpython_312(asset: Path) -> None:
    """FACTS: the runtime imports lupa.lua54; on Lambda arm64 + python3.12 that needs the
    manylinux aarch64 cp312 build of lupa, not this machine's."""
    (dist_info,) = asset.glob("lupa-*.dist-info")
    wheel = (dist_info / "WHEEL").read_text(encoding="utf-8")
    tags = {line.split(": ", 1)[1] for line in wheel.splitlines() if line.startswith("Tag: ")}
    assert tags and all(t.startswith("cp312-cp312-") and t.endswith("aarch64") for t in tags), tags
    lua54 = asset / "lupa" / "lua54.cpython-312-aarch64-linux-gnu.so"
    assert elf_machine(lua54) == (2, EM_AARCH64)
    assert (asset / "lupa" / "__init__.py").is_file()


def test_bundled_lupa_is_the_version_the_test_suite_runs(asset: Path) -> None:
    """Replay must behave the same in tests and on Lambda: the same lupa release on both."""
    bundled = [p.name for p in asset.glob("lupa-*.dist-info")]
    assert bundled == [f"lupa-{metadata.version('lupa')}.dist-info"]


def test_every_compiled_extension_in_the_asset_is_for_aarch64_cpython_312(asset: Path) -> None:
    """A wheel for this machine (x86_64, CPython 3.11) would import nowhere on Lambda."""
    extensions = [p for p in asset.rglob("*.so*") if p.is_file()]
    assert extensions
    for path in extensions:
        assert elf_machine(path) == (2, EM_AARCH64), path
        if ".cpython-" in path.name:
            assert ".cpython-312-aarch64-linux-gnu.so" in path.name, path


def test_asset_holds_every_bundled_requirement(asset: Path) -> None:
    """The wheels named in infra/constants.BUNDLE_REQUIREMENTS are installed in the asset."""
    installed = {canonicalize_name(p.name.split("-")[0]) for p in asset.glob("*.dist-info")}
    for requirement in constants.BUNDLE_REQUIREMENTS:
        assert canonicalize_name(Requirement(requirement).name) in installed, requirement
    assert "aws-xray-sdk" in installed  # the [tracer] extra the functions' Tracer needs


def locked() -> dict[str, tuple[str, list[str]]]:
    """infra/bundle.lock: distribution -> (version, its sha256 hashes)."""
    out: dict[str, tuple[str, list[str]]] = {}
    text = constants.BUNDLE_LOCK.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pin, *options = line.split()
        name, version = pin.split("==")
        hashes = [o.removeprefix("--hash=sha256:") for o in options]
        assert all(o.startswith("--hash=sha256:") for o in options) and hashes, line
        out[canonicalize_name(name)] = (version, hashes)
    return out


def test_the_asset_holds_exactly_the_locked_distributions(asset: Path) -> None:
    """Issue 16.5: every synth ships the same code: what the asset holds is the lock, version
    for version, and nothing the lock does not name."""
    installed = {}
    for dist_info in asset.glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[canonicalize_name(name)] = version
    assert installed == {name: version for name, (version, _) in locked().items()}


def test_the_lock_satisfies_the_bundle_requirements_and_pins_the_suites_lupa() -> None:
    lock = locked()
    for requirement in map(Requirement, constants.BUNDLE_REQUIREMENTS):
        version, _ = lock[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version), (requirement, version)
    assert lock["lupa"][0] == metadata.version("lupa")  # replay identical in tests and on Lambda


def test_bundling_refuses_a_wheel_whose_hash_is_not_the_locked_one(tmp_path: Path) -> None:
    """A lock is only a pin if a different file under the same version is refused."""
    lock = tmp_path / "bundle.lock"
    lock.write_text("six==1.17.0 --hash=sha256:" + "0" * 64 + "\n", encoding="utf-8")
    with pytest.raises(subprocess.CalledProcessError):
        bundling.bundle(tmp_path / "out", QUEUE_PROJECT, lock)
    assert not list((tmp_path / "out").glob("six*"))


def test_the_asset_ships_only_the_lua_build_the_engine_imports(asset: Path) -> None:
    """Issue 16.4: lupa's wheel has six Lua builds; runtime/engine/sandbox.py imports lua54."""
    assert sorted(p.name for p in (asset / "lupa").glob("*.so")) == ["lua54.cpython-312-aarch64-linux-gnu.so"]
    sandbox = (REPO / "runtime" / "engine" / "sandbox.py").read_text(encoding="utf-8")
    assert f"import lupa.{constants.LUA_BUILD} " in sandbox


def test_the_asset_keeps_botocore_models_only_for_the_clients_the_handlers_make(asset: Path) -> None:
    """botocore was 30 MB of the bundle, nearly all models of services nothing calls."""
    kept = {p.name for p in (asset / "botocore" / "data").iterdir() if p.is_dir()}
    assert kept == constants.BOTOCORE_SERVICES
    assert set(CLIENT_SERVICES) <= kept
    # The sources; the bytecode beside them (test_bundle_bytecode.py) is bounded on its own.
    files = [p for p in asset.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) < 20e6, "the bundle grew back past 20 MB unzipped"


COLD_START = """
import json, sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import lupa.lua54  # this machine's build (the asset's is for aarch64)
sys.path = [sys.argv[1], *(p for p in sys.path if "-packages" not in p)]
import functions.fetch, functions.worker
from functions import _runtime
rt = _runtime.runtime()
print(json.dumps({"workflows": sorted(rt.platform.code.workflows),
                  "boto3": "boto3" in sys.modules, "console": "runtime.console" in sys.modules,
                  "botocore": sys.modules["botocore"].__file__}))
"""


def test_the_handlers_build_their_runtime_from_the_trimmed_asset_without_boto3(
    asset: Path, tmp_path: Path
) -> None:
    """Every client the handlers make finds its model in the trimmed botocore, with only the
    asset and the standard library on the path; fetch and worker import neither boto3 (and its
    s3transfer) nor the console."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "LUNAFLOW_PROJECT": str(asset / "project"),
        "LUNAFLOW_TABLE": "t",
        "LUNAFLOW_WAKE_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/w",
        "LUNAFLOW_WAKE_QUEUE_ARN": "arn:aws:sqs:eu-west-1:123456789012:w",
        "LUNAFLOW_SCHEDULER_GROUP": "g",
        "LUNAFLOW_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
        "LUNAFLOW_VALUES_BUCKET": "b",
    }
    done = subprocess.run(
        [sys.executable, "-B", "-c", COLD_START, str(asset)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["workflows"] == sorted(describe(AUCTION).workflows)
    assert got["boto3"] is False and got["console"] is False
    assert Path(got["botocore"]).is_relative_to(asset)


def test_asset_holds_the_engine_and_handlers_as_in_the_repository(asset: Path) -> None:
    """runtime/ (with its Lua prelude) and functions/ are copied whole, minus caches and tests."""
    for package in ("runtime", "functions"):
        repo, bundled = shipped_files(REPO / package), shipped_files(asset / package)
        assert repo, package
        assert sorted(bundled) == sorted(repo), package
        changed = [name for name in repo if bundled[name] != repo[name]]
        assert changed == [], package
    assert (asset / "runtime" / "engine" / "lua" / "prelude.lua").is_file()


def test_asset_holds_the_project_scripts_where_the_functions_look(auction: Synth, asset: Path) -> None:
    """The project is bundled as project/ (LUNAFLOW_PROJECT), scripts and migrations alike."""
    for fn in auction.functions().values():
        assert auction.props(fn)["Environment"]["Variables"]["LUNAFLOW_PROJECT"] == "project"
    project = shipped_files(AUCTION)
    assert {name for name in project if name.endswith(".lua")} >= {
        "api.lua",
        "objects.lua",
        "pay.lua",
        "sale.lua",
    }
    assert shipped_files(asset / "project") == project


# --- importing the handlers from the asset -----------------------------------------------------

IMPORTER = r"""
import importlib, json, sys
from pathlib import Path
asset = Path(sys.argv[1])
import lupa.lua54  # compiled: the asset's build is for aarch64 / CPython 3.12, so use this machine's
sys.path.insert(0, str(asset))
out = {"modules": {}, "from": {}}
for name in sys.argv[2:]:
    try:
        module = importlib.import_module(name)
        handler = callable(getattr(module, "handler", None))
        out["modules"][name] = {"file": module.__file__, "handler": handler}
    except Exception as e:
        out["modules"][name] = {"error": f"{type(e).__name__}: {e}"}
from runtime.platform.describe import describe
needs = describe(asset / "project")
out["workflows"] = needs.workflows
out["databases"] = needs.databases
for dep in ("runtime", "functions", "boto3", "botocore", "aws_lambda_powertools", "jwt"):
    importlib.import_module(dep)
    out["from"][dep] = sys.modules[dep].__file__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def imported(auction: Synth, asset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Import every handler module (``Handler``: the ones the template names and the queue
    handler), from the asset, in a fresh interpreter."""
    handlers = sorted({h.rsplit(".", 1)[0] for h in Handler})
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONDONTWRITEBYTECODE": "1",  # the asset folder must stay as synthesized
        "POWERTOOLS_TRACE_DISABLED": "1",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    done = subprocess.run(
        [sys.executable, "-I", "-B", "-c", IMPORTER, str(asset), *handlers],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path_factory.mktemp("import"),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("handler", list(Handler))
def test_handler_module_imports_from_the_asset(
    handler: Handler, auction: Synth, asset: Path, imported: dict[str, Any]
) -> None:
    """Each handler resolves inside the bundle: the module imports (pure-Python parts on this
    machine's Python) and has a callable `handler` (the queue handler too, though the
    auction, with no queue, deploys no queue function)."""
    handlers = {auction.props(fn)["Handler"] for fn in auction.functions().values()}
    handlers.add(auction.props(auction.id(auction.stack.gate.function))["Handler"])  # the deploy gate
    assert handlers == set(Handler) - {Handler.QUEUE}
    module = handler.rsplit(".", 1)[0]
    got = imported["modules"][module]
    assert "error" not in got, got.get("error")
    assert got["handler"] is True
    assert Path(got["file"]).is_relative_to(asset)


def test_handlers_use_the_bundled_engine_and_libraries(asset: Path, imported: dict[str, Any]) -> None:
    """The engine and the pure-Python libraries come from the asset, not from this machine."""
    for dep, file in imported["from"].items():
        assert Path(file).is_relative_to(asset), (dep, file)


def test_the_bundled_engine_loads_the_bundled_project(imported: dict[str, Any]) -> None:
    """The asset's runtime (with its Lua prelude) loads the asset's project/ and finds what the
    repository's engine finds in examples/auction."""
    needs = describe(AUCTION)
    assert imported["workflows"] == needs.workflows
    assert "settle-sale" in imported["workflows"]
    assert imported["databases"] == needs.databases == ["sales"]


# --- the asset hash -----------------------------------------------------------------------------


def test_asset_hash_is_the_fingerprint_of_the_bundled_files(asset: Path) -> None:
    """FACTS: with the default (source) asset hash a changed requirement did not change the
    hash. The asset's hash must be the fingerprint of the bundle's output."""
    assert asset.name == f"asset.{FileSystem.fingerprint(str(asset))}"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """bundle() run four times with a tiny requirement list: twice on the same inputs, once
    with a changed script, once with a changed pin."""
    root = tmp_path_factory.mktemp("bundles")
    changed = root / "changed-project"
    shutil.copytree(QUEUE_PROJECT, changed)
    main = changed / "main.lua"
    main.write_text(
        main.read_text(encoding="utf-8").replace("keyed = key ~= nil", "keyed = true"), encoding="utf-8"
    )
    assert main.read_bytes() != (QUEUE_PROJECT / "main.lua").read_bytes()
    runs = {
        "base": (QUEUE_PROJECT, ["six==1.16.0"]),
        "again": (QUEUE_PROJECT, ["six==1.16.0"]),
        "script": (changed, ["six==1.16.0"]),
        "pin": (QUEUE_PROJECT, ["six==1.17.0"]),
    }
    out = {}
    for name, (project, requirements) in runs.items():
        out[name] = root / name
        bundling.bundle(out[name], project, requirements)
    yield out


def content_hash(folder: Path) -> str:
    """CDK's fingerprint of the bundle, leaving out bytecode (whose determinism
    tests/infra/test_bundle_bytecode.py checks)."""
    return str(FileSystem.fingerprint(str(folder), exclude=BYTECODE))


def test_changing_a_project_script_changes_the_asset_hash(bundles: dict[str, Path]) -> None:
    """A script edit reaches the bundle, so `cdk deploy` uploads new code."""
    assert content_hash(bundles["base"]) == content_hash(bundles["again"])  # the control
    assert content_hash(bundles["script"]) != content_hash(bundles["base"])
    assert FileSystem.fingerprint(str(bundles["script"])) != FileSystem.fingerprint(str(bundles["base"]))
    assert (bundles["script"] / "project" / "main.lua").read_bytes() != (
        bundles["base"] / "project" / "main.lua"
    ).read_bytes()


def test_changing_a_pinned_dependency_changes_the_asset_hash(bundles: dict[str, Path]) -> None:
    """A new pin installs a different wheel, so the hash moves with it."""
    assert content_hash(bundles["base"]) == content_hash(bundles["again"])  # the control
    assert content_hash(bundles["pin"]) != content_hash(bundles["base"])
    assert FileSystem.fingerprint(str(bundles["pin"])) != FileSystem.fingerprint(str(bundles["base"]))
    assert (bundles["pin"] / "six-1.17.0.dist-info").is_dir()
    assert (bundles["base"] / "six-1.16.0.dist-info").is_dir()


def test_bundling_the_same_inputs_twice_gives_the_same_asset_hash(bundles: dict[str, Path]) -> None:
    """An unchanged project must keep its asset hash, or every `cdk deploy` re-uploads the
    bundle and updates all four functions."""
    assert FileSystem.fingerprint(str(bundles["base"])) == FileSystem.fingerprint(str(bundles["again"]))


def test_asset_holds_no_bytecode_compiled_for_another_python(asset: Path) -> None:
    """Bytecode in the bundle can only be for Lambda's CPython 3.12; anything else is dead
    weight in every cold start's download."""
    foreign = [p for p in asset.rglob("*.pyc") if ".cpython-312" not in p.name]
    assert foreign == []
