"""Helpers for the console tests: the test project and a reader for the console's HTML.

``Html(text)`` parses a page with the standard library's ``html.parser`` (character
references decoded, as a browser would) and keeps what the tests look at: every start tag
with its attributes, the page's text, the local forms (their target, hidden fields and
button) and the CloudWatch ``cwdb-action`` elements (their attributes, their JSON payload
and the label of the element just before them, which is what a reader clicks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "projects" / "console_demo"
EVENTS = ROOT / "tests" / "events"
ARTIFACTS = ROOT / "artifacts" / "console"

# Void elements: they have no end tag, so they never hold text.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Tag:
    name: str
    attrs: dict[str, str]
    attr_names: list[str]  # in order, repeats kept (a broken-out attribute shows up here)
    text: str = ""


@dataclass
class Form:
    method: str
    action: str
    fields: dict[str, str] = field(default_factory=dict)
    button: str = ""  # the button's label
    button_name: str = ""
    button_value: str = ""


@dataclass
class CwAction:
    attrs: dict[str, str]
    raw: str  # the element's text (the JSON the dashboard sends back)
    label: str  # the text of the element just before it: what a reader clicks

    @property
    def payload(self) -> dict[str, Any]:
        value = json.loads(self.raw)
        assert isinstance(value, dict), self.raw
        return value


class Html(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.source = text
        self.tags: list[Tag] = []
        self.texts: list[str] = []
        self.forms: list[Form] = []
        self.actions: list[CwAction] = []
        self._open: list[Tag] = []  # elements whose text is being collected
        self._form: Form | None = None
        self._in_button = False
        self._in_style = False
        self._cw: dict[str, str] | None = None
        self._cw_text: list[str] = []
        self._last_label = ""
        self.feed(text)
        self.close()

    # --- parser callbacks --------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        element = Tag(tag, values, [k for k, _ in attrs])
        self.tags.append(element)
        if tag == "style":
            self._in_style = True
        if tag == "cwdb-action":
            self._cw, self._cw_text = values, []
            return
        if tag == "form":
            self._form = Form(values.get("method", "get"), values.get("action", ""))
            self.forms.append(self._form)
        if tag == "input" and self._form is not None and values.get("type") == "hidden":
            self._form.fields[values.get("name", "")] = values.get("value", "")
        if tag == "button" and self._form is not None:
            self._in_button = True
            self._form.button_name = values.get("name", "")
            self._form.button_value = values.get("value", "")
        if tag not in VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
        if tag == "cwdb-action" and self._cw is not None:
            self.actions.append(CwAction(self._cw, "".join(self._cw_text), self._last_label))
            self._cw = None
            return
        if tag == "form":
            self._form = None
        if tag == "button":
            self._in_button = False
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].name == tag:
                closed = self._open[i]
                del self._open[i:]
                self._last_label = closed.text.strip()
                break

    def handle_data(self, data: str) -> None:
        if self._cw is not None:
            self._cw_text.append(data)
            return
        if self._in_style:
            return
        self.texts.append(data)
        for element in self._open:
            element.text += data
        if self._in_button and self._form is not None:
            self._form.button += data

    # --- queries -----------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The page's visible text (cwdb-action payloads and the style sheet left out)."""
        return "".join(self.texts)

    def names(self) -> set[str]:
        return {t.name for t in self.tags}

    def actions_for(self, label: str, **payload: str) -> list[CwAction]:
        """The cwdb-actions placed after an element labelled ``label`` whose payload holds
        ``payload`` (a run's link can appear more than once: its row, a child's parent)."""
        return [
            a
            for a in self.actions
            if a.label == label and all(a.payload.get(k) == v for k, v in payload.items())
        ]

    def action(self, label: str, **payload: str) -> CwAction:
        """The one cwdb-action placed after an element labelled ``label`` whose payload
        holds ``payload``."""
        found = self.actions_for(label, **payload)
        assert len(found) == 1, (label, payload, [(a.label, a.raw) for a in self.actions])
        return found[0]

    def form(self, button: str) -> Form:
        found = [f for f in self.forms if f.button.strip() == button]
        assert len(found) == 1, (button, self.forms)
        return found[0]

    def table_rows(self, table_class: str) -> dict[str, list[str]]:
        """The rows of the table of class ``table_class``, by their first cell, cell by cell
        (each cell's text with its white space collapsed)."""
        rows: dict[str, list[str]] = {}
        inside, current = False, None
        for tag in self.tags:
            if tag.name == "table":
                inside = table_class in tag.attrs.get("class", "")
            elif inside and tag.name == "tr":
                current = []
            elif inside and tag.name == "td" and current is not None:
                current.append(" ".join(tag.text.split()))
                if len(current) == 1:
                    rows[current[0]] = current
        return rows
