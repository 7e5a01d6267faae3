"""Ordinary bad input to a builtin is refused with the what/rule/fix recipe, never reported
as an engine bug (issue 14, point 11)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform

ENGINE_BUG = "engine bug"

BAD_INPUT_PROJECT = r"""
local CLOSED = "http://127.0.0.1:9/"
local function get(spec) spec.url = spec.url or CLOSED return http.request(spec) end
local cases = {
  ["/json-long-number"] = function(r) return json.parse(string.rep("7", 5000)) end,
  ["/json-long-number-nested"] = function(r)
    return json.parse('{"n": [' .. string.rep("1", 4400) .. ']}')
  end,
  ["/json-long-negative"] = function(r) return json.parse("-" .. string.rep("9", 4400)) end,
  ["/http-header-name"] = function(r) return get{ headers = { ["X-A\r\nX-B"] = "1" } } end,
  ["/http-header-value"] = function(r) return get{ headers = { ["X-A"] = "1\r\nX-B: 2" } } end,
  ["/http-method"] = function(r) return http.request{ method = "GET\r\nX-B: 1", url = CLOSED } end,
  ["/http-url"] = function(r) return http.request{ url = CLOSED .. "a\r\nX-B: 1" } end,
  ["/http-url-space"] = function(r) return http.request{ url = CLOSED .. "a b" } end,
  ["/jwt-empty-key"] = function(r) return Jwt.sign({ sub = "ada" }, "") end,
}
on "fetch" (function(request)
  if request.path == "/json-big-but-fine" then
    local v = json.parse("[9223372036854775807, -9223372036854775808]")
    return { status_code = 200, body = tostring(v[1]) }
  end
  local ok, err = pcall(cases[request.path], request)
  return { status_code = 200, body = (ok and "accepted" or tostring(err)) }
end)
"""

BAD_INPUTS = {
    "/json-long-number": "json.parse",
    "/json-long-number-nested": "json.parse",
    "/json-long-negative": "json.parse",
    "/http-header-name": "http.request",
    "/http-header-value": "http.request",
    "/http-method": "http.request",
    "/http-url": "http.request",
    "/http-url-space": "http.request",
    "/jwt-empty-key": "Jwt.sign",
}


@pytest.mark.parametrize("path", sorted(BAD_INPUTS))
def test_bad_input_to_a_builtin_is_refused_not_an_engine_bug(
    make_project: Callable[..., Path], tmp_path: Path, path: str
) -> None:
    """json.parse of a number over 4,300 digits, CR/LF in an http.request header name or
    value, method or URL, Jwt.sign with an empty key, from a fetch handler under pcall: the
    call is refused with an error naming the function and what to do, not `lunaflow engine
    bug in ...`. Before: `lunaflow engine bug in json_parse: ValueError: Exceeds the limit
    (4300 digits)...`, `... in http_request: ValueError: Invalid header name ...`, `... in
    jwt_sign: InvalidKeyError: HMAC key must not be empty.`"""
    with LocalPlatform(make_project({"main.lua": BAD_INPUT_PROJECT}), data_dir=tmp_path / "d") as p:
        message = p.fetch("GET", path).body
        assert not [r for r in p.logs if ENGINE_BUG in str(r.get("message"))], p.logs
    assert message != "accepted", f"{path} was accepted"
    assert ENGINE_BUG not in message, message
    assert BAD_INPUTS[path] in message, message
    assert ";" in message, f"the refusal says what to do: {message}"


def test_numbers_lua_can_hold_still_parse(make_project: Callable[..., Path], tmp_path: Path) -> None:
    """The refusal is for what no Lua number holds: the 64-bit integer range parses exactly."""
    with LocalPlatform(make_project({"main.lua": BAD_INPUT_PROJECT}), data_dir=tmp_path / "d") as p:
        body = p.fetch("GET", "/json-big-but-fine").body
    assert body == "9223372036854775807", body
