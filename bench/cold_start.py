"""Cold start from the built Lambda bundle: its size, and each handler's import and first
activation in a fresh process, run from the bundle folder as Lambda runs it.

    python3 bench/cold_start.py [--bundle DIR] [--against OLD_DIR | --source-only-too] [--trials 5]

Without ``--bundle`` it builds the bundle exactly as ``cdk synth`` does (``infra.bundling``,
from infra/bundle.lock, with examples/auction) into a temporary folder; ``--bundle`` takes
one already built (e.g. the ``asset.*`` folder under cdk.out); ``--against`` measures another
bundle (an older revision's) in the same run, trial by trial; ``--source-only-too`` measures,
the same way, a copy of the bundle with its bytecode left out (what bundling ships where no
CPython 3.12 is found, and what it shipped before issue 31). Printed: the bundle's size and
file count (zipped, as Lambda fetches it; its bytecode, botocore and lupa apart); then, per
handler (fetch, worker, console), the medians over fresh processes of importing the handler
module and of the first activation (``functions._runtime.runtime()``: botocore clients, the
DynamoDB store, the Platform loading the project's Lua), with the heaviest top-level packages
from ``python -X importtime``; with two bundles, the change from the first to the second.

The processes run on a CPython of Lambda's minor version (3.12, found as bundling finds it:
``LUNAFLOW_BUNDLE_PYTHON``, ``python3.12`` on PATH, pyenv), since the bundle's bytecode loads
only there; where none is found, on this Python, which ignores that bytecode (said in the
output). As on Lambda, whose /var/task is read-only, no bytecode is written (``-B``): a module
whose .pyc the bundle ships is read from it, any other is compiled from source in every
process; the bundle is checked to be unchanged afterwards. Differences from Lambda: this
machine's architecture and CPU; lupa's compiled module is this machine's build (the bundle's
is for aarch64): a cp312 wheel of the bundle's lupa version for this machine is fetched with
pip into a temporary folder, and its ``lua54`` module is found after the bundle's own lupa
package (whose Python code, and everything else, comes from the bundle and the standard library
alone). Network connections are refused, so no figure includes an AWS call. Not a test: it
prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from coldstart import ENV as SOURCE_TREE_ENV  # noqa: E402

HANDLERS = ("fetch", "worker", "console")
# The environment the stack sets, as bench/coldstart.py gives it (made-up resource names), with
# the bundle's project folder and, as on Lambda (Tracing.ACTIVE), Powertools' Tracer on.
ENV = {k: v for k, v in SOURCE_TREE_ENV.items() if k != "POWERTOOLS_TRACE_DISABLED"} | {
    "LUNAFLOW_PROJECT": "project",
    "AWS_LAMBDA_FUNCTION_NAME": "lunaflow-bench",
}

CHILD = """
import json, os, socket, sys, time
t0 = time.perf_counter()
def refuse(*a, **k):
    raise OSError("the cold-start bench makes no network calls")
socket.socket.connect = refuse
socket.create_connection = refuse
# Only the bundle and the standard library, as on Lambda (no site-packages of this machine).
sys.path = [sys.argv[1], *(p for p in sys.path if p not in ("", ".") and "-packages" not in p)]
import lupa  # the bundle's package; its lua54 is for aarch64, so this machine's build comes after it
lupa.__path__.append(sys.argv[3])
import lupa.lua54
import importlib
importlib.import_module("functions." + sys.argv[2])
t1 = time.perf_counter()
from functions import _runtime
rt = _runtime.runtime()
t2 = time.perf_counter()
assert sorted(rt.platform.code.workflows), "the project loaded no workflow"
from importlib.util import cache_from_source
bundled = compiled = 0
for name, module in list(sys.modules.items()):
    file = getattr(module, "__file__", None) or ""
    ours = name.split(".")[0] in ("runtime", "functions", "botocore", "lupa") and name != "lupa.lua54"
    if ours and not file.startswith(sys.argv[1]):
        raise SystemExit(f"{name} came from {file}, not the bundle")
    if file.startswith(sys.argv[1]) and file.endswith(".py"):
        bundled += 1
        compiled += os.path.isfile(cache_from_source(file))
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000,
                  "modules": sorted(sys.modules), "bundled": bundled, "from_bytecode": compiled,
                  "python": "%d.%d.%d" % sys.version_info[:3]}))
