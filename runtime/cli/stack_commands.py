"""The commands on what runs beside the runs: ``schedules`` and ``schedule``, ``limits``
and ``secret``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from rich.text import Text

from runtime.cli import output
from runtime.cli.common import Subparsers, Usage, _aws, _done, _local_data, _open_runs
from runtime.cli.output import EXIT_OK, WHOLE, WRAPS, _emit, _print_table
from runtime.core.clock import SystemClock, now_ms
from runtime.dev.server import data_folder
from runtime.errors import LunaflowError
from runtime.platform.runs import Runs
from runtime.store.sqlite import STORE_FILE, SQLiteStore


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
    output.out.print(f"{len(rows)} schedule(s)", style="italic")
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
                output.err.print(Text(note))
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
        output.out.print(
            f"{what}; {len(admitted)} waiting run(s) admitted"
            + (f": {', '.join(admitted)}" if admitted else "")
        )
    output.out.print(f"{len(rows)} key(s) with runs holding or waiting for a slot", style="italic")
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
        output.out.print("settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
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
        output.out.print(
            f"schedule {schedule.name}: an earlier run is still going (overlap = skip); none started"
        )
        return EXIT_OK
    said = {
        "pause": f"schedule {schedule.name} is paused{where}: its ticks start no run until resumed",
        "resume": f"schedule {schedule.name} is active{where}; its next tick starts a run",
        "trigger": f"schedule {schedule.name} triggered{where}: run {schedule.run_id(tick)}",
    }[args.action]
    run_id = schedule.run_id(tick) if args.action == "trigger" else None
    value = {"schedule": schedule.name, "action": args.action, "run_id": run_id}
    return _done(args, value, said)


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


def add_commands(sub: Subparsers, console: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The subcommands of this module, on the parser ``main`` builds."""
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
