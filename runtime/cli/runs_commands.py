"""The commands on runs: ``runs``, ``show``, ``start``, ``signal``, ``resume``, ``retry``,
``cancel`` (one run or a selection) and ``migrate``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from runtime.cli import output
from runtime.cli.common import (
    Subparsers,
    Usage,
    _aws,
    _code_for_check,
    _done,
    _json_arg,
    _moment,
    _open_runs,
    _started,
)
from runtime.cli.output import (
    EXIT_OK,
    EXIT_SET_ASIDE,
    WHOLE,
    WRAPS,
    _current,
    _emit,
    _print_table,
    _run_dict,
    _status,
    _when,
)
from runtime.console import timeline
from runtime.core.clock import SystemClock
from runtime.core.journal import ENDED, Status, generations
from runtime.core.published import parse_where
from runtime.dev.server import data_folder
from runtime.dev.terminal import duration
from runtime.errors import (
    AlreadyCancelled,
    UnknownWorkflow,
)
from runtime.platform.faults import with_faults
from runtime.platform.runs import CLEANUP_NOTE, Runs
from runtime.store.sqlite import STORE_FILE, SQLiteStore


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
    output.out.print(f"{len(found)} run(s)", style="italic")
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
    output.out.print(head.append(_status(run.status)))
    output.out.print(Text(f"started {_when(run.created_at)}  updated {_when(run.updated_at)}"))
    if run.expires_at is not None:
        output.out.print(Text(f"deleted at {_when(run.expires_at)} UTC ([runs] retention in lunaflow.toml)"))
    output.out.print(Text("why ").append(Text(moving.text, style="red" if moving.stuck else "")))
    if code["pinned_to"]:
        output.out.print(
            Text(
                f"code pinned to {code['pinned_to']} (the current code would not replay it; "
                f"lunaflow migrate {run.id} moves it once code that does is deployed)"
            )
        )
    elif code["started_on"]:
        output.out.print(Text(f"code started on {code['started_on']}"))
    if run.parent_id:
        output.out.print(Text(f"parent {run.parent_id}"))
    if children:
        output.out.print(Text(f"children {', '.join(children)}"))
    if awaited is not None:
        output.out.print(Text(f"waiting for child {awaited}"))
    if len(gens) > 1:
        earlier = ", ".join(
            f"{g['generation']} (entries {g['first_seq']}-{g['last_seq']})" for g in gens[:-1]
        )
        output.out.print(Text(f"generation {gens[-1]['generation']}  earlier {earlier}"))
    if run.current_step and run.status not in ("completed", "cancelled"):
        output.out.print(Text(f"current {run.current_step}"))
    if due is not None:
        output.out.print(Text(f"timer due {_when(due / 1000)}"))
    if run.error:
        output.out.print(Text("error", style="red").append(" ").append(Text(run.error)))
    if run.status == "completed":
        output.out.print(Text(f"result {json.dumps(run.result, ensure_ascii=False)}"))
    for key, value in published.items():
        output.out.print(Text(f"value {key} = {json.dumps(value, ensure_ascii=False)}"))
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
    output.out.print(table)
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
        output.out.print(st)
    return EXIT_OK


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
        output.out.print(Text(found.summary()))
        for r in found.todo:
            output.out.print(Text(f"  {r.id}  ({r.workflow}, {r.status})"))
        for run_id, message in found.diverging.items():
            output.out.print(Text(f"  left out {run_id}: ", style="red").append(Text(message)))
        for run_id, reason in found.skipped.items():
            output.out.print(Text(f"  skipped {run_id}: {reason}", style="dim"))
    if not act:
        if args.json:
            _emit({**listing, "done": [], "refused": {}, "dry_run": True})
        elif found.todo:
            n = len(found.todo)
            output.out.print(Text(f"nothing done: run the same command with --yes to {action} these {n}"))
        return EXIT_OK

    def progress(outcome: Any, total: int) -> None:
        if not args.json:
            output.out.print(
                Text(f"{len(outcome.done) + len(outcome.refused)} of {total} done"), style="italic"
            )

    outcome = bulk.act(runs, action, found.todo, progress=progress)
    if args.json:
        _emit({**listing, "done": outcome.done, "refused": outcome.refused, "dry_run": False})
        return EXIT_OK
    for run_id, why in outcome.refused.items():
        output.out.print(Text(f"  refused {run_id}: {why}", style="red"))
    verb = {"resume": "resumed", "retry": "retried", "cancel": "cancelled"}[action]
    output.out.print(
        Text(f"{verb} {len(outcome.done)} run(s); {len(outcome.refused)} had moved and were left")
    )
    return EXIT_OK


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
        output.out.print(Text(f"signal '{args.name}' sent to {args.run_id}"))
    else:
        output.out.print(Text(f"run {args.run_id} has ended; signal '{args.name}' was set aside"))
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


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more (got {text!r})")
    return int(text)


def add_commands(sub: Subparsers, console: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The subcommands of this module, on the parser ``main`` builds."""
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
