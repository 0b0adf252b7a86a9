"""Credentials hidden from what is printed or written beside reports: URL user:password@ and query strings."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"


def hide_url_credentials(value: str) -> str:
    """VALUE with a URL's user:password@ and its query (presigned S3 URLs carry the signature there) as ***."""
    if "://" not in value:
        return value
    try:
        parts = urlsplit(value)
    except ValueError:  # not parseable as a URL (e.g. a bad IPv6 host): nothing to hide in it
        return value
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{HIDDEN}@{netloc.rsplit('@', 1)[1]}"
    query = HIDDEN if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
