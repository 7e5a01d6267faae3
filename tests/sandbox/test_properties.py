"""Property-based tests (hypothesis) for the boundaries every value and request crosses:
Lua <-> JSON values, durations, run ids, and the HTTP layer of ``lunaflow dev``.

Example counts are bounded (``@settings(database=None, max_examples=..., deadline=None)``) so the file
stays a few seconds long.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import string
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from runtime.core.durations import MAX_MS, parse_ms
from runtime.core.ids import MAX_RUN_ID_BYTES, check_run_id
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "tests" / "projects" / "escape_values"
HTTP = ROOT / "tests" / "projects" / "escape_http"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
VALUE_RULE = "values must be JSON-like"

# Hypothesis keeps caches in ./.hypothesis unless told otherwise; keep the checkout clean.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "lunaflow-hypothesis")

FAST = settings(database=None, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def platform() -> Iterator[LocalPlatform]:
    # cache_size=0: every activation replays the run from its journal, so a value recorded
    # by a step comes back into Lua from the journal, not from a live coroutine.
    with LocalPlatform(VALUES, cache_size=0) as p:
        yield p


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (1 is not 1.0, True is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


# --- Lua <-> JSON values ---------------------------------------------------------------------

ints = st.integers(INT64_MIN, INT64_MAX)
floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(max_size=20)  # any Unicode but lone surrogates, control characters included
leaves = st.booleans() | ints | floats | texts | st.sampled_from([INT64_MIN, INT64_MAX, -0.0, 1.0, 2.0**63])

# What Lua holds exactly: no nil inside a table and no empty array (Lua has one kind of
# table: an empty one comes back as {}; see docs/reliability_limits.md).
lua_values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, min_size=1, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)


@FAST
@given(value=lua_values)
def test_values_round_trip_python_lua_journal_lua_python(platform: LocalPlatform, value: Any) -> None:
    """SPEC 3: "A step's values must be JSON-like: nil, booleans, numbers (integers stay
    integers), strings, and tables ..." and "Same limits for inputs, results and signal
    payloads" — the input, the step's recorded value (read back from the journal on replay)
    and a signal payload all come back as they went in, types included."""
    run = platform.start("echo", value)
    assert run.status == "awaiting", run.error
    platform.signal(run.id, "go", value)
    done = platform.get(run.id)
    assert done.status == "completed", done.error
    assert same(done.result.get("recorded"), value), (done.result, value)
    assert same(done.result.get("payload"), value), (done.result, value)
    (recorded,) = [e for e in platform.journal(run.id) if e.kind == "step.result"]
    assert same(recorded.data["values"], [value])


@FAST
@given(n=ints | st.sampled_from([INT64_MIN, INT64_MAX, 2**53 + 1, -(2**53) - 1]))
def test_integers_stay_integers_across_the_whole_int64_range(platform: LocalPlatform, n: int) -> None:
    """SPEC 3: "numbers (integers stay integers)" — up to 2^63-1, never through a double."""
    run = platform.start("echo", {"n": n, "list": [n, n]})
    platform.signal(run.id, "go", n)
    result = platform.get(run.id).result
    assert same(result["recorded"], {"n": n, "list": [n, n]})
    assert same(result["payload"], n)


@FAST
@given(x=floats | st.sampled_from([1.0, -0.0, 2.0**63, 1e16, 5e-324, 1.7976931348623157e308]))
def test_floats_stay_floats_even_when_whole(platform: LocalPlatform, x: float) -> None:
    """SPEC 3: numbers keep their kind — 1.0 comes back as 1.0, not 1."""
    run = platform.start("echo", [x])
    platform.signal(run.id, "go", x)
    result = platform.get(run.id).result
    assert same(result["recorded"], [x]) and same(result["payload"], x)


@FAST
@given(
    x=floats | st.sampled_from([0.1, 19.99, 1 / 3, 1e15, 2.0**53, 2.0**-24, 5e-324, 2.2250738585072014e-308])
)
def test_lua_writes_a_float_with_the_digits_that_read_back_as_it(platform: LocalPlatform, x: float) -> None:
    """A float Lua encodes (json.encode, a step's values) reads back as the same float, in
    15 digits, else 16, else 17: Python's shortest, or one digit more where the 16-digit
    rounding falls outside a power of two's narrower lower half (2^-24: 5.9604644775390625e-08
    where Python writes 5.960464477539063e-08, found by this test in CI), and 15 where a
    subnormal such as 5e-324 needs fewer. Before, every float took 17
    ("0.10000000000000001"), so 15,000 prices were held to the value limit at three times
    their size."""
    text = platform.start("encode", x).result
    assert same(json.loads(text), x), (text, x)
    digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
    shortest = repr(abs(x)).split("e")[0].replace(".", "").strip("0")
    assert len(digits) <= max(len(shortest) + 1, 15), (text, repr(x))
    if abs(x) >= 2.2250738585072014e-308 and len(shortest) <= 15:
        assert digits == shortest, (text, repr(x))  # a normal float's 15 digits are exact


@pytest.mark.parametrize(
    ("x", "written"),
    [
        (0.1, "0.1"),
        (19.99, "19.99"),
        (1 / 3, "0.3333333333333333"),
        (-0.0, "-0.0"),
        (2.0**53, "9007199254740992.0"),
    ],
)
def test_common_floats_are_written_as_python_writes_them(
    platform: LocalPlatform, x: float, written: str
) -> None:
    assert platform.start("encode", x).result == written


def test_lua_has_one_kind_of_table_and_nil_is_absence(platform: LocalPlatform) -> None:
    """The conversion rules docs/reliability_limits.md states: an empty array and an empty
    object are the same Lua table ({} both ways); a null field is an absent field."""
    run = platform.start("echo", {"empty_list": [], "empty_object": {}, "gone": None, "kept": [1]})
    platform.signal(run.id, "go", None)
    assert platform.get(run.id).result == {"recorded": {"empty_list": {}, "empty_object": {}, "kept": [1]}}


# A path into a value: string keys and 1-based array positions, as the engine prints them.
path_keys = st.lists(
    st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=6) | st.integers(1, 3),
    max_size=4,
)


def render(path: list[Any]) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def nest(path: list[Any], leaf: Any) -> Any:
    for key in reversed(path):
        leaf = [0] * (key - 1) + [leaf] if isinstance(key, int) else {key: leaf}
    return leaf


POISONS: dict[str, Any] = {
    "a non-finite number": float("nan"),
    "a float": float("inf"),  # named for its type below: inf is "a non-finite number"
    "a set": {1},
    "a bytes": b"raw",
    "a object": object(),
    "a complex": 1j,
}


@FAST
@given(path=path_keys, poison=st.sampled_from(sorted(POISONS)), where=st.sampled_from(["input", "signal"]))
def test_non_json_values_from_python_are_refused_naming_the_path(
    platform: LocalPlatform, path: list[Any], poison: str, where: str
) -> None:
    """SPEC 3: a value that is not JSON-like "is refused, naming" where it is — the message
    names the path into the value (value.a[2].b) and the rule."""
    value = nest(path, POISONS[poison])
    what = "a non-finite number" if poison == "a float" else poison
    with pytest.raises(InvalidInput) as e:
        if where == "input":
            platform.start("echo", value)
        else:
            run = platform.start("echo", 1)
            platform.signal(run.id, "go", value)
    assert f"holds {what} at value{render(path)}; {VALUE_RULE}" in str(e.value)


@FAST
@given(path=path_keys, key=st.sampled_from([1, None, 2.5, (1, 2)]))
def test_non_string_keys_from_python_are_refused_naming_the_key_and_path(
    platform: LocalPlatform, path: list[Any], key: Any
) -> None:
    """SPEC 3: tables' "keys are all strings or form a 1..n array" — a dict with another
    key is refused, naming the key and where the dict sits."""
    with pytest.raises(InvalidInput) as e:
        platform.start("echo", nest(path, {key: "x"}))
    assert f"holds a non-string key {key!r} at value{render(path)}; {VALUE_RULE}" in str(e.value)


LUA_POISONS = {
    "function": "a function",
    "thread": "a thread",
    "nan": "a non-finite number",
    "inf": "a non-finite number",
    "bytes": "a string that is not valid UTF-8",
    "mixed": "a table mixing string keys and array items",
}


@settings(database=None, max_examples=30, deadline=None)
@given(path=path_keys, leaf=st.sampled_from(sorted(LUA_POISONS)))
def test_non_json_values_from_lua_fail_the_step_naming_the_path(
    platform: LocalPlatform, path: list[Any], leaf: str
) -> None:
    """SPEC 3: "A function, userdata, cycle or mixed table is refused, naming the step" —
    and the path inside the step's values ([1] is its first value)."""
    run = platform.start("poison", {"path": path, "leaf": leaf})
    assert run.status == "failed"
    assert (
        f"step 'bad' failed after 1 attempts: the result of step 'bad' holds {LUA_POISONS[leaf]} "
        f"at [1]{render(path)}; {VALUE_RULE}"
    ) in (run.error or "")


