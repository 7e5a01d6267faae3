"""The console's one renderer: the runs list and a run's page, for the local ``/_console``
page and for the CloudWatch custom widgets alike. Only links, buttons and forms differ
between the two (runtime/console/actions.py); what a page shows is written once, here.

A page's changing part is its ``live`` region (``runs_live``, ``run_live``): the local page
fetches it again every second or two and swaps it in, so a running run updates without a
reload; a widget is rendered whole at each dashboard refresh.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runtime.console import chart, timeline
from runtime.console.actions import Actions, CloudWatchActions, LocalActions
from runtime.console.html import STYLE, Zone, duration, e, json_value, moment, plural, pretty, status
from runtime.console.search import PAGE_SIZE, SCAN_LIMIT, STATUSES, Found, RunQuery, find_runs
from runtime.core import values
from runtime.core.journal import CANCELLABLE, ENDED, RESUMABLE, Entry, Kind, Status, generations
from runtime.errors import InvalidInput
from runtime.platform import bulk
from runtime.platform.flow import limit_rows
from runtime.platform.platform import Platform
from runtime.platform.runs import Runs, in_backoff
from runtime.platform.schedules import ScheduleControl, ScheduleRow, find, schedule_rows
from runtime.store.base import RunRecord

__all__ = [
    "PAGE_SIZE",
    "STATUSES",
    "STYLE",
    "Actions",
    "CloudWatchActions",
    "Form",
    "LocalActions",
    "RunQuery",
    "Zone",
    "e",
    "run_page",
    "runs_page",
]

POLL_MS = 1500  # how often the local page asks for its live region
# Journal items a run page lists at a time (a 10,000-step run's page was 4.1 MB, polled).
JOURNAL_PAGE = 200

LIMIT_ROWS = 20  # keys the runs page lists under flow control, busiest first


@dataclass(frozen=True)
class Form:
    """What a form was last sent with and what was wrong with it, to show it again."""

    values: dict[str, str]
    error: str


def declared_workflows(runs: Runs) -> list[str]:
    """The workflows the project declares (what can be started, what the filter offers);
    without code (a data folder alone) none are known."""
    return sorted(runs.code.workflows) if isinstance(runs, Platform) else []


# --- the runs list -------------------------------------------------------------------------


def runs_page(
    runs: Runs,
    actions: Actions,
    query: RunQuery | None = None,
    *,
    zone: Zone | None = None,
    now: float | None = None,
    notice: str | None = None,
    start_form: Form | None = None,
    schedules: ScheduleControl | None = None,
) -> str:
    """The runs list; with ``schedules`` (where the platform's schedules are paused and
    triggered) and code that declares some, the schedules below it."""
    query = query or RunQuery()
    zone = zone or Zone()
    now = runs.clock.now() if now is None else now
    workflows = declared_workflows(runs)
    parts = ["<div class='lf'><h1>Runs</h1>"]
    if notice:
        parts.append(f"<p class='note'>{e(notice)}</p>")
    parts.append(_search_form(actions, query, workflows, zone))
    poll = f" data-poll='{POLL_MS}'" if actions.live else ""
    parts.append(f"<div id='live'{poll}>{runs_live(runs, actions, query, zone=zone, now=now)}</div>")
    if query.selects():
        parts.append(_repair_bar(runs, actions, query, zone))
    if schedules is not None and isinstance(runs, Platform) and runs.worker.schedules:
        rows = schedule_rows(runs.worker.schedules, runs, schedules, int(now * 1000))
        parts.append(_schedules_table(actions, rows, zone, now))
    if workflows:
        parts.append(_start_form(actions, workflows, start_form))
    parts.append("</div>")
    return "".join(parts)


def runs_live(runs: Runs, actions: Actions, query: RunQuery, *, zone: Zone, now: float) -> str:
    return _runs_list(runs, actions, query, zone=zone, now=now) + _limits_table(runs, actions)


def _limits_table(runs: Runs, actions: Actions) -> str:
    """Flow control: each key with runs holding or waiting for its slots (issue 30.5)."""
    rows = limit_rows(runs.store, LIMIT_ROWS)
    if not rows:
        return ""
    parts = [
        "<h2 id='limits'>Flow control</h2><table class='limits'><tr><th>key</th><th>in use</th>"
        "<th>waiting</th><th>next in line</th></tr>"
    ]
    for r in rows:
        line = " ".join(actions.run_link(run_id, run_id) for run_id in r.next_in_line[:5])
        more = " <span class='muted'>…</span>" if r.waiting > 5 else ""
        setting = " <span class='muted'>(set at run time)</span>" if r.setting is not None else ""
        parts.append(
            f"<tr><td class='id'>{e(r.key)}</td><td>{r.in_use} of {r.limit}{setting}</td>"
            f"<td>{r.waiting}</td><td class='id'>{line}{more}</td></tr>"
        )
    parts.append(
        "</table><p class='muted'>Change a limit without a deploy: <code>lunaflow limits set KEY N</code> "
        "(a key, or <code>workflow/*</code> for every key of a limit).</p>"
    )
    return "".join(parts)


def _runs_list(runs: Runs, actions: Actions, query: RunQuery, *, zone: Zone, now: float) -> str:
    found = find_runs(runs, query)
    parts = [_counts(actions, query, found, zone)]
    for note in found.notes:
        parts.append(f"<p class='muted'>Ignored: {e(note)}.</p>")
    if found.capped:
        parts.append(
            f"<p class='muted'>The counts, and a search by id prefix or time, cover the newest {SCAN_LIMIT:,} runs "
            "of this selection; the pages go through all of them, and an exact run id is found however old.</p>"
        )
    if not found.runs:
        parts.append(
            f"<p class='empty'>No {e(query.describe(zone))}{' on this page' if query.page else ''}.</p>"
        )
        if query.page:
            parts.append(
                f"<div class='bar'>{actions.list_link('first page', **query.params(zone, page=''))}</div>"
            )
        return "".join(parts)
    first = query.page * PAGE_SIZE + 1
    total = f"{found.matching:,}" + ("+" if found.capped else "")
    parts.append(
        f"<p class='muted'>{e(query.describe(zone))}: {first:,}–{first + len(found.runs) - 1:,} of {total}</p>"
    )
    parts.append(
        "<table class='runs'><tr><th>run</th><th>workflow</th><th>status</th><th>current step</th><th>input</th>"
        "<th>result or error</th><th>parent</th><th>started</th><th>updated</th></tr>"
    )
    for r in found.runs:
        current = r.current_step if r.status not in ENDED else ""
        parts.append(
            f"<tr><td class='id'>{actions.run_link(r.id, r.id)}{actions.copy(r.id)}</td><td>{e(r.workflow)}</td>"
            f"<td>{status(r.status)}</td><td>{e(current or '')}</td>"
            f"<td class='wide'>{json_value(r.input, key='in-' + r.id, summary_limit=40)}</td>"
            f"<td class='wide'>{_outcome(r)}</td>"
            f"<td class='id'>{actions.run_link(r.parent_id, r.parent_id) if r.parent_id else ''}</td>"
            f"<td>{moment(r.created_at, zone, now)}</td><td>{moment(r.updated_at, zone, now)}</td></tr>"
        )
    parts.append("</table>")
    nav = []
    if query.page > 0:
        nav.append(actions.list_link("newer", **query.params(zone, page=str(query.page - 1))))
    if found.more:
        nav.append(actions.list_link("older", **query.params(zone, page=str(query.page + 1))))
    parts.append(f"<div class='bar'>{' '.join(nav)}</div>")
    return "".join(parts)


def _outcome(r: RunRecord) -> str:
    if r.status == Status.COMPLETED and not r.error:  # an error on a completed run: it cannot be read
        return json_value(r.result, key="out-" + r.id, summary_limit=40)
    if r.error:
        cut = r.error if len(r.error) <= 140 else r.error[:139] + "…"
        return f"<span class='err' title='{e(r.error)}'>{e(cut)}</span>"
    return ""


def _counts(actions: Actions, query: RunQuery, found: Found, zone: Zone) -> str:
    total = sum(found.counts.values())
    links = [
        actions.list_link(
            f"all {total:,}", "on" if query.status is None else "", **query.params(zone, status="", page="")
        )
    ]
    for s in STATUSES:
        css = f"st {s}" + (" on" if query.status == s else "")
        links.append(
            actions.list_link(f"{s} {found.counts.get(s, 0):,}", css, **query.params(zone, status=s, page=""))
        )
    return f"<div class='counts'>{''.join(links)}</div>"


def _search_form(actions: Actions, query: RunQuery, workflows: list[str], zone: Zone) -> str:
    statuses = "".join(
        f"<option value='{s}'{' selected' if s == (query.status or '') else ''}>{s or 'any status'}</option>"
        for s in ("", *STATUSES)
    )
    names = sorted(set(workflows) | ({query.workflow} if query.workflow else set()))
    flows = "<option value=''>any workflow</option>" + "".join(
        f"<option value='{e(w)}'{' selected' if w == query.workflow else ''}>{e(w)}</option>" for w in names
    )
    values = query.params(zone)
    fields = (
        f"<label>run id <input name='id' value='{e(query.id)}' placeholder='exact or prefix' size='22'></label>"
        f"<label>status <select name='status'>{statuses}</select></label>"
        f"<label>workflow <select name='workflow'>{flows}</select></label>"
        f"<label>started since <input type='datetime-local' name='since' value='{e(values.get('since', ''))}'></label>"
        f"<label>before <input type='datetime-local' name='until' value='{e(values.get('until', ''))}'></label>"
        f"<label>value <input name='where' value='{e(query.where)}' placeholder='month=7 or month&gt;=3' "
        "size='16'></label>"
        f"<span class='muted'>({e(zone.label)})</span>"
    )
    return actions.form("search", fields, "Search")


def _schedules_table(actions: Actions, rows: list[ScheduleRow], zone: Zone, now: float) -> str:
    parts = [
        "<h2 id='schedules'>Schedules</h2><table class='schedules'><tr><th>schedule</th><th>workflow</th>"
        "<th>when</th><th>overlap</th><th>state</th><th>next tick</th><th>last run</th><th></th></tr>"
    ]
    for r in rows:
        s = r.schedule
        when = r.when if s.timezone == "UTC" else f"{r.when} ({s.timezone})"
        state = (
            "<span class='st failed'>paused</span>" if r.paused else "<span class='st running'>active</span>"
        )
        nxt = "none (window over)" if r.next_tick_ms is None else moment(r.next_tick_ms / 1000, zone, now)
        if r.paused and r.next_tick_ms is not None:
            nxt += " <span class='muted'>(skipped while paused)</span>"
        last = (
            "none yet"
            if r.last_run is None
            else f"{actions.run_link(r.last_run.id, r.last_run.id)} {status(r.last_run.status)}"
        )
        toggle = (
            actions.schedule_button(
                s.name, "resume", "Resume", f"Resume schedule {s.name}? Its next tick starts a run."
            )
            if r.paused
            else actions.schedule_button(
                s.name,
                "pause",
                "Pause",
                f"Pause schedule {s.name}? Its ticks start no run until it is resumed.",
            )
        )
        trigger = actions.schedule_button(
            s.name,
            "trigger",
            "Trigger now",
            f"Trigger schedule {s.name} now? A tick's run of {s.workflow} starts.",
        )
        parts.append(
            f"<tr><td class='id'>{e(s.name)}</td><td>{e(s.workflow)}</td><td>{e(when)}</td><td>{e(s.overlap)}</td>"
            f"<td>{state}</td><td>{nxt}</td><td class='id'>{last}</td><td class='acts'>{toggle}{trigger}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


# --- repair by query: resume, retry or cancel what a search selects ---------------------------

REPAIR_LABELS = {"resume": "Resume", "retry": "Retry now", "cancel": "Cancel"}
REPAIR_STATUSES = {
    "resume": ("failed",),
    "retry": ("sleeping",),  # those waiting out a step's backoff: repair_counts tells them apart
    "cancel": ("running", "sleeping", "awaiting", "failed"),
}
# What a repair's confirmation says happens before it acts: a resume or retry hands each run
# to the current code, so the preview replays it; a cancel ends it as it stands, code unread.
_REPLAYED_FIRST = "Each is replayed on the current code first; those it would not replay are left out."
REPAIR_CHECKS = {
    "resume": _REPLAYED_FIRST,
    "retry": _REPLAYED_FIRST,
    "cancel": (
        "Nothing is replayed: each run not ended is cancelled as it stands (its on_cancel handler, "
        "if any, runs), with the runs it started."
    ),
}
# Sleeping runs whose last entry a search page reads to count the retryable: a read each (a
# wf:sleep's none), so few enough that a page, or a CloudWatch widget, renders in a second.
RETRY_COUNTED = 100


def repair_counts(runs: Runs, query: RunQuery) -> dict[str, str]:
    """How many of the search's runs each repair would be asked of, as a button says it
    ("" for none); the preview narrows it further (the runs the code would not replay).
    Resume and cancel go by status, from the search's own counts (no run is read). Retry
    reads each sleeping run's last entry, as the preview does: a ``wf:sleep`` sleeps too,
    and counting it offered runs the retry then skips. At most ``RETRY_COUNTED`` are read,
    newest first; past that the count ends in "+"."""
    found = find_runs(runs, query)
    counts = {
        action: sum(found.counts.get(st, 0) for st in statuses if query.status in (None, st))
        for action, statuses in REPAIR_STATUSES.items()
    }
    shown = {action: f"{n:,}" if n else "" for action, n in counts.items()}
    if counts["retry"]:
        n, more = bulk.count_in_backoff(runs, query.selection(), limit=RETRY_COUNTED)
        shown["retry"] = f"{n:,}+" if more else f"{n:,}" if n else ""
    return shown


def _repair_bar(runs: Runs, actions: Actions, query: RunQuery, zone: Zone) -> str:
    counts = repair_counts(runs, query)
    buttons = []
    for action, n in counts.items():
        if not n:
            continue
        what = "sleeping runs (those in a step's backoff)" if action == "retry" else "runs"
        label = f"{REPAIR_LABELS[action]} all {n} {'failed ' if action == 'resume' else ''}{what}"
        confirmation = (
            f"{REPAIR_LABELS[action]} the {n} {what} this search selects ({query.describe(zone)})? "
        )
        confirmation += REPAIR_CHECKS[action]
        buttons.append(actions.bulk_button(action, label, confirmation, query.params(zone)))
    if not buttons:
        return ""
    return "<div class='bar repair'><b>Repair what this search selects:</b> " + " ".join(buttons) + "</div>"


def repair_preview(runs: Runs, action: str, query: RunQuery) -> bulk.Preview:
    """The repair of a search's runs, previewed on the current code (a Lua state of its
    own: the platform's are serving)."""
    worker = runs.new_worker() if isinstance(runs, Platform) else None
    return bulk.preview(runs, action, query.selection(), worker)


