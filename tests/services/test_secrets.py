"""Acceptance: ``secret "name"`` (SPEC section 2: "the secret's current value (a string)";
section 3: "pinned to the version the run first resolved"), through LocalPlatform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.errors import InvalidInput, ProjectLoadError
from runtime.testing import LocalPlatform

from . import error, project, value


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_secrets"), data_dir=tmp_path) as plat:
        yield plat


def test_set_secret_adds_numbered_versions(p: LocalPlatform) -> None:
    """SPEC 5: `p.set_secret("api-key", "v2")` "adds a new version of a secret"."""
    v1 = p.set_secret("api-key", "one")
    v2 = p.set_secret("api-key", "two")
    v3 = p.set_secret("api-key", "three")
    assert isinstance(v1, int)
    assert v1 < v2 < v3


def test_set_secret_refuses_a_non_string_value(p: LocalPlatform) -> None:
    with pytest.raises(InvalidInput, match="secret 'api-key' must be a string"):
        p.set_secret("api-key", 42)  # type: ignore[arg-type]


def test_a_handler_reads_the_latest_version(p: LocalPlatform) -> None:
    """SPEC 2: `secret "name"` is "the secret's current value (a string)"."""
    p.set_secret("api-key", "one")
    assert value(p, name="api-key") == "one"
    p.set_secret("api-key", "two")
    assert value(p, name="api-key") == "two"
    p.set_secret("other", "separate")
    assert value(p, name="api-key") == "two"
    assert value(p, name="other") == "separate"


def test_secrets_survive_a_restart(p: LocalPlatform) -> None:
    p.set_secret("api-key", "kept")
    p.restart()
    assert value(p, name="api-key") == "kept"


def test_a_run_stays_pinned_to_the_version_it_first_resolved(p: LocalPlatform) -> None:
    """Seed: "`secret "name"` | pinned to the version the run first resolved" — in the
    workflow function, after a wait, and inside a step body, across a restart."""
    p.set_secret("api-key", "v1")
    p.start("pinned", {}, id="pinned")
    p.set_secret("api-key", "v2")
    p.restart()
    assert value(p, name="api-key") == "v2"  # handlers see the latest
    p.signal("pinned", "go")
    run = p.get("pinned")
    assert run.status == "completed", run.error
    assert run.result == {"first": "v1", "second": "v1", "in_step": "v1"}


def test_a_new_run_resolves_the_latest_version(p: LocalPlatform) -> None:
    p.set_secret("api-key", "v1")
    p.start("pinned", {}, id="old")
    p.set_secret("api-key", "v2")
    p.start("pinned", {}, id="new")
    p.signal("old", "go")
    p.signal("new", "go")
    assert p.get("old").result == {"first": "v1", "second": "v1", "in_step": "v1"}
    assert p.get("new").result == {"first": "v2", "second": "v2", "in_step": "v2"}


def test_a_first_read_inside_a_step_pins_the_run_too(p: LocalPlatform) -> None:
    p.set_secret("api-key", "v1")
    p.start("step-only", {}, id="s")
    p.set_secret("api-key", "v2")  # set before the run first reads: the run gets v2
    p.signal("s", "go")
    p.set_secret("api-key", "v3")
    p.signal("s", "again")
    run = p.get("s")
    assert run.status == "completed", run.error
    assert run.result == {"a": "v2", "b": "v2"}


def test_a_missing_secret_is_an_error_naming_it(p: LocalPlatform) -> None:
    e = error(p, name="never-set")
    assert "secret 'never-set' is not set" in e
    assert "set_secret" in e  # says how to fix it
    run = p.start("missing", {}, id="missing")
    assert run.status == "failed"
    assert "secret 'never-set' is not set" in (run.error or "")


def test_reading_a_secret_at_a_scripts_top_level_refuses_the_load() -> None:
    """SPEC 1: "Top-level code declares things"; a secret read there refuses the load,
    naming the script and line."""
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(project("svc_secrets_toplevel"))
    message = str(refused.value)
    assert "main.lua:2" in message
    assert 'secret "api-key" was read at a script\'s top level' in message
