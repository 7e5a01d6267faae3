"""Issue 17, point 4 and issue 21: the README's examples run in order, and the docs name
only files that exist.

The README's blocks themselves run as pytest items (the root conftest.py hands README.md
and docs/*.md to Sybil; tests/support/docs.py runs each block): its quickstart and console
command blocks, in document order, as real shell commands against a real ``lunaflow dev
examples/auction`` (started by the README's own ``lunaflow dev`` line) on a fresh data
folder, in a copy of the example standing for the repository root. The tests here check
that those blocks are the ones that run, and what the examples alone would not show.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from tests.support.devserver import ROOT, Servers, wait_for
from tests.support.docs import Block, Session, commands, fenced_blocks, shell_blocks

README = ROOT / "README.md"


def _runnable() -> list[Block]:
    """The README's shell blocks that run (not marked aws, install or bench)."""
    return [b for b in shell_blocks(README) if b.role == "run"]


def _fresh_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(
        ROOT / "examples" / "auction",
        root / "examples" / "auction",
        ignore=shutil.ignore_patterns(".lunaflow"),
    )
    return root


def test_the_set_up_is_two_commands_that_install_what_they_need() -> None:
    """Exactly two set-up commands: one installs and runs the auction under ``lunaflow
    dev`` (the server the quickstart's blocks talk to), one installs and runs the tests
    (what .ci/run runs)."""
    setup = README.read_text(encoding="utf-8").split("## Set up", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in shell_blocks(README) if b.text.strip() and b.text.strip() in setup]
    assert [b.role for b in blocks] == ["install", "install"], [(b.line, b.info) for b in blocks]
    serve, test = (b.text.strip() for b in blocks)
    assert "pip install" in serve and serve.endswith("&& lunaflow dev examples/auction"), serve
    assert "pip install" in test and test.endswith("python3 -m pytest -q"), test
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert test.split("&& ", 2)[-1] in ci, "CI runs the README's test command"


def test_the_runnable_blocks_are_the_quickstart_and_the_console_commands() -> None:
    """The README's running blocks hold the quickstart (curl commands with outputs) and every
    console command, so the Sybil items cover them; only installs and AWS are checked
    offline (the first install also starts the server the quickstart talks to)."""
    blocks = _runnable()
    found = [c for b in blocks for c in commands(b)]
    assert any(c.text.startswith("curl") and c.expected for c in found), found
    for verb in ("runs", "show", "signal", "cancel", "start", "check", "record", "test"):
        assert any(c.text.startswith(f"lunaflow {verb} ") for c in found), verb
    offline = [b for b in shell_blocks(README) if b.role != "run"]
    assert {b.role for b in offline} == {"install", "aws"}, [(b.line, b.info) for b in offline]
    assert all("--aws" in b.text or "cdk" in b.text for b in offline if b.role == "aws")


def test_a_sale_started_from_the_cli_is_a_sale_the_api_knows(servers: Servers, tmp_path: Path) -> None:
    """``lunaflow start settle-sale '<sale>' --id sale-<X>`` as the README shows it leaves a
    sale the example's API knows: GET /api/sale/<X> answers 200."""
    root = _fresh_root(tmp_path)
    project = root / "examples" / "auction"
    dev = servers.start(project, project / ".lunaflow")
    starts = [
        c for b in _runnable() for c in commands(b) if re.match(r"lunaflow start settle-sale\b", c.text)
    ]
    assert starts, "the README shows no `lunaflow start settle-sale`"
    session = Session(root)
    for c in starts:
        ran = session.run(c)
        assert ran.code == 0, str(ran)
        path = f"/api/sale/{json.loads(shlex.split(c.text)[3])['id']}"
        wait_for(f"GET {path} to answer 200", lambda path=path: dev.get(path).status == 200, 10)


