"""Issue 17, point 1: ``lunaflow dev`` reloads the project when its files change.

Each test writes a project into its tmp folder, starts a real ``lunaflow dev`` on it, edits
files under the running server and watches HTTP answers and the server's output. Every
wait for a reload is bounded by RELOAD_S.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.support import databases
from tests.support.devserver import DevServer, Servers, edit, wait_for, write_project

RELOAD_S = 8.0  # bound on an edit being noticed and loaded

ROUTES = """
on "fetch" (function(request)
    if request.path == "/v" then return { status_code = 200, body = "VERSION" } end
    if request.path == "/start" then
        local run = workflows(request.query.wf):start({}, { id = request.query.id })
        return { status_code = 201, body = run.id }
    end
    return { status_code = 404, body = "no route" }
end)
"""

WORKFLOWS = """workflow "two-steps" (function(wf, input)
    wf:step("STEP_A", function() return 1 end)
    local v = wf:await("go")
    wf:step("b", function() return 2 end)
    return { ok = true }
end)

workflow "fixme" (function(wf, input)
    wf:step("work", function() FIXME_BODY end)
    return { ok = true }
end)
"""


def _main(version: str = "v1", step_a: str = "a", body: str = 'error("bug-v1")') -> str:
    return WORKFLOWS.replace("STEP_A", step_a).replace("FIXME_BODY", body) + ROUTES.replace(
        "VERSION", version
    )


def _project(tmp_path: Path, **kw: str) -> Path:
    return write_project(tmp_path / "proj", {"main.lua": _main(**kw), "lunaflow.toml": 'name = "reload"\n'})


def _answers(server: DevServer, path: str, body: str, timeout: float = RELOAD_S) -> None:
    def ok() -> bool:
        r = server.get(path)
        return r.status == 200 and r.body == body

    try:
        wait_for(f"GET {path} to answer {body!r}", ok, timeout, interval=0.2)
    except AssertionError:
        r = server.get(path)
        raise AssertionError(
            f"GET {path} still answers {r.status} {r.body!r} {timeout}s after the edit (expected {body!r}); "
            f"server output:\n{server.output_tail(1500)}"
        ) from None


def _printed(server: DevServer, since: tuple[int, int], what: str, found: object) -> None:
    try:
        wait_for(what, found, RELOAD_S)  # type: ignore[arg-type]
    except AssertionError:
        raise AssertionError(f"no {what}; printed: {server.lines_since(since)!r}") from None


def test_edit_goes_live_without_restart_and_one_line_announces_it(servers: Servers, tmp_path: Path) -> None:
    """Changing a route's answer in main.lua under a running ``lunaflow dev`` changes what
    the route answers (same process, no restart), and one line says the new code is live."""
    project = _project(tmp_path)
    dev = servers.start(project)
    assert dev.get("/v").body == "v1"
    since = dev.mark()
    edit(project / "main.lua", _main(version="v2"))
    _answers(dev, "/v", "v2")
    assert dev.alive

    def announcing_lines() -> list[str]:
        return [ln for ln in dev.lines_since(since) if re.search(r"(?i)\blive\b|reload", ln)]

    # The new code answers a moment before its line is printed (install, then say).
    wait_for("the line announcing the new code", announcing_lines, 10)
    time.sleep(0.3)  # a second announcement would be printed by now
    announcing = announcing_lines()
    assert len(announcing) == 1, f"expected one line announcing the new code, got: {dev.lines_since(since)!r}"
    assert "main.lua" in announcing[0], announcing


def test_broken_edit_keeps_old_code_serving_and_prints_file_and_line(
    servers: Servers, tmp_path: Path
) -> None:
    """An edit that fails to load (a syntax error on line 3 of main.lua) leaves the old code
    serving (/v still answers v1) and prints why, naming main.lua:3."""
    project = _project(tmp_path)
    dev = servers.start(project)
    since = dev.mark()
    broken = _main(version="v2").splitlines()
    broken[2] = "    local v = = wf:await('go')"  # line 3: a syntax error
    edit(project / "main.lua", "\n".join(broken) + "\n")
    _printed(dev, since, "line naming main.lua:3", lambda: "main.lua:3" in dev.output_since(since))
    r = dev.get("/v")
    assert (r.status, r.body) == (200, "v1"), r


def test_top_level_error_in_edit_keeps_old_code_and_prints_file_and_line(
    servers: Servers, tmp_path: Path
) -> None:
    """An edit whose top level raises (line 1 of main.lua) keeps the old code serving and
    prints main.lua:1 with the error; fixing the file then makes the new code live."""
    project = _project(tmp_path)
    dev = servers.start(project)
    since = dev.mark()
    edit(project / "main.lua", 'error("top-level-boom")\n' + _main(version="v2"))
    _printed(
        dev,
        since,
        "line naming main.lua:1 and the error",
        lambda: any("main.lua:1" in ln and "top-level-boom" in ln for ln in dev.lines_since(since)),
    )
    assert dev.get("/v").body == "v1"
    edit(project / "main.lua", _main(version="v3"))
    _answers(dev, "/v", "v3")


def test_step_rename_prints_the_in_flight_runs_divergence_before_it_next_runs(
    servers: Servers, tmp_path: Path
) -> None:
    """Renaming step 'a' to 'a-renamed' while run r-div awaits after it prints, with no
    signal sent, a line naming r-div and its divergence as ``lunaflow check`` words it (the
    new step named). When the run next runs (signal "go") it fails with the divergence."""
    project = _project(tmp_path)
    dev = servers.start(project)
    assert dev.request("POST", "/start?wf=two-steps&id=r-div", "").status == 201
    dev.wait_status("r-div", {"awaiting"})
    since = dev.mark()
    edit(project / "main.lua", _main(step_a="a-renamed"))

    def reported() -> bool:
        lines = dev.lines_since(since)
        return any("r-div" in ln and "diverg" in ln.lower() for ln in lines) and "a-renamed" in "\n".join(
            lines
        )

    _printed(dev, since, "report of r-div diverging on the renamed step", reported)
    assert dev.run("r-div")["status"] == "awaiting"  # printed before it next runs
    d = dev.cli("signal", "r-div", "go")
    assert d.code == 0, str(d)
    run = dev.wait_status("r-div", {"failed", "completed"})
    assert run["status"] == "failed" and "journal divergence" in (run["error"] or ""), run


def test_resuming_a_failed_run_after_a_fix_runs_the_fixed_code(servers: Servers, tmp_path: Path) -> None:
    """A run failed on a bug; the step is fixed in main.lua under the running server;
    ``lunaflow resume`` then completes the run on the new code."""
    project = _project(tmp_path)
    dev = servers.start(project)
    assert dev.request("POST", "/start?wf=fixme&id=r-fix", "").status == 201
    run = dev.wait_status("r-fix", {"failed"})
    assert "bug-v1" in run["error"]
    edit(project / "main.lua", _main(version="v2", body="return 1"))
    _answers(dev, "/v", "v2")
    d = dev.cli("resume", "r-fix")
    assert d.code == 0, str(d)
    run = dev.wait_status("r-fix", {"failed", "completed"})
    assert run["status"] == "completed", f"resumed run ended {run['status']}: {run['error']}"


def test_lunaflow_toml_is_watched_and_a_bad_one_is_reported(servers: Servers, tmp_path: Path) -> None:
    """lunaflow.toml is watched too: making it invalid TOML prints a line naming
    lunaflow.toml, and the old code keeps serving."""
    project = _project(tmp_path)
    dev = servers.start(project)
    since = dev.mark()
    edit(project / "lunaflow.toml", 'name = "reload"\n[limits\n')
    _printed(dev, since, "line naming lunaflow.toml", lambda: "lunaflow.toml" in dev.output_since(since))
    assert dev.get("/v").body == "v1"


def test_a_module_under_lib_is_watched(servers: Servers, tmp_path: Path) -> None:
    """A module reached with ``require`` (lib/answer.lua) is watched like a script."""
    project = write_project(
        tmp_path / "proj",
        {
            "main.lua": 'local answer = require "lib.answer"\n'
            'on "fetch" (function(request) return { status_code = 200, body = answer } end)\n',
            "lib/answer.lua": 'return "one"\n',
        },
    )
    dev = servers.start(project)
    assert dev.get("/").body == "one"
    edit(project / "lib" / "answer.lua", 'return "two"\n')
    _answers(dev, "/", "two")


def test_new_migration_is_applied_on_reload(servers: Servers, tmp_path: Path) -> None:
    """Migrations are watched: adding migrations/d/002_t2.sql under the running server
    creates table t2, which a route then reads (answers "n=0" instead of "missing")."""
    project = write_project(
        tmp_path / "proj",
        {
            "main.lua": """local d = database "d" { migrations = "migrations/d" }
