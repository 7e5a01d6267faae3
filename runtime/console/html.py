"""The console's HTML primitives: escaping, times with their zone and relative form,
durations, counted words, JSON values as collapsible blocks, the style sheet and the local
page's one script.

Everything a user or a run wrote is escaped here (``e``) before it is placed in HTML;
nothing else in the console builds HTML from user text without it.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from runtime.core.values import compact


def e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 attempt``, ``2 attempts``."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def duration(seconds: float | None) -> str:
    """A span as a person reads it: 12 ms, 2.4 s, 3 min 20 s, 2 h 5 min, 3 d 4 h."""
    if seconds is None:
        return ""
    s = max(0.0, seconds)
    if s < 1:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{round(s)} s"
    if s < 3600:
        m, rest = divmod(round(s), 60)
        return f"{m} min {rest} s" if rest else f"{m} min"
    if s < 86400:
        h, rest = divmod(round(s / 60), 60)
        return f"{h} h {rest} min" if rest else f"{h} h"
    d, rest = divmod(round(s / 3600), 24)
    return f"{d} d {rest} h" if rest else f"{d} d"


def ago(at: float, now: float) -> str:
    """``3 min ago``, ``in 2 h``, ``just now``."""
    delta = now - at
    if abs(delta) < 1:
        return "just now"
    return f"{duration(abs(delta))} ago" if delta > 0 else f"in {duration(abs(delta))}"


@dataclass(frozen=True)
class Zone:
    """The time zone times are written in: UTC locally, the dashboard's in CloudWatch."""

    offset_minutes: int = 0
    label: str = "UTC"

    @classmethod
    def from_widget(cls, context: Any) -> Zone:
        tz = context.get("timezone") if isinstance(context, dict) else None
        if not isinstance(tz, dict):
            return cls()
        offset = tz.get("offsetInMinutes")
        label = tz.get("label")
        if isinstance(offset, bool) or not isinstance(offset, int) or abs(offset) > 24 * 60:
            return cls()
        # CloudWatch's offsetInMinutes has the sign of JavaScript's getTimezoneOffset when the
        # label is a zone name; the ISO offset is unambiguous, so prefer it when present.
        iso = tz.get("offsetISO")
        if isinstance(iso, str) and re.fullmatch(r"[+-][0-9]{2}:[0-9]{2}", iso):
            offset = (1 if iso[0] == "+" else -1) * (int(iso[1:3]) * 60 + int(iso[4:6]))
        return cls(offset, str(label)[:40] if isinstance(label, str) and label else "UTC")

    @property
    def tzinfo(self) -> timezone:
        return UTC if self.offset_minutes == 0 else timezone(timedelta(minutes=self.offset_minutes))

    def when(self, at: float | None) -> str:
        if at is None:
            return ""
        return datetime.fromtimestamp(at, self.tzinfo).strftime("%Y-%m-%d %H:%M:%S") + f" {self.label}"

    def clock(self, at: float) -> str:
        """The time of day alone, for the chart's marks."""
        return datetime.fromtimestamp(at, self.tzinfo).strftime("%H:%M:%S")

    def parse(self, text: str) -> float | None:
        """A date or date-time typed in this zone (``2026-01-01``, ``2026-01-01T10:00``),
        as epoch seconds; None when it is not one."""
        text = text.strip()
        if not text or len(text) > 32:
            return None
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=self.tzinfo)
        try:
            return value.timestamp()
        except (OverflowError, OSError, ValueError):
            return None


def moment(at: float | None, zone: Zone, now: float) -> str:
    """A time with its zone and its relative form: ``2026-01-01 10:00:00 UTC (3 min ago)``."""
    if at is None:
        return ""
    iso = datetime.fromtimestamp(at, UTC).isoformat()
    return f"<time datetime='{iso}'>{e(zone.when(at))}</time> <span class='ago'>({e(ago(at, now))})</span>"


def status(value: str) -> str:
    return f"<span class='st {e(value)}'>{e(value)}</span>"


# --- JSON values ---------------------------------------------------------------------------

