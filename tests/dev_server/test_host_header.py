"""Issue 17, point 7: ``lunaflow dev`` serves only loopback names (and the ``--host``
given), so a DNS-rebinding page cannot read run inputs, results and payloads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.dev.http import HostAllowlist
from tests.support.devserver import PROJECTS, DevServer, Servers, parse_response

EVENTS = PROJECTS / "events"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    s = Servers(tmp_path_factory.mktemp("host"))
    try:
        server = s.start(EVENTS)
        r = server.request("POST", "/start?wf=waiter&id=c7-secret", '{"card":"4111-SECRET"}')
        assert r.status == 201, r
        server.wait_status("c7-secret", {"awaiting"})
        yield server
    finally:
        s.close()


@pytest.mark.parametrize("path", ["/_console", "/_console/runs/c7-secret", "/echo"])
@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1.evil.example:{port}", ""])
def test_foreign_host_header_is_refused(dev: DevServer, path: str, host: str) -> None:
    """A request whose Host is not a loopback name (as after DNS rebinding), or that has an
    empty Host, is refused with 421 on the console and on the project's routes, and the
    run's input is not in the answer."""
    r = dev.send("GET", path, host=host.format(port=dev.port))
    assert r.status == 421, f"GET {path} with Host {host!r} answered {r.status}"
    assert "4111-SECRET" not in r.body


def test_a_post_with_a_foreign_host_reaches_no_route(dev: DevServer) -> None:
    r = dev.send("POST", "/echo", b"hello", host="evil.example")
    assert r.status == 421 and "hello" not in r.body, r


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "127.0.0.1", "localhost", "[::1]:{port}", "LOCALHOST:{port}"],
)
def test_loopback_host_names_are_served(dev: DevServer, host: str) -> None:
    r = dev.send("GET", "/_console", host=host.format(port=dev.port))
    assert r.status == 200, (host, r.status)


def test_the_host_given_with_dash_dash_host_is_served(
    servers: Servers, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``--host dev.test`` (a name the developer chose) is served besides the loopback names;
    other names still are not. Bound on 127.0.0.1, so the name only reaches the Host check."""
    server = servers.start(
        EVENTS, tmp_path_factory.mktemp("host-flag"), ["--host", "127.0.0.1", "--allow-host", "dev.test"]
    )
    assert server.send("GET", "/_console", host=f"dev.test:{server.port}").status == 200
    assert server.send("GET", "/_console", host=f"other.test:{server.port}").status == 421


@pytest.mark.parametrize(
    "bind, extra, header, allowed",
    [
        ("127.0.0.1", (), "127.0.0.1:8787", True),
        ("127.0.0.1", (), "127.8.9.10", True),  # all of 127.0.0.0/8 is loopback
        ("127.0.0.1", (), "app.localhost:8787", True),  # RFC 6761: never leaves the machine
        ("127.0.0.1", (), "[::1]:8787", True),
        ("127.0.0.1", (), "localhost.evil.example", False),
        ("127.0.0.1", (), "192.168.1.5:8787", False),
        ("192.168.1.5", (), "192.168.1.5:8787", True),  # the --host given
        ("0.0.0.0", (), "0.0.0.0:8787", False),  # a wildcard names no host
        ("0.0.0.0", ("devbox",), "DevBox:8787", True),
        ("127.0.0.1", (), "127.0.0.1:99999", False),  # not a port
        ("127.0.0.1", (), "user@127.0.0.1", False),
        ("127.0.0.1", (), None, False),
    ],
)
def test_the_host_allowlist(bind: str, extra: tuple[str, ...], header: str | None, allowed: bool) -> None:
    assert HostAllowlist(bind, extra).allows(header) is allowed


@pytest.mark.parametrize(
    "hosts",
    [("localhost", "evil.example"), ("127.0.0.1", "127.0.0.1"), ("evil.example", "localhost")],
    ids=["loopback-then-foreign", "the-same-twice", "foreign-then-loopback"],
)
def test_two_host_headers_are_a_400(dev: DevServer, hosts: tuple[str, str]) -> None:
    """Issue 24 §4. RFC 9112 §3.2: a request with more than one Host field line is answered
    400. Before: the first was read and the request served (200 with ``localhost`` first)."""
    head = "".join(f"Host: {h}\r\n" for h in hosts)
    raw = dev.raw(f"GET /_console HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
    status, _, body, _ = parse_response(raw)
    assert status == 400, (hosts, status, body[:200])
    assert b"4111-SECRET" not in body and b"Host" in body