on "fetch" (function(request)
    local ok, row = pcall(function() return d:first("SELECT count(*) AS n FROM t2") end)
    if not ok then return { status_code = 200, body = "missing" } end
    return { status_code = 200, body = "n=" .. row.n }
end)
""",
            "migrations/d/001_t1.sql": "CREATE TABLE t1 (id TEXT PRIMARY KEY);\n",
        },
    )
    dev = servers.start(project)
    assert dev.get("/count").body == "missing"
    (project / "migrations" / "d" / "002_t2.sql").write_text("CREATE TABLE t2 (id TEXT PRIMARY KEY);\n")
    _answers(dev, "/count", "n=0")


def test_no_reload_turns_reloading_off(servers: Servers, tmp_path: Path) -> None:
    """``lunaflow dev --no-reload`` starts, and an edit under it changes nothing: /v still
    answers v1 after the reload bound has passed."""
    project = _project(tmp_path)
    dev = servers.start(project, extra=["--no-reload"])
    assert dev.get("/v").body == "v1"
    edit(project / "main.lua", _main(version="v2"))
    time.sleep(RELOAD_S / 2)
    assert dev.get("/v").body == "v1"


# --- issue 24 §1: a refused reload changes nothing -----------------------------------------

ORDERS = """local d = database "d" { migrations = "migrations/d" }
on "fetch" (function(request)
    if request.path == "/v" then return { status_code = 200, body = "VERSION" } end
    local ok, row = pcall(function() return d:first("SELECT count(*) AS n FROM orders") end)
    if not ok then return { status_code = 200, body = "missing" } end
    return { status_code = 200, body = "n=" .. row.n }
end)
"""


def _orders_project(tmp_path: Path) -> Path:
    return write_project(
        tmp_path / "proj",
        {
            "main.lua": ORDERS.replace("VERSION", "v1"),
            "migrations/d/001_init.sql": "CREATE TABLE orders (id TEXT PRIMARY KEY);\n"
            "INSERT INTO orders VALUES ('o1');\n",
        },
    )


def _database(dev: DevServer) -> dict[str, object]:
    """The tables of database d and its applied migrations, read beside the server."""
    names = databases.tables(dev.data, "d")
    applied = [
        r[0] for r in databases.rows(dev.data, "d", "SELECT file FROM _lunaflow_migrations ORDER BY file")
    ]
    return {"tables": names, "applied": applied}


def test_a_refused_save_runs_none_of_its_migrations(servers: Servers, tmp_path: Path) -> None:
    """One save adds 002_drop.sql and a script with a syntax error. On main the drop ran
    while the project loaded, then the load was refused: "the old code keeps serving" on a
    schema without its table. Migrations of new code run only once it is accepted."""
    project = _orders_project(tmp_path)
    dev = servers.start(project)
    assert dev.get("/count").body == "n=1"
    since = dev.mark()
    # The broken script first: a reload between the two writes (a stall of 0.3 s on a loaded
    # machine) must meet a save that is refused too, not the drop alone.
    (project / "zz_broken.lua").write_text("local x = (\n", encoding="utf-8")
    (project / "migrations" / "d" / "002_drop.sql").write_text("DROP TABLE orders;\n", encoding="utf-8")
    _printed(
        dev, since, "a refusal naming zz_broken.lua", lambda: "zz_broken.lua:" in dev.output_since(since)
    )
    assert "the old code keeps serving" in dev.output_since(since)
    assert dev.get("/count").body == "n=1"
    assert _database(dev) == {"tables": {"orders", "_lunaflow_migrations"}, "applied": ["001_init.sql"]}
    # Fixed, the save is accepted: now the drop runs, and the new code serves.
    (project / "zz_broken.lua").unlink()
    _answers(dev, "/count", "missing")
    assert _database(dev) == {"tables": {"_lunaflow_migrations"}, "applied": ["001_init.sql", "002_drop.sql"]}


def test_a_failing_migration_refuses_the_new_code_on_the_old_schema(servers: Servers, tmp_path: Path) -> None:
    """A save whose 002 works and whose 003 fails is refused: both roll back, the old schema
    is intact and the old code keeps serving; once 003 is fixed, both apply and the new code
    is live."""
    project = _orders_project(tmp_path)
    dev = servers.start(project)
    assert dev.get("/v").body == "v1"
    since = dev.mark()
    folder = project / "migrations" / "d"
    # The failing migration first, so a reload between the writes meets a refused save too.
    (folder / "003_bad.sql").write_text("INSERT INTO no_such_table VALUES (1);\n", encoding="utf-8")
    (folder / "002_drop.sql").write_text("DROP TABLE orders;\n", encoding="utf-8")
    edit(project / "main.lua", ORDERS.replace("VERSION", "v2"))
    _printed(dev, since, "a refusal naming 003_bad.sql", lambda: "003_bad.sql" in dev.output_since(since))
    assert "the old code keeps serving" in dev.output_since(since)
    said = dev.output_since(since)
    assert "no such table: no_such_table" in said or 'relation "no_such_table" does not exist' in said
    assert (dev.get("/v").body, dev.get("/count").body) == ("v1", "n=1")
    assert _database(dev) == {"tables": {"orders", "_lunaflow_migrations"}, "applied": ["001_init.sql"]}
    edit(folder / "003_bad.sql", "CREATE TABLE later (id TEXT);\n")
    _answers(dev, "/v", "v2")
    assert dev.get("/count").body == "missing"
    assert _database(dev)["applied"] == ["001_init.sql", "002_drop.sql", "003_bad.sql"]