def repair_page(actions: LocalActions, found: bulk.Preview, query: RunQuery, zone: Zone) -> str:
    """What a repair would do, and the button that does it (the local console's second step)."""
    verb = REPAIR_LABELS[found.action]
    rows = "".join(
        f"<li>{actions.run_link(r.id, r.id)} <span class='muted'>{e(r.workflow)}, {status(r.status)}</span></li>"
        for r in found.todo[:200]
    )
    more = f"<li class='muted'>and {len(found.todo) - 200:,} more</li>" if len(found.todo) > 200 else ""
    left = "".join(
        f"<li>{actions.run_link(run_id, run_id)}: <span class='err'>{e(why)}</span></li>"
        for run_id, why in list(found.diverging.items())[:200]
    )
    parts = [
        f"<div class='lf'><h1>{e(verb)} {len(found.todo):,} run(s)?</h1><p>{e(found.summary())}.</p>",
        f"<ul>{rows}{more}</ul>" if rows else "<p class='empty'>No run to act on.</p>",
    ]
    if left:
        parts.append(f"<p><b>Left out</b> (the current code would not replay them):</p><ul>{left}</ul>")
    bar = [actions.list_link("No, go back", **query.params(zone))]
    if found.todo:
        bar.insert(
            0,
            actions.bulk_confirm(
                found.action, f"Yes, {verb.lower()} these {len(found.todo):,}", query.params(zone)
            ),
        )
    parts.append(f"<div class='bar'>{''.join(bar)}</div></div>")
    return "".join(parts)


