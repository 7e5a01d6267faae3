"""Golden journals of a user's project: what Temporal's replayer tests are to Temporal users.

``lunaflow record RUN_ID`` (or ``LocalPlatform.record``) writes a run's journal, as it stands,
to ``PROJECT/tests/golden/<run id>.json``. ``lunaflow test`` and ``lunaflow check`` replay
every such file on the project's current code with the executor's replay-only mode
(``Executor.check``, the loop ``lunaflow check`` runs on in-flight runs), running no step
body and writing nothing: a change to the code that would make recorded runs diverge fails
there, before a deploy meets a run in flight.

A golden passes when replay takes the recorded path: a completed run replays to its return,
a failed one replays without diverging, a run recorded in flight replays cleanly to where
its journal ends. Each is loaded into a throwaway SQLite store through the store API, so the
replay reads it exactly as it reads a live run. Secrets are not recorded: a workflow
function that reads one on replay gets the placeholder ``[secret 'name']``.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.clock import FakeClock
from runtime.core.journal import FORMAT_VERSION, Entry, Kind, Status
from runtime.dev.check import check_run
from runtime.engine.project import ProjectSource
from runtime.errors import LunaflowError
from runtime.platform.platform import Platform
from runtime.services.local import LocalServices
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.sqlite import STORE_FILE, SQLiteStore

GOLDEN_DIR = Path("tests") / "golden"
GOLDEN_FORMAT = 1  # of the file around the journal; the journal carries its own format
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_CLEAN = "replays cleanly"  # how Executor.check words a replay that took the recorded path
_RETURNED = "replays cleanly to its return"


@dataclass(frozen=True)
class GoldenVerdict:
    """One golden file replayed on the current code."""

    file: str  # relative to the project, e.g. tests/golden/sale-lot-42.json
    run_id: str
    workflow: str
    status: str  # as recorded
    passed: bool
    message: str


def golden_dir(project: str | Path) -> Path:
    return Path(project) / GOLDEN_DIR


def file_name(run_id: str) -> str:
    """A file name for a run id: characters outside ``[A-Za-z0-9._-]`` become ``_``."""
    name = _SAFE.sub("_", run_id).lstrip(".") or "run"
    return name[:180] + ".json"


def golden_of(run: RunRecord, entries: list[Entry]) -> dict[str, Any]:
    return {
        "lunaflow_golden": GOLDEN_FORMAT,
        "run": {
            "id": run.id,
            "workflow": run.workflow,
            "status": str(run.status),
            "current_step": run.current_step,
            "result": run.result,
            "error": run.error,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
        },
        "entries": [e.as_dict() for e in entries],
    }


def write_golden(
    project: str | Path, run: RunRecord, entries: list[Entry], *, name: str | None = None
) -> Path:
    """Write the run's golden into the project (replacing an earlier recording of the same
    run); refuse to replace the golden of another run."""
    folder = golden_dir(project)
    path = folder / (file_name(name) if name is not None else file_name(run.id))
    if path.exists():
        try:
            held = json.loads(path.read_text(encoding="utf-8"))["run"]["id"]
        except (ValueError, KeyError, TypeError):
            held = None
        if held != run.id:
            raise LunaflowError(
                f"{path} holds the golden of {'another run' if held is None else repr(held)}, "
                f"not of '{run.id}'; name the file with --name NAME"
            )
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(golden_of(run, entries), ensure_ascii=False, indent=2, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def golden_files(project: str | Path, pattern: str | None = None) -> list[Path]:
    files = sorted(golden_dir(project).glob("*.json"))
    return [f for f in files if pattern is None or pattern in f.name]


class _GoldenStore(SQLiteStore):
    """A throwaway store for replaying goldens: secrets were never recorded, so every secret
    reads as its placeholder."""

    def secret(self, name: str, version: int | None = None) -> tuple[int, str] | None:
        return (1, f"[secret '{name}']")


def _entries(doc: dict[str, Any]) -> list[Entry]:
    """The journal of a golden, its shape checked entry by entry: a file edited by hand or
    cut short is a reason to give, never a traceback."""
    raw = doc.get("entries")
    if not isinstance(raw, list):
        raise ValueError(f"its 'entries' is {_shape(raw)}, not a list of journal entries")
    entries: list[Entry] = []
    for i, e in enumerate(raw, 1):
        if not isinstance(e, dict):
            raise ValueError(f"journal entry {i} is {_shape(e)}, not an object")
        seq, name, data, at = e.get("seq"), e.get("name"), e.get("data"), e.get("at")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise ValueError(f"journal entry {i}'s seq is {_shape(seq)}, not a whole number")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"journal entry {i}'s name is {_shape(name)}, not text")
        if not isinstance(data, dict):
            raise ValueError(f"journal entry {i}'s data is {_shape(data)}, not an object")
        if not isinstance(at, int | float) or isinstance(at, bool):
            raise ValueError(f"journal entry {i}'s at is {_shape(at)}, not a time")
        try:
            kind = Kind(str(e.get("kind")))
        except ValueError:
            raise ValueError(
                f"journal entry {i}'s kind {e.get('kind')!r} is not a journal entry kind"
            ) from None
        entries.append(Entry(seq, kind, name, data, at))
    if not entries or entries[0].kind != Kind.STARTED:
        raise ValueError("its first journal entry is not run.started")
    if entries[0].data.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"its journal is format {entries[0].data.get('format')!r}; this lunaflow replays format "
            f"{FORMAT_VERSION}"
        )
    return entries


def _run_of(doc: Any) -> dict[str, Any]:
    """The golden's ``run`` object, its shape checked."""
    run = doc.get("run") if isinstance(doc, dict) else None
    if not isinstance(run, dict):
        raise ValueError(
            f"its 'run' is {_shape(run)}, not an object" if isinstance(doc, dict) else "it is not an object"
        )
    for key in ("id", "workflow"):
        if not isinstance(run.get(key), str):
            raise ValueError(f"its run's {key} is {_shape(run.get(key))}, not text")
    if run.get("status") not in {str(s) for s in Status}:
        raise ValueError(f"its run's status {run.get('status')!r} is not a run status")
    return run


