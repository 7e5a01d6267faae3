"""The ``lunaflow`` command: ``dev``, ``check`` and the console (SPEC section 4).

Console commands work on a data folder (``PROJECT/.lunaflow`` by default), beside a
running ``lunaflow dev`` or without one. Exit codes: 0 done; 1 refused or failed (the
reason on stderr; for ``check``, a run would diverge); 2 bad usage; 3 ``signal`` reached
an ended run and was set aside.

Everything printed that came from users (run ids, step names, errors, payloads) is text:
the rich consoles have markup off, and styles are applied with ``Text`` spans only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runtime import __version__
from runtime.console import timeline
from runtime.core import values
from runtime.core.clock import SystemClock, now_ms
from runtime.core.durations import parse_ms
from runtime.core.journal import ENDED, Status, generations
from runtime.core.published import parse_where
from runtime.dev.server import RUN_WORKERS, DevServer, NotAProject, ServeError, check_project, data_folder
from runtime.dev.terminal import NORMAL, QUIET, VERBOSE, Terminal, duration
from runtime.errors import (
    AlreadyCancelled,
    InvalidInput,
    LunaflowError,
    NoProjectFolder,
    NoSuchRun,
    UnknownWorkflow,
)
from runtime.platform.faults import tick_fault, with_faults
from runtime.platform.runs import CLEANUP_NOTE, Runs
from runtime.platform.why import STUCK_AFTER_S
from runtime.store.base import UNREADABLE_RUN, RunRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_SET_ASIDE = 0, 1, 2, 3


class OutputFailed(LunaflowError):
    """Standard output refused a write (`lunaflow runs > /dev/full`)."""


class _Stdout:
    """Standard output as the command writes it: whichever ``sys.stdout`` is current (a test
    may swap it), its failures named as the output's. A closed pipe stays a
    ``BrokenPipeError``: ``main`` answers that one (the reader went away)."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(f"the output could not be written ({e.strerror or e})") from e

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(f"the output could not be written ({e.strerror or e})") from e

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno: rich asks
        return getattr(sys.stdout, name)


class _Output(Console):
    def on_broken_pipe(self) -> None:
        # rich's own answer is exit 1, which fails `set -o pipefail; lunaflow runs | head`:
        # ``main`` answers the reader's going away instead (nothing left to say, exit 0).
        self.quiet = True
        raise BrokenPipeError()


stdout = _Stdout()
out = _Output(file=stdout, highlight=False, soft_wrap=True, markup=False, emoji=False)  # type: ignore[arg-type]
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


STACK_HELP = "the stack name (default: lunaflow-<project folder>; a folder my_shop: lunaflow-my-shop)"


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str), file=stdout)


def _run_dict(run: RunRecord) -> dict[str, Any]:
    return run.summary()


class Usage(Exception):
    """A command line that cannot be carried out as given."""


# --- data folders ------------------------------------------------------------------------


def _aws(args: argparse.Namespace, *, read_only: bool = False) -> Any:
    """The deployed stack's AwsRuntime (``--aws``), found through its CloudFormation outputs;
    ``read_only`` for commands that change nothing (no migration, no secret pin).
    A missing region or missing credentials is the user's setup, said in one line (botocore
    raises them from deep inside the first client or request)."""
    import boto3
    from botocore.exceptions import BotoCoreError, NoCredentialsError, NoRegionError

    from runtime.aws.contract import stack_name
    from runtime.aws.runtime import AwsRuntime, Clients
    from runtime.aws.stack import config_from_stack

    stack = args.stack or stack_name(Path(args.project).resolve().name)
    try:
        session = boto3.session.Session()
        config = config_from_stack(session.client("cloudformation"), stack, args.project)
        return AwsRuntime(
            config, Clients.from_session(session), read_only=read_only, observer=with_faults(None, os.environ)
        )
    except NoRegionError:
        raise LunaflowError(
            f"no AWS region is set, so stack '{stack}' cannot be found (--aws works on the stack "
            "`npx cdk deploy` made in your account); set AWS_REGION (or AWS_DEFAULT_REGION), or a "
            "region in ~/.aws/config with `aws configure`"
        ) from None
    except NoCredentialsError:
        raise LunaflowError(
            f"no AWS credentials were found, so stack '{stack}' cannot be read (--aws signs its "
            "requests as you); run `aws configure`, or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        ) from None
    except BotoCoreError as e:
        raise LunaflowError(
            f"AWS could not be reached for stack '{stack}' ({e}); check the network and the region"
        ) from None


def _open_runs(args: argparse.Namespace, *, read_only: bool = False) -> Runs:
    """The runs of the data folder or (``--aws``) the stack; ``read_only`` for commands that
    only read (the store is then neither migrated nor written)."""
    if getattr(args, "aws", False):
        runs: Runs = _aws(args, read_only=read_only).platform
        return runs
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        raise Usage(
            f"no lunaflow data in {data}; run `lunaflow dev {args.project}` first, or point at the folder "
            "with --data DIR (or at the project with --project PATH)"
        )
    store = SQLiteStore(data / STORE_FILE, read_only=read_only)
    if not read_only:  # a command that may end runs (cancel) records their expiry
        store.retention_s = _retention_of(args.project)
    return Runs(store, SystemClock(), observer=with_faults(None, os.environ))


def _retention_of(project: str) -> float | None:
    """The project's ``[runs] retention``, for the runs a command ends (``lunaflow cancel``);
    None, so the ended runs are kept, when the project cannot be read."""
    from runtime.engine.project import ProjectSource

    try:
        return ProjectSource.read(project).retention_s
    except (LunaflowError, OSError, UnicodeError) as e:
        # Said, not silent: a run this command ends is then kept until deleted by hand.
        err.print(
            Text(
                f"note: the project cannot be read ({e}), so its [runs] retention is not known: a run "
                "this command ends is kept; name the project with -p PATH to have it deleted in time"
            )
        )
        return None


# --- commands ----------------------------------------------------------------------------


def _run_workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number from 1 to 64 (got {text!r})")
    return int(text)


def _stuck_after(text: str) -> float:
    try:
        ms = parse_ms(text)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(f"--stuck-after: {e}") from None
    if ms < 1000:
        raise argparse.ArgumentTypeError(f"--stuck-after takes a duration of at least 1s (got {text!r})")
    return ms / 1000


def _port(text: str) -> int:
    """A TCP port: bind() refused one past 65535 with a traceback, after the data folder was made."""
    if not text.strip().isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"--port takes a whole number from 0 to 65535 (got {text!r})")
    return int(text)