@pytest.mark.parametrize("n", [INT64_MAX + 1, INT64_MIN - 1, 10**30])
@pytest.mark.parametrize("where", ["input", "signal"])
def test_integers_beyond_64_bits_are_refused_naming_the_path_and_the_platform_keeps_serving(
    n: int, where: str
) -> None:
    """SPEC 3: "integers stay integers" — one a Lua integer cannot hold is refused up front
    (as json.parse does: "the number at value.n[1] does not fit a Lua integer (64 bits)"),
    never accepted and lost."""
    with LocalPlatform(VALUES) as p:
        with pytest.raises(InvalidInput, match=re.escape("value.n[1]")):
            if where == "input":
                p.start("echo", {"n": [n]})
            else:
                p.start("echo", 1, id="target")
                p.signal("target", "go", {"n": [n]})
        ok = p.start("echo", 1, id="after")
        assert ok.status == "awaiting"


def test_a_string_that_is_not_unicode_text_is_refused_naming_the_path(platform: LocalPlatform) -> None:
    """SPEC 3: a value that is not JSON-like is refused naming where it is — here a lone
    surrogate, which no UTF-8 text (and so no Lua string from JSON) can hold."""
    with pytest.raises(InvalidInput, match=re.escape("value.who[2]")):
        platform.start("echo", {"who": ["ok", "bad \ud800"]})


