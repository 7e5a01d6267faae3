"""The examples in README.md and docs/*.md are tests: Sybil reads each file's blocks and
tests/support/docs.py says how each kind is run or checked (pyproject.toml's testpaths
name the files, so ``python -m pytest`` collects them)."""

from tests.support.docs import sybil

pytest_collect_file = sybil().pytest()