def cmd_dev(args: argparse.Namespace) -> int:
    try:
        check_project(args.project)
    except NotAProject as e:
        raise Usage(str(e)) from None
    level = QUIET if args.quiet else VERBOSE if args.verbose else NORMAL
    terminal = Terminal(sys.stdout, level=level)
    logging.basicConfig(level=logging.INFO, handlers=[terminal.handler()], force=True)
    try:
        server = DevServer(
            args.project,
            data=args.data,
            host=args.host,
            port=args.port,
            workers=args.workers,
            stuck_after_s=args.stuck_after,
            observer=with_faults(terminal, os.environ),
            say=terminal.note,
            reload=not args.no_reload,
            allow_hosts=args.allow_host,
            tick_fault=tick_fault(os.environ),
        )
    except ServeError as e:
        err.print(f"lunaflow dev: {e}")
        return EXIT_REFUSED
    server.serve_until_signalled()
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    runs = _open_runs(args, read_only=True)
    try:
        return _runs(args, runs)
    finally:
        runs.store.close()


def _runs(args: argparse.Namespace, runs: Runs) -> int:
    wheres = [parse_where(w) for w in args.where or []]
    if wheres:
        # As a repair selects them: the store's index of published values, narrowed by the
        # status and workflow in the lookup, so the limit counts runs matching every filter.
        from runtime.platform import bulk

        selection = bulk.Selection(status=args.status, workflow=args.workflow, where=tuple(wheres))
        found = bulk.select(runs, selection, limit=args.limit)
    else:
        found = runs.runs(status=args.status, workflow=args.workflow, limit=args.limit)
    whys = {r.id: runs.why(r) for r in found}
    if args.json:
        _emit(
            [
                {
                    **_run_dict(r),
                    "values": runs.store.run_values(r.id),
                    "why": whys[r.id].text,
                    "stuck": whys[r.id].stuck,
                }
                for r in found
            ]
        )
        return EXIT_OK
    out.print(f"{len(found)} run(s)", style="italic")
    if not found:
        return EXIT_OK
    columns = [("run", WHOLE), ("workflow", WHOLE), ("status", WHOLE)]
    columns += [("current step", WRAPS), ("why", WRAPS), ("started", WRAPS), ("updated", WRAPS)]
    rows = [
        [
            Text(r.id),
            Text(r.workflow),
            _status(r.status),
            _current(r),
            Text(whys[r.id].text, style="red" if whys[r.id].stuck else ""),
            Text(_when(r.created_at)),
            Text(_when(r.updated_at)),
        ]
        for r in found
    ]
    _print_table(None, columns, rows)
    return EXIT_OK


def _current(r: Any) -> Text:
    """What a run is on; for a run the store could list but not read (a value missing from
    its bucket), why, so the broken run is marked rather than shown as healthy."""
    if r.error and r.error.startswith(UNREADABLE_RUN):
        return Text(r.error, style="red")
    return Text((r.current_step or "") if r.status not in ("completed", "cancelled") else "")


# --- tables ------------------------------------------------------------------------------

WHOLE, WRAPS = True, False
MIN_WRAPPED = 8  # the narrowest a column that wraps is made


def _print_table(
    title: str | None, columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence[Text]]
) -> None:
    """A table whose ``WHOLE`` columns (ids, names, statuses) are never cut or wrapped, so
    two runs never look alike and an id can be copied, and whose other columns wrap. When
    the whole columns do not fit the terminal with room for the others, each row becomes a
    block of lines instead."""
    widths = [
        max([len(head), *(row[i].cell_len for row in rows)]) if whole else MIN_WRAPPED
        for i, (head, whole) in enumerate(columns)
    ]
    if sum(widths) + 3 * len(columns) + 1 <= out.width:  # a cell's padding and border
        table = Table(title=title)
        for (head, whole), width in zip(columns, widths, strict=True):
            if whole:
                table.add_column(head, no_wrap=True, min_width=width)
            else:
                table.add_column(head, overflow="fold")
        for row in rows:
            table.add_row(*row)
        out.print(table)
        return
    if title:
        out.print(Text(title), style="italic")
    for row in rows:
        _print_block(columns, row)


def _print_block(columns: Sequence[tuple[str, bool]], row: Sequence[Text]) -> None:
    """One row as lines: its first cell alone, the other whole cells on a line when they fit
    (each on its own otherwise, never cut), then each other cell, wrapped, with its name."""
    out.print(Text(row[0].plain, style="bold"), no_wrap=True, overflow="ignore", crop=False)
    whole = [cell for (_, w), cell in zip(columns[1:], row[1:], strict=True) if w and cell.plain]
    line = Text("  ") + Text(" · ").join(whole)
    for part in [line] if line.cell_len <= out.width else [Text("  ") + cell for cell in whole]:
        out.print(part, no_wrap=True, overflow="ignore", crop=False)
    for (head, w), cell in zip(columns[1:], row[1:], strict=True):
        if not w and cell.plain:
            for line in (Text(f"{head}: ") + cell).wrap(out, max(out.width - 2, MIN_WRAPPED)):
                line.rstrip()
                out.print(Text("  ") + line, no_wrap=True, overflow="ignore", crop=False)


_STATUS_STYLES = {
    "failed": "red",
    "completed": "green",
    "cancelled": "dim",
    "awaiting": "yellow",
    "sleeping": "cyan",
}


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLES.get(status, ""))


def cmd_show(args: argparse.Namespace) -> int:
    runs = _open_runs(args, read_only=True)
    try:
        return _show(args, runs)
    finally:
        runs.store.close()


