"""The ``lunaflow`` command. The local console commands arrive with ``lunaflow dev``."""

from __future__ import annotations

import argparse
import sys

from runtime import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lunaflow", description="Durable workflows written in Lua.")
    parser.add_argument("--version", action="version", version=f"lunaflow {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
