"""The console's one renderer: HTML with no JavaScript, for the local ``/_console`` page and
for CloudWatch custom widgets (which strip scripts). Only links and buttons differ between
the two, so they come from an ``Actions`` object: forms that POST locally,
``cwdb-action`` elements on AWS.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from runtime.console import timeline
from runtime.core.journal import CANCELLABLE, RESUMABLE
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord

PAGE_SIZE = 50
STATUSES = ("running", "sleeping", "awaiting", "failed", "completed", "cancelled")

STYLE = """
.lf{font:13px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;color:#1f2328}
.lf h1{font-size:18px;margin:0 0 8px}.lf h2{font-size:15px;margin:16px 0 6px}
.lf table{border-collapse:collapse;width:100%}.lf td,.lf th{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}
.lf th{font-weight:600;color:#57606a}.lf code,.lf pre{font:12px ui-monospace,Menlo,monospace}.lf pre{margin:0;white-space:pre-wrap}
.lf .st{display:inline-block;padding:0 7px;border-radius:10px;font-size:12px;background:#eaeef2}
.lf .failed{background:#ffebe9;color:#a40e26}.lf .completed{background:#dafbe1;color:#116329}.lf .cancelled{color:#6e7781}
.lf .awaiting{background:#fff8c5;color:#7d4e00}.lf .sleeping{background:#ddf4ff;color:#0550ae}.lf .running{background:#fbefff;color:#6639ba}
.lf .err{color:#a40e26}.lf .muted{color:#6e7781}.lf .att{margin-left:14px}
.lf .bar{margin:8px 0}.lf .bar form,.lf .bar a{display:inline-block;margin-right:8px}
.lf button,.lf .btn{font:inherit;padding:3px 10px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;color:#24292f;text-decoration:none;cursor:pointer}
.lf button.danger,.lf .btn.danger{color:#a40e26}
"""


def e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(value: Any, limit: int = 120) -> str:
    return timeline.short(value, limit)


def status(value: str) -> str:
    return f"<span class='st {e(value)}'>{e(value)}</span>"


class Actions(Protocol):
    """How the page links and acts, locally or in CloudWatch."""

    def run_link(self, run_id: str, text: str) -> str: ...

    def list_link(self, text: str, **filters: str) -> str: ...

    def button(
        self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False
    ) -> str: ...

    def filters(self, status: str | None, workflow: str | None) -> str: ...


@dataclass(frozen=True)
class LocalActions:
    """The ``lunaflow dev`` page: plain links and forms that POST."""

    base: str = "/_console"

    def run_link(self, run_id: str, text: str) -> str:
        return f"<a href='{e(self.base)}/runs/{e(quote(run_id, safe=''))}'>{e(text)}</a>"

    def list_link(self, text: str, **filters: str) -> str:
        query = urlencode({k: v for k, v in filters.items() if v})
        return f"<a href='{e(self.base)}{'?' + e(query) if query else ''}'>{e(text)}</a>"

    def button(self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False) -> str:
        # The confirmation is a second step: the first button leads to a page that asks.
        target = f"{self.base}/runs/{quote(run_id, safe='')}"
        return (
            f"<form method='post' action='{e(target)}'>"
            f"<input type='hidden' name='action' value='{e(action)}'>"
            f"<input type='hidden' name='confirm' value='{e(confirmation)}'>"
            f"<button class='{'danger' if danger else ''}' name='step' value='ask'>{e(label)}</button></form>"
        )

    def filters(self, status: str | None, workflow: str | None) -> str:
        options = "".join(
            f"<option value='{s}'{' selected' if s == status else ''}>{s}</option>" for s in ("", *STATUSES)
        )
        return (
            f"<form method='get' action='{e(self.base)}' class='bar'>status <select name='status'>{options}</select> "
            f"workflow <input name='workflow' value='{e(workflow or '')}'> <button>filter</button></form>"
        )


def confirm_page(actions: LocalActions, run: RunRecord, action: str, message: str) -> str:
    target = f"{actions.base}/runs/{quote(run.id, safe='')}"
    return (
        f"<div class='lf'><h1>{e(action.capitalize())} {e(run.id)}?</h1><p>{e(message)}</p><div class='bar'>"
        f"<form method='post' action='{e(target)}'><input type='hidden' name='action' value='{e(action)}'>"
        f"<button class='danger' name='step' value='do'>Yes, {e(action)}</button></form>"
        f"{actions.run_link(run.id, 'No, go back')}</div></div>"
    )


@dataclass(frozen=True)
class CloudWatchActions:
    """CloudWatch custom widgets: buttons and links are ``cwdb-action`` elements that call
    the console function back; its JSON's keys arrive as the event's top-level keys."""

    endpoint: str  # the console function's ARN

    def _call(self, payload: dict[str, str], display: str = "widget", confirmation: str | None = None) -> str:
        confirm = f" confirmation='{e(confirmation)}'" if confirmation else ""
        return (
            f"<cwdb-action action='call' endpoint='{e(self.endpoint)}' display='{display}'{confirm}>"
            f"{e(json.dumps(payload, separators=(',', ':')))}</cwdb-action>"
        )

    def run_link(self, run_id: str, text: str) -> str:
        return f"<a class='btn'>{e(text)}</a>" + self._call({"view": "run", "run_id": run_id})

    def list_link(self, text: str, **filters: str) -> str:
        return f"<a class='btn'>{e(text)}</a>" + self._call(
            {"view": "runs", **{k: v for k, v in filters.items() if v}}
        )

    def button(self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False) -> str:
        css = "btn danger" if danger else "btn"
        return f"<a class='{css}'>{e(label)}</a>" + self._call(
            {"view": "run", "run_id": run_id, "action": action}, confirmation=confirmation
        )

    def filters(self, status: str | None, workflow: str | None) -> str:
        links = [self.list_link("all")] + [self.list_link(s, status=s) for s in STATUSES]
        return "<div class='bar'>" + " ".join(links) + "</div>"


# --- the pages ---------------------------------------------------------------------------


def runs_page(
    runs: Runs, actions: Actions, *, status_filter: str | None, workflow: str | None, page: int = 0
) -> str:
    # One row past the page says whether an older page exists, without counting every run.
    found = runs.runs(status=status_filter, workflow=workflow, limit=(page + 1) * PAGE_SIZE + 1)
    shown = found[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
    rows = "".join(
        f"<tr><td>{actions.run_link(r.id, r.id)}</td><td>{e(r.workflow)}</td><td>{status(r.status)}</td>"
        f"<td>{e(r.current_step if r.status not in ('completed', 'cancelled') else '')}</td>"
        f"<td>{when(r.created_at)}</td><td>{when(r.updated_at)}</td></tr>"
        for r in shown
    )
    nav = []
    if page > 0:
        nav.append(
            actions.list_link(
                "newer", status=status_filter or "", workflow=workflow or "", page=str(page - 1)
            )
        )
    if len(found) > (page + 1) * PAGE_SIZE:
        nav.append(
            actions.list_link(
                "older", status=status_filter or "", workflow=workflow or "", page=str(page + 1)
            )
        )
    first = page * PAGE_SIZE + 1 if shown else 0
    caption = (
        f"runs {first}-{page * PAGE_SIZE + len(shown)}"
        + (f" {status_filter}" if status_filter else "")
        + (f" of {workflow}" if workflow else "")
    )
    return (
        f"<div class='lf'><h1>Runs</h1>{actions.filters(status_filter, workflow)}<p class='muted'>{e(caption)}</p>"
        "<table><tr><th>run</th><th>workflow</th><th>status</th><th>current step</th><th>started</th>"
        f"<th>updated</th></tr>{rows}</table><div class='bar'>{' '.join(nav)}</div></div>"
    )


def descendants(runs: Runs, run_id: str) -> list[str]:
    out: list[str] = []
    for child in runs.store.children(run_id):
        out += [child, *descendants(runs, child)]
    return out


def cancel_confirmation(runs: Runs, run: RunRecord) -> str:
    reached = descendants(runs, run.id)
    message = f"Cancel run {run.id}?"
    if reached:
        message += f" This also cancels the runs it started: {', '.join(reached)}."
    return message


def run_page(runs: Runs, actions: Actions, run_id: str, *, notice: str | None = None) -> str:
    run = runs.get(run_id)
    entries = runs.journal(run.id)
    items = timeline.build(entries)
    signals = runs.store.signals(run.id)
    children = runs.store.children(run.id)
    due = runs.store.timer(run.id)
    parts = [f"<div class='lf'><p>{actions.list_link('all runs')}</p>"]
    parts.append(f"<h1>{e(run.id)} {status(run.status)}</h1>")
    if notice:
        parts.append(f"<p class='muted'>{e(notice)}</p>")
    facts = [
        f"workflow <b>{e(run.workflow)}</b>",
        f"started {when(run.created_at)}",
        f"updated {when(run.updated_at)}",
    ]
    if run.parent_id:
        facts.append("parent " + actions.run_link(run.parent_id, run.parent_id))
    if children:
        facts.append("children " + ", ".join(actions.run_link(c, c) for c in children))
    if run.current_step and run.status not in ("completed", "cancelled"):
        facts.append(f"at <code>{e(run.current_step)}</code>")
    if due is not None and run.status in ("sleeping", "awaiting"):
        facts.append(f"timer due {when(due / 1000)}")
    parts.append("<p>" + " · ".join(facts) + "</p>")
    if run.error:
        parts.append(f"<p class='err'><b>error</b> {e(run.error)}</p>")
    if run.status == "completed":
        parts.append(f"<p><b>result</b> <code>{e(short(run.result, 400))}</code></p>")
    buttons = []
    if run.status in RESUMABLE:
        buttons.append(
            actions.button(
                run.id, "resume", "Resume", f"Resume {run.id}? Its failed step gets a fresh set of attempts."
            )
        )
    if run.status in CANCELLABLE:
        buttons.append(
            actions.button(run.id, "cancel", "Cancel", cancel_confirmation(runs, run), danger=True)
        )
    if buttons:
        parts.append("<div class='bar'>" + "".join(buttons) + "</div>")
    parts.append("<h2>Timeline</h2><table><tr><th>#</th><th>at</th><th>what</th><th>detail</th></tr>")
    parts.extend(_timeline_rows(items))
    parts.append("</table>")
    if signals:
        parts.append(
            "<h2>Signals</h2><table><tr><th>id</th><th>at</th><th>name</th><th>state</th><th>payload</th></tr>"
        )
        for s in signals:
            state = s.state.replace("_", " ") + (f" (entry {s.consumed_seq})" if s.consumed_seq else "")
            parts.append(
                f"<tr><td>{s.id}</td><td>{when(s.at)}</td><td>{e(s.name)}</td><td>{e(state)}</td>"
                f"<td><code>{e(short(s.payload))}</code></td></tr>"
            )
        parts.append("</table>")
    parts.append("</div>")
    return "".join(parts)


def _timeline_rows(items: Iterable[timeline.Item]) -> Iterable[str]:
    for item in items:
        detail = e(item.detail)
        if item.kind == "wait":
            bits = []
            if item.due_at is not None:
                bits.append(("wakes" if item.title == "sleep" else "times out") + f" at {when(item.due_at)}")
            if item.resolution:
                bits.append(f"→ {e(item.resolution)} at {when(item.resolved_at)}")
            else:
                bits.append("<span class='muted'>waiting</span>")
            detail = " · ".join(bits)
        css = (
            " class='err'"
            if item.kind == "step" and item.attempts and item.attempts[-1].outcome == "failed"
            else ""
        )
        yield f"<tr><td>{item.seq}</td><td>{when(item.at)}</td><td{css}>{e(item.title)}</td><td>{detail}</td></tr>"
        for a in item.attempts:
            took = "" if a.ended_at is None else f", took {max(0.0, a.ended_at - a.started_at):.3f}s"
            line = f"attempt {a.attempt}: {e(a.outcome)}{took} · step id <code>{e(a.step_id)}</code>"
            if a.error:
                line += f"<br><span class='err'>{e(a.error)}</span>"
            if a.retry_at is not None:
                line += f"<br><span class='muted'>retry at {when(a.retry_at)}</span>"
            yield f"<tr><td></td><td>{when(a.started_at)}</td><td></td><td class='att'>{line}</td></tr>"


def document(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>body{{margin:24px}}{STYLE}</style></head><body>{body}</body></html>"
    )