def _show(args: argparse.Namespace, runs: Runs) -> int:
    run = runs.get(args.run_id)
    entries = runs.journal(run.id)
    items = timeline.build(entries)
    signals = runs.store.signals(run.id)
    children = runs.store.children(run.id)
    due = runs.store.timer(run.id)
    published = runs.store.run_values(run.id)
    # The child whose result the run waits for (c:result()), shown with the links.
    awaited = timeline.awaited_child(items) if run.status == "awaiting" else None
    gens = generations(entries)  # wf:continue_as_new: the current one last
    moving = runs.why(run, entries)
    code = _code_line(args, runs, entries, run.id)
    if args.json:
        _emit(
            {
                "run": _run_dict(run),
                "why": moving.text,
                "stuck": moving.stuck,
                "code": code,
                "values": published,
                "children": children,
                "waiting_for": awaited,
                "generation": gens[-1]["generation"] if gens else 1,
                "generations": gens,
                "timer_due_at": None if due is None else due / 1000,
                "expires_at": run.expires_at,
                "timeline": timeline.as_dicts(items),
                "signals": timeline.signals_view(signals),
                "journal": [e.as_dict() for e in entries],
            }
        )
        return EXIT_OK
    head = Text(run.id, style="bold").append("  workflow ").append(Text(run.workflow)).append("  status ")
    out.print(head.append(_status(run.status)))
    out.print(Text(f"started {_when(run.created_at)}  updated {_when(run.updated_at)}"))
    if run.expires_at is not None:
        out.print(Text(f"deleted at {_when(run.expires_at)} UTC ([runs] retention in lunaflow.toml)"))
    out.print(Text("why ").append(Text(moving.text, style="red" if moving.stuck else "")))
    if code["pinned_to"]:
        out.print(
            Text(
                f"code pinned to {code['pinned_to']} (the current code would not replay it; "
                f"lunaflow migrate {run.id} moves it once code that does is deployed)"
            )
        )
    elif code["started_on"]:
        out.print(Text(f"code started on {code['started_on']}"))
    if run.parent_id:
        out.print(Text(f"parent {run.parent_id}"))
    if children:
        out.print(Text(f"children {', '.join(children)}"))
    if awaited is not None:
        out.print(Text(f"waiting for child {awaited}"))
    if len(gens) > 1:
        earlier = ", ".join(
            f"{g['generation']} (entries {g['first_seq']}-{g['last_seq']})" for g in gens[:-1]
        )
        out.print(Text(f"generation {gens[-1]['generation']}  earlier {earlier}"))
    if run.current_step and run.status not in ("completed", "cancelled"):
        out.print(Text(f"current {run.current_step}"))
    if due is not None:
        out.print(Text(f"timer due {_when(due / 1000)}"))
    if run.error:
        out.print(Text("error", style="red").append(" ").append(Text(run.error)))
    if run.status == "completed":
        out.print(Text(f"result {json.dumps(run.result, ensure_ascii=False)}"))
    for key, value in published.items():
        out.print(Text(f"value {key} = {json.dumps(value, ensure_ascii=False)}"))
    table = Table(title="timeline")
    for column in ("#", "at", "what", "detail"):
        table.add_column(column)
    for item in items:
        detail = item.detail
        if item.kind == "wait":
            parts = []
            if item.due_at is not None:
                parts.append(f"due {_when(item.due_at)}")
            parts.append(
                f"→ {item.resolution} at {_when(item.resolved_at)}" if item.resolution else "waiting"
            )
            detail = "  ".join(parts)
        table.add_row(Text(str(item.seq)), Text(_when(item.at)), Text(item.title), Text(detail))
        for a in item.attempts:
            took = "" if a.ended_at is None else f" took {duration(a.ended_at - a.started_at)}"
            line = f"attempt {a.attempt} {a.outcome}{took}  step id {a.step_id}"
            if a.error:
                line += f"\n  error: {a.error}"
            if a.retry_at is not None:
                line += f"\n  retry at {_when(a.retry_at)}"
            table.add_row(Text(""), Text(_when(a.started_at)), Text(""), Text(line))
    out.print(table)
    if signals:
        st = Table(title="signals")
        for column in ("id", "at", "name", "state", "payload"):
            st.add_column(column)
        for sig in signals:
            state = sig.state.replace("_", " ") + (f" (entry {sig.consumed_seq})" if sig.consumed_seq else "")
            st.add_row(
                Text(str(sig.id)),
                Text(_when(sig.at)),
                Text(sig.name),
                Text(state),
                Text(json.dumps(sig.payload, ensure_ascii=False)),
            )
        out.print(st)
    return EXIT_OK


def _moment(text: str, flag: str) -> float:
    """``2026-11-01``, ``2026-11-01T09:30`` or ``2026-11-01T09:30:00Z``: UTC, epoch seconds."""
    import datetime as dt

    cleaned = text.strip().removesuffix("Z")
    for shape in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"):
        try:
            return dt.datetime.strptime(cleaned, shape).replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            continue
    raise Usage(f"{flag} {text!r} is not a time; write 2026-11-01 or 2026-11-01T09:30 (UTC)")


def _bulk(args: argparse.Namespace, action: str) -> int | None:
    """``resume|retry|cancel`` with a selection instead of a run id (issue 29.3): a preview
    that replays each run on the current code, then, with ``--yes``, the action on each in
    batches. None when the command names a run instead."""
    from runtime.platform import bulk

    chosen = [args.status, args.workflow, args.since, args.until, *(args.where or [])]
    if args.run_id is not None:
        if any(c is not None for c in chosen):
            raise Usage(
                f"lunaflow {action} takes a run id or a selection (--status, --workflow, --since, --until, "
                "--where), not both"
            )
        if args.dry_run or args.yes:
            given = "--dry-run" if args.dry_run else "--yes"
            raise Usage(
                f"lunaflow {action} {args.run_id} was given {given}, which goes with a selection (a preview, "
                f"then the action on each run it lists); a run id is acted on at once: drop {given}"
            )
        return None
    if args.dry_run and args.yes:
        raise Usage(
            f"lunaflow {action} was given both --dry-run and --yes: the first shows what would be done, "
            "the second does it; give one (--dry-run alone is the default: a preview, nothing done)"
        )
    if all(c is None for c in chosen):
        raise Usage(
            f"lunaflow {action} needs a run id or a selection: --status, --workflow, --since, --until or "
            f"--where (e.g. lunaflow {action} --status failed --workflow settle-sale --dry-run)"
        )
    selection = bulk.Selection(
        status=args.status,
        workflow=args.workflow,
        since=None if args.since is None else _moment(args.since, "--since"),
        until=None if args.until is None else _moment(args.until, "--until"),
        where=tuple(parse_where(w) for w in args.where or []),
    )
    checker, close = _code_for_check(args)
    runs = _open_runs(args)
    try:
        found = bulk.preview(runs, action, selection, checker)
    finally:
        close()
    listing = {
        "action": action,
        "selected": selection.describe(),
        "runs": [r.id for r in found.todo],
        "diverging": found.diverging,
        "skipped": found.skipped,
        "capped": found.capped,
    }
    act = args.yes and not args.dry_run
    if not args.json:
        out.print(Text(found.summary()))
        for r in found.todo:
            out.print(Text(f"  {r.id}  ({r.workflow}, {r.status})"))
        for run_id, message in found.diverging.items():
            out.print(Text(f"  left out {run_id}: ", style="red").append(Text(message)))
        for run_id, reason in found.skipped.items():
            out.print(Text(f"  skipped {run_id}: {reason}", style="dim"))
    if not act:
        if args.json:
            _emit({**listing, "done": [], "refused": {}, "dry_run": True})
        elif found.todo:
            n = len(found.todo)
            out.print(Text(f"nothing done: run the same command with --yes to {action} these {n}"))
        return EXIT_OK

    def progress(outcome: Any, total: int) -> None:
        if not args.json:
            out.print(Text(f"{len(outcome.done) + len(outcome.refused)} of {total} done"), style="italic")

    outcome = bulk.act(runs, action, found.todo, progress=progress)
    if args.json:
        _emit({**listing, "done": outcome.done, "refused": outcome.refused, "dry_run": False})
        return EXIT_OK
    for run_id, why in outcome.refused.items():
        out.print(Text(f"  refused {run_id}: {why}", style="red"))
    verb = {"resume": "resumed", "retry": "retried", "cancel": "cancelled"}[action]
    out.print(Text(f"{verb} {len(outcome.done)} run(s); {len(outcome.refused)} had moved and were left"))
    return EXIT_OK


