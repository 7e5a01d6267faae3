"""Issue 29.2: runs pinned to the code they need. With ``[deploys] pin_runs = true``, a
deploy whose code would not replay a run in flight pins that run to the code it ran on: it
finishes there (kept loaded beside the new code, and reloaded from the data folder after a
restart), while new runs start on the new code; ``migrate`` moves a pinned run once the
current code replays it; a version no pin needs is retired. Without the setting, the seed's
rule holds: the run fails with the divergence when it next runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status
from runtime.engine.project import ProjectSource
from runtime.errors import InvalidInput

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
V1, V2, V3 = (PROJECTS / f"pins_v{n}" for n in (1, 2, 3))
DIGEST = {v: ProjectSource.read(v).digest for v in (V1, V2, V3)}


def test_a_run_the_new_code_would_not_replay_finishes_on_its_own_code(harness: Any, tmp_path: Path) -> None:
    with harness(V1, data_dir=tmp_path) as p:
        p.start("order", None, id="old")
        assert p.journal("old")[0].data["code"] == DIGEST[V1]
        p.deploy(V2)
        assert p.platform.versions.pinned("old") == DIGEST[V1]
        p.start("order", None, id="new")
        assert p.journal("new")[0].data["code"] == DIGEST[V2]
        p.signal("old", "paid", {"by": "ada"})
        p.signal("new", "paid", {"by": "bo"})
        assert p.get("old").result == {"reserved": "reserved by v1", "paid": True, "shipped": "shipped by v1"}
        assert p.get("new").result == {"reserved": "reserved by v2", "paid": True, "shipped": "shipped by v2"}
        assert p.platform.versions.pinned("old") is None, "an ended run's pin is dropped"


def test_a_pinned_run_finds_its_code_again_after_a_restart(harness: Any, tmp_path: Path) -> None:
    with harness(V1, data_dir=tmp_path) as p:
        p.start("order", None, id="old")
        p.deploy(V2)
        p.restart()  # every Lua state gone: version 1 is loaded from where it was saved
        saved = p.platform.versions.snapshots.load(DIGEST[V1])
        assert saved is not None and saved.digest == DIGEST[V1]
        p.signal("old", "paid", None)
        assert p.get("old").result["shipped"] == "shipped by v1"


def test_migrate_moves_a_run_once_the_current_code_replays_it(harness: Any, tmp_path: Path) -> None:
    with harness(V1, data_dir=tmp_path) as p:
        p.start("order", None, id="old")
        p.deploy(V2)
        with pytest.raises(
            InvalidInput, match=r"run 'old' cannot move to the current code .*journal divergence"
        ):
            p.platform.migrate("old")
        assert p.platform.versions.pinned("old") == DIGEST[V1]
        p.deploy(V3)  # replays version 1's runs: the pin stays until asked
        assert p.platform.versions.pinned("old") == DIGEST[V1]
        assert p.platform.migrate("old") == DIGEST[V1]
        assert p.platform.versions.pinned("old") is None
        p.signal("old", "paid", {"by": "ada"})
        got = p.get("old").result
        assert got == {"reserved": "reserved by v1", "paid": True, "shipped": "shipped by v3"}
        with pytest.raises(InvalidInput, match=r"run 'old' is not pinned to older code"):
            p.platform.migrate("old")


def test_runs_the_new_code_replays_are_not_pinned(harness: Any, tmp_path: Path) -> None:
    with harness(V1, data_dir=tmp_path) as p:
        p.start("order", None, id="old")
        p.deploy(V3)
        assert p.platform.versions.pinned("old") is None
        p.signal("old", "paid", None)
        assert p.get("old").result["shipped"] == "shipped by v3"


def test_without_the_setting_a_diverging_run_fails_as_the_seed_says(harness: Any, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    for v in (V1, V2):
        (plain / v.name).mkdir(parents=True)
        (plain / v.name / "main.lua").write_text(
            (v / "main.lua").read_text(encoding="utf-8"), encoding="utf-8"
        )
    with harness(plain / V1.name, data_dir=tmp_path / "data") as p:
        p.start("order", None, id="old")
        p.deploy(plain / V2.name)
        p.signal("old", "paid", None)
        run: Any = p.get("old")
        assert run.status == Status.FAILED
        assert run.error.startswith(
            "journal divergence: expected step 'reserve', code reached step 'reserve-stock'"
        )


def test_pins_are_not_read_while_the_code_does_not_keep_them(harness: Any, tmp_path: Path) -> None:
    """A pin lookup is a read per activation (a GetItem on AWS): code without the setting
    makes none."""
    plain = tmp_path / "plain"
    plain.mkdir()
    plain.joinpath("main.lua").write_text((V1 / "main.lua").read_text(encoding="utf-8"), encoding="utf-8")
    with harness(plain, data_dir=tmp_path / "data") as p:
        pins = p.platform.versions.pins
        asked: list[str] = []

        class Counting:
            def get(self, run_id: str) -> str | None:
                asked.append(run_id)
                return pins.get(run_id)

            def set(self, changes: dict[str, str | None]) -> None:
                pins.set(changes)

            def all(self) -> dict[str, str] | None:
                return pins.all()

        p.platform.versions.pins = Counting()
        p.start("order", None, id="o1")
        p.signal("o1", "paid", {"by": "ada"})
        assert p.get("o1").status == Status.COMPLETED
        assert asked == []
