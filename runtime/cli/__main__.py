"""``python -m runtime.cli``: the ``lunaflow`` command."""

from runtime.cli import entry

entry()
