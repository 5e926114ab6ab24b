"""Where an IP address leads, decided by one table: the IANA special-purpose address registries.

`SPECIAL_BLOCKS` is the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890, updated
by RFC 8190 and the RFC each row names), as revised in 2025-04 (RFC 9780's dummy IPv6 prefix),
row for row, plus what the IANA address-space registries say of the rest: IPv4 multicast (RFC
5771), and IPv6 outside global unicast 2000::/3 (reserved by the IETF, multicast, site-local: RFC
4291). A row's `reach` is IANA's "Globally Reachable" column (True: GLOBAL; False: NETWORK, LINK or
HOST, by what a connection reaches), or, for the IPv6 forms that carry an IPv4 address, the rule
that the carried address decides. The most specific row that holds an address decides.

Python's `ipaddress` only parses here: its `is_global` / `is_private` tables change between
releases (3.11.7 calls 192.0.0.8, 192.88.99.1 and 3fff::1 global), so they decide nothing.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Reach(StrEnum):
    """What a connection to an address reaches."""

    GLOBAL = "a public address"  # globally reachable (IANA)
    # Not globally reachable, beyond this host and its link: private use, shared, documentation,
    # benchmarking, reserved, multicast...
    NETWORK = "a private address"
    # This link only. On AWS: the instance metadata, credentials and Lambda's own endpoints.
    LINK = "a link-local address"
    # This host: loopback, "this network", unspecified. On AWS Lambda: its runtime API.
    HOST = "an address of this host"


# Where an outbound URL's addresses may lead: the default, and what an origin an operator vouched
# for may (outbound/origins.py).
PUBLIC_ONLY: Final = frozenset({Reach.GLOBAL})
ANY_ADDRESS: Final = frozenset(Reach)


class Embedded(Enum):
    """An IPv6 form that carries an IPv4 address: it reaches that address, which decides. The
    value is how far the IPv4 address sits from the low end."""

    LAST_32_BITS = 0  # IPv4-mapped, IPv4-compatible, the NAT64 well-known prefix
    SIX_TO_FOUR = 80  # 6to4: the 32 bits after 2002::/16 (RFC 3056)

    def carried(self, address: IPAddress) -> ipaddress.IPv4Address:
        return ipaddress.IPv4Address((int(address) >> self.value) & 0xFFFFFFFF)


@dataclass(frozen=True, slots=True)
class SpecialBlock:
    """One row: the block, IANA's name for it, the RFC, and where its addresses lead."""

    prefix: str
    name: str
    source: str
    reach: Reach | Embedded


_GLOBAL, _NETWORK, _LINK, _HOST = Reach.GLOBAL, Reach.NETWORK, Reach.LINK, Reach.HOST