"""


def build(folder: Path) -> Path:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    sys.path.insert(0, str(ROOT))
    from infra import bundling, constants

    bundling.bundle(folder, ROOT / "examples" / "auction", constants.BUNDLE_LOCK)
    return folder


def without_bytecode(bundle: Path, folder: Path) -> Path:
    """A copy of the bundle without its bytecode: what bundling ships without CPython 3.12."""
    shutil.copytree(bundle, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def lambda_python() -> tuple[str, str]:
    """The interpreter the processes run on, and a note when it is not Lambda's minor version."""
    sys.path.insert(0, str(ROOT))
    from infra import bundling, constants

    found, why = bundling.lambda_python()
    if found is not None:
        return found, ""
    return sys.executable, (
        f"no CPython {constants.PYTHON_VERSION} here ({why}): the processes run on this Python "
        f"{sys.version_info.major}.{sys.version_info.minor}, which ignores the bundle's bytecode"
    )


def native_lupa(python: str, bundle: Path, folder: Path) -> str:
    """The folder holding lupa's compiled lua54 module for ``python`` on this machine: pip's
    cp312 wheel of the bundle's lupa version for this architecture, or this Python's own lupa."""
    tag = subprocess.run(
        [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if python == sys.executable:
        import lupa

        return str(Path(lupa.__file__).parent)
    (dist_info,) = bundle.glob("lupa-*.dist-info")
    version = dist_info.name.removesuffix(".dist-info").split("-", 1)[1]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-compile",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            tag,
            "--platform",
            f"manylinux2014_{platform.machine()}",
            "--target",
            str(folder),
            f"lupa=={version}",
        ],
        check=True,
    )
    return str(folder / "lupa")


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def size(folder: Path) -> dict[str, Any]:
    def measure(root: Path, pattern: str = "*", bytecode: bool = True) -> tuple[float, int]:
        files = [p for p in root.rglob(pattern) if p.is_file() and (bytecode or p.suffix != ".pyc")]
        return sum(p.stat().st_size for p in files) / 1e6, len(files)

    total_mb, total_files = measure(folder)
    pyc_mb, pyc_files = measure(folder, "*.pyc")
    boto_mb, boto_files = measure(folder / "botocore", bytecode=False)
    lupa = sorted(p.name.split(".")[0] for p in (folder / "lupa").glob("*.so"))
    with tempfile.TemporaryFile() as zipped:
        with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    z.write(path, path.relative_to(folder).as_posix())
        zip_mb = zipped.tell() / 1e6
    return {
        "mb": total_mb,
        "files": total_files,
        "zip_mb": zip_mb,
        "pyc_mb": pyc_mb,
        "pyc_files": pyc_files,
        "botocore_mb": boto_mb,
        "botocore_files": boto_files,
        "botocore_services": len([p for p in (folder / "botocore" / "data").iterdir() if p.is_dir()]),
        "lua_builds": lupa,
    }


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LUNAFLOW_", "PYTHON"))}
    env.update(ENV)
    env["LAMBDA_TASK_ROOT"] = str(cwd)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{done.stderr}")
    return done


def heaviest(python: str, lupa: str, folder: Path, handler: str, n: int = 5) -> list[tuple[str, float]]:
    """Self import time summed per top-level package, in ms (python -X importtime)."""
    done = run([python, "-B", "-X", "importtime", "-c", CHILD, str(folder), handler, lupa], folder)
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(\S+)", line)
        if m:
            root = m.group(3).split(".")[0]
            found[root] = found.get(root, 0.0) + int(m.group(1)) / 1000
    return sorted(found.items(), key=lambda kv: -kv[1])[:n]


def measure(python: str, lupa: str, folders: list[Path], trials: int) -> list[dict[str, Any]]:
    """Each folder's figures; trials interleave the folders (A, B, A, B...), so a load that
    comes and goes on a shared machine weighs on each alike. -B: no bytecode is written, as
    on Lambda's read-only /var/task (what the bundle ships is read)."""
    results: list[dict[str, Any]] = [{"size": size(f), "handlers": {}} for f in folders]
    before = [files_of(f) for f in folders]
    for handler in HANDLERS:
        runs: list[list[dict[str, Any]]] = [[] for _ in folders]
        for _ in range(trials):
            for i, folder in enumerate(folders):
                done = run([python, "-B", "-c", CHILD, str(folder), handler, lupa], folder)
                runs[i].append(json.loads(done.stdout))
        for i, folder in enumerate(folders):
            first = runs[i][0]
            results[i]["handlers"][handler] = {
                "import_ms": statistics.median(r["import_ms"] for r in runs[i]),
                "first_ms": statistics.median(r["first_ms"] for r in runs[i]),
                "trials_ms": [round(r["import_ms"] + r["first_ms"]) for r in runs[i]],
                "python": first["python"],
                "bundled": first["bundled"],
                "from_bytecode": first["from_bytecode"],
                # The fastest process: the least disturbed by other work on a shared machine.
                "best_ms": min(r["import_ms"] + r["first_ms"] for r in runs[i]),
                "modules": len(runs[i][0]["modules"]),
                "scheduler_or_console": sorted(
                    m for m in runs[i][0]["modules"] if m.startswith(("runtime.console", "runtime.aws.wake"))
                ),
                "heaviest": heaviest(python, lupa, folder, handler),
            }
    for folder, files in zip(folders, before, strict=True):
        if files_of(folder) != files:
            raise SystemExit(f"{folder} changed while it was measured: the processes wrote to it")
    return results