# --- durations ---------------------------------------------------------------------------------

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
duration_parts = st.lists(
    st.tuples(st.integers(0, 10**6), st.sampled_from(sorted(UNIT_MS))), min_size=1, max_size=4
)
ASCII_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d))+")


@FAST
@given(parts=duration_parts)
def test_durations_of_whole_parts_add_up_exactly(parts: list[tuple[int, str]]) -> None:
    """SPEC 3: "Durations are strings of one or more <number><unit> (ms, s, m, h, d)"."""
    text = "".join(f"{n}{unit}" for n, unit in parts)
    total = sum(n * UNIT_MS[unit] for n, unit in parts)
    if total <= MAX_MS:
        assert parse_ms(text) == total
    else:
        with pytest.raises(InvalidInput, match=re.escape(f'bad duration "{text}"')):
            parse_ms(text)


@FAST
@given(
    whole=st.integers(0, 10**6),
    frac=st.text(alphabet=string.digits, min_size=1, max_size=3),
    unit=st.sampled_from(sorted(UNIT_MS)),
)
def test_fractional_durations_round_to_the_millisecond(whole: int, frac: str, unit: str) -> None:
    """SPEC 3: a <number> may have a fraction ("1.5s" is 1500ms)."""
    text = f"{whole}.{frac}{unit}"
    ms = round(float(f"{whole}.{frac}") * UNIT_MS[unit])
    if ms <= MAX_MS:
        assert parse_ms(text) == ms
    else:  # over a century
        with pytest.raises(InvalidInput, match=re.escape(f'bad duration "{text}"')):
            parse_ms(text)


