"""The resolve-and-pin guard: which outbound URLs jobstream may send a request to, and the
addresses to pin.

A URL passes when its scheme is allowed, it carries no credentials, and every address its host
resolves to leads where its origin allows (by default: public addresses only; where an address
leads is the IANA table's word, addresses.py). The addresses are returned so the request
connects to exactly those, never to a second DNS answer (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jobstream.outbound.addresses import PUBLIC_ONLY, Reach, ip_literal, reach_of
from jobstream.outbound.origins import OriginPattern, access_for
from jobstream.outbound.url import OutboundRefused, OutboundUrl, RefusalReason, parse_url

Resolver = Callable[[str, int], list[str]]


@dataclass(frozen=True, slots=True)
class PinnedTarget:
    """A checked outbound URL. `host` is unbracketed (for TLS SNI and the Host header), and
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


def check_at_admission(url: str, origins: Sequence[OriginPattern] | None) -> None:
    """Syntax, scheme, the origins and a literal IP address: no DNS lookup."""
    parsed = parse_url(url, allow_http=True)
    access = access_for(parsed, origins)
    literal = ip_literal(parsed.host)
    if literal is not None:
        check_reach(str(literal), access.reach, host=str(literal))


def check_at_delivery(
    url: str, origins: Sequence[OriginPattern] | None, resolver: Resolver = system_resolver
) -> PinnedTarget:
    """The admission checks under the origins as they are now, then resolve and pin."""
    parsed = parse_url(url, allow_http=True)
    return resolve_and_pin(parsed, access_for(parsed, origins).reach, resolver)


def resolve_and_pin(url: OutboundUrl, reach: frozenset[Reach], resolver: Resolver) -> PinnedTarget:
    """`url`'s addresses, each leading where `reach` allows: the only ones to connect to."""
    literal = ip_literal(url.host)
    if literal is not None:
        # An IP literal is its own (and only) address: no DNS query.
        addresses: tuple[str, ...] = (str(literal),)
    else:
        addresses = _resolve(url.host, url.port, resolver)
    for address in addresses:
        check_reach(address, reach, host=url.host)
    return PinnedTarget(
        url=url.text,
        scheme=url.scheme,
        host=url.host,
        port=url.port,
        path_and_query=url.path_and_query,
        addresses=addresses,
    )


def check_reach(address: str, reach: frozenset[Reach], *, host: str) -> None:
    """OutboundRefused(host_not_allowed) unless `address` (one of `host`'s) leads where `reach`
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
    raise OutboundRefused(RefusalReason.HOST_NOT_ALLOWED, message)


def _resolve(host: str, port: int, resolver: Resolver) -> tuple[str, ...]:
    try:
        answers = resolver(host, port)
    except (OSError, UnicodeError, ValueError) as error:
        raise OutboundRefused(
            RefusalReason.UNRESOLVABLE, f"{host} cannot be resolved: {error}"
        ) from None
    addresses: list[str] = []
    for answer in answers:
        try:
            addresses.append(str(ipaddress.ip_address(answer)))
        except ValueError:
            raise OutboundRefused(
                RefusalReason.UNRESOLVABLE, f"{host} resolved to {answer!r}, not an IP address"
            ) from None
    if not addresses:
        raise OutboundRefused(RefusalReason.UNRESOLVABLE, f"{host} has no address")
    return tuple(dict.fromkeys(addresses))
