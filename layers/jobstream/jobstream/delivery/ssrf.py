"""The SSRF guard: which callback URLs jobstream may POST to, and the addresses to pin.

A URL passes when its scheme is allowed, it carries no credentials, and every address its host
resolves to leads where its origin allows (by default: public addresses only; where an address
leads is the IANA table's word, special_addresses.py). The addresses are returned so the request
connects to exactly those, never to a second DNS answer (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from jobstream.callback_url import (
    CallbackRefused,
    RefusalReason,
    ip_literal,
    is_public_address,
    parse_callback_url,
)
from jobstream.special_addresses import Reach, reach_of

# The refusal and the syntax check are the guard's too: callers name them through it.
__all__ = [
    "ANY_ADDRESS",
    "PUBLIC_ONLY",
    "CallbackRefused",
    "CallbackTarget",
    "RefusalReason",
    "Resolver",
    "check_callback_url",
    "is_public_address",
    "parse_callback_url",
    "system_resolver",
]

Resolver = Callable[[str, int], list[str]]

# Where a URL's addresses may lead: the default, and what an origin an operator vouched for may.
PUBLIC_ONLY: Final = frozenset({Reach.GLOBAL})
ANY_ADDRESS: Final = frozenset(Reach)


@dataclass(frozen=True, slots=True)
class CallbackTarget:
    """A checked callback URL. `host` is unbracketed (for TLS SNI and the Host header), and
    `addresses` are the checked IPs, in resolver order, to connect to."""

    url: str
    scheme: str
    host: str
    port: int
    path_and_query: str
    addresses: tuple[str, ...]


def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from getaddrinfo: unique, in the order the system gave them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def check_callback_url(
    url: str,
    *,
    allow_http: bool,
    reach: frozenset[Reach] = PUBLIC_ONLY,
    resolver: Resolver = system_resolver,
) -> CallbackTarget:
    """Check `url` and resolve its host; every address must lead where `reach` allows."""
    parts = parse_callback_url(url, allow_http=allow_http)
    literal = ip_literal(parts.host)
    if literal is not None:
        # An IP literal is its own (and only) address: no DNS query.
        addresses: tuple[str, ...] = (str(literal),)
    else:
        addresses = _resolve(parts.host, parts.port, resolver)
    for address in addresses:
        check_reach(address, reach, host=parts.host)
    return CallbackTarget(
        url=url,
        scheme=parts.scheme,
        host=parts.host,
        port=parts.port,
        path_and_query=parts.path_and_query,
        addresses=addresses,
    )


def check_reach(address: str, reach: frozenset[Reach], *, host: str) -> None:
    """CallbackRefused(host_not_allowed) unless `address` (one of `host`'s) leads where `reach`
    allows."""
    leads = reach_of(ipaddress.ip_address(address))
    if leads in reach:
        return
    names = host if host == address else f"{host} resolves to {address}, which"
    if reach == PUBLIC_ONLY:
        message = f"{names} is not a public address"
    else:
        # Only on AWS: this host and its link are Lambda's own, whatever the origin says.
        message = f"{names} is {leads}, never reached from AWS, even for a listed origin"
    raise CallbackRefused(RefusalReason.HOST_NOT_ALLOWED, message)


def _resolve(host: str, port: int, resolver: Resolver) -> tuple[str, ...]:
    try:
        answers = resolver(host, port)
    except (OSError, UnicodeError, ValueError) as error:
        raise CallbackRefused(
            RefusalReason.UNRESOLVABLE, f"{host} cannot be resolved: {error}"
        ) from None
    addresses: list[str] = []
    for answer in answers:
        try:
            addresses.append(str(ipaddress.ip_address(answer)))
        except ValueError:
            raise CallbackRefused(
                RefusalReason.UNRESOLVABLE, f"{host} resolved to {answer!r}, not an IP address"
            ) from None
    if not addresses:
        raise CallbackRefused(RefusalReason.UNRESOLVABLE, f"{host} has no address")
    return tuple(dict.fromkeys(addresses))
