"""How the console's pages link and act: the one place the local page and the CloudWatch
widgets differ.

Locally (``LocalActions``) links are links, actions are forms that POST back to
``lunaflow dev`` carrying the process's token, the page updates itself with a small
script, and ids have copy buttons. In a CloudWatch custom widget (``CloudWatchActions``)
scripts are stripped: every link and button is a ``cwdb-action`` that calls the console
function back with a JSON payload (its keys arrive as top-level event keys), the values of
the widget's inputs arrive under ``widgetContext.forms.all``, and the dashboard's refresh is
what updates the widget. Input names are unique across a page because CloudWatch sends
every input of the widget with every action.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote, urlencode

from runtime.console.html import e


class Actions(Protocol):
    @property
    def live(self) -> bool:
        """Whether the page updates itself (and may carry a script)."""

    def run_link(self, run_id: str, text: str, **query: str) -> str: ...

    def list_link(self, text: str, css: str = "", **query: str) -> str: ...

    def button(self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False) -> str:
        """Resume or cancel, confirmed before it acts."""

    def form(self, name: str, fields: str, submit: str, *, run_id: str | None = None) -> str:
        """``fields`` (inputs) and a submit button: ``search`` (the runs list), ``signal``
        (a run), ``start`` (a new run)."""

    def copy(self, text: str) -> str:
        """A button that copies ``text``, where the page can run one."""

    def value_link(self, run_id: str, ref: str, text: str) -> str:
        """A link to the whole of a value shown cut short."""

    def schedule_button(self, name: str, action: str, label: str, confirmation: str) -> str:
        """Pause, resume or trigger a schedule (the runs list's schedules)."""

    def bulk_button(self, action: str, label: str, confirmation: str, query: dict[str, str]) -> str:
        """Resume, retry or cancel every run a search selects (``query``: its parameters),
        confirmed first with ``confirmation``, which names the count."""


@dataclass(frozen=True)
class LocalActions:
    """The ``lunaflow dev`` page: plain links, forms that POST with the process's token."""

    base: str = "/_console"
    token: str = ""

    @property
    def live(self) -> bool:
        return True

    def _run_url(self, run_id: str) -> str:
        return f"{self.base}/runs/{quote(run_id, safe='')}"

    def run_link(self, run_id: str, text: str, **query: str) -> str:
        q = urlencode({k: v for k, v in query.items() if v})
        return f"<a href='{e(self._run_url(run_id))}{'?' + e(q) if q else ''}'>{e(text)}</a>"

    def list_link(self, text: str, css: str = "", **query: str) -> str:
        q = urlencode({k: v for k, v in query.items() if v})
        cls = f" class='{e(css)}'" if css else ""
        return f"<a{cls} href='{e(self.base)}{'?' + e(q) if q else ''}'>{e(text)}</a>"

    def _token(self) -> str:
        return f"<input type='hidden' name='token' value='{e(self.token)}'>"

    def button(self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False) -> str:
        # The confirmation is a second step: the first button leads to a page that asks.
        return (
            f"<form method='post' action='{e(self._run_url(run_id))}'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(action)}'>"
            f"<button class='{'danger' if danger else 'primary'}' name='step' value='ask'>{e(label)}</button></form>"
        )

    def confirm(self, run_id: str, action: str, label: str, danger: bool) -> str:
        return (
            f"<form method='post' action='{e(self._run_url(run_id))}'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(action)}'>"
            f"<button class='{'danger' if danger else 'primary'}' name='step' value='do'>{e(label)}</button></form>"
        )

    def form(self, name: str, fields: str, submit: str, *, run_id: str | None = None) -> str:
        if name == "search":
            return (
                f"<form method='get' action='{e(self.base)}' class='bar' id='search'>{fields}"
                f"<button>{e(submit)}</button> {self.list_link('clear')}</form>"
            )
        target = self._run_url(run_id) if run_id is not None else f"{self.base}/start"
        return (
            f"<form method='post' action='{e(target)}' class='form' id='{e(name)}'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(name)}'>{fields}"
            f"<button class='primary'>{e(submit)}</button></form>"
        )

    def copy(self, text: str) -> str:
        # The label is drawn by the style sheet, so the id's cell reads as the id alone.
        return f"<button class='copy' type='button' data-copy='{e(text)}' title='copy {e(text)}'></button>"

    def value_link(self, run_id: str, ref: str, text: str) -> str:
        return f"<a href='{e(self._run_url(run_id))}/value/{e(quote(ref, safe=''))}'>{e(text)}</a>"

    def bulk_button(self, action: str, label: str, confirmation: str, query: dict[str, str]) -> str:
        # A second step previews (a replay of each run on the current code) and confirms. The
        # search travels as one field, so no input of this form shares a name with the page's.
        return (
            f"<form method='post' action='{e(self.base)}/bulk' title='{e(confirmation)}'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(action)}'>{_query_field(query)}"
            f"<button class='{'danger' if action == 'cancel' else ''}' name='step' value='ask'>{e(label)}</button></form>"
        )

    def bulk_confirm(self, action: str, label: str, query: dict[str, str]) -> str:
        return (
            f"<form method='post' action='{e(self.base)}/bulk'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(action)}'>{_query_field(query)}"
            f"<button class='{'danger' if action == 'cancel' else 'primary'}' name='step' value='do'>{e(label)}</button></form>"
        )

    def schedule_button(self, name: str, action: str, label: str, confirmation: str) -> str:
        # Pausing is undone by resuming and a trigger's run is the tick's (a second click
        # within the second joins it), so these act at once; the page says what happened.
        css = "primary" if action == "trigger" else ""
        return (
            f"<form method='post' action='{e(self.base)}/schedules/{e(quote(name, safe=''))}' "
            f"title='{e(confirmation)}'>{self._token()}"
            f"<input type='hidden' name='action' value='{e(action)}'>"
            f"<button class='{css}'>{e(label)}</button></form>"
        )


@dataclass(frozen=True)
class CloudWatchActions:
    """CloudWatch custom widgets: buttons and links are ``cwdb-action`` elements that call
    the console function back; its JSON's keys arrive as the event's top-level keys."""

    endpoint: str  # the console function's ARN

    @property
    def live(self) -> bool:
        return False

    def _call(self, payload: dict[str, str], display: str = "widget", confirmation: str | None = None) -> str:
        confirm = f" confirmation='{e(confirmation)}'" if confirmation else ""
        return (
            f"<cwdb-action action='call' endpoint='{e(self.endpoint)}' display='{display}'{confirm}>"
            f"{e(json.dumps(payload, separators=(',', ':')))}</cwdb-action>"
        )

    def run_link(self, run_id: str, text: str, **query: str) -> str:
        extra = {k: v for k, v in query.items() if v}
        return f"<a class='btn'>{e(text)}</a>" + self._call({"view": "run", "run_id": run_id, **extra})

    def list_link(self, text: str, css: str = "", **query: str) -> str:
        cls = f"btn {css}".strip()
        return f"<a class='{e(cls)}'>{e(text)}</a>" + self._call(
            {"view": "runs", **{k: v for k, v in query.items() if v}}
        )

    def button(self, run_id: str, action: str, label: str, confirmation: str, danger: bool = False) -> str:
        css = "btn danger" if danger else "btn primary"
        return f"<a class='{css}'>{e(label)}</a>" + self._call(
            {"view": "run", "run_id": run_id, "action": action}, confirmation=confirmation
        )

    def form(self, name: str, fields: str, submit: str, *, run_id: str | None = None) -> str:
        payload = {"view": "run" if run_id is not None else "runs", "action": name}
        if run_id is not None:
            payload["run_id"] = run_id
        css = "bar" if name == "search" else "form"
        return (
            f"<div class='{css}' id='{e(name)}'>{fields}"
            f"<a class='btn primary'>{e(submit)}</a>{self._call(payload)}</div>"
        )

    def copy(self, text: str) -> str:
        return ""  # no script runs in a widget; the text is selectable

    def value_link(self, run_id: str, ref: str, text: str) -> str:
        return f"<a class='btn'>{e(text)}</a>" + self._call(
            {"view": "value", "run_id": run_id, "ref": ref}, display="popup"
        )

    def bulk_button(self, action: str, label: str, confirmation: str, query: dict[str, str]) -> str:
        css = "btn danger" if action == "cancel" else "btn"
        payload = {
            "view": "runs",
            "action": "bulk",
            "do": action,
            **{k: v for k, v in query.items() if k != "page"},
        }
        return f"<a class='{css}'>{e(label)}</a>" + self._call(payload, confirmation=confirmation)

    def schedule_button(self, name: str, action: str, label: str, confirmation: str) -> str:
        css = "btn primary" if action == "trigger" else "btn"
        return f"<a class='{css}'>{e(label)}</a>" + self._call(
            {"view": "runs", "action": "schedule", "schedule": name, "do": action}, confirmation=confirmation
        )


def _query_field(query: dict[str, str]) -> str:
    """A search's parameters as one hidden field (``query``: URL-encoded, the page left out)."""
    encoded = urlencode(sorted((k, v) for k, v in query.items() if k != "page"))
    return f"<input type='hidden' name='query' value='{e(encoded)}'>"