def repair(runs: Runs, action: str, query: RunQuery) -> str:
    """Preview, then act on what the preview lists; what happened, in words."""
    if action not in bulk.ACTIONS:
        raise InvalidInput(f"unknown repair {action!r}; the console resumes, retries and cancels runs")
    if not query.selects():
        raise InvalidInput(
            "a repair acts on a search's runs: search by status, workflow, id, time or value first"
        )
    found = repair_preview(runs, action, query)
    done = bulk.act(runs, action, found.todo)
    verb = {"resume": "Resumed", "retry": "Retried", "cancel": "Cancelled"}[action]
    said = f"{verb} {len(done.done):,} run(s)"
    if found.diverging:
        said += f"; {len(found.diverging):,} left out (the current code would not replay them: {', '.join(list(found.diverging)[:10])})"
    if done.refused:
        said += f"; {len(done.refused):,} had moved and were left"
    return said + "."


SCHEDULE_ACTIONS = ("pause", "resume", "trigger")


def act_on_schedule(runs: Runs, control: ScheduleControl, name: str, action: str, now: float) -> str:
    """Pause, resume or trigger a declared schedule; what happened, as the page says it."""
    if action not in SCHEDULE_ACTIONS:
        raise InvalidInput(
            f"unknown schedule action {action!r}; the console pauses, resumes and triggers schedules"
        )
    schedule = find(runs.worker.schedules if isinstance(runs, Platform) else {}, name)
    if action == "trigger":
        tick = int(now) * 1000
        if not control.trigger(schedule, tick):
            return f"Schedule {name}: an earlier run is still going (overlap = skip); none started."
        return f"Schedule {name} triggered: run {schedule.run_id(tick)}."
    control.set_paused(name, action == "pause")
    if action == "pause":
        return f"Schedule {name} is paused: its ticks start no run until it is resumed."
    return f"Schedule {name} is active: its next tick starts a run."


