"""The first ``/_console`` page of ``lunaflow dev``: plain HTML, no JavaScript.

Lists runs (filter by status and workflow), shows one run's journal, and offers resume
for failed runs and cancel for the rest as forms that POST.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote, urlsplit

from runtime.errors import LunaflowError
from runtime.fetch import Response
from runtime.journal import CANCELLABLE, RESUMABLE
from runtime.runs import Runs

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left;vertical-align:top}
.failed{color:#b00}.completed{color:#070}.cancelled{color:#777}pre{margin:0;white-space:pre-wrap}
form{display:inline}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _page(title: str, body: str, status: int = 200) -> Response:
    doc = f"<!doctype html><html><head><meta charset=utf-8><title>{_e(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>"
    return Response(status, {"content-type": "text/html; charset=utf-8"}, doc)


def render(
    runs: Runs, method: str, target: str, form: dict[str, str], *, poke: Callable[[], None]
) -> Response:
    parts = urlsplit(target)
    path = parts.path.rstrip("/")
    query = dict(parse_qsl(parts.query))
    if path in ("/_console", ""):
        return _list(runs, query)
    if path.startswith("/_console/runs/"):
        run_id = path[len("/_console/runs/") :]
        if method == "POST":
            action = form.get("action")
            try:
                if action == "resume":
                    runs.resume(run_id)
                elif action == "cancel":
                    runs.cancel(run_id)
                poke()
            except LunaflowError as e:
                return _page(
                    "refused", f"<p class=failed>{_e(e)}</p><p><a href='/_console'>back</a></p>", 409
                )
            return Response(303, {"location": f"/_console/runs/{quote(run_id)}"}, "")
        return _run(runs, run_id)
    return _page("not found", "<p>no such console page</p>", 404)


def _list(runs: Runs, query: dict[str, str]) -> Response:
    status = query.get("status") or None
    workflow = query.get("workflow") or None
    rows = "".join(
        f"<tr><td><a href='/_console/runs/{quote(r.id)}'>{_e(r.id)}</a></td><td>{_e(r.workflow)}</td>"
        f"<td class={_e(r.status)}>{_e(r.status)}</td><td>{_e(r.current_step)}</td>"
        f"<td>{_time(r.created_at)}</td><td>{_time(r.updated_at)}</td></tr>"
        for r in runs.runs(status=status, workflow=workflow)[:200]
    )
    body = (
        "<h1>Runs</h1><form method=get action='/_console'>status <input name=status value='"
        + _e(status or "")
        + "'> workflow <input name=workflow value='"
        + _e(workflow or "")
        + "'> <button>filter</button></form>"
        + "<table><tr><th>run</th><th>workflow</th><th>status</th><th>current step</th><th>started</th><th>updated</th></tr>"
        + rows
        + "</table>"
    )
    return _page("lunaflow runs", body)


def _run(runs: Runs, run_id: str) -> Response:
    try:
        run = runs.get(run_id)
    except LunaflowError as e:
        return _page("no such run", f"<p>{_e(e)}</p>", 404)
    actions = ""
    if run.status in RESUMABLE:
        actions += (
            "<form method=post><input type=hidden name=action value=resume><button>resume</button></form> "
        )
    if run.status in CANCELLABLE:
        children = runs.store.children(run.id)
        note = f" (and its children: {', '.join(children)})" if children else ""
        actions += (
            "<form method=post><input type=hidden name=action value=cancel>"
            f"<button>cancel{_e(note)}</button></form>"
        )
    entries = "".join(
        f"<tr><td>{e.seq}</td><td>{_time(e.at)}</td><td>{_e(e.kind)}</td><td>{_e(e.name)}</td>"
        f"<td><pre>{_e(json.dumps(e.data, ensure_ascii=False))}</pre></td></tr>"
        for e in runs.journal(run.id)
    )
    body = (
        f"<p><a href='/_console'>all runs</a></p><h1>{_e(run.id)}</h1>"
        f"<p>workflow {_e(run.workflow)} · status <span class={_e(run.status)}>{_e(run.status)}</span>"
        f" · parent {_e(run.parent_id or '—')}</p>"
        + (f"<p class=failed>{_e(run.error)}</p>" if run.error else "")
        + (
            f"<p>result <code>{_e(json.dumps(run.result, ensure_ascii=False))}</code></p>"
            if run.status == "completed"
            else ""
        )
        + f"<p>{actions}</p><table><tr><th>#</th><th>at</th><th>kind</th><th>name</th><th>data</th></tr>{entries}</table>"
    )
    return _page(run.id, body)
