"""What every page served by the bot checks, written once for the web chat and the operator console.

- ``security_headers``: a strict Content-Security-Policy (scripts, styles, images and audio from the bot only, no inline
  script), no framing, no MIME sniffing, no referrer to other sites, and no caching of pages.
- ``local_only``: when a server is bound to a loopback address, a request is answered only if it comes from
  loopback, names a loopback host (a DNS-rebinding page names its own) and was not forwarded for another machine
  (``X-Forwarded-For``, ``Forwarded``). Anything else gets the same short 403.
- ``well_formed``: a request the server cannot read (its cookie holds a byte that is not ASCII, its body names a
  charset Python does not know, or is not valid in its charset, or its JSON is nested past the parser's depth) gets
  a short 400 saying what is wrong, never a 500 with a traceback in the log.
"""

from __future__ import annotations

import codecs
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

__all__ = (
    "CSP",
    "bad_request",
    "is_loopback",
    "local_only",
    "refused",
    "request_is_local",
    "security_headers",
    "visitor_address",
    "well_formed",
)

log = logging.getLogger("extensions.web")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every page."""

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str | None) -> bool:
    """True for a loopback address or name (``127.0.0.1``, ``::1``, ``localhost``)."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name of a ``Host`` header, without its port (``[::1]:80`` -> ``::1``); ``""`` when the header is not a
    name with at most a port of ASCII digits (``127.0.0.1:80@evil`` names no host of ours)."""
    header = header.strip()
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket:
            return ""
    elif header.count(":") == 1:
        name, _, port = header.partition(":")
        rest = ":" + port
    else:  # no port, or a bare IPv6 address
        name, rest = header, ""
    port = rest.removeprefix(":")
    if rest and (rest == port or not (port.isascii() and port.isdigit())):
        return ""
    return name


def request_is_local(request: web.Request) -> bool:
    """True when ``request`` came from this machine, for this machine, and was not forwarded."""
    if not is_loopback(request.remote):
        return False
    if not is_loopback(_host_name(request.headers.get("Host", ""))):
        return False
    forwarded = request.headers.get("X-Forwarded-For", "")
    if any(not is_loopback(part) for part in forwarded.split(",") if part.strip()):
        return False
    return "Forwarded" not in request.headers


def refused(status: int = 403) -> web.Response:
    """The one answer to a request refused for who or where it came from (nothing says which check failed)."""
    return web.Response(status=status, text="Forbidden" if status == 403 else "Not allowed", content_type="text/plain")


def local_only(bound_host: str, proxies: Networks = ()) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware answering only local requests when ``bound_host`` is a loopback address (else nothing), and
    those a trusted proxy on this machine forwards (``proxies``, ``WEB_TRUSTED_PROXIES``: the operator serves the
    page through it)."""
    enforce = is_loopback(bound_host)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if enforce and not request_is_local(request):
            peer = _parsed(request.remote or "")
            if peer is None or not peer.is_loopback or not _within(peer, proxies):
                return refused()
        return await handler(request)

    return middleware


def bad_request(reason: str) -> web.Response:
    """The answer to a request that cannot be read: 400 and what is wrong with it, in one line."""
    return web.Response(status=400, text=f"Bad request: {reason}", content_type="text/plain")


def well_formed(*cookies: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware answering 400 to a request it cannot read: one of ``cookies`` (the server's own; other sites'
    cookies on the same host are never read) with a byte that is not ASCII, a body in a charset Python does not know;
    and, from the handler, a body that is not valid in its charset or JSON nested too deep to parse."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        problem = _unreadable(request, cookies)
        if problem is not None:
            log.info("%s %s refused with 400: %s", request.method, request.path, problem)
            return bad_request(problem)
        try:
            return await handler(request)
        except (UnicodeDecodeError, RecursionError) as exc:  # raised reading the body (text, form or JSON)
            problem = "the body is too deeply nested" if isinstance(exc, RecursionError) else "the body is not text"
            log.info("%s %s refused with 400: %s", request.method, request.path, problem)
            return bad_request(problem)

    return middleware


def _unreadable(request: web.Request, cookies: Sequence[str]) -> str | None:
    for name in cookies:
        value = request.cookies.get(name)
        if value is not None and not value.isascii():  # (a non-UTF-8 byte arrives as a lone surrogate)
            return f"the {name} cookie is malformed"
    charset = request.charset
    if charset and request.body_exists:
        try:
            codecs.lookup(charset)
        except LookupError:
            return "the body's charset is unknown"
    return None


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Adds the headers every answer carries."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = exc
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")  # (no-referrer would make form posts say Origin: null)
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    if not request.path.startswith("/static/"):
        headers.setdefault("Cache-Control", "no-store")
    if isinstance(response, web.HTTPException):
        raise response
    return response


Networks = Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def visitor_address(request: web.Request, trusted: Networks) -> str | None:
    """Who sent ``request``, as a key to count by: the peer's address, or, when the peer is one of the ``trusted``
    proxies, the nearest address in ``X-Forwarded-For`` that is not one (a client may write anything there: only
    what the proxies appended counts). An IPv6 address stands for its /64 (one subscriber's prefix), an IPv4
    address mapped into IPv6 for itself, a port is dropped. None when it is not known: a peer that is not a public
    address (a balancer, an Ingress, a proxy on this machine, every visitor sharing its address) and is not a
    trusted proxy naming the visitor."""
    hops = [hop.strip() for hop in ",".join(request.headers.getall("X-Forwarded-For", [])).split(",") if hop.strip()]
    address = _parsed(request.remote or "")
    forwarded = False
    while address is not None and hops and _within(address, trusted):
        address, forwarded = _parsed(hops.pop()), True
    if address is None or _within(address, trusted) or not (forwarded or address.is_global):
        return None
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _parsed(text: str) -> Address | None:
    """The address in ``text`` (``[::1]:80``, ``1.2.3.4:5678``, ``::ffff:1.2.3.4``), None when there is none."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        found = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    mapped = found.ipv4_mapped if isinstance(found, ipaddress.IPv6Address) else None
    return mapped if mapped is not None else found


def _within(address: Address, networks: Networks) -> bool:
    return any(address in network for network in networks)
