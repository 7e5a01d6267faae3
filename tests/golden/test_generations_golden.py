"""Issue 27.3: golden journals and `lunaflow check` understand generations: a run that
continued as new, recorded as a golden, replays on the same code from its current
generation (the closed ones are kept, not replayed), and a change to the current
generation's path is reported as a divergence."""

from __future__ import annotations

import shutil
from pathlib import Path

from runtime.dev.golden import replay_goldens
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"


def test_a_continued_runs_golden_replays_and_a_changed_generation_diverges(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        p.start("subscription", {"customer": "ada", "months": 3}, id="sub-1")
        p.signal("sub-1", "renew", None)
        p.signal("sub-1", "renew", None)
        assert p.get("sub-1").status == "completed"
        p.record("sub-1")
    (verdict,) = replay_goldens(project)
    assert verdict.passed, verdict.message
    main = project / "main.lua"
    main.write_text(main.read_text().replace('wf:step("bill"', 'wf:step("charge"'))
    (verdict,) = replay_goldens(project)
    assert not verdict.passed
    assert "step 'bill'" in verdict.message and "step 'charge'" in verdict.message
