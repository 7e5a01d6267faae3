"""Issue 29 §1 on moto: the deploy gate's handler (functions/gate.py), run as CloudFormation
runs it (a custom resource event; the answer PUT to its pre-signed URL, here a real HTTP
server on loopback), against a deployment holding runs parked in every state: awaiting a
signal, sleeping, waiting out a step's backoff, failed, plus a completed and a cancelled one
(ended: not checked). With the old code, and with new code that is clean, the gate answers
SUCCESS; with new code that renames a step an in-flight run recorded, FAILED, naming the run
and its first diverging entry, and logs the same; with Force it answers SUCCESS and reports
what it breaks. A rollback (the resource's digest is not the bundle's) is let through.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import functions._runtime as _runtime
from functions import gate
from runtime.aws import container
from runtime.aws.contract import Env
from runtime.aws.runtime import AwsRuntime
from runtime.engine.project import ProjectSource
from runtime.testing import AwsPlatform
from tests.support.aws_events import GATE_ARN, gate_context

OLD = """
workflow "order" (function(wf, input)
    wf:step("reserve", function() return 1 end)
    return wf:await("paid", { timeout = "72h" })
end)
workflow "nap" (function(wf, input)
    wf:step("prepare", function() return 1 end)
    wf:sleep("24h")
end)
workflow "flaky" (function(wf, input)
    wf:step("call", { retries = input.retries, backoff = "1h" }, function() error("down") end)
end)
workflow "quick" (function(wf, input) return "done" end)
"""
CLEAN = (
    OLD
    + """
workflow "extra" (function(wf, input) return 1 end)
"""
)
DIVERGING = OLD.replace('wf:step("reserve"', 'wf:step("reserve-stock"')


class _Answers(BaseHTTPRequestHandler):
    answers: list[dict[str, Any]] = []

    def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers["Content-Length"])
        type(self).answers.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    server = HTTPServer(("127.0.0.1", 0), _Answers)
    _Answers.answers = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response", _Answers.answers
    finally:
        server.shutdown()


def _event(
    url: str, *, digest: str = "new", force: bool = False, kind: str = "Update", old_version: str = ""
) -> dict[str, Any]:
    event = {
        "RequestType": kind,
        "ServiceToken": GATE_ARN,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/lunaflow-shop/1",
        "RequestId": "r-1",
        "LogicalResourceId": "DeployGateCheck",
        "PhysicalResourceId": "lunaflow-deploy-gate",
        "ResourceType": "Custom::LunaflowDeployGate",
        "ResourceProperties": {"CodeDigest": digest, "Force": "true" if force else "false"},
    }
    if old_version:
        event["OldResourceProperties"] = {"CodeDigest": "old", "ProjectDigest": old_version}
    return event


def _project(root: Path, name: str, source: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "main.lua").write_text(source, encoding="utf-8")
    return folder


@pytest.fixture
def lines() -> Iterator[list[dict[str, Any]]]:
    """The lines the gate's Lambda writes, as the JSON Powertools prints (tests/aws/test_log_keys.py)."""
    got: list[dict[str, Any]] = []
    formatter = _runtime.logger.registered_formatter

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(json.loads(formatter.format(record)))

    handler = Keep(level=logging.DEBUG)
    _runtime.logger._logger.addHandler(handler)
    yield got
    _runtime.logger._logger.removeHandler(handler)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[AwsPlatform]:
    with AwsPlatform(_project(tmp_path, "old", OLD), data_dir=tmp_path / "aws") as p:
        assert p.start("order", {}, id="o-awaiting").status == "awaiting"
        assert p.start("nap", {}, id="n-sleeping").status == "sleeping"
        assert p.start("flaky", {"retries": 3}, id="f-backoff").status == "sleeping"
        assert p.start("flaky", {"retries": 1}, id="f-failed").status == "failed"
        assert p.start("quick", {}, id="q-completed").status == "completed"
        assert p.start("order", {}, id="o-cancelled").status == "awaiting"
        p.cancel("o-cancelled")
        assert p.get("o-cancelled").status == "cancelled"
        yield p


def _gate(p: AwsPlatform, project: Path, url: str, monkeypatch: pytest.MonkeyPatch, **event: Any) -> None:
    """Invoke the handler as the gate's Lambda holding ``project``'s code would be."""
    monkeypatch.setenv(Env.CODE_DIGEST, "new")
    checking = AwsRuntime(replace(p.config, project=str(project)), p.new_clients(), read_only=True)
    with container.serving(checking):
        gate.handler(_event(url, **event), gate_context())  # type: ignore[arg-type]


IN_FLIGHT = 4  # awaiting, sleeping, backoff, failed


