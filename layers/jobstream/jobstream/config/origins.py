"""The callback origins a tenant may use, as the registry and the settings spell them.

An origin pattern is `scheme://host[:port]`: the scheme is `https` or `http`, the host is a name,
an IP address or `*.<domain>` (any name under the domain, not the domain itself), and the port a
number or `*` (absent: the scheme's default). What an origin lets a callback reach is decided at
admission and at delivery (delivery/origins.py).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from jobstream.callback_url import DEFAULT_PORTS, HOSTNAME, ParsedUrl, ip_literal

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
