"""``lunaflow check``: replay in-flight runs against the current code, running no effects,
and report each run that would diverge.

The executor's own loop in replay-only mode (``Executor.check``): the same replay core and
Lua driver as live runs, stopped at the first command the journal does not answer (a step
that would run, a value that would be drawn, a wait that would park). Everything before it
is what replay would do on the next wake. The code lives in ``runtime/platform/check.py``,
which the deploy gate inside ``cdk deploy`` (``functions/gate.py``) shares.
"""

from __future__ import annotations

from runtime.platform.check import Verdict, check_run, check_runs

__all__ = ["Verdict", "check_run", "check_runs"]
