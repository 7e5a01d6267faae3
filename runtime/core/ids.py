"""Run ids and step ids: the names of runs and of the effects their steps perform."""

from __future__ import annotations

import hashlib

from runtime.errors import InvalidInput

MAX_RUN_ID_BYTES = 200


def _utf8_len(value: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not text a run id can be
        return MAX_RUN_ID_BYTES + 1


def check_run_id(value: object) -> str:
    """Return the run id, or raise with the SPEC's message naming the bad value."""
    if (
        isinstance(value, str)
        and value
        and "/" not in value
        and _utf8_len(value) <= MAX_RUN_ID_BYTES
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    ):
        return value
    shown = (
        value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else repr(value)
    )
    if isinstance(shown, str) and len(shown) > 60:
        shown = shown[:60] + "..."
    raise InvalidInput(f"run id must be a non-empty string without '/' (got \"{shown}\")")


def generation_owner(run_id: str, generation: int) -> str:
    """What a generation's effects are named after: the run id in generation 1, ``<run id>@<n>``
    in a later one (``wf:continue_as_new``), so a month's step ids and derived child ids are
    its own and never those of the month before. Generation 1 keeps the bare run id: runs
    that never continue name their effects as they always have."""
    return run_id if generation == 1 else f"{run_id}@{generation}"


def step_id(run_id: str, step: str, pass_: int, attempt: int) -> str:
    """``<run id>/<step name>/<pass>/<attempt>``: stable across a crash, new per attempt and pass."""
    return f"{run_id}/{step}/{pass_}/{attempt}"


def child_run_id(parent_id: str, n: int) -> str:
    """The id of the ``n``-th child a run starts with ``wf:child`` and no id of its own:
    derived from the parent and the command's position, so a replay after a crash names the
    same run (and joins it) instead of starting a second one. ``parent_id`` is the
    generation's owner (``generation_owner``), so a later generation starts children of its
    own instead of joining the ended ones of the generation before. Ids cannot hold '/', so
    the parts are joined by '.'; a parent id too long to extend is replaced by its hash."""
    derived = f"{parent_id}.child-{n}"
    if _utf8_len(derived) <= MAX_RUN_ID_BYTES:
        return derived
    digest = hashlib.sha256(parent_id.encode("utf-8", "backslashreplace")).hexdigest()[:40]
    return f"{digest}.child-{n}"