def _start_form(actions: Actions, workflows: list[str], form: Form | None) -> str:
    values = form.values if form else {}
    chosen = values.get("start_workflow", "")
    options = "".join(
        f"<option value='{e(w)}'{' selected' if w == chosen else ''}>{e(w)}</option>" for w in workflows
    )
    error = f"<p class='err'>{e(form.error)}</p>" if form and form.error else ""
    fields = (
        "<h2>Start a run</h2>"
        f"<label>workflow <select name='start_workflow'>{options}</select></label>"
        f"<label>input (JSON) <textarea name='start_input' rows='3' data-json placeholder='{{}} or null: what the workflow takes as input'>"
        f"{e(values.get('start_input', ''))}</textarea><span class='jerr'></span></label>"
        f"<label>run id <input name='start_id' value='{e(values.get('start_id', ''))}' "
        "placeholder='optional: a fresh UUID if empty' size='30'></label>"
        f"<label>signal <input name='start_signal' value='{e(values.get('start_signal', ''))}' "
        "placeholder='optional: sent with the start' size='16'></label>"
        f"<label>payload (JSON) <textarea name='start_payload' rows='1' data-json>"
        f"{e(values.get('start_payload', ''))}</textarea><span class='jerr'></span></label>"
        f"{error}"
    )
    return actions.form("start", fields, "Start run")