PRETTY_LIMIT = 4000  # characters of pretty JSON shown before "show all"


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)


def json_value(
    value: Any, *, key: str = "", more: str = "", summary_limit: int = 80, open_: bool = False
) -> str:
    """A value as collapsible, formatted JSON: its compact form as the summary, the
    indented form inside. A long value shows its first PRETTY_LIMIT characters and
    ``more`` (a link to all of it). ``key`` names the block so a live update keeps it open."""
    text = compact(value)
    if len(text) <= 40 and "\n" not in text:
        return f"<code class='json'>{e(text)}</code>"
    summary = text if len(text) <= summary_limit else text[: summary_limit - 1] + "…"
    body = pretty(value)
    cut = ""
    if len(body) > PRETTY_LIMIT:
        cut = (
            f"<p class='muted'>{e(f'{len(body) - PRETTY_LIMIT:,}')} more characters not shown. {more}</p>"
            if more
            else ""
        )
        body = body[:PRETTY_LIMIT] + "\n…"
    attrs = "class='json'" + (f" data-key='{e(key)}'" if key else "") + (" open" if open_ else "")
    return f"<details {attrs}><summary><code>{e(summary)}</code></summary><pre>{e(body)}</pre>{cut}</details>"


# --- the page ------------------------------------------------------------------------------

STYLE = """
.lf{font:13px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;color:#1f2328;background:#fff}
.lf h1{font-size:18px;margin:0 0 8px;display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.lf h2{font-size:15px;margin:18px 0 6px}
.lf table{border-collapse:collapse;width:100%}.lf td,.lf th{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}
.lf th{font-weight:600;color:#57606a}.lf code,.lf pre{font:12px ui-monospace,Menlo,monospace}.lf pre{margin:4px 0;white-space:pre-wrap;word-break:break-word}
.lf .st{display:inline-block;padding:0 7px;border-radius:10px;font-size:12px;background:#eaeef2}
.lf .failed{background:#ffebe9;color:#a40e26}.lf .completed{background:#dafbe1;color:#116329}.lf .cancelled{color:#6e7781}
.lf .awaiting{background:#fff8c5;color:#7d4e00}.lf .sleeping{background:#ddf4ff;color:#0550ae}.lf .running{background:#fbefff;color:#6639ba}
.lf .err{color:#a40e26}.lf .muted,.lf .ago{color:#6e7781}.lf .att{padding-left:22px}.lf .note{background:#ddf4ff;border-radius:6px;padding:6px 10px}
.lf .bar{margin:8px 0;display:flex;gap:8px;flex-wrap:wrap;align-items:center}.lf .bar form{display:inline}
.lf button,.lf .btn{font:inherit;padding:3px 10px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;color:#24292f;text-decoration:none;cursor:pointer}
.lf button.primary,.lf .btn.primary{background:#1f883d;border-color:#1a7f37;color:#fff}
.lf button.danger,.lf .btn.danger{background:#fff;border-color:#cf222e;color:#cf222e}
.lf button.copy{padding:0 6px;font-size:11px;margin-left:4px}.lf button.copy::after{content:'copy'}.lf button.copy.done::after{content:'copied'}
.lf input,.lf select,.lf textarea{font:inherit;padding:2px 6px;border:1px solid #d0d7de;border-radius:6px}
.lf textarea{font:12px ui-monospace,Menlo,monospace;width:100%;max-width:560px}
.lf .form{border:1px solid #d8dee4;border-radius:8px;padding:8px 12px;margin:10px 0;max-width:640px}
.lf .form label{display:block;margin:4px 0}.lf .jerr{color:#a40e26;font-size:12px}
.lf .counts{display:flex;gap:6px;flex-wrap:wrap;margin:6px 0}.lf .counts .on{outline:2px solid #0969da}
.lf details.json summary{cursor:pointer}.lf details.json pre{background:#f6f8fa;border-radius:6px;padding:6px 8px;max-height:420px;overflow:auto}
.lf td.wide{max-width:260px;overflow-wrap:anywhere}.lf td.id{white-space:nowrap}.lf td.acts form{display:inline;margin-right:4px}
.lf .chart{overflow-x:auto;border:1px solid #d8dee4;border-radius:8px;padding:6px 4px;margin:6px 0}
.lf .legend{display:flex;gap:12px;flex-wrap:wrap;font-size:12px;color:#57606a;margin:4px 0}
.lf .sw{display:inline-block;width:12px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
.lf .o-ok{fill:#2da44e;background:#2da44e}.lf .o-failed{fill:#cf222e;background:#cf222e}
.lf .o-timed-out{fill:#bf8700;background:#bf8700}.lf .o-interrupted{fill:#8250df;background:#8250df}
.lf .o-cancelled{fill:#6e7781;background:#6e7781}.lf .o-running{fill:#0969da;background:#0969da}
.lf .w-signal{fill:#54aeff;background:#54aeff}.lf .w-timer{fill:#8c959f;background:#8c959f}
.lf .w-failure{fill:#ff8182;background:#ff8182}.lf .w-timeout{fill:#d4a72c;background:#d4a72c}.lf .w-cancel{fill:#afb8c1;background:#afb8c1}.lf .w-waiting{fill:#b6e3ff;background:#b6e3ff}
.lf .backoff{fill:none;stroke:#cf222e;stroke-dasharray:3 3}.lf .gap{fill:#f6f8fa;stroke:#d0d7de;stroke-dasharray:2 2}
.lf svg text{font:11px system-ui,sans-serif;fill:#57606a}.lf svg .lane{fill:#1f2328}
"""

