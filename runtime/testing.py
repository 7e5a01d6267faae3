"""The in-process harnesses users and our tests import (SPEC section 5).

``runtime.testing`` is the public import path whatever the package layout: the harness
itself lives in ``runtime.dev.harness``.
"""

from runtime.dev.harness import LocalPlatform

__all__ = ["LocalPlatform"]
