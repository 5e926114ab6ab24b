"""The special-purpose address table decides where an address leads, by itself: the verdicts
below are written out, so a Python release that changes `ipaddress`'s own tables cannot move
them, and the table is checked to be well formed."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.outbound.addresses import (
    SPECIAL_BLOCKS,
    Embedded,
    Reach,
    is_public,
    is_public_address,
    reach_of,
)

G, N, L, H = Reach.GLOBAL, Reach.NETWORK, Reach.LINK, Reach.HOST

# Each block's first and last address, and the addresses just outside it, IPv4 then IPv6.
BOUNDARIES: list[tuple[str, Reach]] = [
    ("0.0.0.0", H), ("0.255.255.255", H), ("1.0.0.0", G),  # noqa: S104 - an address under test
    ("9.255.255.255", G), ("10.0.0.0", N), ("10.255.255.255", N), ("11.0.0.0", G),
    ("100.63.255.255", G), ("100.64.0.0", N), ("100.127.255.255", N), ("100.128.0.0", G),
    ("126.255.255.255", G), ("127.0.0.0", H), ("127.0.0.1", H), ("127.255.255.255", H),
    ("128.0.0.0", G),
    ("169.253.255.255", G), ("169.254.0.0", L), ("169.254.169.254", L), ("169.254.170.2", L),
    ("169.254.255.255", L), ("169.255.0.0", G),
    ("172.15.255.255", G), ("172.16.0.0", N), ("172.31.255.255", N), ("172.32.0.0", G),
    ("191.255.255.255", G), ("192.0.0.0", N), ("192.0.0.7", N), ("192.0.0.8", N),
    ("192.0.0.9", G), ("192.0.0.10", G), ("192.0.0.11", N), ("192.0.0.170", N),
    ("192.0.0.171", N), ("192.0.0.255", N), ("192.0.1.0", G),
    ("192.0.2.0", N), ("192.0.2.255", N), ("192.0.3.0", G),
    ("192.31.195.255", G), ("192.31.196.0", G), ("192.52.193.0", G),
    ("192.88.98.255", G), ("192.88.99.0", N), ("192.88.99.1", N), ("192.88.99.2", N),
    ("192.88.99.255", N), ("192.88.100.0", G),
    ("192.167.255.255", G), ("192.168.0.0", N), ("192.168.255.255", N), ("192.169.0.0", G),
    ("192.175.48.0", G),
    ("198.17.255.255", G), ("198.18.0.0", N), ("198.19.255.255", N), ("198.20.0.0", G),
    ("198.51.99.255", G), ("198.51.100.0", N), ("198.51.100.255", N), ("198.51.101.0", G),
    ("203.0.112.255", G), ("203.0.113.0", N), ("203.0.113.255", N), ("203.0.114.0", G),
    ("223.255.255.255", G), ("224.0.0.0", N), ("239.255.255.255", N), ("240.0.0.0", N),
    ("255.255.255.254", N), ("255.255.255.255", L),
    ("::", H), ("::1", H), ("::2", H),  # ::0.0.0.2 carries 0.0.0.2: "this network"
    ("::ffff:0:0", H), ("::ffff:8.8.8.8", G), ("::ffff:10.0.0.1", N),
    ("::ffff:127.0.0.1", H), ("::ffff:169.254.169.254", L), ("::ffff:192.0.0.8", N),
    ("::8.8.8.8", G), ("::127.0.0.1", H), ("::169.254.169.254", L), ("::1:0:0", N),
    ("::ffff:0:0:0", N),  # IPv4-translatable (RFC 2765), not a special form
    ("64:ff9b::", H), ("64:ff9b::8.8.8.8", G), ("64:ff9b::127.0.0.1", H),
    ("64:ff9b::169.254.169.254", L), ("64:ff9b::10.0.0.1", N), ("64:ff9b::192.88.99.1", N),
    ("64:ff9b::1:0:0", N), ("64:ff9b:1::", N), ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", N),
    ("100::", N), ("100::ffff:ffff:ffff:ffff", N), ("100:0:0:1::", N),
    ("100:0:0:1:ffff:ffff:ffff:ffff", N), ("100:0:0:2::", N),
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", N), ("2000::", G),
    ("2001::", N), ("2001:0:ffff::1", N), ("2001:1::", N), ("2001:1::1", G), ("2001:1::2", G),
    ("2001:1::3", G), ("2001:1::4", N), ("2001:2::", N), ("2001:2:0:ffff::1", N),
    ("2001:2:1::", N), ("2001:3::", G), ("2001:3:ffff::1", G), ("2001:4:112::", G),
    ("2001:4:113::", N), ("2001:10::", N), ("2001:1f:ffff::1", N), ("2001:20::", G),
    ("2001:2f:ffff::1", G), ("2001:30::", G), ("2001:3f:ffff::1", G), ("2001:40::", N),
    ("2001:1ff:ffff::1", N), ("2001:200::", G),
    ("2001:db7:ffff::1", G), ("2001:db8::", N), ("2001:db8:ffff::1", N), ("2001:db9::", G),
    ("2002::", H), ("2002:808:808::1", G), ("2002:7f00:1::", H), ("2002:a9fe:a9fe::", L),
    ("2002:c0a8:101::1", N), ("2002:ffff:ffff::", L), ("2003::", G),
    ("2606:4700:4700::1111", G), ("2620:4f:8000::", G), ("2620:4f:7fff::1", G),
    ("3ffe::1", G), ("3ffe:ffff::1", G), ("3fff::", N), ("3fff::1", N),
    ("3fff:fff:ffff::1", N), ("3fff:1000::", G), ("3fff:ffff:ffff::1", G),
    ("4000::", N), ("5eff::1", N), ("5f00::", N), ("5f00:ffff::1", N), ("5f01::", N),
    ("fbff::1", N), ("fc00::", N), ("fdff:ffff::1", N), ("fe00::", N), ("fe7f::1", N),
    ("fe80::", L), ("fe80::1", L), ("febf:ffff::1", L), ("fec0::", N), ("feff::1", N),
    ("ff00::", N), ("ff02::1", N), ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", N),
]  # fmt: skip


def _refuse(_self: object) -> bool:
    raise AssertionError("ipaddress's own tables must not decide")


# What ipaddress itself says of an address: each made to fail if the table asked it.
IPADDRESS_TABLES = (
    "is_global",
    "is_private",
    "is_reserved",
    "is_loopback",
    "is_link_local",
    "is_multicast",
    "is_unspecified",
    "is_site_local",
    "ipv4_mapped",
    "sixtofour",
    "teredo",
)


@pytest.mark.parametrize(("address", "reach"), BOUNDARIES)
def test_boundary_addresses_lead_where_the_table_alone_says(
    address: str, reach: Reach, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for name in IPADDRESS_TABLES:
            if hasattr(version, name):
                monkeypatch.setattr(version, name, property(_refuse))
    ip = ipaddress.ip_address(address)
    assert reach_of(ip) is reach
    assert is_public(ip) is (reach is G)
    assert is_public_address(address) is (reach is G)


@pytest.mark.parametrize(
    "address",
    # Python 3.11.7's is_global calls each of these global; IANA does not.
    ["192.0.0.8", "192.0.0.170", "192.88.99.1", "192.88.99.2", "3fff::1", "3fff:fff::1"],
)
def test_what_this_interpreter_calls_global_the_table_may_not(address: str) -> None:
    assert not is_public_address(address)


def test_a_zone_id_does_not_change_where_an_address_leads() -> None:
    assert reach_of(ipaddress.ip_address("fe80::1%eth0")) is L
    assert reach_of(ipaddress.ip_address("2606:4700:4700::1111%eth0")) is G


@pytest.mark.parametrize("text", ["", "example.com", "127.1", "2130706433", "1.2.3.4/32", "[::1]"])
def test_anything_but_an_address_is_not_public(text: str) -> None:
    assert not is_public_address(text)


# -- the table itself --------------------------------------------------------------------------


def _networks() -> Iterator[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    for block in SPECIAL_BLOCKS:
        yield ipaddress.ip_network(block.prefix)  # strict: a prefix with host bits is refused


def test_every_row_is_a_block_named_with_its_source() -> None:
    networks = list(_networks())
    assert len(set(networks)) == len(networks), "a block listed twice"
    assert all(block.name and block.source.startswith("RFC ") for block in SPECIAL_BLOCKS)
    # Every address has a row: the whole of each version is one.
    assert ipaddress.ip_network("0.0.0.0/0") in networks
    assert ipaddress.ip_network("::/0") in networks


def test_only_ipv6_forms_carry_an_ipv4_address() -> None:
    carriers = {
        block.prefix: block.reach for block in SPECIAL_BLOCKS if isinstance(block.reach, Embedded)
    }
    assert carriers == {
        "::/96": Embedded.LAST_32_BITS,
        "::ffff:0:0/96": Embedded.LAST_32_BITS,
        "64:ff9b::/96": Embedded.LAST_32_BITS,
        "2002::/16": Embedded.SIX_TO_FOUR,
    }


@given(st.integers(0, 2**32 - 1))
def test_every_form_that_carries_an_ipv4_address_leads_where_it_does(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    expected = reach_of(v4)
    forms = [
        ipaddress.IPv6Address((0xFFFF << 32) | value),  # mapped
        ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | value),  # NAT64
        ipaddress.IPv6Address((0x2002 << 112) | (value << 80) | 1),  # 6to4
        # IPv4-compatible; :: and ::1 are rows of their own, both this host like 0.0.0.0/8.
        ipaddress.IPv6Address(value),
    ]
    assert [reach_of(form) for form in forms] == [expected] * len(forms)
