"""Fixtures for the console tests.

The AWS side is tests/aws/conftest.py's (``aws``: the table, queues and Scheduler group
under moto; ``make_runtime``: the container's ``AwsRuntime`` injected for the handlers),
imported here so the widget tests build exactly what the handler tests build.
``console_context`` is the Lambda context the console function is called with: its
``invoked_function_arn`` is the endpoint the widget's ``cwdb-action`` buttons call back.
"""

from __future__ import annotations

import pytest

from tests.aws.conftest import aws, make_runtime  # noqa: F401 (fixtures, used by name)
from tests.support.aws_world import ACCOUNT, REGION, FakeContext

CONSOLE_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:lunaflow-console"


@pytest.fixture
def console_context() -> FakeContext:
    return FakeContext(function_name="lunaflow-console", invoked_function_arn=CONSOLE_ARN)
