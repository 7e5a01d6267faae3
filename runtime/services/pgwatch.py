"""The watcher of a local PostgreSQL server (``runtime.services.pgserver``).

``python -m runtime.services.pgwatch OWNER_PID USER POSTGRES_ARGS...`` starts the server as
its child (as ``USER`` when that is not empty) and stops it with a fast shutdown (SIGINT:
open transactions roll back, the log is flushed) once the owner process is gone or this
watcher is asked to stop (SIGTERM). It checks the owner by its parent pid, which changes
when the owner dies by any means, SIGKILL included; a parent-death signal would not do,
since Linux sends it when the forking *thread* ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.2


def main(argv: list[str]) -> int:
    owner, user, args = int(argv[0]), argv[1] or None, argv[2:]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The user's own group too, and no supplementary ones: left in root's group, the server
    # would be refused by folders whose group (root) may not enter them.
    as_user: dict[str, object] = {"user": user, "group": user, "extra_groups": []} if user else {}
    server = subprocess.Popen(args, stdin=subprocess.DEVNULL, **as_user)  # type: ignore[call-overload]
    while server.poll() is None:
        if stopping or os.getppid() != owner:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.send_signal(signal.SIGQUIT)  # immediate: recovery replays the log
                server.wait()
            break
        time.sleep(POLL_S)
    return server.returncode or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