# https://www.iana.org/assignments/iana-ipv4-special-registry and
# https://www.iana.org/assignments/iana-ipv6-special-registry (2025-04), in their order; the
# first row of each version says what an address no other row holds is.
SPECIAL_BLOCKS: Final[tuple[SpecialBlock, ...]] = (
    SpecialBlock("0.0.0.0/0", "IPv4 unicast (IANA IPv4 Address Space)", "RFC 791", _GLOBAL),
    SpecialBlock("0.0.0.0/8", '"This network"', "RFC 791", _HOST),
    SpecialBlock("0.0.0.0/32", '"This host on this network"', "RFC 1122", _HOST),
    SpecialBlock("10.0.0.0/8", "Private-Use", "RFC 1918", _NETWORK),
    SpecialBlock("100.64.0.0/10", "Shared Address Space", "RFC 6598", _NETWORK),
    SpecialBlock("127.0.0.0/8", "Loopback", "RFC 1122", _HOST),
    SpecialBlock("169.254.0.0/16", "Link Local", "RFC 3927", _LINK),
    SpecialBlock("172.16.0.0/12", "Private-Use", "RFC 1918", _NETWORK),
    SpecialBlock("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", _NETWORK),
    SpecialBlock("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", _NETWORK),
    SpecialBlock("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", _NETWORK),
    SpecialBlock("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", _GLOBAL),
    SpecialBlock("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", _GLOBAL),
    SpecialBlock("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880", _NETWORK),
    SpecialBlock("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880", _NETWORK),
    SpecialBlock("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", _NETWORK),
    SpecialBlock("192.31.196.0/24", "AS112-v4", "RFC 7535", _GLOBAL),
    SpecialBlock("192.52.193.0/24", "AMT", "RFC 7450", _GLOBAL),
    # Terminated in 2015: the registry leaves its columns empty; it is no destination.
    SpecialBlock("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", _NETWORK),
    SpecialBlock("192.88.99.2/32", "6a44-relay anycast address", "RFC 6751", _NETWORK),
    SpecialBlock("192.168.0.0/16", "Private-Use", "RFC 1918", _NETWORK),
    SpecialBlock("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", _GLOBAL),
    SpecialBlock("198.18.0.0/15", "Benchmarking", "RFC 2544", _NETWORK),
    SpecialBlock("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", _NETWORK),
    SpecialBlock("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", _NETWORK),
    SpecialBlock(
        "224.0.0.0/4", "Multicast (IANA IPv4 Multicast Address Space)", "RFC 5771", _NETWORK
    ),
    SpecialBlock("240.0.0.0/4", "Reserved", "RFC 1112", _NETWORK),
    # Never forwarded: it stays on the link.
    SpecialBlock("255.255.255.255/32", "Limited Broadcast", "RFC 8190", _LINK),
    SpecialBlock("::/0", "Reserved by the IETF (IANA IPv6 Address Space)", "RFC 4291", _NETWORK),
    SpecialBlock("2000::/3", "Global Unicast (IANA IPv6 Address Space)", "RFC 4291", _GLOBAL),
    SpecialBlock("::1/128", "Loopback Address", "RFC 4291", _HOST),
    SpecialBlock("::/128", "Unspecified Address", "RFC 4291", _HOST),
    # Deprecated (IANA IPv6 Address Space, note 1): still reaches its IPv4 address where routed.
    SpecialBlock("::/96", "IPv4-Compatible Address", "RFC 4291", Embedded.LAST_32_BITS),
    SpecialBlock("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", Embedded.LAST_32_BITS),
    SpecialBlock("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC 6052", Embedded.LAST_32_BITS),
    SpecialBlock("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC 8215", _NETWORK),
    SpecialBlock("100::/64", "Discard-Only Address Block", "RFC 6666", _NETWORK),
    SpecialBlock("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", _NETWORK),
    SpecialBlock("2001::/23", "IETF Protocol Assignments", "RFC 2928", _NETWORK),
    # Globally reachable "N/A": the IPv4 addresses it carries are obfuscated; never public here.
    SpecialBlock("2001::/32", "TEREDO", "RFC 4380", _NETWORK),
    SpecialBlock("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", _GLOBAL),
    SpecialBlock("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", _GLOBAL),
    SpecialBlock(
        "2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", _GLOBAL
    ),
    SpecialBlock("2001:2::/48", "Benchmarking", "RFC 5180", _NETWORK),
    SpecialBlock("2001:3::/32", "AMT", "RFC 7450", _GLOBAL),
    SpecialBlock("2001:4:112::/48", "AS112-v6", "RFC 7535", _GLOBAL),
    SpecialBlock("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", _NETWORK),
    SpecialBlock("2001:20::/28", "ORCHIDv2", "RFC 7343", _GLOBAL),
    SpecialBlock(
        "2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", _GLOBAL
    ),
    SpecialBlock("2001:db8::/32", "Documentation", "RFC 3849", _NETWORK),
    SpecialBlock("2002::/16", "6to4", "RFC 3056", Embedded.SIX_TO_FOUR),
    SpecialBlock("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", _GLOBAL),
    SpecialBlock("3fff::/20", "Documentation", "RFC 9637", _NETWORK),
    SpecialBlock("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", _NETWORK),
    SpecialBlock("fc00::/7", "Unique-Local", "RFC 4193", _NETWORK),
    SpecialBlock("fe80::/10", "Link-Local Unicast", "RFC 4291", _LINK),
    SpecialBlock("fec0::/10", "Site-Local (deprecated)", "RFC 3879", _NETWORK),
    SpecialBlock("ff00::/8", "Multicast", "RFC 4291", _NETWORK),
)


def _by_specificity() -> tuple[tuple[IPNetwork, SpecialBlock], ...]:
    """The rows as networks, most specific first: the first that holds an address decides."""
    rows = [(ipaddress.ip_network(block.prefix), block) for block in SPECIAL_BLOCKS]
    return tuple(sorted(rows, key=lambda row: -row[0].prefixlen))


_ROWS: Final = _by_specificity()


def block_of(address: IPAddress) -> SpecialBlock:
    """The most specific row holding `address` (a zone id, fe80::1%eth0, is ignored)."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        address = ipaddress.IPv6Address(int(address))
    return next(block for network, block in _ROWS if address in network)


def reach_of(address: IPAddress) -> Reach:
    """Where a connection to `address` leads; an embedded IPv4 address decides for its form."""
    reach = block_of(address).reach
    if isinstance(reach, Embedded):
        return reach_of(reach.carried(address))  # once: no IPv4 row embeds anything
    return reach


def is_public(address: IPAddress) -> bool:
    """True when `address` is globally reachable, by the table alone."""
    return reach_of(address) is Reach.GLOBAL


def is_public_address(address: str) -> bool:
    """True for a globally reachable address (the table); anything unparseable is not."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return is_public(ip)


# One part of an IPv4 address as the system resolver reads it (inet_aton, which getaddrinfo
# applies before any DNS query): hexadecimal after 0x, octal after a leading 0, else decimal.
_NUMBER: Final = re.compile(r"0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*", re.ASCII | re.IGNORECASE)


def ip_literal(host: str) -> IPAddress | None:
    """The address a host names literally, else None: IPv6, or IPv4 in any spelling the system
    resolver takes for an address (2852039166, 0xa9fea9fe, 0251.0376.0251.0376, 169.254.43518,
    127.1, 0), one trailing dot allowed. Admission and delivery both read hosts here: a host
    that is an address to the resolver is one at admission too."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return _numeric_ipv4(host.removesuffix("."))


def _numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """inet_aton's reading: one to four numbers, the last filling the bytes the others leave
    (a.b.c.d, a.b.c with c 16 bits, a.b with b 24 bits, a alone 32 bits)."""
    parts = host.split(".")
    if len(parts) > 4 or not all(_NUMBER.fullmatch(part) for part in parts):
        return None
    numbers = [_number(part) for part in parts]
    last_bits = 8 * (5 - len(numbers))
    if any(number > 0xFF for number in numbers[:-1]) or numbers[-1] >= 1 << last_bits:
        return None
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value |= number << (24 - 8 * index)
    return ipaddress.IPv4Address(value)


def _number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part, 16)  # Python reads the 0x prefix with base 16
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)
    return int(part)
