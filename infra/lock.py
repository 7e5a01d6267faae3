"""Refresh infra/bundle.lock, the Lambda bundle's pinned wheels with their hashes:

    python3 -m infra.lock

It downloads what ``constants.BUNDLE_REQUIREMENTS`` resolves to for Lambda (manylinux
aarch64, CPython 3.12, wheels only) and writes each distribution as ``name==version`` with
the sha256 of the wheel pip chose. The bundling step installs from the lock alone
(``--require-hashes --no-deps``), so every synth ships the same bytes until the lock is
refreshed and committed; a wheel whose hash differs is refused.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # infra imports aws_cdk

from infra import constants  # noqa: E402

HEADER = """\
# The Lambda bundle's wheels (manylinux aarch64, CPython {python}), pinned with their hashes.
# Made from infra/constants.py BUNDLE_REQUIREMENTS by: python3 -m infra.lock
# infra/bundling.py installs exactly these (pip --require-hashes --no-deps).
"""


def lock_text(wheels: list[Path]) -> str:
    lines = [HEADER.format(python=constants.PYTHON_VERSION)]
    for wheel in sorted(wheels, key=lambda w: canonicalize_name(parse_wheel_filename(w.name)[0])):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}\n")
    return "".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                *constants.pip_wheel_args(),
                "--dest",
                folder,
                *constants.BUNDLE_REQUIREMENTS,
            ],
            check=True,
        )
        wheels = sorted(Path(folder).glob("*.whl"))
        constants.BUNDLE_LOCK.write_text(lock_text(wheels), encoding="utf-8")
    print(f"wrote {constants.BUNDLE_LOCK.relative_to(constants.REPO_ROOT)}: {len(wheels)} wheels")


if __name__ == "__main__":
    main()
