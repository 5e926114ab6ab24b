"""Origin patterns (the origins a tenant's callbacks, or a source's downloads, may use, as the
registry and the settings spell them), and what they let an outbound URL reach.

An origin pattern is `scheme://host[:port]`: the scheme is `https` or `http`, the host is a name,
an IP address or `*.<domain>` (any name under the domain, not the domain itself), and the port a
number or `*` (absent: the scheme's default).

Without a list, a URL may use any https origin whose addresses are public. With a list, only the
origins it names; a listed origin with an exact host may also be http and reach non-public
addresses (an operator vouched for that host), a wildcard host stays public-only. On AWS no
origin reaches this host (loopback: Lambda's runtime API) or its link (169.254.0.0/16,
fe80::/10: the platform's endpoints); the local stack and the tests may. Nothing here resolves a
name: the guard (guard.py) checks without DNS at admission, resolves and pins before a request.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from jobstream.collector import LAMBDA_FUNCTION_VARIABLE
from jobstream.config.environment import environment
from jobstream.outbound.addresses import ANY_ADDRESS, PUBLIC_ONLY, Reach, ip_literal
from jobstream.outbound.url import (
    DEFAULT_PORTS,
    HOSTNAME,
    OutboundRefused,
    OutboundUrl,
    RefusalReason,
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

    def matches(self, url: OutboundUrl) -> bool:
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


# What an exact origin reaches on AWS: anything but this host and its link.
BEYOND_THIS_HOST: Final = ANY_ADDRESS - {Reach.HOST, Reach.LINK}


@dataclass(frozen=True, slots=True)
class Access:
    """What an outbound URL may do under a list of origins: its scheme, and where its
    addresses may lead."""

    allow_http: bool
    reach: frozenset[Reach]


def access_for(url: OutboundUrl, origins: Sequence[OriginPattern] | None) -> Access:
    """The access `origins` grant `url`; OutboundRefused when they grant none."""
    if origins is None:
        if url.scheme != "https":
            raise OutboundRefused(
                RefusalReason.SCHEME_NOT_ALLOWED, f"the scheme must be https, not {url.scheme!r}"
            )
        return Access(allow_http=False, reach=PUBLIC_ONLY)
    matched = [pattern for pattern in origins if pattern.matches(url)]
    if not matched:
        raise OutboundRefused(
            RefusalReason.ORIGIN_NOT_ALLOWED,
            f"{url.scheme}://{url.netloc} is not one of the callback origins allowed for this "
            "consumer",
        )
    vouched = any(not pattern.wildcard_host for pattern in matched)
    return Access(
        allow_http=url.scheme == "http", reach=vouched_reach() if vouched else PUBLIC_ONLY
    )


def vouched_reach() -> frozenset[Reach]:
    """Where an origin with an exact host may lead: anywhere, except this host and its link on
    AWS (read each time: the environment says where this process runs)."""
    return BEYOND_THIS_HOST if runs_on_aws() else ANY_ADDRESS


def runs_on_aws(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a Lambda function. There this host's loopback serves Lambda's
    runtime API (127.0.0.1:9001) and its link the platform's own endpoints (169.254.0.0/16):
    outbound requests never reach them, whatever origin an operator lists."""
    env = environment() if environ is None else environ
    return bool((env.get(LAMBDA_FUNCTION_VARIABLE) or "").strip())


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
