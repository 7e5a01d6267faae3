"""The harnesses users and our tests import (SPEC section 5): ``LocalPlatform`` (the platform
in-process on SQLite) and ``AwsPlatform`` (the same interface through the Lambda handlers on
a moto server). ``runtime.testing`` is the public import path whatever the package layout:
the harnesses live in ``runtime.dev.harness`` and ``runtime.aws.harness``.
"""

from runtime.aws.harness import AwsPlatform, DeliveryFailed, WakeFailed
from runtime.dev.harness import LocalPlatform

__all__ = ["AwsPlatform", "DeliveryFailed", "LocalPlatform", "WakeFailed"]