@FAST
@given(seconds=st.floats(min_value=0, max_value=MAX_MS / 1000) | st.integers(0, MAX_MS // 1000))
def test_a_number_is_a_duration_in_seconds(seconds: float) -> None:
    """SPEC 3: a duration may be "a number of seconds"."""
    assert parse_ms(seconds) == round(seconds * 1000)


def _not_a_foreign_digit(c: str) -> bool:
    return not (unicodedata.category(c) == "Nd" and not c.isascii())


@FAST
@given(
    text=st.text(alphabet=st.characters(codec="utf-8").filter(_not_a_foreign_digit), max_size=12)
    | st.from_regex(r"\A[0-9. hmsd-]{1,10}\Z")
)
def test_garbage_durations_are_refused_with_the_value_in_the_message(text: str) -> None:
    """SPEC 3: durations that are not <number><unit>... "Anything else is refused with the
    bad value in the message"."""
    assume(not ASCII_DURATION.fullmatch(text))  # real durations are the properties above
    with pytest.raises(InvalidInput) as e:
        parse_ms(text, "wf:sleep")
    assert str(e.value).startswith(f'bad duration "{text}" for wf:sleep: ')


@FAST
@given(
    value=st.none()
    | st.booleans()
    | st.floats(max_value=-1e-9)
    | st.integers(max_value=-1)
    | st.sampled_from([math.nan, math.inf, -math.inf, MAX_MS / 1000 + 1])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)
)
def test_durations_that_are_not_strings_or_sane_numbers_are_refused_with_the_value(value: Any) -> None:
    """SPEC 3: anything else is refused with the bad value in the message."""
    with pytest.raises(InvalidInput) as e:
        parse_ms(value, "the timeout of wf:await")
    assert str(e.value).startswith(f"bad duration {value!r} for the timeout of wf:await: ")


@pytest.mark.parametrize("text", ["٣s", "１h", "5\u0663m"])
def test_durations_with_digits_from_other_scripts_are_refused(text: str) -> None:
    """SPEC 3: a duration is "<number><unit>" with the units given — numbers in ASCII
    digits, as in every example; "٣s" is garbage, not three seconds."""
    with pytest.raises(InvalidInput, match=re.escape(f'bad duration "{text}"')):
        parse_ms(text)


@settings(database=None, max_examples=12, deadline=None)
@given(
    text=st.text(min_size=1, max_size=10).filter(
        lambda t: not ASCII_DURATION.fullmatch(t) and _all_ascii_digits(t)
    )
)
def test_a_workflow_sleeping_for_garbage_fails_naming_the_value(platform: LocalPlatform, text: str) -> None:
    """SPEC 3: a bad duration reaching wf:sleep fails the run with the value in the message."""
    run = platform.start("sleep", {"duration": text})
    assert run.status == "failed"
    assert f'bad duration "{text}" for wf:sleep' in (run.error or "")


def _all_ascii_digits(text: str) -> bool:
    return all(_not_a_foreign_digit(c) for c in text)


# --- run ids -------------------------------------------------------------------------------------


def run_id_rule(value: str) -> bool:
    """SPEC 3: "A run id is a non-empty string without /, at most 200 bytes, no control
    characters" (C0 below 0x20, DEL, and the C1 range 0x80-0x9F)."""
    return (
        value != ""
        and "/" not in value
        and len(value.encode("utf-8")) <= MAX_RUN_ID_BYTES
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    )


def shown(value: str) -> str:
    return value if len(value) <= 60 else value[:60] + "..."


run_ids = (
    st.text(max_size=30)
    | st.text(alphabet="ab/é\x00\x1f\x7f ", max_size=8)
    | st.text(alphabet="é€😀x", min_size=60, max_size=110)  # around the 200-byte bound
)


@settings(database=None, max_examples=80, deadline=None)
@given(value=run_ids)
def test_run_ids_are_accepted_or_refused_by_the_rule_with_the_value_shown(value: str) -> None:
    """SPEC 3: anything else "is refused: run id must be a non-empty string without '/'
    (got "a/b")"."""
    if run_id_rule(value):
        assert check_run_id(value) == value
        return
    with pytest.raises(InvalidInput) as e:
        check_run_id(value)
    assert str(e.value) == f"run id must be a non-empty string without '/' (got \"{shown(value)}\")"


@FAST
@given(
    value=st.none()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.lists(st.text(max_size=3), max_size=2)
    | st.binary(max_size=4)
)
def test_run_ids_that_are_not_strings_are_refused_with_their_repr(value: Any) -> None:
    """SPEC 3: a run id is a string; anything else is refused, showing what was given."""
    with pytest.raises(InvalidInput) as e:
        check_run_id(value)
    assert str(e.value) == f"run id must be a non-empty string without '/' (got \"{shown(repr(value))}\")"


@settings(database=None, max_examples=25, deadline=None)
@given(value=st.text(min_size=1, max_size=40).filter(run_id_rule))
def test_any_valid_run_id_names_its_run_and_its_step_ids(platform: LocalPlatform, value: str) -> None:
    """SPEC 3: the id is the run's identity; wf.step_id is "<run id>/<step name>/<pass>/<attempt>"."""
    run = platform.start("whoami", id=value)
    assert (run.id, run.status, run.result) == (value, "completed", f"{value}/id/1/1")
    assert platform.get(value).id == value


@pytest.mark.parametrize("value", ["line\x85break", "esc\x9b[2J"])
def test_run_ids_with_c1_control_characters_are_refused(value: str) -> None:
    """SPEC 3: a run id has "no control characters" — U+0085 (next line) and U+009B (the
    terminal's CSI) are control characters as much as \\n and ESC are."""
    with pytest.raises(InvalidInput):
        check_run_id(value)


def test_a_run_id_that_is_not_unicode_text_is_refused_with_the_spec_message() -> None:
    """SPEC 3: anything else is refused with `run id must be a non-empty string ...`."""
    with pytest.raises(InvalidInput, match=r"^run id must be a non-empty string without '/'"):
        check_run_id("run-\ud800")


# --- the HTTP layer of `lunaflow dev` --------------------------------------------------------------

TOKEN = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"
KNOWN_METHODS = st.sampled_from(
    ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT"]
)
methods = st.one_of(
    KNOWN_METHODS, KNOWN_METHODS, KNOWN_METHODS, st.text(alphabet=TOKEN, min_size=1, max_size=10)
)
LATIN1 = "".join(chr(c) for c in range(0x20, 0x100) if not 0x7F <= c <= 0x9F)
wild_paths = st.builds(
    lambda prefix, rest, query: prefix + rest + query,
    st.sampled_from(["/", "/", "/api/", "/boom", "/_console", "/_console/", "//", "/%2e%2e/"]),
    st.text(alphabet=LATIN1 + "%\t", max_size=40),
    st.sampled_from(["", "?", "?a=1&a=2", "?%zz=%ff&=&x"])
    | st.text(alphabet=LATIN1, max_size=15).map(lambda q: "?" + q),
)
# What a client puts in a request line: visible ASCII (anything else it percent-encodes),
# and never a #fragment.
client_paths = st.builds(
    lambda rest, query: "/" + rest + query,
    st.text(alphabet=[chr(c) for c in range(0x21, 0x7F) if chr(c) != "#"], max_size=40),
    st.sampled_from(["", "?", "?a=1&a=2", "?%zz=%ff&=&x", "?q=%C3%A9"]),
)
paths = st.one_of(wild_paths, client_paths, client_paths.map(lambda p: "/boom" + p))

header_names = st.sampled_from(
    ["Content-Length", "Transfer-Encoding", "Expect", "Connection", "Host", "Cookie", "Content-Type"]
) | st.text(alphabet=TOKEN, min_size=1, max_size=12)
header_values = st.sampled_from(["chunked", "100-continue", "close", "keep-alive", "-1", "0"]) | st.text(
    alphabet=LATIN1 + "\t", max_size=40
)
header_lists = st.lists(st.tuples(header_names, header_values), max_size=8)
bodies = st.binary(max_size=600) | st.text(max_size=200).map(lambda t: t.encode("utf-8"))
lengths = st.one_of(
    st.none(),
    st.none(),
    st.text(alphabet=string.digits + "-+ x", max_size=8),
    st.integers(0, 5 * 1024 * 1024).map(str),
)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.devserver import Servers

    servers = Servers(tmp_path_factory.mktemp("http-dev"))
    try:
        yield servers.start(HTTP, servers.tmp / "data")
    finally:
        servers.close()


def exchange(port: int, raw: bytes, method: str) -> http.client.HTTPResponse:
    """Send ``raw``, close our side, and read one response as a client would."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        response.body = response.read()  # type: ignore[attr-defined]
        return response
    finally:
        sock.close()


@settings(
    database=None, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(method=methods, path=paths, headers=header_lists, body=bodies, length=lengths)
def test_the_dev_server_answers_any_request_with_a_well_formed_response(
    dev: Any, method: str, path: str, headers: list[tuple[str, str]], body: bytes, length: str | None
) -> None:
    """SPEC 5: `lunaflow dev` "serves the project's fetch routes" — whatever arrives
    (any method, path, headers, body, content-length), it answers with a well-formed HTTP
    response and keeps serving."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{dev.port}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(body) if length is None else length}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    response = exchange(dev.port, raw, method)
    event(f"status {response.status}")  # pytest --hypothesis-show-statistics shows the spread
    assert response.version in (10, 11)
    assert 100 <= response.status <= 599
    declared = response.getheader("content-length")
    if method != "HEAD":  # a HEAD answer declares the length of a body it does not send
        if declared is not None:
            assert len(response.body) == int(declared)  # type: ignore[attr-defined]
        if response.status == 500:  # a handler failure: no details, a request id for the log
            assert response.body.startswith(b"internal error (request id ")  # type: ignore[attr-defined]
    assert dev.alive
    ok = dev.get("/ok")
    assert (ok.status, ok.body) == (200, "ok")


@settings(
    database=None, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]),
    path=client_paths,
    headers=header_lists,
    body=st.text(max_size=300),
)
def test_a_request_reaches_the_handler_as_the_request_table_says(
    dev: Any, method: str, path: str, headers: list[tuple[str, str]], body: str
) -> None:
    """SPEC 2: "A fetch request is { method, path, query = {...}, headers = {...} (lower-case
    names), body = "..." }" — for any path, headers and UTF-8 body the handler sees them."""
    target = path.split("?")[0]
    if ("/" + target.lstrip("/")).startswith("/_console") or target == "/ok":
        return  # the console's and /ok's own routes (http.server routes "//_console" as "/_console")
    data = body.encode("utf-8")
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{dev.port}"]
    lines += [f"X-P-{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(data)}")
    response = exchange(dev.port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data, method)
    assert response.status == 200, response.body  # type: ignore[attr-defined]
    seen = json.loads(response.body)  # type: ignore[attr-defined]
    names = {"host", "content-length"} | {f"x-p-{name}".lower() for name, _ in headers}
    assert seen == {
        "method": method,
        "path": target,
        "headers": len(names),
        "query": seen["query"],
        "body": len(data),
    }
