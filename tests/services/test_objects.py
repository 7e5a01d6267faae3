"""Acceptance: ``object "Name" {...}`` and ``objects "Name"`` (SPEC section 2): "`self.key`
is the key, `self.state` a table persisted after each call returns. Calls to one key are
serialized." On the local backend, through LocalPlatform."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ProjectLoadError
from runtime.platform.fetch import make_request
from runtime.platform.platform import Worker
from runtime.testing import AwsPlatform, LocalPlatform

from . import call, error, loopback_server, project, value


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_objects"), data_dir=tmp_path) as plat:
        yield plat


def obj(p: LocalPlatform, key: str, method: str, *args: Any, cls: str = "Counter") -> Any:
    return value(p, cls=cls, key=key, method=method, args=list(args))


def test_self_key_is_the_key(p: LocalPlatform) -> None:
    """SPEC 2: "`self.key` is the key"."""
    assert obj(p, "ada", "whoami") == "ada"
    assert obj(p, "lot-42/x", "whoami") == "lot-42/x"


def test_state_is_persisted_after_each_call(p: LocalPlatform) -> None:
    """SPEC 2: "`self.state` a table persisted after each call returns" — the next call sees it."""
    assert obj(p, "a", "get") == 0
    assert obj(p, "a", "incr", 2) == 2
    assert obj(p, "a", "incr", 3) == 5
    obj(p, "a", "remember", "note", {"by": "ada", "tags": ["x"]})
    assert obj(p, "a", "state") == {"count": 5, "note": {"by": "ada", "tags": ["x"]}}


def test_state_survives_a_restart(p: LocalPlatform) -> None:
    obj(p, "a", "incr", 7)
    p.restart()
    assert obj(p, "a", "get") == 7
    assert p.services.objects.state("Counter", "a") == {"count": 7}


def test_a_method_may_replace_the_whole_state(p: LocalPlatform) -> None:
    obj(p, "a", "incr", 5)
    obj(p, "a", "replace", {"fresh": True})
    assert obj(p, "a", "state") == {"fresh": True}
    assert obj(p, "a", "get") == 0


def test_a_state_that_is_not_json_like_is_refused_and_not_kept(p: LocalPlatform) -> None:
    """SPEC 3: values "must be JSON-like"; `self.state` is persisted, so the same rule holds."""
    obj(p, "a", "incr", 2)
    e = error(p, key="a", method="keep_function")
    assert p.services.objects.state("Counter", "a") == {"count": 2}
    assert "state" in e and "a function" in e
    assert "engine bug" not in e


def test_a_method_returns_all_its_values(p: LocalPlatform) -> None:
    out = call(p, key="a", method="two", args=[])
    assert out["values"] == ["a", "b"]


def test_different_keys_have_independent_state(p: LocalPlatform) -> None:
    obj(p, "a", "incr", 1)
    obj(p, "a", "incr", 1)
    obj(p, "b", "incr", 10)
    assert obj(p, "a", "get") == 2
    assert obj(p, "b", "get") == 10
    assert obj(p, "c", "get") == 0


def _hammer(
    p: LocalPlatform | AwsPlatform,
    keys: list[str],
    calls_each: int,
    method: Callable[[int, int], tuple[str, list[Any]]] = lambda thread, i: ("incr", [1]),
) -> list[Any]:
    """One thread per key in ``keys``, each with its own worker (its own Lua state, as the
    dev server's pool has), each calling ``incr`` (or what ``method`` picks for the thread's
    ``i``-th call) ``calls_each`` times through the fetch handler. Returns the failures."""
    workers: list[Worker] = [p.platform.new_worker() for _ in keys]
    start = threading.Barrier(len(keys))
    failures: list[Any] = []

    def go(thread: int, worker: Worker, key: str) -> None:
        start.wait()
        for i in range(calls_each):
            name, args = method(thread, i)
            request = make_request("POST", "/", json.dumps({"key": key, "method": name, "args": args}))
            ok, out, _ = worker.code.call_fetch(request)
            reply = json.loads(out["body"]) if ok else {"ok": False, "error": out}
            if not reply["ok"]:
                failures.append(reply["error"])

    threads = [
        threading.Thread(target=go, args=(n, w, k))
        for n, (w, k) in enumerate(zip(workers, keys, strict=True))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    return failures


def test_concurrent_calls_to_one_key_are_serialized(p: LocalPlatform) -> None:
    """SPEC 2: "Calls to one key are serialized" — eight threads each incrementing one key
    25 times (read, work, write) end at exactly 200, with no call refused."""
    failures = _hammer(p, ["shared"] * 8, 25)
    assert failures == []
    assert obj(p, "shared", "get") == 200


@pytest.fixture(params=["local", "aws"])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalPlatform | AwsPlatform]:
    """The project on either harness: on AWS an object call runs optimistically and takes the
    key's lock only at an effect (runtime/aws/services.py), so serialization is its to show."""
    harness = LocalPlatform if request.param == "local" else AwsPlatform
    with harness(project("svc_objects"), data_dir=tmp_path) as plat:
        yield plat