DOC_FILE = re.compile(r"`([\w./-]+\.(?:md|txt|png|svg))`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _named_files(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    return set(DOC_FILE.findall(text)) | {t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)}


def test_docs_name_only_files_in_the_repository() -> None:
    """Every file the README and docs/*.md link to, or name as a document or a picture
    (`name.md`, `.txt`, `.png`, `.svg`), exists, relative to the document or to the
    repository root. The reference named SPEC.md and seed-workflows.txt, which are not in
    the repository."""
    missing = []
    for doc in [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]:
        if not doc.exists():
            continue
        for name in sorted(_named_files(doc)):
            if not ((doc.parent / name).exists() or (ROOT / name).exists()):
                missing.append(f"{doc.relative_to(ROOT)} -> {name}")
    assert not missing, "docs name files that are not in the repository: " + "; ".join(missing)


def _slugs(doc: Path) -> set[str]:
    """GitHub's anchors for a document's headings."""
    text = re.sub(r"^(```|~~~).*?^\1", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)
    heads = re.findall(r"^#+\s+(.*)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_links_to_sections_name_headings_that_exist() -> None:
    """A link to ``#section`` (in the same file or another document) names a heading that
    exists, as GitHub spells its anchors."""
    broken = []
    for doc in [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]:
        for target, anchor in re.findall(r"\]\(([^)\s#]*)#([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            linked = (doc.parent / target) if target else doc
            if not linked.exists() or anchor not in _slugs(linked):
                broken.append(f"{doc.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, "links to sections that do not exist: " + "; ".join(broken)


def test_docs_cite_no_document_outside_the_repository() -> None:
    """The SPEC and the product page (seed-workflows.txt) live outside the repository: the
    docs cite the reference instead."""
    cited = []
    for doc in [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bSPEC\b|seed-workflows|\bthe seed\b", line):
                cited.append(f"{doc.relative_to(ROOT)}:{n}")
    assert not cited, "docs cite documents that are not in the repository: " + ", ".join(cited)


# --- the sample of what `lunaflow dev` prints ------------------------------------------------

TERMINAL_INTRO = "prints\nwhat they do, one line per event"
# Not part of the example: what the sample's run needs beyond it. The charge's first attempt
# fails (its step id ends in /1), and a workflow with a typo at main.lua:7.
BUSY_ONCE = '        if key:match("/1$") then error("card processor busy", 0) end\n'
TYPO = """-- Not part of the example: a workflow with a typo, for the README's sample of what
-- lunaflow dev prints (tests/docs/test_readme.py adds this file).
workflow "typo" (function(wf, input)
    wf:step("first", function() return 1 end)
    -- the next line has the typo the sample shows
    local sale = input
    wf:awiat("go")
end)
"""
STAMP = re.compile(r"\b\d\d:\d\d:\d\d\b")


def _terminal_sample() -> list[str]:
    text = README.read_text(encoding="utf-8")
    after = text.split(TERMINAL_INTRO, 1)[1]
    blocks = [b for b in fenced_blocks(after) if b.lang == "text"]
    assert blocks, "the README shows no sample of lunaflow dev's lines"
    return [line for line in blocks[0].text.splitlines() if line.strip()]


def _shape(line: str) -> str:
    """A terminal line with what differs between runs made alike: clock times, and the
    digits (not the unit) of a retry's ``(in 1.0s)``."""
    line = STAMP.sub("HH:MM:SS", line.strip())
    return re.sub(r"\(in ([^)]*)\)", lambda m: "(in " + re.sub(r"\d", "9", m.group(1)) + ")", line)


def _sample_in(sample: list[str], printed: list[str]) -> str | None:
    """Why the sample's lines are not, in order, lines the server printed (a sample line
    ending in `` ...`` stands for the start of one), or None."""
    got = [_shape(line) for line in printed]
    at = 0
    for line in sample:
        want = _shape(line)
        prefix = want.endswith(" ...")
        want = want.removesuffix(" ...")
        while at < len(got) and not (got[at].startswith(want) if prefix else got[at] == want):
            at += 1
        if at == len(got):
            return f"the README's line {line!r} is not printed (in this order)"
        at += 1
    return None


def test_the_readmes_sample_of_lunaflow_devs_lines_comes_from_a_real_run(
    servers: Servers, tmp_path: Path
) -> None:
    """Issue 24 §6: every line of the README's sample of what ``lunaflow dev`` prints is one
    a real ``lunaflow dev examples/auction`` prints, in that order, for the README's sale
    and payment (the charge's first attempt failing) and a run with a typo. Before: the
    sample said ``(in 1.0s)`` where the server printed ``(in 1000ms)``."""
    root = _fresh_root(tmp_path)
    project = root / "examples" / "auction"
    objects = project / "objects.lua"
    head = "    charge = function(self, amount, key)\n"
    assert head in objects.read_text(encoding="utf-8")
    objects.write_text(objects.read_text(encoding="utf-8").replace(head, head + BUSY_ONCE), encoding="utf-8")
    (project / "main.lua").write_text(TYPO, encoding="utf-8")
    dev = servers.start(project, project / ".lunaflow")
    sale = dev.request("POST", "/api/sale", '{"id":"lot-42","winner":"ada","price":25}')
    assert sale.status in (200, 201), sale
    wait_for("the sale's notify", lambda: "run sale-lot-42  log info  notify ada" in dev.stdout(), 30)
    pay = dev.request("POST", "/api/sale/pay", '{"id":"lot-42","user":"ada"}')
    assert pay.status in (200, 201, 202), pay
    dev.wait_status("sale-lot-42", {"completed"}, timeout=30)
    done = dev.cli("start", "typo", "--id", "typo-1")
    assert done.code == 0, str(done)
    wait_for("typo-1 to fail", lambda: "run typo-1  failed" in dev.stdout(), 30)
    wait_for("its traceback", lambda: "in function <main.lua:3>" in dev.stdout(), 10)
    problem = _sample_in(_terminal_sample(), dev.stdout().splitlines())
    assert problem is None, f"{problem}; the server printed:\n{dev.stdout()}"