@pytest.mark.parametrize("code", ["old", "clean"])
def test_code_that_replays_every_run_passes(
    deployment: AwsPlatform, answers: Any, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, got = answers
    project = _project(tmp_path, f"code-{code}", OLD if code == "old" else CLEAN)
    _gate(deployment, project, url, monkeypatch)
    [answer] = got
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Reason"].startswith(f"{IN_FLIGHT} in-flight run(s) replayed on the new code")
    assert answer["PhysicalResourceId"] == "lunaflow-deploy-gate"
    assert answer["Data"]["Report"] == answer["Reason"]


def test_diverging_code_fails_the_resource_naming_the_run_and_its_first_diverging_entry(
    deployment: AwsPlatform,
    answers: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[dict[str, Any]],
) -> None:
    url, got = answers
    before = [deployment.get(r).status for r in ("o-awaiting", "n-sleeping", "f-backoff", "f-failed")]
    _gate(deployment, _project(tmp_path, "new", DIVERGING), url, monkeypatch)
    [answer] = got
    assert answer["Status"] == "FAILED"
    reason = answer["Reason"]
    assert f"1 of {IN_FLIGHT} in-flight run(s) would diverge on the new code" in reason
    assert (
        "o-awaiting (order, awaiting): journal divergence: expected step 'reserve', "
        "code reached step 'reserve-stock'" in reason
    )
    assert "-c force=true" in reason and 'wf:version("change-id")' in reason
    [line] = [x for x in lines if x.get("level") == "ERROR"]
    assert line["diverging"][0]["run_id"] == "o-awaiting"
    assert "reserve-stock" in line["diverging"][0]["entry"]
    # Read-only: the runs are where they were.
    after = [deployment.get(r).status for r in ("o-awaiting", "n-sleeping", "f-backoff", "f-failed")]
    assert after == before


def test_force_passes_and_says_what_it_breaks(
    deployment: AwsPlatform, answers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, got = answers
    _gate(deployment, _project(tmp_path, "new", DIVERGING), url, monkeypatch, force=True)
    [answer] = got
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"]["Report"].startswith("forced (-c force=true): deployed although 1 of 4")
    assert "o-awaiting" in answer["Data"]["Report"]


@pytest.mark.parametrize("kind", ["Update", "Delete"])
def test_a_rollback_or_a_removal_is_let_through(
    deployment: AwsPlatform, answers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    url, got = answers
    _gate(deployment, _project(tmp_path, "new", DIVERGING), url, monkeypatch, digest="old", kind=kind)
    [answer] = got
    assert answer["Status"] == "SUCCESS"


PINNING = "[deploys]\npin_runs = true\n"


def _pinning_project(root: Path, name: str, source: str) -> Path:
    folder = _project(root, name, source)
    (folder / "lunaflow.toml").write_text(PINNING, encoding="utf-8")
    return folder


def test_with_pin_runs_the_diverging_run_is_pinned_to_the_code_deployed_until_now(
    deployment: AwsPlatform, answers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29.2 in the gate: the deploy that let the old code through saved it in the values
    bucket; the next one, whose code would not replay a run, pins the run to it and passes.
    The pinned run then finishes on the old code under a container of the new code."""
    url, got = answers
    old = _pinning_project(tmp_path, "old-pinning", OLD)
    _gate(deployment, old, url, monkeypatch)  # lets the old code through: saves it
    assert got.pop()["Status"] == "SUCCESS"
    old_version = ProjectSource.read(old).digest
    new = _pinning_project(tmp_path, "new-pinning", DIVERGING)
    _gate(deployment, new, url, monkeypatch, old_version=old_version)
    [answer] = got
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert "1 it would not replay keep running on the code they ran on" in answer["Reason"]
    assert f"({old_version}): o-awaiting" in answer["Reason"]
    assert deployment.runtime.store.pin_of("o-awaiting") == old_version
    assert deployment.runtime.store.pin_of("n-sleeping") is None
    deployment.runtime = deployment.container(new)  # the aliases moved: the new code serves
    deployment.signal("o-awaiting", "paid", {"by": "ada"})
    assert deployment.get("o-awaiting").status == "completed"
    assert deployment.runtime.store.pin_of("o-awaiting") is None, "an ended run's pin is dropped"


def test_with_pin_runs_but_the_old_code_not_saved_the_gate_refuses_as_before(
    deployment: AwsPlatform, answers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code deployed before any gate saved it cannot be pinned to: the divergence refuses."""
    url, got = answers
    new = _pinning_project(tmp_path, "new-pinning", DIVERGING)
    _gate(deployment, new, url, monkeypatch, old_version="0123456789abcdef")
    [answer] = got
    assert answer["Status"] == "FAILED"
    assert deployment.runtime.store.pin_of("o-awaiting") is None


def test_a_run_written_by_a_newer_lunaflow_is_left_as_it_is_and_does_not_hold_the_deploy(
    deployment: AwsPlatform, answers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deploying this version back over runs a newer lunaflow wrote (a rollback): the gate
    does not replay them (it cannot read them) and lets the deploy through, naming them."""
    from runtime.store.dynamodb_layout import LAYOUT
    from tests.support.aws_items import needs_layout

    needs_layout(deployment, "o-awaiting", LAYOUT + 1)
    url, got = answers
    _gate(deployment, _project(tmp_path, "code-old", OLD), url, monkeypatch)
    [answer] = got
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Reason"].startswith(f"{IN_FLIGHT - 1} in-flight run(s) replayed on the new code")
    assert (
        "1 run(s) written by a newer lunaflow were not replayed and are left as they are: o-awaiting"
        in (answer["Reason"])
    )
