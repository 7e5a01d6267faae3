"""The ``/_console`` pages of ``lunaflow dev``: the shared renderer with local actions.

GET ``/_console`` lists runs (``?status=&workflow=&page=``); GET ``/_console/runs/<id>``
shows one run; POST there with ``action`` asks for confirmation (``step=ask``) and then
acts (``step=do``), answering with a redirect back to the run.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from runtime.console import render
from runtime.errors import LunaflowError, NoSuchRun
from runtime.platform.fetch import Response
from runtime.platform.runs import Runs

ACTIONS = render.LocalActions()


def _page(title: str, body: str, status: int = 200) -> Response:
    return Response(status, {"content-type": "text/html; charset=utf-8"}, render.document(title, body))


def render_console(
    runs: Runs, method: str, target: str, form: dict[str, str], *, poke: Callable[[], None]
) -> Response:
    parts = urlsplit(target)
    path = parts.path.rstrip("/")
    query = dict(parse_qsl(parts.query))
    if path in ("/_console", ""):
        status = query.get("status") or None
        if status is not None and status not in render.STATUSES:
            status = None
        page = int(query["page"]) if query.get("page", "").isdigit() else 0
        body = render.runs_page(
            runs, ACTIONS, status_filter=status, workflow=query.get("workflow") or None, page=page
        )
        return _page("lunaflow runs", body)
    if path.startswith("/_console/runs/"):
        run_id = unquote(path[len("/_console/runs/") :])
        try:
            if method == "POST":
                return _act(runs, run_id, form, poke)
            return _page(run_id, render.run_page(runs, ACTIONS, run_id))
        except NoSuchRun as e:
            return _page("no such run", f"<div class='lf'><p>{render.e(e)}</p></div>", 404)
    return _page("not found", "<div class='lf'><p>no such console page</p></div>", 404)


def _act(runs: Runs, run_id: str, form: dict[str, str], poke: Callable[[], None]) -> Response:
    action = form.get("action")
    if action not in ("resume", "cancel"):
        return _page("refused", "<div class='lf'><p class='err'>unknown action</p></div>", 400)
    run = runs.get(run_id)
    if form.get("step") != "do":
        message = (
            render.cancel_confirmation(runs, run)
            if action == "cancel"
            else f"Resume {run.id}? Its failed step gets a fresh set of attempts."
        )
        return _page(f"{action} {run.id}", render.confirm_page(ACTIONS, run, action, message))
    try:
        if action == "resume":
            runs.resume(run_id)
        else:
            runs.cancel(run_id)
    except LunaflowError as e:
        body = (
            f"<div class='lf'><p class='err'>{render.e(e)}</p><p>{ACTIONS.run_link(run_id, 'back')}</p></div>"
        )
        return _page("refused", body, 409)
    poke()
    return Response(303, {"location": f"/_console/runs/{quote(run_id, safe='')}"}, "")
