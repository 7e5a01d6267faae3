"""A moto server process on loopback for ``AwsPlatform`` (``runtime.testing``).

``python -m runtime.aws.motoserver`` serves moto over HTTP on 127.0.0.1 (a free port,
printed on the first line of stdout) until its stdin closes, so it never outlives the
process that started it. What sets it apart from a plain ``moto_server``:

- **One request at a time.** moto's conditional writes are not atomic under concurrent
  requests (two writers both won in 8 of 300 trials, FACTS.md); lunaflow's races are about
  its own conditions, so the server serializes requests with one lock.
- **Queries that read one partition.** moto 5.2.5 gathers a query's candidates from every
  item of the table, sorted (``Table.all_items``), and sorts them again by the key it
  queries. With Python-level comparisons that is milliseconds per query at a few thousand
  items; the AWS torture's table grows to tens of thousands, every activation's load is a
  query, and the server (one core) fell from 145 to 19 activations per 30 s as the journals
  grew. Here a table query reads only its partition, and an index query the items unsorted:
  the second sort alone orders the answer, so the answers are the same
  (``tests/aws/test_moto_queries.py`` compares them).
- **SQS on the caller's clock.** A request carrying ``x-lunaflow-clock-ms`` runs with SQS's
  notion of now set to that time, so ``DelaySeconds`` and visibility timeouts follow the
  harness's fake clock (moto's own clock is the machine's). Requests without the header see
  the real time. Only SQS reads the clock this way; DynamoDB and Scheduler do not keep time.
- **Connections kept open.** werkzeug closes the connection after every answer, so each of
  botocore's requests paid a connection, a server thread and, with the request logged, a
  line nobody reads; here a client's connection serves its requests one after another
  (each body read whole, nothing drained after it, no Nagle delay between an answer's head
  and body), and moto's per-request lookups that never change (its modules, a host's
  backend, a response class's methods) are made once. The AWS tests ran about 30 % faster.

``GET /_lunaflow/next?region=R&queues=a,b&group=G&now=MS`` answers, as JSON, when the next
message of those queues becomes visible after ``now`` (delayed or in flight) and the earliest
one-time schedule of the group: what the harness needs to move its clock from one due
time to the next. moto's internals are read only here, and only in this process.
"""

from __future__ import annotations

import atexit
import functools
import io
import json
import os
import re
import select
import selectors
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

CLOCK_HEADER = "x-lunaflow-clock-ms"
ACCOUNT = "123456789012"  # moto's default account
START_TIMEOUT_S = 60.0

_AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")


def at_ms(expression: str) -> int | None:
    """Epoch milliseconds of a one-time ``at(yyyy-mm-ddThh:mm:ss)`` schedule (UTC)."""
    match = _AT.match(expression)
    if match is None:
        return None
    when = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


# --- the server process ------------------------------------------------------------------


class _Clock:
    """SQS's now inside the server: the calling request's time, else the real time."""

    def __init__(self) -> None:
        self.now_ms: float | None = None

    def set(self, now_ms: float | None) -> None:
        self.now_ms = now_ms

    def millis(self, dt: Any = None) -> float:
        if dt is None and self.now_ms is not None:
            return self.now_ms
        return float(self._real_millis(dt))

    def seconds(self, dt: Any = None) -> float:
        return self.millis(dt) / 1000.0

    _real_millis: Callable[..., float]


