"""The console as CloudWatch custom widgets: what one widget call shows and does.

CloudWatch calls the console function with the widget's params as top-level keys (``view``:
runs, run or value; ``run_id``; the runs list's filters) and a ``widgetContext``; a clicked
``cwdb-action`` adds its JSON's keys (``action``: resume, cancel, signal, start, search;
schedule with ``schedule`` and ``do``: pause, resume or trigger; bulk with ``do``: resume,
retry or cancel every run of the search its other keys hold)
and the values of the widget's inputs arrive under ``widgetContext.forms.all``. Times are
written in the dashboard's time zone. Resume and cancel are confirmed by CloudWatch itself
(the ``confirmation`` attribute); no token is needed, since only a signed-in console user can
make the dashboard call the function.

What differs from the local page: no script runs in a widget, so it does not update itself
(the dashboard's refresh renders it again), ids have no copy button, and JSON typed into a
form is checked when it reaches the function, not as it is typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.console import render
from runtime.console.actions import CloudWatchActions
from runtime.console.html import Zone, e
from runtime.console.search import RunQuery
from runtime.errors import LunaflowError
from runtime.platform.runs import CLEANUP_NOTE, Runs
from runtime.platform.schedules import ScheduleControl

SEARCH_FIELDS = ("id", "status", "workflow", "since", "until")


def widget_page(
    runs: Runs,
    actions: CloudWatchActions,
    event: Mapping[str, Any],
    schedules: ScheduleControl | None = None,
) -> str:
    context = _dict(event.get("widgetContext"))
    zone = Zone.from_widget(context)
    typed = {k: v for k, v in _dict(_dict(context.get("forms")).get("all")).items() if isinstance(v, str)}
    view, action, run_id = event.get("view", "runs"), event.get("action"), event.get("run_id")
    run_id = run_id if isinstance(run_id, str) and run_id else None
    now = runs.clock.now()
    try:
        if view == "value" and run_id is not None:
            try:
                return render.value_page(runs, actions, run_id, str(event.get("ref", "")))
            except KeyError:
                return f"<div class='lf'><p>run {e(run_id)} has no value {e(event.get('ref'))}</p></div>"
        if action == "start":
            try:
                run, said = render.start_run(
                    runs,
                    typed.get("start_workflow", ""),
                    typed.get("start_input", ""),
                    typed.get("start_id", ""),
                    typed.get("start_signal", ""),
                    typed.get("start_payload", ""),
                )
            except LunaflowError as err:
                form = render.Form(typed, str(err))
                return render.runs_page(
                    runs, actions, RunQuery(), zone=zone, now=now, start_form=form, schedules=schedules
                )
            return render.run_page(runs, actions, run.id, zone=zone, now=now, notice=said)
        if action == "bulk":  # CloudWatch confirmed it, naming the count
            query = RunQuery.read(dict(event), zone)
            said = render.repair(runs, str(event.get("do", "")), query)
            return render.runs_page(
                runs, actions, query, zone=zone, now=now, notice=said, schedules=schedules
            )
        if action == "schedule" and schedules is not None:
            said = render.act_on_schedule(
                runs, schedules, str(event.get("schedule", "")), str(event.get("do", "")), now
            )
            return render.runs_page(
                runs, actions, RunQuery(), zone=zone, now=now, notice=said, schedules=schedules
            )
        if view == "run":
            journal = render.read_journal_page(event.get("journal"))
            return _run_view(runs, actions, run_id, action, typed, zone, now, journal)
        params = {k: typed[k] for k in SEARCH_FIELDS if k in typed} if action == "search" else dict(event)
        return render.runs_page(
            runs, actions, RunQuery.read(params, zone), zone=zone, now=now, schedules=schedules
        )
    except LunaflowError as err:
        return f"<div class='lf'><p class='err'>{e(err)}</p>{actions.list_link('all runs')}</div>"


def _dict(value: object) -> dict[str, Any]:
    return {k: v for k, v in value.items() if isinstance(k, str)} if isinstance(value, dict) else {}


def _run_view(
    runs: Runs,
    actions: CloudWatchActions,
    run_id: str | None,
    action: object,
    typed: dict[str, str],
    zone: Zone,
    now: float,
    journal: int | None = None,
) -> str:
    if run_id is None:
        latest = runs.runs(status="failed", limit=1) or runs.runs(limit=1)
        if not latest:
            return "<div class='lf'><p>No runs yet.</p></div>"
        run_id = latest[0].id
    notice = None
    if action in ("resume", "cancel"):
        if action == "resume":
            runs.resume(run_id)
            notice = f"Run {run_id} resumed."
        elif runs.cancel(run_id).cleanup:
            notice = f"Run {run_id} {CLEANUP_NOTE}."
        else:
            notice = f"Run {run_id} cancelled."
    elif action == "retry":
        runs.retry(run_id)
        notice = f"Run {run_id} retried: its step's next attempt runs now."
    elif action == "signal":
        try:
            notice = render.send_signal(
                runs, run_id, typed.get("signal_name", ""), typed.get("signal_payload", "")
            )
        except LunaflowError as err:
            form = render.Form(typed, str(err))
            return render.run_page(runs, actions, run_id, zone=zone, now=now, signal_form=form)
    return render.run_page(runs, actions, run_id, zone=zone, now=now, notice=notice, journal_page=journal)
