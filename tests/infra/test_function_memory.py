"""The functions' memory follows the project's Lua state bound (infra/memory.py).

Every function had 1,024 MB whatever ``limits.memory_mb`` said: a project that raised the
bound past what fits beside the process (as the error for a full state advises) had its
functions killed by Lambda mid-invocation instead of the call failing with that error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App

from conftest import TINY_REQUIREMENTS, Synth
from infra import constants, memory
from infra.stack import LunaflowStack, ProjectError
from runtime.engine.sandbox import DEFAULT_MEMORY_BYTES

MiB = 2**20
MAIN = 'workflow "w" (function(wf) return wf:step("s", function() return 1 end) end)\n'


def project(tmp_path: Path, memory_mb: int) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "lunaflow.toml").write_text(
        f'name = "big"\n[limits]\nmemory_mb = {memory_mb}\n', encoding="utf-8"
    )
    (root / "main.lua").write_text(MAIN, encoding="utf-8")
    return root


def sizes(stack: LunaflowStack) -> dict[str, int]:
    """Each function's MemorySize, the deploy gate's with them."""
    found = {name: fn.node.default_child.memory_size for name, fn in stack.functions.functions.items()}  # type: ignore[union-attr]
    found["Gate"] = stack.gate.function.node.default_child.memory_size  # type: ignore[union-attr]
    return found


def test_a_default_project_keeps_functions_of_1024_mb(auction: Synth) -> None:
    functions = auction.of_type("AWS::Lambda::Function")
    assert functions
    assert {props["MemorySize"] for props in functions.values()} == {1024}
    assert memory.function_memory_mb(DEFAULT_MEMORY_BYTES) == 1024


def test_a_raised_bound_gives_every_function_room_for_a_state_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memory_mb = 1024: one state at its bound takes up to 1.5 GiB in the process (malloc's
    rounding), beside the runtime and the values Python holds; every function, the deploy
    gate's too (it replays runs on the new code), gets 1,792 MB."""
    monkeypatch.setattr(constants, "BUNDLE_SOURCE", TINY_REQUIREMENTS)
    stack = LunaflowStack(App(), "lunaflow-big-memory", project=project(tmp_path, 1024))
    assert set(sizes(stack).values()) == {1792}, sizes(stack)
    assert memory.RUNTIME_MB + 1.5 * 1024 + memory.VALUES_MB <= 1792


def test_a_bound_no_lambda_function_can_hold_is_refused_when_the_stack_is_built(tmp_path: Path) -> None:
    largest = memory.largest_bound_mb()
    assert largest == 6656
    assert memory.function_memory_mb(largest * MiB) == memory.LAMBDA_MAX_MB == 10_240
    assert memory.too_large("p", largest * MiB) is None
    with pytest.raises(ProjectError) as refused:
        LunaflowStack(App(), "lunaflow-too-big", project=project(tmp_path, largest + 1))
    assert str(refused.value) == (
        f"lunaflow.toml in {tmp_path / 'project'}: limits.memory_mb is 6657, and a Lambda function "
        "holding a Lua state at that bound (1.5 times it, with what malloc adds) beside its runtime "
        "(128 MB) and the values it converts (128 MB) would need 10304 MB, over Lambda's largest, "
        "10240 MB; lower limits.memory_mb to at most 6656"
    )


@pytest.mark.parametrize(("bound_mib", "function_mb"), [(1, 1024), (256, 1024), (512, 1024), (600, 1216)])
def test_sizes_are_whole_multiples_of_64_mb_and_never_below_the_floor(
    bound_mib: int, function_mb: int
) -> None:
    assert memory.function_memory_mb(bound_mib * MiB) == function_mb
