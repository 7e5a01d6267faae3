"""Every seed-semantics test runs on both harnesses (SPEC section 5: "A test written against
one harness runs unchanged on the other"): ``harness`` is ``LocalPlatform`` (SQLite,
in-process) or ``AwsPlatform`` (the Lambda handlers on a moto server process). A test makes
its platform with ``harness(project, data_dir=..., objects=...)`` exactly as it would with
either class.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.testing import AwsPlatform, LocalPlatform

HARNESSES: dict[str, Any] = {"local": LocalPlatform, "aws": AwsPlatform}


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Any:
    return HARNESSES[request.param]


def local_only(reason: str) -> pytest.MarkDecorator:
    """A case that holds for LocalPlatform alone, and why (the AWS path differs by design and
    a test under tests/aws/ pins what it does instead). Such a case is deselected on AWS,
    not skipped."""
    return pytest.mark.local_only(reason=reason)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "local_only(reason): the case is not run on AwsPlatform")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    aws_only_local = [
        item
        for item in items
        if item.get_closest_marker("local_only") is not None
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("harness") == "aws"  # type: ignore[attr-defined]
    ]
    if aws_only_local:
        config.hook.pytest_deselected(items=aws_only_local)
        items[:] = [item for item in items if item not in aws_only_local]