def _shape(value: Any) -> str:
    if value is None:
        return "missing"
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _load(store: SQLiteStore, doc: dict[str, Any]) -> RunRecord:
    run = _run_of(doc)
    entries = _entries(doc)
    record = RunRecord(
        id=run["id"],
        workflow=run["workflow"],
        status=Status.RUNNING,
        input=entries[0].data.get("input"),
        created_at=run.get("created_at") or entries[0].at,
        updated_at=run.get("created_at") or entries[0].at,
    )
    store.create_run(record, entries[0])
    if len(entries) > 1:
        status = Status(run["status"])
        update = RunUpdate(status, run.get("current_step"), run.get("result"), run.get("error"))
        store.append(record.id, 1, entries[1:], update=update)
    loaded = store.get_run(record.id)
    if loaded is None:  # pragma: no cover - the store just wrote it
        raise LunaflowError(f"lunaflow engine bug: golden run '{record.id}' was not stored")
    return loaded


def _judge(recorded: str, diverges: bool, message: str) -> tuple[bool, str]:
    if diverges:
        return False, message
    if recorded == Status.COMPLETED and message != _RETURNED:
        return False, f"the recorded run completed, but on this code {message}"
    if recorded not in (Status.COMPLETED, Status.FAILED) and not message.startswith(_CLEAN):
        return False, f"the recorded run was {recorded}; on this code {message}"
    return True, message


@contextmanager
def _replayer(project: Path) -> Iterator[tuple[Platform, SQLiteStore]]:
    with tempfile.TemporaryDirectory(prefix="lunaflow-golden-") as tmp:
        clock = FakeClock()
        store = _GoldenStore(Path(tmp) / STORE_FILE, clock=clock)
        services = LocalServices(Path(tmp), clock.now, ProjectSource.read(project).queue_settings)
        platform = Platform(project, store, clock, services=services, read_only=True)
        try:
            yield platform, store
        finally:
            platform.close()


def load_project(project: str | Path) -> None:
    """Load the project's code as a check does, in a throwaway store, changing nothing: raises
    ``ProjectLoadError`` if it does not load. For a check that has no runs to replay, so that
    a script that cannot load is still reported."""
    with _replayer(Path(project)):
        pass


def replay_goldens(project: str | Path, pattern: str | None = None) -> list[GoldenVerdict]:
    """Replay every golden of the project (whose file name contains ``pattern``) on the
    project's current code. Raises ``ProjectLoadError`` if the project does not load."""
    root = Path(project)
    files = golden_files(root, pattern)
    if not files:
        return []
    verdicts: list[GoldenVerdict] = []
    pending = list(files)
    while pending:
        # Runs keep their ids on replay (code may read wf.id), so two goldens of one run id
        # are replayed in separate stores.
        batch: list[tuple[Path, dict[str, Any]]] = []
        later: list[tuple[Path, dict[str, Any]]] = []
        seen: set[str] = set()
        for path in pending:
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                run_id = _run_of(doc)["id"]
                _entries(doc)
            except (ValueError, KeyError, TypeError, RecursionError) as e:
                verdicts.append(_unreadable(root, path, e))
                continue
            (later if run_id in seen else batch).append((path, doc))
            seen.add(run_id)
        pending = [p for p, _ in later]
        with _replayer(root) as (platform, store):
            for path, doc in batch:
                verdicts.append(_replay_one(root, path, doc, platform, store))
    return sorted(verdicts, key=lambda v: v.file)


def _relative(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _unreadable(root: Path, path: Path, e: Exception) -> GoldenVerdict:
    return GoldenVerdict(
        _relative(root, path),
        "?",
        "?",
        "?",
        False,
        f"cannot be read as a golden journal ({e}); record it again with `lunaflow record RUN_ID`",
    )


def _replay_one(
    root: Path, path: Path, doc: dict[str, Any], platform: Platform, store: SQLiteStore
) -> GoldenVerdict:
    try:
        run = _load(store, doc)
        recorded = str(doc["run"]["status"])
        # Entries of a well-formed shape may still hold values replay cannot take (a hand
        # edit): that is this golden's verdict, and the others are still judged.
        verdict = check_run(platform.worker, run)
    except (ValueError, KeyError, TypeError, AttributeError, LunaflowError) as e:
        return _unreadable(root, path, e)
    passed, message = _judge(recorded, verdict.diverges, verdict.message)
    return GoldenVerdict(_relative(root, path), run.id, run.workflow, recorded, passed, message)
