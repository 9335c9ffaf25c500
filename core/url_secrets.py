"""Secrets written in a URL's query string (``https://host/v1?api-key=...``, an MCP server's ``?token=...``).

Providers and servers accept credentials there as readily as in the user part, so whatever shows a URL (``bots
config``, the console's settings page, an error message) hides every query value with ``mask_query``, and the log
filter masks ``query_secrets`` wherever they appear. The password of the user part is the other helpers' business
(``core.models.retry.safe_url``, ``bots.config.safe_url``); they call ``mask_query`` too.
"""

from __future__ import annotations

import urllib.parse

__all__ = ("QUERY_MASK", "mask_query", "query_secrets")

QUERY_MASK = "********"
"""What a query value looks like once masked."""

_SECRET_WORDS = ("key", "token", "secret", "pass", "pwd", "auth", "sig", "credential", "session", "code")
"""A query parameter whose name holds one of these carries a secret, whatever its length."""
_OPAQUE_LENGTH = 16
"""A value this long under any other name is taken for a credential too (logs mask it); shorter ones (``v=2``,
``api-version=2024-06-01``) would turn common words of every log line into stars."""


def mask_query(url: str) -> str:
    """``url`` with the value of every query parameter replaced by ``********`` (names kept, so the reader still
    sees ``?api-key=********``); a URL without a query, or that does not parse, as it is."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if not parts.query:
        return url
    masked = "&".join(
        f"{name}={QUERY_MASK}" if sep else name
        for name, sep, _value in (item.partition("=") for item in parts.query.split("&"))
    )
    return urllib.parse.urlunsplit(parts._replace(query=masked))


def query_secrets(url: str) -> list[str]:
    """The query values of ``url`` that are secrets (a secret-sounding name, or an opaque value of 16 characters or
    more), as written and decoded, for a log filter to mask wherever they appear."""
    try:
        query = urllib.parse.urlsplit(url).query
    except ValueError:
        return []
    found: list[str] = []
    for item in query.split("&"):
        name, sep, raw = item.partition("=")
        if not sep or not raw:
            continue
        decoded = urllib.parse.unquote_plus(raw)
        lowered = urllib.parse.unquote_plus(name).lower()
        if any(word in lowered for word in _SECRET_WORDS) or len(decoded) >= _OPAQUE_LENGTH:
            found.extend({raw, decoded})
    return found
