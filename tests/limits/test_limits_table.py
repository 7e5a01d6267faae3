"""docs/reliability_limits.md cannot drift from the code: every limit in ``runtime.platform.limits``
has a row, every value in the table is the constant's value, and every message in the
table is the one the engine gives when the limit is met.

Issue: "Limits with clear errors, documented in one table: payload and result sizes,
journal length per run, steps per run, signal backlog per run, memory and instructions per
Lua call, request body size."
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import runtime.platform.limits as limits
from runtime.core import values
from runtime.core.ids import check_run_id
from runtime.core.journal import Entry, Kind
from runtime.core.replay import Fail, Replay, StepCmd, ValueCmd
from runtime.engine.sandbox import Sandbox
from runtime.errors import LunaflowError
from runtime.services.base import ServiceError
from runtime.services.local import LocalServices
from runtime.testing import LocalPlatform
from tests.sandbox.test_escape_corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability_limits.md"
PRELUDE = ROOT / "runtime" / "engine" / "lua" / "prelude.lua"
VALUES = ROOT / "tests" / "projects" / "escape_values"
HTTP = ROOT / "tests" / "projects" / "escape_http"

STEPS_PER_RUN = "Steps per run"


def section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n{title}\n")
    end = text.find("\n#", start + len(title) + 2)
    return text[start : end if end != -1 else len(text)]


def table(title: str) -> list[dict[str, str]]:
    """The first pipe table under ``title``, as dicts keyed by its header cells."""
    rows = [line for line in section(title).splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert set(rows[1].replace("|", "").strip()) <= {"-", ":"}, "the second row must be the rule"
    return [
        dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True)) for row in rows[2:]
    ]


LIMITS = table("## Limits")
GUARDS = table("### Engine guards")


def first_number(cell: str) -> int:
    m = re.search(r"\d[\d,]*", cell)
    assert m, f"no number in {cell!r}"
    return int(m.group(0).replace(",", ""))


def constant_name(cell: str) -> str:
    m = re.fullmatch(r"`([\w.]+)`", cell)
    assert m, f"the Constant cell must name one dotted constant in backticks: {cell!r}"
    return m.group(1)


def constant_value(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def row(label: str) -> dict[str, str]:
    (found,) = [r for r in LIMITS if r["Limit"] == label]
    return found


def template(label: str) -> str:
    m = re.match(r"`([^`]+)`", row(label)["What the user sees"])
    assert m, f"row {label!r} quotes no message"
    return m.group(1)


def matches(template_text: str, message: str) -> bool:
    """``{placeholders}`` in the template stand for any text; the rest is verbatim."""
    pattern = re.sub(r"\\\{\w+\\\}", ".+?", re.escape(template_text))
    return re.fullmatch(pattern, message) is not None


# --- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", limits.__all__)
def test_every_limit_in_runtime_limits_has_a_row_with_its_value(name: str) -> None:
    """Issue: limits "documented in one table" — each constant of runtime.platform.limits appears,
    with its value."""
    rows = [r for r in LIMITS if r["Constant"] == f"`runtime.platform.limits.{name}`"]
    assert rows, f"docs/reliability_limits.md has no row for runtime.platform.limits.{name}"
    for r in rows:
        if r["Limit"] != STEPS_PER_RUN:
            assert first_number(r["Value"]) == getattr(limits, name), r


def test_steps_per_run_follow_from_the_journal_bound() -> None:
    """Issue: "steps per run" — each attempt journals an intent and an outcome after
    run.started, so the journal bound allows this many attempts."""
    r = row(STEPS_PER_RUN)
    assert constant_name(r["Constant"]) == "runtime.platform.limits.MAX_JOURNAL_ENTRIES"
    assert first_number(r["Value"]) == (limits.MAX_JOURNAL_ENTRIES - 1) // 2


@pytest.mark.parametrize(
    "r", [r for r in LIMITS if r["Constant"].startswith("`runtime.")], ids=lambda r: r["Limit"]
)
def test_every_constant_the_table_names_exists_with_that_value(r: dict[str, str]) -> None:
    if r["Limit"] == STEPS_PER_RUN:
        return
    assert first_number(r["Value"]) == constant_value(constant_name(r["Constant"]))


def test_the_random_bytes_bound_is_the_preludes() -> None:
    r = row("`crypto.random_bytes` length")
    source = PRELUDE.read_text(encoding="utf-8")
    bound = re.search(r"random_bytes = function\(n\).*?n > (\d+)", source, re.S)
    assert bound and first_number(r["Value"]) == int(bound.group(1))


def test_the_date_format_bound_is_the_preludes() -> None:
    r = row("`os.date` format length")
    bound = re.search(r"local MAX_DATE_FORMAT = (\d+)", PRELUDE.read_text(encoding="utf-8"))
    assert bound and first_number(r["Value"]) == int(bound.group(1))


@pytest.mark.parametrize("g", GUARDS, ids=lambda g: g["Guard"])
def test_engine_guards_have_their_values_and_their_words(g: dict[str, str]) -> None:
    dotted = constant_name(g["Constant"])
    assert first_number(g["Value"]) == constant_value(dotted)
    module = importlib.import_module(dotted.rpartition(".")[0])
    quoted = re.findall(r"`([^`]+)`", g["What happens"])
    for text in quoted[1:] if quoted and quoted[0] == "EngineBug" else quoted:
        assert text in inspect.getsource(module), f"{text!r} is not in {module.__name__}"


# --- messages: what the engine says when each limit is met ---------------------------------------


def _refusal(fn: Callable[[], Any]) -> str:
    with pytest.raises((LunaflowError, ServiceError)) as e:
        fn()
    return str(e.value)


def value_size() -> str:
    return _refusal(lambda: values.encode("x" * (300 * 1024), "the input of run 'r'"))


def journal_entries() -> str:
    journal = [Entry(1, Kind.STARTED, "w", {"format": 1, "input": None}, 0.0)]
    journal += [
        Entry(i, Kind.VALUE, "os.time", {"value": i}, 0.0) for i in range(2, limits.MAX_JOURNAL_ENTRIES + 1)
    ]
    replay = Replay("r", journal, 0)
    for _ in range(limits.MAX_JOURNAL_ENTRIES - 1):
        replay.value(ValueCmd("os.time"))
    decision = replay.value(ValueCmd("os.time"))
    assert isinstance(decision, Fail)
    return decision.error


def signal_backlog() -> str:
    with LocalPlatform(VALUES) as p:
        p.start("echo", 1, id="r")
        # A full backlog, written straight into the store's file in one transaction (ten
        # thousand sends one by one would be slow): the store's own write refuses the next.
        with sqlite3.connect(p.platform.store.path) as db:
            db.executemany(
                "INSERT INTO signals (run_id, name, payload, at, state) "
                "VALUES ('r', 'go', '1', 0, 'pending')",
                [()] * limits.MAX_SIGNAL_BACKLOG,
            )
        return _refusal(lambda: p.signal("r", "go", 1))


def memory() -> str:
    return Sandbox(max_memory=limits.DEFAULT_MEMORY_BYTES).explain("not enough memory")


def instructions() -> str:
    small = 20_000  # the message at the default bound, without spending 200M instructions
    ok, message = Sandbox().engine.load_script("x.lua", "while true do end", small)
    assert not ok
    return str(message).replace(f"budget of {small} Lua", f"budget of {limits.DEFAULT_INSTRUCTIONS} Lua")


def cpu_time() -> str:
    # The message at the default bound, from a call stopped at a small one: 200 upper-cased
    # copies of a megabyte cost a second or more.
    ok, message = Sandbox(cpu_seconds=0.05).engine.load_script(
        "x.lua", "local s = ('x'):rep(1e6) while true do local t = s:upper() end", 10**15
    )
    assert not ok
    return str(message).replace("more than 0.05 s", f"more than {limits.DEFAULT_CPU_SECONDS:g} s")


def dev_body(tmp_path: Path) -> str:
    from runtime.dev.server import DevServer

    server = DevServer(HTTP, data=tmp_path / "data", port=0)
    server.start()
    try:
        size = limits.MAX_BODY_BYTES + 1
        with socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(f"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\n\r\n".encode())
            sock.shutdown(socket.SHUT_WR)
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
    finally:
        server.stop()
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 413 ")
    return body.decode("utf-8")


def aws_body() -> str:
    from runtime.aws.http import BadRequest, request_from_event

    with pytest.raises(BadRequest) as e:
        request_from_event({"body": "x" * (limits.MAX_BODY_BYTES + 1)})
    assert e.value.response.status_code == 413
    return e.value.response.body


def run_id() -> str:
    return _refusal(lambda: check_run_id("a/b"))


def duration() -> str:
    from runtime.core.durations import parse_ms

    return _refusal(lambda: parse_ms(f"{limits.MAX_MS // 86_400_000 + 1}d", "wf:sleep"))


@pytest.fixture
def big_http_answer() -> Iterator[str]:
    from runtime.services.builtins import MAX_HTTP_BODY

    class Big(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(MAX_HTTP_BODY + 1))
            self.end_headers()
            self.wfile.write(b"x" * (MAX_HTTP_BODY + 1))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Big)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/big"
    finally:
        server.shutdown()
        server.server_close()


def outbound_http(url: str) -> str:
    from runtime.services.builtins import http_request

    return _refusal(lambda: http_request({"method": "GET", "url": url}, None))


def service(tmp_path: Path, kind: str, name: str, method: str, args: list[Any]) -> str:
    services = LocalServices(tmp_path / "svc", lambda: 0.0)
    try:
        return _refusal(lambda: services.call(kind, name, method, args))
    finally:
        services.close()


class _State:
    """An object method that returns a state one byte over the limit."""

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        return [], {"data": "x" * (limits.MAX_VALUE_BYTES - len('{"data":""}') + 1)}


def object_state(tmp_path: Path) -> str:
    services = LocalServices(tmp_path / "svc", lambda: 0.0)
    try:
        return _refusal(lambda: services.call_object(_State(), "Box", "b", "fill", []))
    finally:
        services.close()


def date_format() -> str:
    ok, message = Sandbox().engine.load_script("x.lua", "os.date(string.rep('%Y', 3000))", 100_000)
    assert not ok
    return re.sub(r"^x\.lua:1: ", "", str(message))


def database_name() -> str:
    ok, message = Sandbox().engine.load_script("x.lua", 'database "my-sales" {}', 100_000)
    assert not ok
    return str(message).split(": ", 1)[1]  # after the script and line


def test_the_database_name_message() -> None:
    assert matches(template("Database name"), database_name())


def test_the_database_name_bound_is_the_preludes() -> None:
    source = PRELUDE.read_text(encoding="utf-8")
    bound = re.search(r"check_database_name\(name\)\n  if #name <= (\d+)", source)
    assert bound and first_number(row("Database name")["Value"]) == int(bound.group(1))


def random_bytes() -> str:
    ok, message = Sandbox().engine.load_script("x.lua", "crypto.random_bytes(65537)", 100_000)
    assert not ok
    return re.sub(r"^x\.lua:1: ", "", str(message))


def test_the_value_size_message(tmp_path: Path) -> None:
    """SPEC 3: "Each recorded value is at most 256 KiB encoded; larger is refused with the
    size and the limit."""
    assert matches(
        template("Size of one value (run input, step result, run result, signal payload)"), value_size()
    )


def test_the_journal_message() -> None:
    assert matches(template("Journal entries per run"), journal_entries())


def children() -> str:
    from runtime.core import children as core_children
    from runtime.core.child_commands import ChildCmd, ChildRefused
    from runtime.core.replay import Resume

    replay = Replay("r", [Entry(1, Kind.STARTED, "w", {"format": 1, "input": None}, 0.0)], 0)
    replay.child_calls = limits.MAX_CHILDREN_PER_RUN
    decision = core_children.child(replay, ChildCmd("echo", None, None))
    assert isinstance(decision, Resume) and isinstance(decision.value, ChildRefused)
    assert replay.take_unsaved() == []
    return decision.value.message


def test_the_children_message() -> None:
    assert matches(template("Children per run"), children())


def test_the_branches_message_and_the_preludes_bound_agree_with_the_constant(tmp_path: Path) -> None:
    """The bound lives in the prelude, which refuses the call; its message names the
    constant's value, so the two cannot drift apart unseen."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "main.lua").write_text(
        'workflow "item" (function(wf, n) return n end)\n'
        'workflow "fan" (function(wf, n)\n'
        "    local items = {}\n"
        "    for i = 1, n do items[i] = i end\n"
        '    return wf:map(items, "item")\n'
        "end)\n",
        encoding="utf-8",
    )
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        p.start("fan", limits.MAX_BRANCHES + 1, id="over")
        message = p.get("over").error
        assert matches(template("Branches per `wf:map` or `wf:all_of` call"), message), message
        assert f"more than the {limits.MAX_BRANCHES} branches" in message
        assert [e.kind.value for e in p.journal("over")] == ["run.started"]
        p.start("fan", 3, id="within")
        assert p.get("within").result == [1, 2, 3]