# The local page's script: live updates by polling the page's own URL (no framework, no
# request beyond this server), copy buttons, and JSON checked before a form is sent.
SCRIPT = """
(function(){
  var live = document.getElementById('live');
  function openKeys(){ var o = {}; live.querySelectorAll('details[data-key]').forEach(function(d){ if (d.open) o[d.dataset.key] = 1; }); return o; }
  if (live && live.dataset.poll) {
    var last = null, busy = false, timer;
    timer = setInterval(function(){
      if (busy || document.hidden) return;
      busy = true;
      var url = new URL(location.href); url.searchParams.set('part', 'live');
      fetch(url, {cache: 'no-store', credentials: 'same-origin'}).then(function(r){ return r.ok ? r.text() : null; }).then(function(t){
        if (t !== null && t !== last) {
          var keep = openKeys();
          live.innerHTML = t;
          live.querySelectorAll('details[data-key]').forEach(function(d){ if (keep[d.dataset.key]) d.open = true; });
          last = t;
        }
        if (live.querySelector('[data-ended]')) clearInterval(timer);  // the run ended: nothing changes now
      }).catch(function(){}).finally(function(){ busy = false; });
    }, Number(live.dataset.poll));
  }
  document.addEventListener('click', function(ev){
    var b = ev.target.closest('button.copy'); if (!b) return;
    ev.preventDefault();
    navigator.clipboard.writeText(b.dataset.copy).then(function(){ b.classList.add('done'); setTimeout(function(){ b.classList.remove('done'); }, 1500); });
  });
  function check(area){
    var out = area.parentNode.querySelector('.jerr'), text = area.value.trim();
    try { if (text) JSON.parse(text); out.textContent = ''; return true; }
    catch (err) { out.textContent = 'not valid JSON: ' + err.message; return false; }
  }
  document.querySelectorAll('textarea[data-json]').forEach(function(a){ a.addEventListener('input', function(){ check(a); }); });
  document.addEventListener('submit', function(ev){
    ev.target.querySelectorAll('textarea[data-json]').forEach(function(a){ if (!check(a)) { ev.preventDefault(); a.focus(); } });
  });
})();
"""


def document(title: str, body: str, *, nonce: str | None = None) -> str:
    script = f"<script nonce='{e(nonce)}'>{SCRIPT}</script>" if nonce else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><link rel='icon' href='data:,'>"
        f"<style>body{{margin:24px}}{STYLE}</style></head><body>{body}{script}</body></html>"
    )