class _Server:
    """moto's WSGI app behind one lock, plus the harness's ``/_lunaflow/next`` query."""

    def __init__(self, app: Callable[..., Any], clock: _Clock) -> None:
        self.app = app
        self.clock = clock
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        # The whole body, read before anything answers: the connection is kept open for the
        # next request (``_KeepAlive``), which must begin where this one's body ends.
        length, stream = environ.get("CONTENT_LENGTH"), environ["wsgi.input"]
        if length:
            body = stream.read(int(length))
        elif environ.get("wsgi.input_terminated"):
            body = stream.read()  # chunked: werkzeug's stream ends with the last chunk
        else:
            body = b""  # neither: HTTP/1.1 says the request has no body
        environ["wsgi.input"] = io.BytesIO(body)
        with self.lock:
            header = environ.get("HTTP_" + CLOCK_HEADER.upper().replace("-", "_"))
            self.clock.set(float(header) if header else None)
            try:
                if environ.get("PATH_INFO", "").startswith("/_lunaflow/"):
                    return self._control(environ, start_response)
                result = self.app(environ, start_response)
                try:
                    return [bytes(chunk) for chunk in result]
                finally:
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()
            finally:
                self.clock.set(None)

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        if environ["PATH_INFO"] == "/_lunaflow/ping":
            body: dict[str, Any] = {"lunaflow": True}
        else:
            now = float(query.get("now", "0"))
            region = query.get("region", "us-east-1")
            queues = [q for q in query.get("queues", "").split(",") if q]
            body = {
                "message_ms": _next_visible(region, queues, now),
                "schedule_ms": _first_schedule(region, query.get("group")),
            }
        payload = json.dumps(body).encode()
        start_response(
            "200 OK", [("content-type", "application/json"), ("content-length", str(len(payload)))]
        )
        return [payload]


def _next_visible(region: str, names: Iterable[str], now_ms: float) -> float | None:
    from moto.sqs.models import sqs_backends

    queues = sqs_backends[ACCOUNT][region].queues
    found: list[float] = []
    for name in names:
        queue = queues.get(name)
        if queue is None:
            continue
        for message in list(queue._messages):
            # Shown once now >= visible_at (patched in ``serve``), held while now < delayed_until.
            ready = max(float(message.delayed_until or 0), float(message.visible_at or 0))
            if ready > now_ms:
                found.append(ready)
    return min(found) if found else None


def _first_schedule(region: str, group: str | None) -> int | None:
    if not group:
        return None
    from moto.scheduler.models import scheduler_backends

    found_group = scheduler_backends[ACCOUNT][region].schedule_groups.get(group)
    if found_group is None:
        return None
    found = [
        t
        for s in list(found_group.schedules.values())
        if (s.state or "ENABLED") == "ENABLED"  # moto's UpdateSchedule leaves None: AWS's default
        if (t := at_ms(s.schedule_expression)) is not None
    ]
    return min(found) if found else None


