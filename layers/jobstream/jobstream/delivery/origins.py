"""The callback origins a tenant may use, and what each lets a callback reach.

An origin pattern is `scheme://host[:port]`: the scheme is `https` or `http`, the host is a name,
an IP address or `*.<domain>` (any name under the domain, not the domain itself), and the port a
number or `*` (absent: the scheme's default). A tenant without a list may use any https origin
whose addresses are public. A tenant with a list may use only the origins it names; a listed
origin with an exact host may also be http and reach private addresses (an operator vouched for
that host), a wildcard host stays public-only. Nothing here resolves a name: admission checks
without DNS, delivery resolves and pins (ssrf.check_callback_url).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from jobstream.delivery.ssrf import (
    DEFAULT_PORTS,
    HOSTNAME,
    CallbackRefused,
    CallbackTarget,
    ParsedUrl,
    RefusalReason,
    Resolver,
    check_callback_url,
    ip_literal,
    is_public_address,
    parse_callback_url,
    system_resolver,
)

ANY_PORT: Final = "*"
_WILDCARD: Final = "*."
_PATTERN: Final = re.compile(
    r"(?P<scheme>[A-Za-z]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+)(?::(?P<port>\*|\d{1,5}))?/?",
    re.ASCII,
)


@dataclass(frozen=True, slots=True)
class OriginPattern:
    """One allowed origin; `host` is lower-case without a trailing dot (IPs normalised)."""

    scheme: str
    host: str
    port: int | None  # None: any port

    @classmethod
    def parse(cls, text: str) -> OriginPattern:
        """The pattern `text` spells; ValueError says what is wrong with it."""
        match = _PATTERN.fullmatch(text.strip())
        if match is None:
            raise ValueError(
                f"{text!r} is not an origin: expected scheme://host[:port] with no path"
            )
        scheme = match["scheme"].lower()
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"{text!r}: the scheme must be https or http")
        host = _pattern_host(match["host"], text)
        port_text = match["port"]
        if port_text == ANY_PORT:
            port = None
        elif port_text is None:
            port = DEFAULT_PORTS[scheme]
        else:
            port = int(port_text)
            if not 1 <= port <= 65535:
                raise ValueError(f"{text!r}: the port must be 1-65535 or *")
        return cls(scheme, host, port)

    @property
    def wildcard_host(self) -> bool:
        return self.host.startswith(_WILDCARD)

    def matches(self, url: ParsedUrl) -> bool:
        if url.scheme != self.scheme or (self.port is not None and url.port != self.port):
            return False
        host = _normal_host(url.host)
        if self.wildcard_host:
            return ip_literal(host) is None and host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = ANY_PORT if self.port is None else str(self.port)
        return f"{self.scheme}://{host}:{port}"


def parse_origins(texts: Sequence[str]) -> tuple[OriginPattern, ...]:
    return tuple(OriginPattern.parse(text) for text in texts)


@dataclass(frozen=True, slots=True)
class Access:
    """What a callback URL may do under a tenant's origins."""

    allow_http: bool
    allow_private: bool


def access_for(url: ParsedUrl, origins: Sequence[OriginPattern] | None) -> Access:
    """The access `origins` grant `url`; CallbackRefused when they grant none."""
    if origins is None:
        if url.scheme != "https":
            raise CallbackRefused(
                RefusalReason.SCHEME_NOT_ALLOWED, f"the scheme must be https, not {url.scheme!r}"
            )
        return Access(allow_http=False, allow_private=False)
    matched = [pattern for pattern in origins if pattern.matches(url)]
    if not matched:
        raise CallbackRefused(
            RefusalReason.ORIGIN_NOT_ALLOWED,
            f"{url.scheme}://{url.netloc} is not one of the callback origins allowed for this "
            "consumer",
        )
    return Access(
        allow_http=url.scheme == "http",
        allow_private=any(not pattern.wildcard_host for pattern in matched),
    )


def check_at_admission(url: str, origins: Sequence[OriginPattern] | None) -> None:
    """Syntax, scheme, the tenant's origins and a literal IP address: no DNS lookup."""
    parsed = parse_callback_url(url, allow_http=True)
    access = access_for(parsed, origins)
    literal = ip_literal(parsed.host)
    if literal is not None and not access.allow_private and not is_public_address(str(literal)):
        raise CallbackRefused(RefusalReason.HOST_NOT_ALLOWED, f"{literal} is not a public address")


def check_at_delivery(
    url: str, origins: Sequence[OriginPattern] | None, resolver: Resolver = system_resolver
) -> CallbackTarget:
    """The admission checks under the origins as they are now, then resolve and pin."""
    access = access_for(parse_callback_url(url, allow_http=True), origins)
    return check_callback_url(
        url, allow_http=access.allow_http, allow_private=access.allow_private, resolver=resolver
    )


def _pattern_host(text: str, pattern: str) -> str:
    if text.startswith("["):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            raise ValueError(f"{pattern!r}: {text} is not an IPv6 address") from None
    host = _normal_host(text)
    literal = ip_literal(host)
    if literal is not None:
        if literal.version == 6:
            raise ValueError(f"{pattern!r}: an IPv6 address must be in brackets")
        return str(literal)
    name = host.removeprefix(_WILDCARD)
    if not HOSTNAME.fullmatch(name) or name.endswith(".") or "*" in name:
        raise ValueError(f"{pattern!r}: the host must be a name, an IP address or *.<domain>")
    return host


def _normal_host(host: str) -> str:
    """Lower-case, one trailing dot dropped, IP literals in their canonical form."""
    host = host.lower().removesuffix(".")
    literal = ip_literal(host)
    return str(literal) if literal is not None else host
