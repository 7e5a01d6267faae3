"""The strict edges of ``lunaflow dev``'s HTTP: which ``Host`` names it serves, how a request
body is framed, and which console requests may change state.

A developer's browser can be made to talk to the dev server by any page it opens: by DNS
rebinding (a page's own name resolving to 127.0.0.1, so the browser sends ``Host:
evil.example``) or by a cross-site form POST. So the server answers only loopback names and
the names it was told to serve, and a console action needs the per-process token from a
page it served, sent from its own origin. Bodies are framed as RFC 9112 says, with no
leniency a proxy and this server could read differently: ``Content-Length`` is ASCII
digits, ``Transfer-Encoding: chunked`` is decoded, anything else is refused and the
connection closed. Field lines are held to RFC 9110 §5 and RFC 9112 §5: a name is a token
with its colon right after it, only spaces and tabs surround a value and no other control
character is in it, and ``Host`` comes once; anything else is a 400, because a lenient
reading (Python's ``.strip()`` takes ``\x0bchunked`` for ``chunked``) is where a proxy and
this server would see two different requests.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import Message
from io import BufferedIOBase

LOOPBACK_NAMES = ("localhost",)
MAX_CHUNK_LINE = 4096  # a chunk-size line with its extensions
MAX_TRAILERS = 64

_DIGITS = re.compile(r"[0-9]{1,18}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,15}")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CTLs but HTAB (RFC 9110 §5.5)
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.\-_]+))(?::(?P<port>[0-9]{1,5}))?")


@dataclass(frozen=True)
class Refusal(Exception):
    """A request the server answers with ``status`` and closes the connection after;
    ``drain`` bytes of body are still to be read and dropped first (so a client that
    writes its whole request before reading gets the answer, not a reset)."""

    status: int
    message: str
    drain: int = 0


# --- field lines ----------------------------------------------------------------------------


def check_fields(headers: Message) -> None:
    """Raise ``Refusal`` (400) unless every field line is well formed and ``Host`` appears
    exactly once or not at all (a missing one is the Host check's to refuse)."""
    if headers.defects or headers.get_payload():
        # Python's parser stops at the first line that is not ``name: value`` and keeps
        # the rest as a "body": those lines (a Host among them) would go unread.
        raise Refusal(
            400,
            "a header line is malformed (a field name is a token followed by ':' with no space "
            "before it, RFC 9112 §5.1); send each header as Name: value",
        )
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise Refusal(400, f"header name {name[:40]!r} is not a token (RFC 9110 §5.1); fix the header")
        if _BAD_VALUE.search(value):
            raise Refusal(
                400,
                f"header {name[:40]} has a control character in its value {value[:60]!r}; only spaces "
                "and tabs may surround a value and none other may be in it (RFC 9110 §5.5)",
            )
    hosts = headers.get_all("host") or []
    if len(hosts) > 1:
        raise Refusal(
            400,
            f"the request has {len(hosts)} Host headers; a request names its host once (RFC 9112 §3.2) "
            "— send one Host header",
        )


# --- Host -----------------------------------------------------------------------------------


def host_name(header: str | None) -> str | None:
    """The name (or address) in a ``Host`` header, lower-cased, without the port; None
    when the header is missing or malformed."""
    if header is None:
        return None
    m = _HOST.fullmatch(header.strip(" \t"))
    if m is None or (m.group("port") is not None and int(m.group("port")) > 65535):
        return None
    return (m.group("v6") or m.group("name") or "").lower() or None


def is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):  # RFC 6761: never leaves the machine
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostAllowlist:
    """Loopback names, plus the ``--host`` the server was bound to (unless a wildcard)
    and the names given with ``--allow-host``."""

    def __init__(self, bind_host: str, extra: Iterable[str] = ()) -> None:
        names = {n.strip().lower() for n in extra if n.strip()}
        bound = bind_host.strip().strip("[]").lower()
        if bound and bound not in ("0.0.0.0", "::"):
            names.add(bound)
        self.names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        name = host_name(header)
        return name is not None and (is_loopback(name) or name in self.names)

    def refusal(self, header: str | None) -> Refusal:
        shown = (header or "").strip()[:100] or "(none)"
        return Refusal(
            421,
            f"lunaflow dev serves loopback names (localhost, 127.0.0.1, [::1]) and the names given "
            f"with --host or --allow-host; this request named host {shown!r} (a page reaching the "
            "server through DNS rebinding looks like this). To serve that name, start lunaflow dev "
            "with --allow-host NAME",
        )