def test_the_signal_backlog_message() -> None:
    assert matches(template("Signal backlog per run"), signal_backlog())


def test_the_memory_message() -> None:
    """SPEC 6: "Memory per Lua state ... bounded; past the bound the call fails with a
    clear error"."""
    assert matches(template("Memory per Lua state"), memory())


def test_the_instruction_budget_message() -> None:
    """SPEC 6: instructions per call are bounded; past the bound the call fails with a
    clear error."""
    assert matches(template("Instructions per Lua call"), instructions())


def test_the_cpu_time_message() -> None:
    """What the instruction budget cannot bound (instructions on megabytes) stops at the
    CPU time limit, with a clear error."""
    assert matches(template("CPU time per Lua call"), cpu_time())


def test_the_dev_request_body_message(tmp_path: Path) -> None:
    assert matches(template("Request body (`lunaflow dev`)"), dev_body(tmp_path))


def test_the_aws_request_body_message() -> None:
    assert matches(template("Request body (AWS)"), aws_body())


def test_the_local_platform_request_body_message() -> None:
    with LocalPlatform(HTTP) as p:
        response = p.fetch("POST", "/", body="x" * (limits.MAX_BODY_BYTES + 1))
    assert response.status_code == 413
    assert matches(template("Request body (`LocalPlatform`)"), response.body)


