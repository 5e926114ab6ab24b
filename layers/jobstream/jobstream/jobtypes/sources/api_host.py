"""A pixiv target's `api_host`: the exact origin of a proxy or mirror of Pixiv's app API (what
pixivpy3's `set_api_proxy` takes), checked like an exact asset origin (outbound/origins.py).

An operator names it, so it may be http and a private or loopback address (a local mirror, the
fake Pixiv of the tests); on AWS an IP literal never names this host or its link, as no exact
origin may reach them there.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from jobstream.outbound.addresses import ip_literal, reach_of
from jobstream.outbound.origins import OriginPattern, vouched_reach
from jobstream.outbound.url import DEFAULT_PORTS

# Pixiv's own API host: what pixivpy3 calls when no api_host is configured.
PIXIV_API_HOST: Final = "https://app-api.pixiv.net"


def parse_api_host(text: str) -> str:
    """`text` as the origin pixivpy3 is given: `scheme://host[:port]`, the host lower-case, the
    scheme's default port left out. ValueError says what is wrong with it."""
    _check_nothing_but_an_origin(text)
    try:
        origin = OriginPattern.parse(text)
    except ValueError as error:
        raise ValueError(f"api_host: {error}") from None
    if origin.wildcard_host or origin.port is None:
        raise ValueError(f"api_host {text!r} must name one host and one port, not a pattern")
    literal = ip_literal(origin.host)
    if literal is not None and reach_of(literal) not in vouched_reach():
        raise ValueError(f"api_host {text!r} is {reach_of(literal)}, never reached on AWS")
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    port = "" if origin.port == DEFAULT_PORTS[origin.scheme] else f":{origin.port}"
    return f"{origin.scheme}://{host}{port}"


def _check_nothing_but_an_origin(text: str) -> None:
    """What OriginPattern would call a bad host, named for what it is (a credential, a query)."""
    try:
        parts = urlsplit(text)
    except ValueError as error:
        raise ValueError(f"api_host {text!r} is not an origin: {error}") from None
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"api_host {text!r} is not an origin: expected scheme://host[:port]")
    if "@" in parts.netloc:
        raise ValueError(f"api_host {text!r} must not carry a user name or password")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise ValueError(f"api_host {text!r} must have no query or fragment")
    if parts.path not in {"", "/"}:
        raise ValueError(f"api_host {text!r} must have no path: scheme://host[:port]")