def _code_for_check(args: argparse.Namespace) -> tuple[Any, Callable[[], None]]:
    """The project's current code in a worker that replays without writing (as ``lunaflow
    check`` loads it), and how to close it."""
    if args.aws:
        rt = _aws(args, read_only=True)
        return rt.platform.worker, lambda: None
    platform = _read_only_platform(args, data_folder(args.project, args.data))
    return platform.worker, platform.close


def _read_only_platform(args: argparse.Namespace, data: Path) -> Any:
    """The project's code on the data folder's store, both opened read-only: nothing is
    migrated, applied or written (``lunaflow check``, a repair's preview)."""
    from runtime.platform.platform import Platform

    clock = SystemClock()
    store = SQLiteStore(data / STORE_FILE, read_only=True, clock=clock)
    try:
        return Platform(args.project, store, clock, read_only=True)
    except BaseException:
        store.close()
        raise


def cmd_migrate(args: argparse.Namespace) -> int:
    """Move a run pinned to older code to the current code, once that code replays it."""
    if args.aws:
        raise Usage(
            "lunaflow migrate works on a data folder; on AWS a pinned run moves with a deploy of code "
            "that replays it (docs/operations.md)"
        )
    from runtime.platform.platform import Platform
    from runtime.platform.versions import PinFile, SnapshotFolder

    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        raise Usage(
            f"no lunaflow data in {data}; run `lunaflow dev {args.project}` first, or pass --data DIR"
        )
    clock = SystemClock()
    platform = Platform(args.project, SQLiteStore(data / STORE_FILE), clock, read_only=True)
    try:
        platform.keep_versions(PinFile(data), SnapshotFolder(data))
        left = platform.migrate(args.run_id)
        current = platform.source.digest
    finally:
        platform.close()
    value = {"migrated": args.run_id, "from": left, "to": current}
    return _done(args, value, f"run {args.run_id} moved from code {left} to the current code {current}")


def _code_line(args: argparse.Namespace, runs: Runs, entries: list[Any], run_id: str) -> dict[str, Any]:
    """Which code a run runs on: the version it started on, and the one it is pinned to (the
    stack's run item with ``--aws``, the data folder's pins file otherwise)."""
    started = entries[0].data.get("code") if entries else None
    versions = getattr(runs, "versions", None)
    if versions is not None:
        pinned = versions.pinned(run_id)
    else:
        from runtime.platform.versions import PinFile

        pinned = PinFile(data_folder(args.project, args.data)).get(run_id)
    return {"started_on": started, "pinned_to": pinned}


def cmd_resume(args: argparse.Namespace) -> int:
    done = _bulk(args, "resume")
    if done is not None:
        return done
    runs = _open_runs(args)
    runs.resume(args.run_id)
    return _done(args, {"resumed": args.run_id}, f"resumed {args.run_id}")


def cmd_retry(args: argparse.Namespace) -> int:
    done = _bulk(args, "retry")
    if done is not None:
        return done
    runs = _open_runs(args)
    runs.retry(args.run_id)
    return _done(args, {"retried": args.run_id}, f"retried {args.run_id}: its step's next attempt runs now")


def cmd_cancel(args: argparse.Namespace) -> int:
    selected = _bulk(args, "cancel")
    if selected is not None:
        return selected
    runs = _open_runs(args)
    try:
        done = runs.cancel(args.run_id)
    except AlreadyCancelled as again:
        # The CLI cancel is idempotent: a repeat finishes the cascade (one a crash cut short),
        # says what it did, and succeeds, so a script may run it until it holds.
        value = {
            "cancelled": args.run_id,
            "children": again.below,
            "already_cancelled": True,
            "newly_cancelled": again.changed,
            "cleanup": False,
        }
        return _done(
            args, value, f"run {args.run_id} was already cancelled; its cascade is finished: {again.finished}"
        )
    value = {
        "cancelled": args.run_id,
        "children": done.below,
        "already_cancelled": False,
        "newly_cancelled": done.changed,
        "cleanup": done.cleanup,
    }
    if done.cleanup:
        note = f" (lunaflow show {args.run_id} follows it)"
        return _done(
            args,
            value,
            f"run {args.run_id} {CLEANUP_NOTE}{note}",
        )
    note = f" and the runs it started: {', '.join(done.below)}" if done.below else ""
    return _done(args, value, f"cancelled {args.run_id}{note}")


def cmd_signal(args: argparse.Namespace) -> int:
    runs = _open_runs(args)
    payload = _json_arg(args.payload, "the signal payload")
    live = runs.signal(args.run_id, args.name, payload)
    if args.json:
        _emit({"run": args.run_id, "signal": args.name, "delivered": live})
    elif live:
        out.print(Text(f"signal '{args.name}' sent to {args.run_id}"))
    else:
        out.print(Text(f"run {args.run_id} has ended; signal '{args.name}' was set aside"))
    return EXIT_OK if live else EXIT_SET_ASIDE


