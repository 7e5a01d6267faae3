"""lunaflow.toml: a setting lunaflow does not read refuses the project, naming the nearest
one it does. A misspelt name was ignored, so the setting it meant kept its default without
a word: ended runs deleted after 30 days instead of the retention written, pins off, a
queue's attempts left at 3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ProjectLoadError

MakeProject = Callable[[dict[str, str]], Path]
MAIN = """
workflow "w" (function(wf) return "done" end)
on "queue" ("emails", function(msg) end)
"""


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[runs]\nretension = "40d"\n', "'retension' in [runs] is not a setting lunaflow reads"),
        ("[limits]\nmemory = 64\n", "did you mean 'memory_mb'?"),
        ("[limit]\nmemory_mb = 64\n", "'limit' at the top level is not a setting lunaflow reads"),
        ("nmae = 'x'\n", "the settings there are name, limits, deploys, runs, queues; did you mean 'name'?"),
        ("[deploys]\npin_run = true\n", "did you mean 'pin_runs'? correct or remove it"),
        ("[queues.emails]\natempts = 5\n", "'atempts' in [queues.emails] is not a setting"),
        (
            "[queues.email]\nattempts = 5\n",
            "[queues.email] sets a queue no script declares (declared: emails)",
        ),
    ],
    ids=["runs", "limits-key", "limits-table", "top", "deploys", "queue-key", "queue-name"],
)
def test_a_setting_lunaflow_does_not_read_refuses_the_project_naming_the_nearest(
    harness: Any, make_project: MakeProject, tmp_path: Path, toml: str, says: str
) -> None:
    project = make_project({"lunaflow.toml": toml, "main.lua": MAIN})
    with pytest.raises(ProjectLoadError) as refused:
        harness(project, data_dir=tmp_path / "data")
    assert says in str(refused.value)
    assert f"lunaflow.toml in {project.resolve()}" in str(refused.value)


def test_a_misspelt_setting_refuses_a_deploy_and_runs_go_on_under_the_old_code(
    harness: Any, make_project: MakeProject, tmp_path: Path
) -> None:
    good = make_project({"lunaflow.toml": '[runs]\nretention = "40d"\n', "main.lua": MAIN})
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "main.lua").write_text(MAIN, encoding="utf-8")
    (bad / "lunaflow.toml").write_text('[runs]\nretension = "2d"\n', encoding="utf-8")
    with harness(good, data_dir=tmp_path / "data") as p:
        with pytest.raises(ProjectLoadError, match="did you mean 'retention'"):
            p.deploy(bad)
        assert p.start("w", id="after").result == "done"


def test_every_documented_setting_and_a_queue_only_sent_to_load(
    harness: Any, make_project: MakeProject, tmp_path: Path
) -> None:
    toml = (
        'name = "all"\n[limits]\nmemory_mb = 64\ninstructions = 20000000\ncpu_seconds = 5\n'
        '[deploys]\npin_runs = true\n[runs]\nretention = "2d"\n'
        '[queues.emails]\nattempts = 2\nretry_delay = "5s"\n[queues.outbox]\nattempts = 4\n'
    )
    main = MAIN + 'workflow "send" (function(wf) wf:step("s", function() queue "outbox":send({}) end) end)\n'
    with harness(make_project({"lunaflow.toml": toml, "main.lua": main}), data_dir=tmp_path / "data") as p:
        assert p.start("w", id="w-1").result == "done"