@contextmanager
def partition_queries() -> Iterator[None]:
    """While inside, moto's ``Table.query`` gathers its candidates from the queried
    partition (a table query) or from the items unsorted (an index query) instead of every
    item sorted; the candidates are sorted by the query's own key afterwards either way."""
    from moto.dynamodb.models.table import Table

    query, every_item = Table.query, Table.all_items
    asked = threading.local()  # the query in progress on this thread, if any
    everything = object()  # an index query: every item, in any order

    def all_items(self: Any) -> Any:
        partition = getattr(asked, "partition", None)
        if partition is None:  # not a query (a scan pages in this order)
            return every_item(self)
        if partition is everything:
            if not self.range_key_attr:
                return list(self.items.values())
            return [item for items in self.items.values() for item in items.values()]
        found = self.items.get(partition)
        if found is None:
            return []
        return list(found.values()) if self.range_key_attr else [found]

    def one_partition(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        asked.partition = everything if index else hash_key
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            asked.partition = None

    setattr(Table, "all_items", all_items)  # noqa: B010
    setattr(Table, "query", one_partition)  # noqa: B010
    try:
        yield
    finally:
        setattr(Table, "all_items", every_item)  # noqa: B010
        setattr(Table, "query", query)  # noqa: B010


def serve() -> None:
    """The server process: bind, print the port, serve until stdin closes."""
    import moto.sqs.models as sqs_models
    from moto import backends as moto_backends
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug import serving as werkzeug_serving
    from werkzeug.serving import make_server

    clock = _Clock()
    clock._real_millis = sqs_models.unix_time_millis  # type: ignore[attr-defined]
    # SQS reads its clock through these two names, bound in its own module.
    setattr(sqs_models, "unix_time_millis", clock.millis)  # noqa: B010
    setattr(sqs_models, "unix_time", clock.seconds)  # noqa: B010
    receive = sqs_models.SQSBackend.receive_message

    def receive_now(self: Any, queue_name: str, count: int, wait_seconds_timeout: int, *rest: Any) -> Any:
        # A long poll waits for time to pass, which a request's own clock never does: a
        # request on the caller's clock answers at once (a caller that wants to wait, waits).
        wait = 0 if clock.now_ms is not None else wait_seconds_timeout
        return receive(self, queue_name, count, wait, *rest)

    setattr(sqs_models.SQSBackend, "receive_message", receive_now)  # noqa: B010

    def visible(self: Any) -> bool:
        # moto shows a hidden message a millisecond after its visibility timeout (now >
        # visible_at); a message hidden for a queue's 10 s retry delay is due at 10 s, as a
        # 10 s DelaySeconds is and as LocalPlatform delivers it.
        return bool(clock.millis() >= self.visible_at)

    setattr(sqs_models.Message, "visible", property(visible))  # noqa: B010
    # moto finds each request's backend by listing its own package folder on disk, twice a
    # request (a listdir and a stat per module): a fifth of a GetItem's time in the server.
    # Neither the folder nor a host's backend changes while the server runs.
    modules = tuple(moto_backends.list_of_moto_modules())
    setattr(moto_backends, "list_of_moto_modules", lambda: modules)  # noqa: B010
    # moto lists a response class's methods (``inspect.getmembers``) at every request; they
    # do not change while the server runs.
    import moto.core.responses as moto_responses
    from moto.core import utils as moto_utils

    names_of = functools.lru_cache(maxsize=None)(moto_utils.method_names_from_class)
    setattr(moto_responses, "method_names_from_class", names_of)  # noqa: B010
    dispatcher = DomainDispatcherApplication(create_backend_app)
    dispatcher.get_backend_for_host = functools.lru_cache(maxsize=None)(  # type: ignore[method-assign]
        dispatcher.get_backend_for_host
    )
    app = _Server(dispatcher, clock)

    class _KeepAlive(MotoRequestHandler):
        """werkzeug answers every request with ``Connection: close``, so each of botocore's
        requests paid a new connection, a thread and its accept; here a connection serves
        request after request (``_Server`` reads each body whole) until the client closes
        it. Nor does it log a line per request to nobody (stderr is discarded)."""

        protocol_version = "HTTP/1.1"
        # The head and the body go out in two writes: with Nagle's algorithm the second waits
        # for the client's delayed ACK of the first, 40 ms a request on a kept connection.
        disable_nagle_algorithm = True

        def send_header(self, keyword: str, value: str) -> None:
            # werkzeug's own "close", left out unless the client asked for it.
            if keyword.lower() == "connection" and value.lower() == "close" and not self.close_connection:
                return
            super().send_header(keyword, value)

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return

    class _NothingLeft:
        """werkzeug drains what a client sent past a request's body before it closes the
        connection, reading until the socket ends: on a connection kept open that is the
        next request, and the read waits for ever. ``_Server`` reads every body whole, so
        there is nothing to drain."""

        def register(self, *args: Any) -> None:
            return

        def select(self, timeout: float | None = None) -> list[Any]:
            return []

        def close(self) -> None:
            return

    setattr(  # noqa: B010
        werkzeug_serving,
        "selectors",
        types.SimpleNamespace(DefaultSelector=_NothingLeft, EVENT_READ=selectors.EVENT_READ),
    )
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_KeepAlive)
    print(f"PORT {server.server_address[1]}", flush=True)

    def watch_parent() -> None:
        sys.stdin.read()  # returns when the parent closes the pipe or dies
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    with partition_queries():
        server.serve_forever()


# --- the parent side ---------------------------------------------------------------------


class MotoServer:
    """A moto server process this process started; ``endpoint`` is its URL."""

    _shared: MotoServer | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # so the child runs this very code
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runtime.aws.motoserver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=root,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(
                f"the moto server did not start within {START_TIMEOUT_S:.0f}s (got {line!r}); "
                "is moto[server] installed (pip install 'moto[server]')?"
            )
        self.endpoint = f"http://127.0.0.1:{int(line.split()[1])}"
        atexit.register(self.close)

    @classmethod
    def shared(cls) -> MotoServer:
        """One server per Python process, started on first use; every harness that was given
        no endpoint shares it (each with resources of its own)."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared.process.poll() is not None:
                cls._shared = cls()
            return cls._shared

    def close(self) -> None:
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


if __name__ == "__main__":
    serve()