def cmd_start(args: argparse.Namespace) -> int:
    from runtime.engine.project import ProjectSource
    from runtime.platform.platform import Platform
    from runtime.services.local import LocalServices

    if args.payload is not None and args.signal is None:
        raise Usage("--payload is the payload of a signal sent with the start; name it with --signal NAME")
    payload = _json_arg(args.payload, "the signal payload")
    given = {"id": args.id, "timeout": args.timeout, "signal": args.signal, "payload": payload}
    if args.aws:
        run = _aws(args).platform.start(args.workflow, _json_arg(args.input, "the input"), **given)
        return _started(args, run, f"run {run.id} of {run.workflow} is {run.status} on AWS")
    data = data_folder(args.project, args.data)
    clock = SystemClock()
    source = ProjectSource.read(args.project)
    if not source.scripts:
        raise Usage(
            f"{Path(args.project).resolve()} has no .lua scripts, so it declares no workflow "
            f"'{args.workflow}'; name the project with --project PATH (or $LUNAFLOW_PROJECT)"
        )
    input_value = _json_arg(args.input, "the input")
    platform = Platform(
        args.project,
        SQLiteStore(data / STORE_FILE),
        clock,
        services=LocalServices(data, clock.now, source.queue_settings),
        observer=with_faults(None, os.environ),
    )
    try:
        before = platform.store.get_run(args.id) if args.id else None
        run = platform.start(args.workflow, input_value, **given)
    except UnknownWorkflow as e:
        raise UnknownWorkflow(args.workflow, where=str(Path(args.project).resolve())) from e
    finally:
        platform.close()
    # As the console says it: a start of an id that exists joins that run, its input unused.
    joined = before is not None
    text = (
        f"run {run.id} already existed, so the start joined it (the input given was not used); "
        if joined
        else ""
    ) + f"run {run.id} of {run.workflow} is {run.status}"
    if run.status not in ENDED:
        text += f"; `lunaflow dev {args.project}` advances it"
    return _started(args, run, text, joined=joined)


def _declared_schedules(args: argparse.Namespace) -> dict[str, Any]:
    from runtime.platform.describe import describe

    return describe(args.project).schedules


def _schedule_control(args: argparse.Namespace, rt: Any = None, platform: Any = None) -> Any:
    """Where the schedules' pauses live and how a trigger fires: the deployed stack's
    Scheduler with ``--aws``, else the data folder (``platform`` fires triggers there)."""
    if rt is not None:
        from runtime.aws.schedules import AwsSchedules

        return AwsSchedules(rt.clients.scheduler, rt.clients.sqs, rt.config)
    from runtime.platform.schedules import LocalSchedules

    return LocalSchedules(data_folder(args.project, args.data), platform)


def cmd_schedules(args: argparse.Namespace) -> int:
    from runtime.platform.schedules import schedule_rows

    declared = _declared_schedules(args)
    now = now_ms(SystemClock())
    runs: Runs | None
    rt = None
    if args.aws:
        rt = _aws(args, read_only=True)
        runs = rt.platform
    else:
        data = data_folder(args.project, args.data)
        runs = _open_runs(args, read_only=True) if (data / STORE_FILE).exists() else None
    try:
        rows = [r.as_json() for r in schedule_rows(declared, runs, _schedule_control(args, rt), now)]
    finally:
        if runs is not None:
            runs.store.close()
    if args.json:
        _emit(rows)
        return EXIT_OK
    out.print(f"{len(rows)} schedule(s)", style="italic")
    if not rows:
        return EXIT_OK
    columns = [("schedule", WHOLE), ("workflow", WHOLE), ("when", WRAPS), ("state", WHOLE)]
    columns += [("next tick", WHOLE), ("last run", WHOLE)]
    table = [
        [
            Text(r["schedule"]),
            Text(r["workflow"]),
            Text(f"{r['when']} ({r['timezone']})" if r["timezone"] != "UTC" else r["when"]),
            Text("paused" if r["paused"] else "active"),
            Text(r["next_tick"] or "none (window over)"),
            Text("none" if r["last_run"] is None else f"{r['last_run']['id']} ({r['last_run']['status']})"),
        ]
        for r in rows
    ]
    _print_table(None, columns, table)
    return EXIT_OK


