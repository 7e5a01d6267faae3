"""Issue 15.7: every cold container migrates, and two starting together never apply a
migration twice (Aurora through the RDS Data API).

On main a container read the applied migrations, then applied the rest and recorded each
at the end of its transaction: a second container that had read the same list ran the
same statements again and then failed on the record's primary key. A migration's
transaction now claims its record first; the second waits for the first to end, finds it
claimed, and leaves it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from runtime.aws.dataapi import ARN, SECRET_ARN, SqliteDataApi
from runtime.aws.database import DataApiDatabases

BOUNDED_S = 30.0


class Interleaved(SqliteDataApi):
    """The Data API, holding the first container's transaction open (bounded) until the
    second has read which migrations are applied, so the two overlap the same way every
    time."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.first_began = threading.Event()
        self.second_read = threading.Event()
        self.second: threading.Thread | None = None

    def begin_transaction(self, **request: Any) -> dict[str, Any]:
        began = super().begin_transaction(**request)
        if threading.current_thread() is not self.second and not self.first_began.is_set():
            self.first_began.set()
            assert self.second_read.wait(BOUNDED_S)
        return began

    def execute_statement(self, **request: Any) -> dict[str, Any]:
        out = super().execute_statement(**request)
        if threading.current_thread() is self.second and request["sql"].startswith("SELECT file"):
            self.second_read.set()
        return out


def test_two_containers_migrating_at_once_apply_each_migration_once(tmp_path: Path) -> None:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "001_hits.sql").write_text(
        "CREATE TABLE IF NOT EXISTS hits (n INTEGER);\nINSERT INTO hits VALUES (1);\n", encoding="utf-8"
    )
    api = Interleaved(tmp_path / "cluster")
    outcomes: dict[str, Any] = {}

    def migrate(who: str) -> None:
        try:
            outcomes[who] = DataApiDatabases(api, ARN, SECRET_ARN).migrate("sales", folder)
        except Exception as e:
            outcomes[who] = e

    first = threading.Thread(target=migrate, args=("first",))
    api.second = threading.Thread(target=migrate, args=("second",))
    first.start()
    assert api.first_began.wait(BOUNDED_S)
    api.second.start()
    first.join(BOUNDED_S)
    api.second.join(BOUNDED_S)
    assert outcomes == {"first": ["001_hits.sql"], "second": []}
    assert api.rows("sales", "SELECT n FROM hits") == [(1,)]
    assert api.rows("sales", "SELECT file FROM _lunaflow_migrations") == [("001_hits.sql",)]
    assert api.transactions == {}


def test_a_container_after_the_others_applies_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "001_hits.sql").write_text("CREATE TABLE hits (n INTEGER);", encoding="utf-8")
    api = SqliteDataApi(tmp_path / "cluster")
    assert DataApiDatabases(api, ARN, SECRET_ARN).migrate("sales", folder) == ["001_hits.sql"]
    assert DataApiDatabases(api, ARN, SECRET_ARN).migrate("sales", folder) == []