def test_concurrent_calls_to_one_key_are_serialized_on_both_harnesses(
    both: LocalPlatform | AwsPlatform,
) -> None:
    failures = _hammer(both, ["shared"] * 6, 15)
    assert failures == []
    assert value(both, key="shared", method="get") == 90


def test_calls_that_reach_outside_and_calls_that_do_not_are_serialized_together(
    both: LocalPlatform | AwsPlatform,
) -> None:
    """Half the calls reach the network (``fetch``: an effect, so on AWS the call takes the
    lock), half only count (``incr``): no increment is lost and each request is made once."""
    with loopback_server() as server:

        def mixed(thread: int, i: int) -> tuple[str, list[Any]]:
            return ("fetch", [server.url + f"/t{thread}/{i}"]) if (thread + i) % 2 else ("incr", [1])

        failures = _hammer(both, ["mixed"] * 4, 10, mixed)
        assert failures == []
        assert value(both, key="mixed", method="get") == 20
        paths = sorted(seen.path for seen in server.requests)
        assert paths == sorted(f"/t{t}/{i}" for t in range(4) for i in range(10) if (t + i) % 2)


def test_concurrent_calls_to_different_keys_are_independent(p: LocalPlatform) -> None:
    keys = [f"k{i}" for i in range(4)] * 2  # two threads per key
    failures = _hammer(p, keys, 20)
    assert failures == []
    for i in range(4):
        assert obj(p, f"k{i}", "get") == 40


def test_a_method_error_surfaces_to_the_caller(p: LocalPlatform) -> None:
    e = error(p, key="a", method="boom")
    assert "counter exploded" in e
    assert "engine bug" not in e


def test_a_method_error_leaves_the_state_unchanged(p: LocalPlatform) -> None:
    """State is persisted "after each call returns": a call that raises keeps nothing."""
    obj(p, "a", "incr", 4)
    error(p, key="a", method="boom")
    assert obj(p, "a", "get") == 4
    assert p.services.objects.state("Counter", "a") == {"count": 4}


def test_an_unknown_method_is_an_error_naming_it(p: LocalPlatform) -> None:
    e = error(p, key="a", method="nope")
    assert "Counter" in e and "'nope'" in e
    assert "engine bug" not in e


def test_an_unknown_class_is_an_error_naming_it(p: LocalPlatform) -> None:
    e = error(p, cls="Ghost", key="a", method="get")
    assert "Ghost" in e
    assert "engine bug" not in e


def test_object_calls_inside_steps_run_and_are_recorded(p: LocalPlatform) -> None:
    run = p.start("count", {"key": "w"}, id="count-1")
    assert run.status == "completed", run.error
    assert run.result == {"n": 1}
    p.start("count", {"key": "w"}, id="count-1")  # joins the run: no second call
    assert obj(p, "w", "get") == 1


def test_an_object_call_outside_a_step_is_refused_in_run_code(p: LocalPlatform) -> None:
    """SPEC 3: object calls outside a step are "refused: ... is an effect and belongs inside
    wf:step"."""
    run = p.start("outside", {}, id="outside")
    assert run.status == "completed", run.error
    assert run.result["ok"] is False
    assert run.result["error"].endswith("Counter:incr is an effect and belongs inside wf:step")
    assert obj(p, "a", "get") == 0


def test_an_object_may_call_http_when_the_step_body_may_not(p: LocalPlatform) -> None:
    """Seed: "Reach the network by calling an object from a step"; `http` is "absent,
    inside step bodies too"."""
    with loopback_server() as server:
        run = p.start("count", {"key": "net", "url": server.url + "/via-object"}, id="via-object")
        assert run.status == "completed", run.error
        assert json.loads(run.result["body"])["path"] == "/via-object"
        assert obj(p, "net", "state") == {"count": 1, "last_status": 200}

        direct = p.start("direct-http", {"url": server.url + "/direct"}, id="direct")
        assert direct.status == "failed"
        assert "step 'direct' failed after 1 attempts" in (direct.error or "")
        assert "global 'http'" in (direct.error or "")
        assert [r.path for r in server.requests] == ["/via-object"]


def test_an_object_called_from_a_handler_may_call_http(p: LocalPlatform) -> None:
    with loopback_server() as server:
        body = obj(p, "h", "fetch", server.url + "/from-handler")
        assert json.loads(body)["path"] == "/from-handler"


def test_an_object_declared_in_two_scripts_is_refused_naming_both() -> None:
    """SPEC 1: loading is refused when "two scripts declare the same workflow, object,
    queue handler or fetch handler"."""
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(project("svc_objects_dup"))
    message = str(refused.value)
    assert "object 'Counter' is declared in both" in message
    assert "a.lua" in message and "b.lua" in message