def cmd_limits(args: argparse.Namespace) -> int:
    """Flow control: what holds and waits for each key's slots, and the limits set at run time."""
    from runtime.platform.flow import limit_rows, set_limit

    changing = args.action in ("set", "clear")
    if changing and not args.name:
        raise Usage(f"lunaflow limits {args.action} needs a NAME: a key (sync/acme), sync/* or rate:BUCKET")
    if args.action == "set" and args.value is None:
        raise Usage("lunaflow limits set NAME VALUE needs a VALUE: a number of slots, or a rate like 10/s")
    runs = _open_runs(args, read_only=not changing)
    try:
        admitted: list[str] = []
        if args.action == "set":
            note = _unknown_scope_note(args, runs)
            if note is not None:
                err.print(Text(note))
        if changing:
            admitted = set_limit(runs.store, args.name, args.value if args.action == "set" else None)
        rows = limit_rows(runs.store)
        settings = runs.store.flow_settings()
    finally:
        runs.store.close()
    if args.json:
        _emit(
            {
                "keys": [
                    {
                        "key": r.key,
                        "limit": r.limit,
                        "in_use": r.in_use,
                        "waiting": r.waiting,
                        "setting": r.setting,
                        "next_in_line": r.next_in_line,
                    }
                    for r in rows
                ],
                "settings": settings,
                "admitted": admitted,
            }
        )
        return EXIT_OK
    if changing:
        what = (
            f"{args.name} = {args.value}"
            if args.action == "set"
            else f"{args.name} cleared (the code's limit holds)"
        )
        out.print(
            f"{what}; {len(admitted)} waiting run(s) admitted"
            + (f": {', '.join(admitted)}" if admitted else "")
        )
    out.print(f"{len(rows)} key(s) with runs holding or waiting for a slot", style="italic")
    if rows:
        columns = [("key", WHOLE), ("in use", WHOLE), ("waiting", WHOLE), ("next in line", WRAPS)]
        table = [
            [
                Text(r.key),
                Text(f"{r.in_use} of {r.limit}" + (" (set)" if r.setting is not None else "")),
                Text(str(r.waiting)),
                Text(", ".join(r.next_in_line[:5]) + (" ..." if r.waiting > 5 else "")),
            ]
            for r in rows
        ]
        _print_table(None, columns, table)
    if settings:
        out.print("settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
    return EXIT_OK


def _unknown_scope_note(args: argparse.Namespace, runs: Runs) -> str | None:
    """``unknown_scope``'s note for ``limits set``; none when the project cannot be read (what
    its code declares is then not known)."""
    from runtime.engine.project import ProjectSource
    from runtime.platform.describe import describe
    from runtime.platform.flow import unknown_scope

    try:
        source = ProjectSource.read(args.project)
        workflows = describe(args.project, source).workflows
    except (LunaflowError, OSError, UnicodeError):
        return None
    in_use = [v.key for v in runs.store.slot_views(1000)]
    return unknown_scope(args.name, workflows, source.texts, in_use)


def cmd_schedule(args: argparse.Namespace) -> int:
    from runtime.platform.schedules import find

    schedule = find(_declared_schedules(args), args.name)
    tick = now_ms(SystemClock()) // 1000 * 1000
    where = " on AWS" if args.aws else ""
    platform = None
    if args.action != "trigger" and not args.aws:
        _local_data(args)  # a pause is a file in the data folder: checked and said as a secret's
    if args.action == "trigger" and not args.aws:
        from runtime.engine.project import ProjectSource
        from runtime.platform.platform import Platform
        from runtime.services.local import LocalServices

        data = _local_data(args)
        clock = SystemClock()
        platform = Platform(
            args.project,
            SQLiteStore(data / STORE_FILE),
            clock,
            services=LocalServices(data, clock.now, ProjectSource.read(args.project).queue_settings),
        )
    try:
        control = _schedule_control(args, _aws(args) if args.aws else None, platform)
        if args.action == "trigger":
            started = control.trigger(schedule, tick)
        else:
            control.set_paused(schedule.name, args.action == "pause")
    finally:
        if platform is not None:
            platform.close()
    if args.action == "trigger" and not started:
        out.print(f"schedule {schedule.name}: an earlier run is still going (overlap = skip); none started")
        return EXIT_OK
    said = {
        "pause": f"schedule {schedule.name} is paused{where}: its ticks start no run until resumed",
        "resume": f"schedule {schedule.name} is active{where}; its next tick starts a run",
        "trigger": f"schedule {schedule.name} triggered{where}: run {schedule.run_id(tick)}",
    }[args.action]
    run_id = schedule.run_id(tick) if args.action == "trigger" else None
    value = {"schedule": schedule.name, "action": args.action, "run_id": run_id}
    return _done(args, value, said)


def _started(args: argparse.Namespace, run: RunRecord, text: str, joined: bool | None = None) -> int:
    """What a start prints; with ``--signal``, whether the signal was delivered or, the run
    having ended, set aside (exit 3, as ``lunaflow signal`` says it). ``joined``: whether the
    id named a run that existed (None: not known, on AWS)."""
    said = _run_dict(run) if joined is None else {**_run_dict(run), "joined": joined}
    if args.signal is None:
        return _done(args, said, text)
    delivered = run.status not in ENDED
    if args.json:
        _emit({**said, "signal": args.signal, "delivered": delivered})
    elif delivered:
        out.print(Text(f"{text}; signal '{args.signal}' delivered"))
    else:
        ended = f"run {run.id} of {run.workflow} has ended ({run.status})"
        out.print(Text(f"{ended}; signal '{args.signal}' was set aside"))
    return EXIT_OK if delivered else EXIT_SET_ASIDE


def cmd_secret_set(args: argparse.Namespace) -> int:
    if args.aws:
        version = _aws(args).store.add_secret(args.name, args.value)
        return _done(
            args, {"secret": args.name, "version": version}, f"secret {args.name} is now version {version}"
        )
    data = _local_data(args)
    store = SQLiteStore(data / STORE_FILE)
    try:
        version = store.add_secret(args.name, args.value)
    finally:
        store.close()
    return _done(
        args, {"secret": args.name, "version": version}, f"secret {args.name} is now version {version}"
    )


def _local_data(args: argparse.Namespace) -> Path:
    """The data folder a command that writes settings (a secret, a schedule's pause) writes
    to: the project's own only for a project folder that is one (a mistyped -p made a folder
    and a data folder in it), and said when the folder holds no data yet (a mistyped --data
    made a folder no server reads, and the command said nothing)."""
    if args.data is None:
        try:
            check_project(args.project)
        except NotAProject as e:
            raise Usage(str(e)) from None
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        err.print(
            Text(
                f"note: {data} holds no lunaflow data yet; it is made now, and a `lunaflow dev` "
                "serving that folder (its project's .lunaflow, or the same --data) will read it"
            )
        )
    return data


def cmd_record(args: argparse.Namespace) -> int:
    """Record a run's journal as a golden of the project (tests/golden/), which `lunaflow
    test` and `lunaflow check` replay on the project's code from then on."""
    from runtime.dev.golden import write_golden

    try:
        check_project(args.project)
    except NotAProject as e:
        raise Usage(str(e)) from None
    runs = _open_runs(args, read_only=True)
    try:
        run = runs.get(args.run_id)
        entries = runs.journal(run.id)
    finally:
        runs.store.close()
    path = write_golden(args.project, run, entries, name=args.name)
    value = {"run": run.id, "workflow": run.workflow, "status": run.status, "entries": len(entries)}
    return _done(
        args,
        {**value, "golden": str(path)},
        f"recorded run {run.id} ({run.workflow}, {run.status}, {len(entries)} journal entries) in {path}; "
        f"`lunaflow test {args.project}` and `lunaflow check {args.project}` replay it",
    )


def cmd_check(args: argparse.Namespace) -> int:
    """Replay in-flight runs and goldens on the project's code. Read-only: the store and the
    databases are opened without writing, the code's migrations are reported, not applied."""
    from runtime.dev.check import check_runs
    from runtime.dev.golden import golden_files, load_project, replay_goldens
    from runtime.services.local import pending_migrations

    goldens = replay_goldens(args.project)
    if args.aws:
        from runtime.aws.database import pending_migrations as aws_pending

        runtime = _aws(args, read_only=True)
        worker = runtime.platform.worker
        pending = aws_pending(runtime.databases, worker.declarations, worker.project_root, worker.source.name)
        return _report_check(args, check_runs(worker, runtime.store), goldens, pending)
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        if golden_files(args.project):
            return _report_check(args, None, goldens)
        load_project(args.project)  # nothing to replay, but code that cannot load is still refused
        raise Usage(
            f"no lunaflow data in {data} and no golden journals in {args.project}/tests/golden: there "
            "are no runs to check; the project loads (pass --data DIR to point elsewhere; "
            "`lunaflow record RUN_ID` records a golden)"
        )
    platform = _read_only_platform(args, data)
    try:
        worker = platform.worker
        migrations = pending_migrations(data, worker.declarations, worker.project_root, worker.source.name)
        verdicts = check_runs(worker, platform.store)
    finally:
        platform.close()
    return _report_check(args, verdicts, goldens, migrations)


def _report_check(
    args: argparse.Namespace,
    verdicts: list[Any] | None,
    goldens: list[Any],
    migrations: dict[str, list[str]] | None = None,
) -> int:
    """The verdicts on in-flight runs (None: no data folder to read) and on golden journals,
    and the migrations the code would apply to the data folder's databases."""
    diverging = [v for v in verdicts or [] if v.diverges]
    failing = [g for g in goldens if not g.passed]
    migrations = migrations or {}
    if args.json:
        # Golden journals and pending migrations join the list only when there are some, so
        # the JSON of a project without them is what it was.
        _emit(
            [v.__dict__ for v in verdicts or []]
            + [{**g.__dict__, "golden": g.file} for g in goldens]
            + [{"database": db, "would_apply": files} for db, files in sorted(migrations.items())]
        )
    else:
        for db, files in sorted(migrations.items()):
            out.print(
                Text(
                    f"database '{db}': would apply {', '.join(files)} (not applied by check; they apply "
                    "when this code is served: `lunaflow dev`, or a deploy)"
                )
            )
        if verdicts is not None and not verdicts:
            out.print(Text("no runs are in flight, so none can diverge; only new runs will use this code"))
        elif verdicts is not None:
            rows = [
                [
                    Text(v.run_id),
                    Text(v.workflow),
                    _status(v.status),
                    Text(v.message, style="red" if v.diverges else ""),
                ]
                for v in verdicts
            ]
            _print_table(
                f"{len(verdicts)} in-flight run(s), {len(diverging)} would diverge",
                [("run", WHOLE), ("workflow", WHOLE), ("status", WHOLE), ("verdict", WRAPS)],
                rows,
            )
        if goldens:
            rows = [
                [
                    Text(g.file),
                    Text(g.run_id),
                    Text(g.workflow),
                    Text(g.status),
                    Text(g.message, style="" if g.passed else "red"),
                ]
                for g in goldens
            ]
            _print_table(
                f"{len(goldens)} golden journal(s), {len(failing)} would not replay",
                [
                    ("golden", WHOLE),
                    ("run", WHOLE),
                    ("workflow", WHOLE),
                    ("recorded", WHOLE),
                    ("verdict", WRAPS),
                ],
                rows,
            )
    return EXIT_REFUSED if diverging or failing else EXIT_OK


def cmd_test(args: argparse.Namespace) -> int:
    from runtime.dev.luatest import run_tests

    project = Path(args.project)
    if not (project / "tests").is_dir():
        raise Usage(f"{project} has no tests/ folder; write tests/*_test.lua (lunaflow new scaffolds one)")
    report = run_tests(project, pattern=args.k, out=sys.stdout)
    if not report.outcomes:
        # Exit 1 with "0 passed, 0 failed" and no reason looked like a crash.
        chosen = f"matches -k {args.k!r}" if args.k else "is there"
        err.print(
            Text(
                f'no test {chosen} in {project}: a test is a test "name" (function(p) ... end) in '
                "tests/*_test.lua, or a golden journal in tests/golden/; check the pattern, or write one"
            )
        )
    return EXIT_REFUSED if report.failed or not report.outcomes else EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    from runtime.dev.scaffold import scaffold

    created = scaffold(Path(args.name))
    for path in created:
        out.print(Text(f"created {path}"))
    out.print(Text(f"next: lunaflow test {args.name} && lunaflow dev {args.name}"))
    return EXIT_OK


def cmd_deploy(args: argparse.Namespace) -> int:
    """Check in-flight runs against the new code, then `npx cdk deploy`; refuse on divergence."""
    import subprocess

    args.json = False
    args.aws = args.data is None  # the deployed stack's runs, unless a local folder is named
    verdict = cmd_check(args)
    if verdict != EXIT_OK and not args.force:
        err.print(
            "lunaflow deploy: refused — the new code would make in-flight runs diverge, or golden "
            "journals fail to replay (listed above). "
            'Keep the old step names, branch with wf:version("change-id"), or pass --force to deploy anyway'
        )
        return EXIT_REFUSED
    command = ["npx", "cdk", "deploy", "-c", f"project={args.project}"]
    if args.stack:
        command += ["-c", f"stack={args.stack}"]
    if args.force:
        # The gate inside cdk deploy replays the runs again; --force lets it pass too, and its
        # DeployGateReport output names the runs the deploy breaks.
        command += ["-c", "force=true"]
    if args.dry_run:
        out.print(Text("would run: " + " ".join(command)))
        return EXIT_OK
    return subprocess.call(command)


def _done(args: argparse.Namespace, value: Any, text: str) -> int:
    if args.json:
        _emit(value)
    else:
        out.print(Text(text))
    return EXIT_OK


def _json_arg(text: str | None, what: str) -> Any:
    """A JSON argument. Text that cannot be read as JSON (malformed, nested too deep for the
    parser, an integer past Python's digit limit) is bad usage; a value the platform then
    refuses (too big, too deep to keep) is a refusal, as from any other client."""
    if text is None:
        return None
    example = 'quote it for the shell, e.g. \'{"by": "ada"}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Usage(f"{what} is not valid JSON ({e}); {example}") from None
    except RecursionError:
        raise Usage(
            f"{what} is nested too deeply to read; keep values under {values.MAX_DEPTH} levels"
        ) from None
    except ValueError as e:  # an integer literal past Python's digit limit
        raise Usage(f"{what} holds a number too long to read ({e}); send big numbers as strings") from None
    return value


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more (got {text!r})")
    return int(text)


# --- the parser --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lunaflow", description="Durable workflows written in Lua.")
    parser.add_argument("--version", action="version", version=f"lunaflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def console(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument(
            "--project",
            "-p",
            default=os.environ.get("LUNAFLOW_PROJECT", "."),
            help="the project folder (default: $LUNAFLOW_PROJECT or .)",
        )
        p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")
        p.add_argument(
            "--aws", action="store_true", help="work on the deployed stack instead of a data folder"
        )
        p.add_argument("--stack", help="with --aws: " + STACK_HELP)
        return p

    p = sub.add_parser("dev", help="serve a project locally: fetch routes, runs, timers, /_console")
    p.add_argument("project")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8787, help="0 to 65535; 0 picks a free one")
    p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
    p.add_argument("--no-reload", action="store_true", help="do not reload the project when its files change")
    p.add_argument(
        "--workers",
        type=_run_workers,
        default=RUN_WORKERS,
        help=f"runs advanced at once, a Lua state each (1-64, default {RUN_WORKERS})",
    )
    p.add_argument(
        "--stuck-after",
        type=_stuck_after,
        default=STUCK_AFTER_S,
        help="warn of a run woken this long ago and not taken by a worker (a duration; default 5m)",
    )
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", help="print failures only (failed attempts and runs, warnings)"
    )
    loud.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print every step attempt that succeeded and signals",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="serve requests for this Host name too (loopback names always are); repeatable",
    )
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser(
        "check",
        help="replay in-flight runs and golden journals against the current code; list those that diverge",
    )
    p.add_argument("project")
    p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--aws", action="store_true", help="check the deployed stack's runs against this code")
    p.add_argument("--stack", help="with --aws: " + STACK_HELP)
    p.set_defaults(func=cmd_check)

    p = console("record", "record a run's journal as a golden of the project (tests/golden/)")
    p.add_argument("run_id")
    p.add_argument("--name", help="the golden's file name, without .json (default: the run id)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser(
        "test",
        help="run the project's Lua tests (tests/*_test.lua) on a fake clock and replay its golden journals",
    )
    p.add_argument("project")
    p.add_argument("-k", help="run only tests whose name contains this")
    p.set_defaults(func=cmd_test)

    p = sub.add_parser(
        "new", help="scaffold a project: a workflow, a route, a migration, a test, editor types"
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("deploy", help="check in-flight runs against the new code, then cdk deploy")
    p.add_argument("project")
    p.add_argument("--stack", help=STACK_HELP)
    p.add_argument("--data", help="check a local data folder instead of the deployed stack")
    p.add_argument("--force", action="store_true", help="deploy even if in-flight runs would diverge")
    p.add_argument(
        "--dry-run", action="store_true", help="check, then print the deploy command instead of running it"
    )
    p.set_defaults(func=cmd_deploy, aws=None)

    p = console("runs", "list runs, newest first")
    p.add_argument(
        "--status", choices=["running", "sleeping", "awaiting", "failed", "completed", "cancelled"]
    )
    p.add_argument("--workflow")
    p.add_argument("--limit", type=_positive, default=100, help="at most this many runs (default 100)")
    p.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="runs whose published value (wf:set) matches: month=7, state=paid, 'month>=3'; repeatable",
    )
    p.set_defaults(func=cmd_runs)

    p = console("show", "one run's journal as a timeline")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_show)

    def repair(name: str, help: str) -> argparse.ArgumentParser:
        p = console(name, help)
        p.add_argument("run_id", nargs="?", help="the run; or select runs with the options below")
        p.add_argument("--status", choices=[s.value for s in Status], help="select runs of this status")
        p.add_argument("--workflow", help="select runs of this workflow")
        p.add_argument("--since", help="select runs started at or after (UTC: 2026-11-01, 2026-11-01T09:30)")
        p.add_argument("--until", help="select runs started before (UTC)")
        p.add_argument("--where", action="append", help="select runs by a value they published: KEY=VALUE")
        p.add_argument("--dry-run", action="store_true", help="show what would be done (the default)")
        p.add_argument("--yes", action="store_true", help="act on every run the preview lists")
        return p

    p = console("migrate", "move a run pinned to older code to the current code, once it replays the run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_migrate)

    p = repair("resume", "resume a failed run, or every selected failed run the code replays")
    p.set_defaults(func=cmd_resume)

    p = repair("retry", "run a step's next attempt now, skipping its backoff (one run, or a selection)")
    p.set_defaults(func=cmd_retry)

    p = repair("cancel", "cancel a run and the runs it started (one run, or a selection)")
    p.set_defaults(func=cmd_cancel)

    p = console("signal", "send a signal to a run")
    p.add_argument("run_id")
    p.add_argument("name")
    p.add_argument("payload", nargs="?", help="JSON")
    p.set_defaults(func=cmd_signal)

    p = console("start", "start a run (or join the run with that id)")
    p.add_argument("workflow")
    p.add_argument("input", nargs="?", help="JSON")
    p.add_argument("--id", help="the run id (default: a fresh UUID)")
    p.add_argument(
        "--timeout", help='bound the run in time, e.g. "30d" (default: the workflow\'s own, or none)'
    )
    p.add_argument(
        "--signal",
        metavar="NAME",
        help="signal-with-start: deliver this signal too, written with the run in one write "
        "(or sent to the run with that id)",
    )
    p.add_argument("--payload", metavar="JSON", help="the signal's payload")
    p.set_defaults(func=cmd_start)

    p = console("schedules", "list the project's schedules: state, next tick, last run")
    p.set_defaults(func=cmd_schedules)

    p = console("limits", "flow control: runs holding and waiting for each key's slots; set a limit")
    p.add_argument("action", nargs="?", choices=["list", "set", "clear"], default="list")
    p.add_argument("name", nargs="?", help="a key (sync/acme), every key of a limit (sync/*) or rate:BUCKET")
    p.add_argument("value", nargs="?", help="a number of slots, or a rate like 10/s")
    p.set_defaults(func=cmd_limits)

    p = console("schedule", "pause or resume a schedule, or trigger a tick now")
    p.add_argument("action", choices=["pause", "resume", "trigger"])
    p.add_argument("name")
    p.set_defaults(func=cmd_schedule)

    p = console("secret", "manage secrets")
    secret_sub = p.add_subparsers(dest="secret_command", required=True)
    s = secret_sub.add_parser("set", help="add a new version of a secret (runs already pinned keep theirs)")
    s.add_argument("name")
    s.add_argument("value")
    s.add_argument("--project", "-p", default=os.environ.get("LUNAFLOW_PROJECT", "."))
    s.add_argument("--data")
    s.add_argument("--json", action="store_true")
    s.add_argument("--aws", action="store_true", help="set it in the deployed stack's Secrets Manager")
    s.add_argument("--stack")
    s.set_defaults(func=cmd_secret_set)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command's exit code. The ``lunaflow`` script pip installs calls this, so what
    must never reach the user as a traceback is caught here."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`lunaflow runs --json | head`): nothing left to say to it.
        # Later writes (the interpreter's last flush) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (Usage, NoProjectFolder) as e:  # a folder that is none is bad usage, whichever command
        err.print(f"lunaflow {args.command}: {e}")
        return EXIT_USAGE
    except NoSuchRun as e:
        err.print(f"lunaflow {args.command}: {e}; {_where_runs_are(args)}")
        return EXIT_REFUSED
    except LunaflowError as e:
        err.print(f"lunaflow {args.command}: {e}")
        return EXIT_REFUSED
    except sqlite3.DatabaseError as e:  # a data file other than the store's (kv, queues)
        folder = data_folder(getattr(args, "project", "."), getattr(args, "data", None))
        err.print(
            f"lunaflow {args.command}: a data file in {folder} cannot be read ({e}); lunaflow reads its "
            "SQLite files only whole — move the damaged file away, or put back a backup"
        )
        return EXIT_REFUSED


def _where_runs_are(args: argparse.Namespace) -> str:
    """The hint after ``no run 'x'``: where the command looked, and how to list what is there."""
    if getattr(args, "aws", False):
        from runtime.aws.contract import stack_name

        stack = getattr(args, "stack", None) or stack_name(Path(args.project).resolve().name)
        return f"the runs of stack '{stack}' are listed by `lunaflow runs --aws`"
    folder = data_folder(getattr(args, "project", "."), getattr(args, "data", None))
    return f"the runs in {folder} are listed by `lunaflow runs` (another project's data: --data DIR)"


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