def test_the_fetch_response_message(tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    (root / "main.lua").write_text(
        'on "fetch" (function() return { status_code = 200, body = string.rep("x", 7e6) } end)\n',
        encoding="utf-8",
    )
    with LocalPlatform(root) as p:
        response = p.fetch("GET", "/big")
    assert response.status_code == 500
    assert matches(template("Fetch response"), json.loads(response.body)["error"])


def test_the_run_id_message() -> None:
    """SPEC 3: "Anything else is refused: run id must be a non-empty string without '/'
    (got "a/b")"."""
    assert matches(template("Run id length"), run_id())


def test_the_duration_message() -> None:
    assert matches(template("Longest duration"), duration())


def test_the_outbound_http_message(big_http_answer: str) -> None:
    assert matches(template("Outbound HTTP response body"), outbound_http(big_http_answer))


def test_the_kv_list_message(tmp_path: Path) -> None:
    assert matches(template("kv list page"), service(tmp_path, "kv", "ns", "list", [{"limit": 5000}]))


def test_the_stored_value_messages(tmp_path: Path) -> None:
    """Issue 20.2: one set of key and value limits that both stores honour."""
    template_text = template("Size of one stored value (kv value, object state)")
    big = "x" * limits.MAX_VALUE_BYTES
    assert matches(template_text, service(tmp_path / "kv", "kv", "ns", "put", ["k", big]))
    assert matches(template_text, object_state(tmp_path / "obj"))


def test_the_key_message(tmp_path: Path) -> None:
    long = "k" * (limits.MAX_KEY_BYTES + 1)
    label = "Key of kv or an object; kv namespace or object class name"
    message = service(tmp_path, "kv", "ns", "get", [long])
    assert matches(template(label), message)
    quoted = re.findall(r"`([^`]+)`", row(label)["What the user sees"])
    assert matches(
        quoted[-1], service(tmp_path / "name", "kv", "n" * (limits.MAX_KEY_BYTES + 1), "get", ["k"])
    )


def queue_settings(tmp_path: Path, settings: str) -> str:
    from runtime.engine.project import ProjectSource

    (tmp_path / "main.lua").write_text("", encoding="utf-8")
    (tmp_path / "lunaflow.toml").write_text(f"[queues.q]\n{settings}\n", encoding="utf-8")
    return _refusal(lambda: ProjectSource.read(tmp_path))


def test_the_queue_attempts_message(tmp_path: Path) -> None:
    """Issue 20.4: the stack sets maxReceiveCount to a queue's attempts; SQS takes 1 to 1000."""
    for i, bad in enumerate(["0", str(limits.MAX_ATTEMPTS + 1), '"5"', "true"]):
        folder = tmp_path / str(i)
        folder.mkdir()
        assert matches(template("Queue attempts"), queue_settings(folder, f"attempts = {bad}"))


def test_the_queue_retry_delay_message(tmp_path: Path) -> None:
    assert matches(template("Queue retry delay"), queue_settings(tmp_path, 'retry_delay = "12h1s"'))


def test_the_largest_queue_settings_load(tmp_path: Path) -> None:
    from runtime.engine.project import ProjectSource

    (tmp_path / "main.lua").write_text("", encoding="utf-8")
    (tmp_path / "lunaflow.toml").write_text(
        f'[queues.q]\nattempts = {limits.MAX_ATTEMPTS}\nretry_delay = "12h"\n', encoding="utf-8"
    )
    settings = ProjectSource.read(tmp_path).queue_settings("q")
    assert (settings.attempts, settings.retry_delay_s) == (limits.MAX_ATTEMPTS, limits.MAX_RETRY_DELAY_S)


def test_the_queue_delay_message(tmp_path: Path) -> None:
    message = service(tmp_path, "queue", "jobs", "send", [1, {"delay": "16m"}])
    assert matches(template("Queue send delay"), message)


def test_the_date_format_message() -> None:
    assert matches(template("`os.date` format length"), date_format())


def test_the_random_bytes_message() -> None:
    assert matches(template("`crypto.random_bytes` length"), random_bytes())


def test_the_aws_step_timeout_message() -> None:
    from runtime.aws.invocation import too_long

    [message] = too_long(ROOT / "tests" / "projects" / "aws_too_long")
    assert matches(template("Step timeout (AWS)"), message)


STEP_TIMEOUT = r"""
object "Slow" { get = function(self, url) return http.get(url).status end }
workflow "slow" (function(wf, url)
  return wf:step("call", { timeout = "200ms" }, function() return objects("Slow")("s"):get(url) end)
end)
"""


@pytest.fixture
def slow_url() -> Iterator[str]:
    from tests.support.stress import slow_upstream

    with slow_upstream(5.0) as upstream:
        yield upstream.url("/slow")


def step_timeout(tmp_path: Path, url: str) -> str:
    project = tmp_path / "p"
    project.mkdir()
    (project / "main.lua").write_text(STEP_TIMEOUT, encoding="utf-8")
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        run = p.start("slow", url, id="s1")
        failed = [e for e in p.journal("s1") if e.kind == Kind.STEP_FAILED]
    assert run.status == "failed"
    return str(failed[0].data["error"])


def interrupted() -> str:
    journal = [
        Entry(1, Kind.STARTED, "w", {"format": 1, "input": None}, 0.0),
        Entry(2, Kind.STEP_INTENT, "charge", {"pass": 1, "attempt": 1, "step_id": "r/charge/1/1"}, 0.0),
    ]
    journal += [
        Entry(2 + n, Kind.STEP_RERUN, "charge", {"attempt": 1, "start": n + 1}, 0.0)
        for n in range(1, limits.MAX_STARTS)
    ]
    replay = Replay("r", journal, 0)
    decision = replay.step(StepCmd("charge", 2, 1000, None))
    assert not isinstance(decision, Fail)
    [failed] = replay.take_unsaved()
    return str(failed.data["error"])


def http_time(url: str) -> str:
    from runtime.services.builtins import http_request

    message = _refusal(lambda: http_request({"method": "GET", "url": url, "timeout": "200ms"}, None))
    default_ms = round(limits.DEFAULT_HTTP_TIMEOUT_S * 1000)
    return message.replace("timed out after 200ms", f"timed out after {default_ms}ms")


def busy(tmp_path: Path) -> str:
    from runtime.dev.server import DevServer

    server = DevServer(HTTP, data=tmp_path / "data", port=0, request_states=1, request_wait_s=0.05)
    try:
        with server.requests.borrow() as _held:  # the only request state, held
            response = server.handle_fetch(
                {"method": "GET", "path": "/", "query": {}, "headers": {}, "body": ""}
            )
    finally:
        server.platform.close()
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    from runtime.dev.server import REQUEST_STATES, REQUEST_WAIT_S
    from runtime.dev.terminal import duration

    return (
        response.body.strip()
        .replace("all 1 Lua states", f"all {REQUEST_STATES} Lua states")
        .replace(f"for {duration(0.05)} ", f"for {duration(REQUEST_WAIT_S)} ")
    )


def overflow() -> str:
    """The answer to a connection past the most ``lunaflow dev`` serves at once, as the
    accepting thread writes it (a socket pair stands in for the accepted connection)."""
    import types

    from runtime.dev.server import _Server

    accepted, client = socket.socketpair()
    with client:
        _Server._overflow(types.SimpleNamespace(_warned_at=float("inf")), accepted)  # type: ignore[arg-type]
        raw = b""
        while chunk := client.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head, head
    return body.decode().strip()


def log_line() -> str:
    from runtime.engine.host import clip

    return clip("x" * (limits.MAX_LOG_CHARS * 2))


def test_the_step_timeout_message(tmp_path: Path, slow_url: str) -> None:
    """Issue 14 point 5: past its timeout, host calls included, an attempt fails with the
    SPEC's words."""
    assert matches(template("Step attempt time"), step_timeout(tmp_path, slow_url))


def test_the_interrupted_attempt_message() -> None:
    assert matches(template("Interrupted starts of one attempt"), interrupted())


CLEANUPS = """
workflow "slow" (function(wf)
    wf:on_cancel({ timeout = "1m" }, function() wf:sleep("2m") end)
    wf:await("never")
end)
workflow "endless" (function(wf)
    wf:on_cancel(function() while true do wf:step("undo", function() end) end end)
    wf:await("never")
end)
"""


def cleanups(tmp_path: Path) -> tuple[str, str]:
    """The errors of a cleanup past its time and of one past its step attempts."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "main.lua").write_text(CLEANUPS, encoding="utf-8")
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        p.start("slow", None, id="c1")
        p.cancel("c1")
        p.advance("1m")
        p.start("endless", None, id="c2")
        p.cancel("c2")
        out = str(p.get("c1").error), str(p.get("c2").error)
        assert [e.kind for e in p.journal("c2")].count(Kind.STEP_INTENT) == limits.MAX_CLEANUP_STEPS
    return out


def test_the_cleanup_budget_messages(tmp_path: Path) -> None:
    slow, endless = cleanups(tmp_path)
    assert matches(template("Cleanup time after a cancel (`wf:on_cancel`)"), slow)
    assert matches(template("Step attempts of one cleanup"), endless)


def test_the_http_time_message(slow_url: str) -> None:
    assert matches(template("Outbound HTTP exchange time"), http_time(slow_url))


def test_the_busy_dev_server_message(tmp_path: Path) -> None:
    message = busy(tmp_path)
    assert matches(template("Lua states serving requests (`lunaflow dev`)"), message)
    assert matches(template("Wait for a request's Lua state (`lunaflow dev`)"), message)


def test_the_connection_cap_message() -> None:
    assert matches(template("Connections served at once (`lunaflow dev`)"), overflow())


def test_the_log_line_message() -> None:
    assert matches(template("Log line"), log_line())


def test_the_log_history_keeps_the_newest_within_its_bounds() -> None:
    from runtime.platform.logs import LogHistory

    history = LogHistory()
    for i in range(limits.MAX_LOG_RECORDS + 10):
        history.append({"level": "info", "message": str(i), "fields": None})
    assert len(history) == limits.MAX_LOG_RECORDS and next(iter(history))["message"] == "10"
    for _ in range(2 * limits.MAX_LOG_HISTORY_CHARS // limits.MAX_LOG_CHARS):
        history.append({"level": "info", "message": "m" * limits.MAX_LOG_CHARS, "fields": None})
    kept = sum(len(r["message"]) for r in history)
    assert limits.MAX_LOG_HISTORY_CHARS - 2 * limits.MAX_LOG_CHARS < kept <= limits.MAX_LOG_HISTORY_CHARS


def _published(tmp_path: Path, key: str, value: Any, many: int = 0) -> str:
    project = ROOT / "tests" / "projects" / "published"
    with LocalPlatform(project, data_dir=tmp_path) as p:
        run = p.start("probe", {"key": key, "value": value, "many": many or None}, id="limits-1")
    err = str(run.result["err"])
    return err.split(": ", 1)[1] if err.startswith("subscription.lua:") else err


def test_the_published_values_messages(tmp_path: Path) -> None:
    keys = _published(tmp_path / "a", "first", 0, many=limits.MAX_PUBLISHED_KEYS + 1)
    assert matches(template("Keys a run publishes (`wf:set`)"), keys), keys
    key = _published(tmp_path / "b", "no key", 1)
    assert matches(template("Published key (`wf:set`)"), key), key
    value = _published(tmp_path / "c", "note", "x" * (limits.MAX_PUBLISHED_VALUE_BYTES + 1))
    assert matches(template("Published value (`wf:set`)"), value), value


def test_every_row_of_the_limits_table_has_its_message_checked() -> None:
    checked = {
        "Size of one value (run input, step result, run result, signal payload)",
        "Size of one stored value (kv value, object state)",
        "Key of kv or an object; kv namespace or object class name",
        "Journal entries per run",
        STEPS_PER_RUN,  # points at the journal's message
        "Signal backlog per run",
        "Children per run",
        "Branches per `wf:map` or `wf:all_of` call",
        "Memory per Lua state",
        "Instructions per Lua call",
        "CPU time per Lua call",
        "Request body (`lunaflow dev`)",
        "Request body (AWS)",
        "Request body (`LocalPlatform`)",
        "Fetch response",
        "Step timeout (AWS)",
        "Run id length",
        "Longest duration",
        "Outbound HTTP response body",
        "kv list page",
        "Queue send delay",
        "Queue attempts",
        "Queue retry delay",
        "`crypto.random_bytes` length",
        "`os.date` format length",
        "Database name",
        "Step attempt time",
        "Interrupted starts of one attempt",
        "Cleanup time after a cancel (`wf:on_cancel`)",
        "Step attempts of one cleanup",
        "Outbound HTTP exchange time",
        "Lua states serving requests (`lunaflow dev`)",
        "Wait for a request's Lua state (`lunaflow dev`)",  # the same message
        "Connections served at once (`lunaflow dev`)",
        # No message: the connection is closed; tests/dev_server/test_connections.py waits
        # out the 10 s on a real server, for a silent client and for a trickling one.
        "Time to send a request head (`lunaflow dev`)",
        "Log line",
        "Log history kept (`LocalPlatform`)",  # checked by what it keeps
        "Log records kept (`LocalPlatform`)",
        # No message: tests/semantics/test_continue_as_new.py checks what is kept and counted.
        "Generations kept (`wf:continue_as_new`)",
        "Keys a run publishes (`wf:set`)",
        "Published key (`wf:set`)",
        "Published value (`wf:set`)",
        "Concurrency limit of one key",
        # No message: test_a_collection_closes_at_its_bounds checks where the next run begins.
        "Starts one debounced or batched run collects",
        "Inputs one debounced or batched run collects",
        # No message: a run not finished by then goes to the worker; tests/aws/test_eager.py
        # checks what a request advances, and tests/aws/test_config.py the setting's bounds.
        "Time a request spends advancing the runs it started or signalled (AWS)",
        # No message: tests/aws/test_status_index.py checks how deep a list looks, and
        # tests/aws/test_ttl_expiry.py that runs TTL has yet to delete do not shorten a list.
        "Runs a list looks through past those it leaves out (AWS)",
        # No message: tests/aws/test_completed_list.py checks how deep a list looks.
        "Runs a list of completed runs looks through (AWS)",
    }
    assert {r["Limit"] for r in LIMITS} == checked


def test_the_concurrency_limit_message(tmp_path: Path) -> None:
    from runtime.platform.flow import set_limit
    from runtime.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.sqlite")
    try:
        with pytest.raises(LunaflowError) as got:
            set_limit(store, "sync/*", str(limits.MAX_LIMIT + 1))
    finally:
        store.close()
    assert matches(template("Concurrency limit of one key"), str(got.value))


@pytest.mark.parametrize("which", ["starts", "bytes"])
def test_a_collection_closes_at_its_bounds(tmp_path: Path, which: str) -> None:
    """The start past a collection's bound begins a new run; the one it would have overfilled
    holds exactly what fits."""
    from runtime.core.flow import Collect
    from runtime.core.journal import Status
    from runtime.store.base import RunRecord
    from runtime.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.sqlite")
    spec = Collect("debounce", 5000, keep_all=True)
    payload = "x" * (10_000 if which == "bytes" else 1)
    fits = limits.MAX_COLLECTED if which == "starts" else limits.MAX_COLLECTED_BYTES // (len(payload) + 3)
    try:
        ids = []
        for i in range(fits + 1):
            run = RunRecord(f"r{i}", "w", Status.RUNNING, payload, created_at=1.0, updated_at=1.0)
            started = Entry(1, Kind.STARTED, "w", {"format": 1, "input": payload}, 1.0)
            ids.append(store.collect(run, started, "w", spec, 1000)[0].id)
        assert ids[:fits] == ["r0"] * fits and ids[fits] == f"r{fits}"
        events = store.close_collection("r0", spec, 1000)
        assert isinstance(events, list) and len(events) == fits
    finally:
        store.close()


# --- the escape corpus section ---------------------------------------------------------------------


def test_the_escape_corpus_section_lists_every_case_and_its_state() -> None:
    """Issue: 'plus an "Escape corpus" section listing the cases'."""
    rows = {r["Case"].strip("`"): r for r in table("## Escape corpus")}
    assert set(rows) == {c.name for c in CORPUS}
    for case in CORPUS:
        bug = rows[case.name]["Today"].startswith("**engine bug**")
        assert bug == (case.xfail is not None), f"{case.name}: the Today column is stale"
