"""``lunaflow dev``'s ticker thread: it fires the project's schedules on the real clock.

The catch-up rule: at start-up each schedule fires its latest tick of the last 24 hours
(``CATCH_UP_MS``) once, if that tick's run does not exist yet (a tick fired before joins its
run: the run id is the schedule's name and the tick time); earlier missed ticks are not
fired. While the server runs, a tick fires when its time comes (within about a second);
several ticks missed at once (the machine slept) fire as their latest one alone. A schedule
paused in the data folder (``lunaflow schedule pause``) fires nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from runtime.core.clock import now_ms
from runtime.platform.faults import kill_now
from runtime.platform.platform import Platform
from runtime.platform.schedules import CATCH_UP_MS, PauseFile, Ticker, fire_tick

log = logging.getLogger("lunaflow.dev")

TICK_POLL_S = 1.0  # the longest the thread sleeps: a reload may bring new schedules


class TickLoop:
    def __init__(
        self,
        platform: Platform,
        stop: threading.Event,
        poke: Callable[[], None],
        say: Callable[[str], None],
        pauses: PauseFile,
        fault: str | None = None,
    ) -> None:
        self.platform, self.stop, self.poke, self.say, self.fault = platform, stop, poke, say, fault
        self.pauses = pauses
        self.ticker = Ticker(now_ms(platform.clock) - CATCH_UP_MS)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.fire_due()
            except Exception:  # the loop must outlive any one bad iteration
                log.exception("firing a schedule's tick failed; it is tried again at the next tick")
            self.stop.wait(timeout=self._wait())

    def fire_due(self) -> None:
        due = self.ticker.due(self.platform.worker.schedules, now_ms(self.platform.clock))
        paused = self.pauses.paused() if due else set()
        for schedule, tick in due:
            if schedule.name in paused:
                continue
            if self.fault == "before":
                kill_now()
            try:
                fired = fire_tick(self.platform, schedule, tick)
            except Exception:  # the ticker has moved past it: the ticks due with it must still fire
                log.exception("schedule %s: firing its tick %s failed", schedule.name, schedule.run_id(tick))
                continue
            if self.fault == "after":
                kill_now()
            if fired.started:
                self.say(f"schedule {schedule.name}: tick {fired.run_id}")
            elif fired.error is None:  # an error is logged where it happens
                self.say(f"schedule {schedule.name}: tick skipped, an earlier run is still going")
            self.poke()

    def _wait(self) -> float:
        now = now_ms(self.platform.clock)
        due = self.ticker.next_due(self.platform.worker.schedules, now)
        if due is None:
            return TICK_POLL_S
        return max(0.0, min(TICK_POLL_S, due / 1000 - time.time()))
