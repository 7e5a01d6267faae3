"""Issue 17, point 4: the README's examples run in order, and the docs name only files
that exist.

The README's quickstart and console command blocks are run, in document order, as real
shell commands against a real ``lunaflow dev examples/auction`` on a fresh data folder
(tests/support/docs.py). To run the commands verbatim (``-p examples/auction``, the default
data folder), the example is copied into a temporary folder that stands for the
repository root and the commands run there; the only rewrite is the port.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from tests.support.devserver import ROOT, Servers, wait_for
from tests.support.docs import Block, Session, commands, shell_blocks

README = ROOT / "README.md"


def _drives_the_local_example(block: Block) -> bool:
    """Blocks a reader runs against ``lunaflow dev examples/auction``: their commands reach
    the server or the example's data, and install, serve, deploy or reach AWS nothing."""
    texts = [c.text for c in commands(block)]
    if any(re.search(r"pip install|npx |--aws|^lunaflow dev ", t) for t in texts):
        return False
    return any(
        re.search(r"localhost:8787|-p examples/auction|lunaflow check examples/auction", t) for t in texts
    )


def _runnable() -> list[Block]:
    return [b for b in shell_blocks(README) if _drives_the_local_example(b)]


def _fresh_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(
        ROOT / "examples" / "auction",
        root / "examples" / "auction",
        ignore=shutil.ignore_patterns(".lunaflow"),
    )
    return root


def test_the_runnable_blocks_are_the_quickstart_and_the_console_commands() -> None:
    """The selection finds the quickstart (curl commands with outputs) and the console's
    command block (lunaflow commands), so the run below covers them."""
    blocks = _runnable()
    assert len(blocks) >= 2, [b.line for b in blocks]
    found = [c for b in blocks for c in commands(b)]
    assert any(c.text.startswith("curl") and c.expected for c in found), found
    for verb in ("runs", "show", "signal", "cancel", "start", "check"):
        assert any(c.text.startswith(f"lunaflow {verb} ") for c in found), verb


def test_readme_blocks_run_in_order_on_a_fresh_data_folder(servers: Servers, tmp_path: Path) -> None:
    """Every command of the README's quickstart and console blocks, run in order against a
    real ``lunaflow dev`` on a fresh data folder, exits as said and prints what its ``# ->``
    lines say."""
    root = _fresh_root(tmp_path)
    project = root / "examples" / "auction"
    dev = servers.start(project, project / ".lunaflow")
    session = Session(root, rewrite=lambda c: c.replace("localhost:8787", f"127.0.0.1:{dev.port}"))
    for block in _runnable():
        session.check(commands(block), "README.md")


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