# --- bodies ----------------------------------------------------------------------------------


def read_body(rfile: BufferedIOBase, headers: Message, limit: int, drain_limit: int) -> bytes:
    """The request's body, framed by ``Transfer-Encoding: chunked`` or ``Content-Length``.
    Raises ``Refusal`` (400, 413, 501) for anything else, after which the connection must
    be closed: its remaining bytes cannot be trusted to start a request. A body over
    ``limit`` is read and dropped up to ``drain_limit`` before the 413."""
    encodings = headers.get_all("transfer-encoding") or []
    lengths = headers.get_all("content-length") or []
    if encodings:
        if lengths:
            raise Refusal(400, "a request cannot carry both Transfer-Encoding and Content-Length")
        coding = ",".join(encodings).strip(" \t").lower()
        if coding != "chunked":
            raise Refusal(
                501, f"Transfer-Encoding {coding!r} is not supported; send chunked or a Content-Length"
            )
        return _read_chunked(rfile, limit, drain_limit)
    if not lengths:
        return b""
    values = {v.strip(" \t") for v in lengths}
    if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
        raise Refusal(
            400, f"bad Content-Length header {', '.join(lengths)!r}: it must be one number of ASCII digits"
        )
    length = int(next(iter(values)))
    if length > limit:
        raise Refusal(
            413,
            f"request body of {length} bytes is over the limit of {limit} bytes",
            min(length, drain_limit),
        )
    return rfile.read(length) if length else b""


def _read_chunked(rfile: BufferedIOBase, limit: int, drain_limit: int) -> bytes:
    body = bytearray()
    total = 0
    while True:
        line = rfile.readline(MAX_CHUNK_LINE + 1)
        if len(line) > MAX_CHUNK_LINE or not line.endswith(b"\r\n"):
            raise Refusal(400, "a chunk-size line is missing, too long or not ended by CRLF")
        size_text = line[:-2].split(b";", 1)[0].strip(b" \t").decode("latin-1")
        if not _HEX.fullmatch(size_text):
            raise Refusal(400, f"bad chunk size {size_text[:20]!r}: it must be hexadecimal digits")
        size = int(size_text, 16)
        if size == 0:
            break
        total += size
        if total > drain_limit:
            raise Refusal(413, f"request body is over the limit of {limit} bytes")
        data = _read_exactly(rfile, size, keep=total <= limit)
        if data is None or rfile.read(2) != b"\r\n":
            raise Refusal(400, "a chunk is shorter than its size or not followed by CRLF")
        body += data
    for _ in range(MAX_TRAILERS):
        trailer = rfile.readline(MAX_CHUNK_LINE + 1)
        if trailer == b"\r\n":
            if total > limit:
                raise Refusal(413, f"request body of {total} bytes is over the limit of {limit} bytes")
            return bytes(body)
        if len(trailer) > MAX_CHUNK_LINE or not trailer.endswith(b"\r\n"):
            break
    raise Refusal(400, "the chunked body's trailer section is malformed or too long")


def _read_exactly(rfile: BufferedIOBase, size: int, *, keep: bool) -> bytes | None:
    """``size`` bytes (kept, or read and dropped: b""), or None if the stream ends first."""
    parts = []
    left = size
    while left > 0:
        piece = rfile.read(min(left, 1 << 16))
        if not piece:
            return None
        if keep:
            parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


# --- console actions ---------------------------------------------------------------------------


def cross_site(headers: Message, host: str | None) -> str | None:
    """Why a state-changing console request looks cross-site, or None. A browser sends
    ``Origin`` on every POST and ``Sec-Fetch-Site`` on every request; tools such as curl
    send neither, and are held to the token alone."""
    site = (headers.get("sec-fetch-site") or "").strip().lower()
    if site and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site is {site!r}"
    origin = headers.get("origin")
    if origin is not None and origin.strip().lower() != f"http://{(host or '').strip().lower()}":
        return f"Origin {origin.strip()[:100]!r} is not this console's"
    return None
