"""The ``/_console`` pages of ``lunaflow dev``: the shared renderer with local actions.

GET ``/_console`` lists runs (``?id=&status=&workflow=&since=&until=&page=``); GET
``/_console/runs/<id>`` shows one run, ``.../value/<ref>`` the whole of a value; a
``part=live`` parameter answers only the page's changing region (what the page's script
polls). POST ``/_console/runs/<id>`` with ``action`` resume or cancel asks for confirmation
(``step=ask``) and then acts (``step=do``); with ``action=signal`` it sends a signal; POST
``/_console/start`` starts a run; POST ``/_console/bulk`` with ``action`` resume, retry or
cancel and a search's parameters previews (``step=ask``) and then repairs (``step=do``) every
run the search selects; POST ``/_console/schedules/<name>`` with ``action`` pause,
resume or trigger acts on a declared schedule. Every POST must carry this process's ``token`` (the forms
of its pages do) and come from the console's own origin (the server checks Origin and
Sec-Fetch-Site and says so in ``cross_site``); anything else is refused with 403 before it
is read further. An action answers with a redirect back to a page (so a reload does not
repeat it), which shows what happened once.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from runtime.console import render
from runtime.console.actions import LocalActions
from runtime.console.html import Zone, document, e
from runtime.console.search import RunQuery
from runtime.errors import AlreadyCancelled, LunaflowError, NoSuchRun
from runtime.platform.fetch import Response
from runtime.platform.runs import CLEANUP_NOTE, Runs
from runtime.platform.schedules import ScheduleControl

MAX_NOTICES = 256


def _headers(nonce: str | None = None) -> dict[str, str]:
    # No request leaves the page but to this server; scripts run only with this response's
    # nonce; the console cannot be framed (a framed Cancel button could be clicked blind).
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    return {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-store",
        "content-security-policy": (
            f"default-src 'none'; script-src {script}; style-src 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",  # "no-referrer" would make Chrome send Origin: null on our own POSTs
    }


class LocalConsole:
    """The console of one ``lunaflow dev`` process. ``token`` is this process's: a form of
    another process, or a request that never loaded a page of this one, cannot act."""

    def __init__(
        self,
        runs: Runs,
        *,
        token: str | None,
        poke: Callable[[], None],
        schedules: ScheduleControl | None = None,
    ) -> None:
        self.runs = runs
        self.schedules = schedules  # where the project's schedules are paused and triggered
        self.token = token
        self.poke = poke
        self.actions = LocalActions(token=token or "")
        self.zone = Zone()
        self._notices: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    # --- pages -----------------------------------------------------------------------------

    def _page(self, title: str, body: str, status: int = 200) -> Response:
        nonce = secrets.token_urlsafe(12)
        return Response(status, _headers(nonce), document(title, body, nonce=nonce))

    def _fragment(self, body: str) -> Response:
        return Response(200, _headers(), body)

    def _refused(self, message: str, status: int, back: str = "") -> Response:
        return self._page(
            "refused", f"<div class='lf'><p class='err'>{e(message)}</p><p>{back}</p></div>", status
        )

    def handle(
        self, method: str, target: str, form: dict[str, str], *, cross_site: str | None = None
    ) -> Response:
        parts = urlsplit(target)
        path = parts.path.rstrip("/")
        query = dict(parse_qsl(parts.query))
        if method == "POST":
            refusal = self._check(form, cross_site)
            if refusal is not None:
                return refusal
        elif method not in ("GET", "HEAD"):
            return self._refused(f"{method} is not a console method; the console answers GET and POST", 405)
        now = self.runs.clock.now()
        if path in ("/_console", ""):
            if method == "POST":
                return self._refused("POST /_console/start starts a run; /_console itself takes no POST", 405)
            q = RunQuery.read(query, self.zone)
            if query.get("part") == "live":
                return self._fragment(render.runs_live(self.runs, self.actions, q, zone=self.zone, now=now))
            notice = self._notice(query.get("done"))
            body = render.runs_page(
                self.runs, self.actions, q, zone=self.zone, now=now, notice=notice, schedules=self.schedules
            )
            return self._page("lunaflow runs", body)
        if path == "/_console/start" and method == "POST":
            return self._start(form, now)
        if path == "/_console/bulk" and method == "POST":
            return self._repair(form, now)
        if path.startswith("/_console/schedules/") and method == "POST":
            return self._schedule(unquote(path[len("/_console/schedules/") :]), form, now)
        if path.startswith("/_console/runs/"):
            rest = path[len("/_console/runs/") :]
            raw_id, _, tail = rest.partition("/value/")
            run_id = unquote(raw_id)
            try:
                if tail:
                    return self._value(run_id, unquote(tail))
                if method == "POST":
                    return self._act(run_id, form, now)
                journal = render.read_journal_page(query.get("journal"))
                if query.get("part") == "live":
                    run = self.runs.get(run_id)
                    return self._fragment(
                        render.run_live(
                            self.runs, self.actions, run, zone=self.zone, now=now, journal_page=journal
                        )
                    )
                notice = self._notice(query.get("done"))
                body = render.run_page(
                    self.runs,
                    self.actions,
                    run_id,
                    zone=self.zone,
                    now=now,
                    notice=notice,
                    journal_page=journal,
                )
                return self._page(run_id, body)
            except NoSuchRun as err:
                back = self.actions.list_link("all runs")
                return self._page("no such run", f"<div class='lf'><p>{e(err)}</p><p>{back}</p></div>", 404)
        return self._page("not found", "<div class='lf'><p>no such console page</p></div>", 404)

    def _check(self, form: dict[str, str], cross_site: str | None) -> Response | None:
        if cross_site is not None:
            return self._refused(
                f"This console action was refused: it came from another site ({cross_site}). The console acts "
                "only on requests from its own pages.",
                403,
            )
        sent = form.get("token", "")
        if not self.token or not hmac.compare_digest(sent.encode(), self.token.encode()):
            return self._refused(
                "This console action was refused: it carries no valid token of this lunaflow dev process (a "
                "page of another process, or a request that did not come from a console page, looks like "
                "this). Reload the console page and try again.",
                403,
            )
        return None

    # --- actions ---------------------------------------------------------------------------

    def _redirect(self, to: str, notice: str | None = None) -> Response:
        if notice:
            key = secrets.token_urlsafe(9)
            with self._lock:
                self._notices[key] = notice
                while len(self._notices) > MAX_NOTICES:
                    self._notices.popitem(last=False)
            to += ("&" if "?" in to else "?") + f"done={key}"
        return Response(303, {"location": to, "cache-control": "no-store"}, "")

    def _notice(self, key: str | None) -> str | None:
        if not key:
            return None
        with self._lock:
            return self._notices.pop(key, None)

    def _run_url(self, run_id: str) -> str:
        return f"/_console/runs/{quote(run_id, safe='')}"

    def _act(self, run_id: str, form: dict[str, str], now: float) -> Response:
        action = form.get("action")
        run = self.runs.get(run_id)
        back = self.actions.run_link(run_id, "back")
        if action == "signal":
            try:
                said = render.send_signal(
                    self.runs, run_id, form.get("signal_name", ""), form.get("signal_payload", "")
                )
            except LunaflowError as err:
                page = render.run_page(
                    self.runs, self.actions, run_id, zone=self.zone, now=now,
                    signal_form=render.Form(form, str(err)),
                )  # fmt: skip
                return self._page(f"signal {run_id}", page, 400)
            self.poke()
            return self._redirect(self._run_url(run_id), said)
        if action not in ("resume", "cancel", "retry"):
            return self._refused(
                "unknown action; the console resumes, retries, cancels and signals runs", 400, back
            )
        if form.get("step") != "do":
            message = (
                render.cancel_confirmation(self.runs, run)
                if action == "cancel"
                else render.RETRY_CONFIRMATION.format(run=run.id)
                if action == "retry"
                else f"Resume {run.id}? Its failed step gets a fresh set of attempts."
            )
            return self._page(f"{action} {run.id}", render.confirm_page(self.actions, run, action, message))
        cleaning = False
        try:
            if action == "resume":
                self.runs.resume(run_id)
            elif action == "retry":
                self.runs.retry(run_id)
            else:
                cleaning = self.runs.cancel(run_id).cleanup
        except AlreadyCancelled as again:  # a repeat finished the cascade: say so, not "refused"
            self.poke()
            return self._redirect(
                self._run_url(run_id),
                f"Run {run_id} was already cancelled; its cascade is finished: {again.finished}.",
            )
        except LunaflowError as err:
            return self._refused(str(err), 409, back)
        self.poke()
        done = {
            "resume": "resumed: its failed step gets a fresh set of attempts",
            "retry": "retried: its step's next attempt runs now",
        }.get(action, CLEANUP_NOTE if cleaning else "cancelled")
        return self._redirect(self._run_url(run_id), f"Run {run_id} {done}.")

    def _start(self, form: dict[str, str], now: float) -> Response:
        try:
            run, said = render.start_run(
                self.runs,
                form.get("start_workflow", ""),
                form.get("start_input", ""),
                form.get("start_id", ""),
                form.get("start_signal", ""),
                form.get("start_payload", ""),
            )
        except LunaflowError as err:
            page = render.runs_page(
                self.runs,
                self.actions,
                RunQuery(),
                zone=self.zone,
                now=now,
                start_form=render.Form(form, str(err)),
                schedules=self.schedules,
            )
            return self._page("start a run", page, 400)
        self.poke()
        return self._redirect(self._run_url(run.id), said)

    def _repair(self, form: dict[str, str], now: float) -> Response:
        """A search's runs resumed, retried or cancelled: ``step=ask`` previews (each run
        replayed on the current code) and asks; ``step=do`` acts on what the preview lists."""
        query = RunQuery.read(dict(parse_qsl(form.get("query", ""))), self.zone)
        action = form.get("action", "")
        back = self.actions.list_link("back to the search", **query.params(self.zone))
        if action not in render.REPAIR_LABELS:
            return self._refused("unknown repair; the console resumes, retries and cancels runs", 400, back)
        if not query.selects():
            return self._refused(
                "a repair acts on a search's runs: search by status, workflow, id, time or value first",
                400,
                back,
            )
        if form.get("step") != "do":
            found = render.repair_preview(self.runs, action, query)
            return self._page(f"{action} runs", render.repair_page(self.actions, found, query, self.zone))
        try:
            said = render.repair(self.runs, action, query)
        except LunaflowError as err:
            return self._refused(str(err), 409, back)
        self.poke()
        to = "/_console?" + urlencode(query.params(self.zone)) if query.params(self.zone) else "/_console"
        return self._redirect(to, said)

    def _schedule(self, name: str, form: dict[str, str], now: float) -> Response:
        back = self.actions.list_link("all runs")
        if self.schedules is None:
            return self._refused(
                "this console does not act on schedules (it runs no project's code)", 409, back
            )
        try:
            said = render.act_on_schedule(self.runs, self.schedules, name, form.get("action", ""), now)
        except LunaflowError as err:
            return self._refused(str(err), 400, back)
        self.poke()
        return self._redirect("/_console", said)

    def _value(self, run_id: str, ref: str) -> Response:
        try:
            body = render.value_page(self.runs, self.actions, run_id, ref)
        except KeyError:
            return self._page(
                "not found", f"<div class='lf'><p>run {e(run_id)} has no value {e(ref)}</p></div>", 404
            )
        return self._page(f"{run_id} {ref}", body)


def render_console(
    runs: Runs,
    method: str,
    target: str,
    form: dict[str, str],
    *,
    poke: Callable[[], None],
    token: str | None = None,
    cross_site: str | None = None,
) -> Response:
    """One request to a console without notices kept between requests (tests, tools)."""
    return LocalConsole(runs, token=token, poke=poke).handle(method, target, form, cross_site=cross_site)