# --- one run ---------------------------------------------------------------------------------


def run_page(
    runs: Runs,
    actions: Actions,
    run_id: str,
    *,
    zone: Zone | None = None,
    now: float | None = None,
    notice: str | None = None,
    signal_form: Form | None = None,
    journal_page: int | None = None,
) -> str:
    zone = zone or Zone()
    now = runs.clock.now() if now is None else now
    run = runs.get(run_id)
    parts = [f"<div class='lf'><p>{actions.list_link('all runs')}</p>"]
    if notice:
        parts.append(f"<p class='note'>{e(notice)}</p>")
    # An ended run changes no more: its page does not poll (the live region of a run that
    # ends while a page polls it carries `data-ended`, and the script stops there).
    poll = f" data-poll='{POLL_MS}'" if actions.live and run.status not in ENDED else ""
    live = run_live(runs, actions, run, zone=zone, now=now, journal_page=journal_page)
    parts.append(f"<div id='live'{poll}>{live}</div>")
    parts.append(_signal_form(actions, run, signal_form, waited_names(runs.journal(run.id))))
    parts.append("</div>")
    return "".join(parts)


def read_journal_page(value: object) -> int | None:
    """A run page's ``journal`` parameter: a small digit string, or the newest page."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6:
        return int(value)
    return None


def journal_window(items: list[timeline.Item], page: int | None) -> tuple[int, int, int | None]:
    """Which of the journal's items a run page lists, ``JOURNAL_PAGE`` at a time: page ``n``
    holds items ``n * JOURNAL_PAGE`` on (pages stay put as a run grows); no page, the newest
    ``JOURNAL_PAGE``. Returns (first, end, page shown or None for the newest)."""
    n = len(items)
    if page is None or (page + 1) * JOURNAL_PAGE >= n:
        return max(0, n - JOURNAL_PAGE), n, None
    return page * JOURNAL_PAGE, (page + 1) * JOURNAL_PAGE, page


def run_live(
    runs: Runs,
    actions: Actions,
    run: RunRecord,
    *,
    zone: Zone,
    now: float,
    journal_page: int | None = None,
) -> str:
    entries = runs.journal(run.id)
    items = timeline.build(entries)
    if run.status == Status.FAILED:
        timeline.failed_unjournaled(items, entries, run.updated_at, run.error)
    signals = runs.store.signals(run.id)
    children = runs.store.children(run.id)
    due = runs.store.timer(run.id)
    parts = [f"<h1>{e(run.id)}{actions.copy(run.id)} {status(run.status)}</h1>"]
    if run.status in ENDED:
        parts.append("<span data-ended hidden></span>")
    stopped = run.status in (*ENDED, Status.FAILED)
    ended_at = run.updated_at if stopped else now
    facts = [
        f"workflow <b>{e(run.workflow)}</b>",
        f"started {moment(run.created_at, zone, now)}",
        f"updated {moment(run.updated_at, zone, now)}",
        ("took " if stopped else "running for ") + e(duration(ended_at - run.created_at)),
    ]
    if run.expires_at is not None:
        facts.append(f"deleted {moment(run.expires_at, zone, now)} (<code>[runs] retention</code>)")
    if run.parent_id:
        facts.append("parent " + actions.run_link(run.parent_id, run.parent_id))
    if children:
        facts.append("children " + ", ".join(actions.run_link(c, c) for c in children))
    if run.current_step and run.status not in ENDED:
        facts.append(f"at <code>{e(run.current_step)}</code>")
    awaited = timeline.awaited_child(items) if run.status == Status.AWAITING else None
    if awaited is not None:
        facts.append("waiting for child " + actions.run_link(awaited, awaited))
    if due is not None and run.status in (Status.SLEEPING, Status.AWAITING):
        facts.append(f"timer due {moment(due / 1000, zone, now)}")
    pinned = runs.versions.pinned(run.id) if isinstance(runs, Platform) and runs.versions else None
    started_on = entries[0].data.get("code") if entries else None
    if pinned is not None and run.status not in ENDED:
        facts.append(f"code <code>{e(pinned)}</code> (pinned: the current code would not replay it)")
    elif started_on:
        facts.append(f"started on code <code>{e(str(started_on))}</code>")
    gens = generations(entries)  # wf:continue_as_new: the current generation last
    if len(gens) > 1:
        earlier = ", ".join(
            f"{g['generation']} (entries {g['first_seq']}–{g['last_seq']})" for g in gens[:-1]
        )
        facts.append(f"generation <b>{gens[-1]['generation']}</b> (earlier: {e(earlier)})")
    parts.append("<p>" + " · ".join(facts) + "</p>")
    if run.status not in ENDED:
        moving = runs.why(run, entries)
        css = "why err" if moving.stuck else "why"
        parts.append(f"<p class='{css}'><b>why</b> {e(moving.text)}</p>")
    published = runs.store.run_values(run.id)
    if published:
        pairs = " · ".join(
            f"<code>{e(k)}</code> = <code class='pub'>{e(json.dumps(v, ensure_ascii=False))}</code>"
            for k, v in published.items()
        )
        parts.append(f"<p class='values'><b>values</b> {pairs}</p>")
    more_input = actions.value_link(run.id, "input", "show all")
    parts.append(f"<p><b>input</b> {json_value(run.input, key='input', more=more_input)}</p>")
    if run.error:
        parts.append(f"<div class='err'><b>error</b> <pre>{e(run.error)}</pre></div>")
    if run.status == Status.COMPLETED:
        more = actions.value_link(run.id, "result", "show all")
        parts.append(f"<p><b>result</b> {json_value(run.result, key='result', more=more, open_=True)}</p>")
    buttons = []
    if run.status in RESUMABLE:
        buttons.append(
            actions.button(
                run.id, "resume", "Resume", f"Resume {run.id}? Its failed step gets a fresh set of attempts."
            )
        )
    # The journal's last entry, as lunaflow retry reads it: the timeline's last item is a
    # "retry now" once one was asked, the attempts after it gathered in the step's item.
    if in_backoff(run.status, entries[-1] if entries else None):
        buttons.append(actions.button(run.id, "retry", "Retry now", RETRY_CONFIRMATION.format(run=run.id)))
    if run.status in CANCELLABLE:
        buttons.append(
            actions.button(run.id, "cancel", "Cancel", cancel_confirmation(runs, run), danger=True)
        )
    if buttons:
        parts.append("<div class='bar'>" + "".join(buttons) + "</div>")
    parts.append("<h2>Timeline</h2>")
    parts.append(chart.draw(run, items, signals, zone=zone, now=now))
    first, end, page = journal_window(items, journal_page)
    shown = items[first:end]
    parts.append("<h2>Journal</h2>")
    nav = ""
    if len(shown) < len(items):
        links = []
        if first > 0:
            links.append(actions.run_link(run.id, "oldest", journal="0"))
            links.append(actions.run_link(run.id, "older", journal=str((first - 1) // JOURNAL_PAGE)))
        if page is not None:
            newer = page + 1
            if (newer + 1) * JOURNAL_PAGE < len(items):
                links.append(actions.run_link(run.id, "newer", journal=str(newer)))
            links.append(actions.run_link(run.id, "newest"))
        nav = (
            f"<div class='bar'><span class='muted'>entries {shown[0].seq:,}–{shown[-1].seq:,} of "
            f"{len(entries):,}{' (the newest)' if page is None else ''}</span>{' '.join(links)}</div>"
        )
    parts.append(nav)
    parts.append("<table class='journal'><tr><th>#</th><th>at</th><th>what</th><th>detail</th></tr>")
    parts.extend(_journal_rows(actions, run, shown, zone))
    parts.append("</table>")
    parts.append(nav)
    if signals:
        parts.append(
            "<h2>Signals</h2><table class='signals'><tr><th>id</th><th>at</th><th>name</th><th>state</th>"
            "<th>payload</th></tr>"
        )
        for s in signals:
            state = s.state.replace("_", " ") + (f" (entry {s.consumed_seq})" if s.consumed_seq else "")
            more = actions.value_link(run.id, f"signal-{s.id}", "show all")
            parts.append(
                f"<tr><td>{s.id}</td><td>{e(zone.when(s.at))}</td><td>{e(s.name)}</td><td>{e(state)}</td>"
                f"<td class='wide'>{json_value(s.payload, key=f'sig-{s.id}', more=more)}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts)


def _journal_rows(
    actions: Actions, run: RunRecord, items: Iterable[timeline.Item], zone: Zone
) -> Iterable[str]:
    for item in items:
        detail = e(item.detail)
        if item.kind == "wait":
            bits = []
            if item.due_at is not None:
                bits.append(
                    ("wakes" if item.name == "sleep" else "times out") + f" at {e(zone.when(item.due_at))}"
                )
            if item.resolution:
                bits.append(
                    f"→ {e(item.resolution)} at {e(zone.when(item.resolved_at))} (waited {e(duration(item.waited))})"
                )
            else:
                bits.append("<span class='muted'>waiting</span>")
            detail = " · ".join(bits)
        elif item.kind == "step" and item.attempts:
            detail += f" · {e(plural(len(item.attempts), 'attempt'))}"
        if item.value_seq is not None and len(item.detail) >= 60:
            detail += " " + actions.value_link(run.id, f"entry-{item.value_seq}", "show all")
        css = (
            " class='err'"
            if (item.kind == "step" and item.attempts and item.attempts[-1].outcome not in ("ok", "running"))
            or item.kind == "failed"
            else ""
        )
        # A failure no entry records has no number of its own.
        row, number = ("failed", "") if item.kind == "failed" else (f"e{item.seq}", str(item.seq))
        yield (
            f"<tr id='{row}'><td>{number}</td><td>{e(zone.when(item.at))}</td>"
            f"<td{css}>{e(item.title)}</td><td>{detail}</td></tr>"
        )
        for a in item.attempts:
            took = "" if a.took is None else f", took {duration(a.took)}"
            line = (
                f"attempt {a.attempt}: {e(a.outcome)}{e(took)} · step id <code>{e(a.step_id)}</code>"
                f"{actions.copy(a.step_id)}"
            )
            if a.error:
                line += f"<br><span class='err'>{e(a.error)}</span>"
            if a.retry_at is not None:
                line += f"<br><span class='muted'>retry at {e(zone.when(a.retry_at))}</span>"
            yield f"<tr><td></td><td>{e(zone.when(a.started_at))}</td><td></td><td class='att'>{line}</td></tr>"


def waited_names(entries: list[Entry]) -> list[str]:
    """The signal names the run's code waits for, the wait it is parked on first: what the
    signal form suggests (the project's own names, not an example's)."""
    names: list[str] = []
    for entry in reversed(entries):
        if entry.kind == Kind.WAIT:
            names += [n for n in entry.data.get("names") or [] if isinstance(n, str) and n not in names]
    return names


def _signal_form(actions: Actions, run: RunRecord, form: Form | None, names: list[str]) -> str:
    values = form.values if form else {}
    error = f"<p class='err'>{e(form.error)}</p>" if form and form.error else ""
    ended = (
        f"<p class='muted'>This run has ended ({e(run.status)}): a signal sent now is set aside.</p>"
        if run.status in ENDED
        else ""
    )
    fields = (
        f"<h2>Send a signal</h2>{ended}"
        f"<label>name <input name='signal_name' value='{e(values.get('signal_name', ''))}' required "
        f"placeholder='{e(', '.join(names[:3]) if names else 'a name its code waits for')}' size='24'></label>"
        f"<label>payload (JSON, optional) <textarea name='signal_payload' rows='3' data-json "
        f"placeholder='null'>{e(values.get('signal_payload', ''))}</textarea>"
        "<span class='jerr'></span></label>"
        f"{error}"
    )
    return actions.form("signal", fields, "Send signal", run_id=run.id)


# --- actions' words ----------------------------------------------------------------------


def descendants(runs: Runs, run_id: str) -> list[str]:
    # An iterative walk: a chain of runs thousands deep must not raise RecursionError.
    return runs.descendants(run_id)


def cancel_confirmation(runs: Runs, run: RunRecord) -> str:
    reached = descendants(runs, run.id)
    message = f"Cancel run {run.id}?"
    if reached:
        message += f" This also cancels the runs it started: {', '.join(reached)}."
    return message


RETRY_CONFIRMATION = "Retry {run} now? Its failed step's next attempt runs without waiting out the backoff."


def confirm_page(actions: LocalActions, run: RunRecord, action: str, message: str) -> str:
    return (
        f"<div class='lf'><h1>{e(action.capitalize())} {e(run.id)}?</h1><p>{e(message)}</p><div class='bar'>"
        f"{actions.confirm(run.id, action, f'Yes, {action}', danger=action == 'cancel')}"
        f"{actions.run_link(run.id, 'No, go back')}</div></div>"
    )


def read_json(text: str, what: str) -> Any:
    """A JSON value typed into a form; empty is null. Raises InvalidInput naming the
    problem (shown beside the form, nothing sent)."""
    text = text.strip()
    if not text:
        return None
    try:
        return values.loads_bounded(text, what)
    except ValueError as err:  # json's decode errors and integers past the digit limit
        raise InvalidInput(f"{what} is not valid JSON ({err}); nothing was sent") from None


def send_signal(runs: Runs, run_id: str, name: str, payload_text: str) -> str:
    """Send a signal from a console form; returns what happened, in words."""
    name = name.strip()
    if not name:
        raise InvalidInput("a signal needs a name; nothing was sent")
    payload = read_json(payload_text, f"the payload of signal '{name}'")
    live = runs.signal(run_id, name, payload)
    if live:
        return (
            f"Signal '{name}' was delivered to {run_id}: it is consumed when the run waits for '{name}' "
            "(now, if it is waiting for it)."
        )
    run = runs.get(run_id)
    return f"Run {run_id} has ended ({run.status}), so signal '{name}' was set aside; nothing consumes it."


def start_run(
    runs: Runs, workflow: str, input_text: str, run_id: str, signal: str = "", payload_text: str = ""
) -> tuple[RunRecord, str]:
    """Start (or join) a run from a console form, with a signal if one is named (signal-with-
    start: the run and its signal in one write); returns it and what happened."""
    if workflow not in declared_workflows(runs):
        raise InvalidInput(f"workflow {workflow!r} is not declared by this project; pick one from the list")
    value = read_json(input_text, "the input")
    name = signal.strip() or None
    if name is None and payload_text.strip():
        raise InvalidInput(
            "a payload goes with a signal: name the signal, or clear the payload; nothing was sent"
        )
    payload = read_json(payload_text, f"the payload of signal '{name}'") if name else None
    before = runs.store.get_run(run_id.strip()) if run_id.strip() else None
    run = runs.start(workflow, value, id=run_id.strip() or None, signal=name, payload=payload)
    sent = ""
    if name is not None:
        sent = (
            f" Run {run.id} has ended ({run.status}), so signal '{name}' was set aside."
            if run.status in ENDED
            else f" Signal '{name}' was delivered to it."
        )
    if before is not None:
        return (
            run,
            f"Run {run.id} already existed, so the start joined it (the input sent was ignored).{sent}",
        )
    return run, f"Started run {run.id} of {workflow}.{sent}"


def value_of(runs: Runs, run_id: str, ref: str) -> Any:
    """The whole of a value the run page shows cut short: ``input``, ``result``,
    ``signal-<id>``, ``entry-<seq>`` (a journal entry's data)."""
    run = runs.get(run_id)
    if ref == "input":
        return run.input
    if ref == "result":
        return run.result
    kind, _, number = ref.partition("-")
    if number.isascii() and number.isdigit() and len(number) <= 12:
        if kind == "signal":
            for s in runs.store.signals(run.id):
                if s.id == int(number):
                    return s.payload
        if kind == "entry":
            for entry in runs.journal(run.id):
                if entry.seq == int(number):
                    return entry.data
    raise KeyError(ref)


def value_page(runs: Runs, actions: Actions, run_id: str, ref: str) -> str:
    value = value_of(runs, run_id, ref)
    return (
        f"<div class='lf'><p>{actions.run_link(run_id, 'back to ' + run_id)}</p>"
        f"<h1>{e(run_id)}: {e(ref)}</h1><pre>{e(pretty(value))}</pre></div>"
    )