def report(r: dict[str, Any]) -> str:
    s = r["size"]
    lines = [
        f"bundle: {s['mb']:.1f} MB unzipped, {s['files']} files, {s['zip_mb']:.1f} MB zipped; "
        f"bytecode {s['pyc_mb']:.1f} MB ({s['pyc_files']} .pyc); botocore {s['botocore_mb']:.1f} MB "
        f"({s['botocore_files']} files without bytecode, {s['botocore_services']} service models); "
        f"Lua builds: {', '.join(s['lua_builds'])}",
    ]
    for name, h in r["handlers"].items():
        lines.append(
            f"{name:8} import {h['import_ms']:6.0f} ms, first activation {h['first_ms']:6.0f} ms, "
            f"together {h['import_ms'] + h['first_ms']:6.0f} ms (fastest {h['best_ms']:4.0f} ms); "
            f"{h['modules']} modules, {h['from_bytecode']} of the bundle's {h['bundled']} from bytecode"
            + (f"; imports {', '.join(h['scheduler_or_console'])}" if h["scheduler_or_console"] else "")
        )
        lines.append("         heaviest: " + ", ".join(f"{p} {ms:.0f} ms" for p, ms in h["heaviest"]))
        lines.append("         trials (import + first activation, ms): " + " ".join(map(str, h["trials_ms"])))
    return "\n".join(lines)


def change(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Per handler, from the first bundle's medians to the second's."""
    lines = []
    for name, x in a["handlers"].items():
        y = b["handlers"][name]
        parts = []
        for key, label in (("import_ms", "import"), ("first_ms", "first activation")):
            parts.append(f"{label} {x[key]:.0f} -> {y[key]:.0f} ms")
        before, after = x["import_ms"] + x["first_ms"], y["import_ms"] + y["first_ms"]
        parts.append(f"together {before:.0f} -> {after:.0f} ms ({(after - before) / before * 100:+.0f} %)")
        lines.append(f"{name:8} " + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, help="a built bundle folder (default: build one)")
    compare = parser.add_mutually_exclusive_group()
    compare.add_argument("--against", type=Path, help="another bundle folder to compare with, trial by trial")
    compare.add_argument(
        "--source-only-too",
        action="store_true",
        help="compare with a copy of the bundle without its bytecode, trial by trial",
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    t = time.perf_counter()
    load = os.getloadavg()[0]
    python, note = lambda_python()
    with tempfile.TemporaryDirectory() as tmp:
        folders = [args.bundle.resolve() if args.bundle else build(Path(tmp) / "bundle")]
        if args.against:
            folders.insert(0, args.against.resolve())
        elif args.source_only_too:
            folders.insert(0, without_bytecode(folders[0], Path(tmp) / "source-only"))
        lupa = native_lupa(python, folders[-1], Path(tmp) / "native")
        results = measure(python, lupa, folders, args.trials)
    if args.json:
        print(
            json.dumps(
                {
                    "python": python,
                    "note": note,
                    "load": [load, os.getloadavg()[0]],
                    "bundles": dict(zip(map(str, folders), results, strict=True)),
                },
                indent=1,
            )
        )
        return
    version = results[0]["handlers"][HANDLERS[0]]["python"]
    print(f"processes: {python} (CPython {version}), -B" + (f"; {note}" if note else ""))
    print(f"load average (1 min): {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    for folder, result in zip(folders, results, strict=True):
        print(f"== {folder}\n{report(result)}")
    if len(results) == 2:
        print(f"== from {folders[0].name} to {folders[1].name} (medians)\n{change(*results)}")
    print(f"(medians of {args.trials} fresh processes each; {time.perf_counter() - t:.0f} s in all)")


if __name__ == "__main__":
    main()
