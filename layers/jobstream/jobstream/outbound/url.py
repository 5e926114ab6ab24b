"""An outbound URL (a callback's, an asset's), parsed once and checked without DNS: its syntax
(scheme, credentials, host, port). Pure: the guard (guard.py) adds the resolution and the
pinning, the origin patterns (origins.py) match the value parsed here.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final
from urllib.parse import SplitResult, urlsplit

from jobstream.errors import JobstreamError

DEFAULT_PORTS: Final[dict[str, int]] = {"https": 443, "http": 80}

# A DNS name: dot-separated labels of letters, digits, '-' and '_', optional trailing dot.
_LABEL: Final = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
HOSTNAME: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?", re.ASCII)
_MAX_HOSTNAME: Final = 253
# Printable ASCII only: urlsplit silently drops tabs and newlines, and a space or control
# character would reach the request line.
_URL_CHARS: Final = re.compile(r"[\x21-\x7e]+", re.ASCII)


class RefusalReason(StrEnum):
    SCHEME_NOT_ALLOWED = "scheme_not_allowed"
    USERINFO_NOT_ALLOWED = "userinfo_not_allowed"
    INVALID_URL = "invalid_url"
    HOST_NOT_ALLOWED = "host_not_allowed"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    UNRESOLVABLE = "unresolvable"


class OutboundRefused(JobstreamError):  # noqa: N818 - a refusal, not an error in our code
    """A URL jobstream will not send a request to; `reason` is a short machine word."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class OutboundUrl:
    """A URL that passed the syntax checks, as `text` spells it; `host` is unbracketed and
    lower-case. Parsed once: the origins, the guard and the request all read this value."""

    text: str
    scheme: str
    host: str
    port: int
    path_and_query: str

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_url(url: str, *, allow_http: bool) -> OutboundUrl:
    """Scheme, credentials, host and port checked; OutboundRefused says what is wrong."""
    if not _URL_CHARS.fullmatch(url):
        raise OutboundRefused(
            RefusalReason.INVALID_URL, "the URL must be non-empty printable ASCII with no spaces"
        )
    try:
        split = urlsplit(url)
    except ValueError as error:
        raise OutboundRefused(
            RefusalReason.INVALID_URL, f"the URL cannot be parsed: {error}"
        ) from None
    allowed = ("https", "http") if allow_http else ("https",)
    if split.scheme not in allowed:
        raise OutboundRefused(
            RefusalReason.SCHEME_NOT_ALLOWED,
            f"the scheme must be {' or '.join(allowed)}, not {split.scheme or 'missing'!r}",
        )
    if "@" in split.netloc:
        raise OutboundRefused(
            RefusalReason.USERINFO_NOT_ALLOWED, "the URL must not carry user:password@"
        )
    host = _host(split)
    port = _port(split)
    path_and_query = (split.path or "/") + (f"?{split.query}" if split.query else "")
    return OutboundUrl(url, split.scheme, host, port, path_and_query)


def _host(split: SplitResult) -> str:
    host = split.hostname or ""
    if not host:
        raise OutboundRefused(RefusalReason.INVALID_URL, "the URL has no host")
    if split.netloc.startswith("["):
        # Bracketed: must be a plain IPv6 address (no zone id, which only names a local link).
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise OutboundRefused(
                RefusalReason.INVALID_URL, f"{host!r} is not an IPv6 address"
            ) from None
        if "%" in host:
            raise OutboundRefused(RefusalReason.INVALID_URL, "an IPv6 zone id is not allowed")
        return host
    if len(host) > _MAX_HOSTNAME or not HOSTNAME.fullmatch(host):
        raise OutboundRefused(RefusalReason.INVALID_URL, f"{host!r} is not a valid host name")
    return host


def _port(split: SplitResult) -> int:
    try:
        port = split.port
    except ValueError:
        raise OutboundRefused(RefusalReason.INVALID_URL, "the port is not valid") from None
    if port is None:
        return DEFAULT_PORTS[split.scheme]
    if port == 0:
        raise OutboundRefused(RefusalReason.INVALID_URL, "port 0 is not valid")
    return port
