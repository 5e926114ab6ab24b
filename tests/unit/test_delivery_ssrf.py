"""The SSRF guard: schemes, credentials, hosts, ports, and every resolved address public."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.deadline import ANSWER_MARGIN_MS, Deadline, invocation
from jobstream.delivery.classify import Outcome, classify_exception
from jobstream.outbound.addresses import (
    ANY_ADDRESS,
    PUBLIC_ONLY,
    Reach,
    ip_literal,
    is_public_address,
)
from jobstream.outbound.guard import (
    LOOKUP_TIMEOUT_MS,
    DnsUnavailableError,
    Resolver,
    check_at_admission,
    check_at_delivery,
    system_resolver,
)
from jobstream.outbound.guard import PinnedTarget as CallbackTarget
from jobstream.outbound.url import OutboundRefused as CallbackRefused
from jobstream.outbound.url import parse_url as parse_callback_url
from tests.support.outbound import check_url as check_callback_url

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


class FakeResolver:
    """Answers from a table (unknown names get a public address) and records every query."""

    def __init__(self, answers: Mapping[str, list[str]] | None = None) -> None:
        self.answers = dict(answers or {})
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers.get(host, [PUBLIC_V4])


def exploding_resolver(host: str, port: int) -> list[str]:
    raise AssertionError(f"DNS must not be queried (asked for {host}:{port})")


def refusal(
    url: str,
    *,
    allow_http: bool = False,
    resolver: FakeResolver | None = None,
) -> CallbackRefused:
    with pytest.raises(CallbackRefused) as caught:
        check_callback_url(url, allow_http=allow_http, resolver=resolver or FakeResolver())
    return caught.value


# --- accepted URLs and the target they produce ----------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "path_and_query"),
    [
        ("https://example.com/hook", "https", "example.com", 443, "/hook"),
        ("https://example.com", "https", "example.com", 443, "/"),
        ("https://example.com/?", "https", "example.com", 443, "/"),
        ("https://example.com:8443/a/b?x=1&y=2#frag", "https", "example.com", 8443, "/a/b?x=1&y=2"),
        ("https://example.com?q=1", "https", "example.com", 443, "/?q=1"),
        ("https://example.com/p#only-fragment", "https", "example.com", 443, "/p"),
        ("HTTPS://Hooks.Example.COM/X", "https", "hooks.example.com", 443, "/X"),
        ("https://example.com.:443/", "https", "example.com.", 443, "/"),
        ("https://my_host.example.com/", "https", "my_host.example.com", 443, "/"),
        ("https://example.com:/", "https", "example.com", 443, "/"),
    ],
)
def test_accepted_url_target(
    url: str, scheme: str, host: str, port: int, path_and_query: str
) -> None:
    resolver = FakeResolver()
    target = check_callback_url(url, allow_http=False, reach=PUBLIC_ONLY, resolver=resolver)
    assert target == CallbackTarget(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        path_and_query=path_and_query,
        addresses=(PUBLIC_V4,),
    )
    assert resolver.calls == [(host, port)]


@pytest.mark.parametrize(
    ("url", "port"), [("http://example.com/cb", 80), ("http://example.com:8080/cb", 8080)]
)
def test_http_is_accepted_only_with_allow_http(url: str, port: int) -> None:
    target = check_callback_url(url, allow_http=True, reach=PUBLIC_ONLY, resolver=FakeResolver())
    assert (target.scheme, target.port, target.path_and_query) == ("http", port, "/cb")
    assert refusal(url).reason == "scheme_not_allowed"


def test_https_is_accepted_with_allow_http_too() -> None:
    target = check_callback_url(
        "https://example.com/", allow_http=True, reach=PUBLIC_ONLY, resolver=FakeResolver()
    )
    assert (target.scheme, target.port) == ("https", 443)


@pytest.mark.parametrize(
    ("url", "host", "address"),
    [
        ("https://8.8.8.8/hook", "8.8.8.8", "8.8.8.8"),
        ("https://1.1.1.1:8443/", "1.1.1.1", "1.1.1.1"),
        ("https://[2606:4700:4700::1111]/", "2606:4700:4700::1111", "2606:4700:4700::1111"),
        (
            "https://[2606:4700:4700:0:0:0:0:1111]/",
            "2606:4700:4700:0:0:0:0:1111",
            "2606:4700:4700::1111",
        ),
        ("https://[::ffff:8.8.8.8]/", "::ffff:8.8.8.8", "::ffff:808:808"),
        ("https://[2002:808:808::1]/", "2002:808:808::1", "2002:808:808::1"),
        ("https://[64:ff9b::808:808]/", "64:ff9b::808:808", "64:ff9b::808:808"),
    ],
)
def test_public_ip_literal_is_its_own_address_without_dns(
    url: str, host: str, address: str
) -> None:
    target = check_callback_url(
        url, allow_http=False, reach=PUBLIC_ONLY, resolver=exploding_resolver
    )
    assert target.host == host
    assert target.addresses == (address,)


def test_resolver_answers_are_deduplicated_normalised_and_kept_in_order() -> None:
    resolver = FakeResolver(
        {"multi.example": ["1.1.1.1", "2606:4700:0:0:0:0:0:1111", "1.1.1.1", "1.0.0.1"]}
    )
    target = check_callback_url(
        "https://multi.example:9443/x", allow_http=False, reach=PUBLIC_ONLY, resolver=resolver
    )
    assert target.addresses == ("1.1.1.1", "2606:4700::1111", "1.0.0.1")
    assert resolver.calls == [("multi.example", 9443)]


# --- refused addresses: IP literals ----------------------------------------------------------

PRIVATE_LITERALS = [
    "127.0.0.1",
    "127.255.255.254",
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # the cloud metadata endpoint
    "169.254.0.1",
    "0.0.0.0",  # noqa: S104 - a destination under test, nothing binds to it
    "0.1.2.3",
    "100.64.0.1",  # carrier-grade NAT
    "100.127.255.255",
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "255.255.255.255",  # broadcast
    "240.0.0.1",  # reserved
    "192.0.2.1",  # documentation
    "198.51.100.7",
    "203.0.113.9",
    "198.18.0.1",  # benchmarking
    "[::1]",
    "[::]",
    "[fc00::1]",
    "[fd00:ec2::254]",  # the IPv6 metadata endpoint
    "[fe80::1]",
    "[febf:ffff::1]",
    "[fec0::1]",  # deprecated site-local
    "[ff02::1]",  # multicast
    "[ff0e::1]",
    "[2001:db8::1]",  # documentation
    "[2001::1]",  # Teredo
    "[100::1]",  # discard
    "[::ffff:127.0.0.1]",  # IPv4-mapped
    "[::ffff:7f00:1]",
    "[::ffff:10.0.0.1]",
    "[::ffff:169.254.169.254]",
    "[::ffff:0.0.0.0]",
    "[::127.0.0.1]",  # deprecated IPv4-compatible
    "[::7f00:1]",
    "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
    "[2002:a00:1::1]",  # 6to4 of 10.0.0.1
    "[2002:a9fe:a9fe::]",  # 6to4 of the metadata address
    "[64:ff9b::7f00:1]",  # NAT64 of 127.0.0.1
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of the metadata address
    "[64:ff9b::c0a8:101]",  # NAT64 of 192.168.1.1
    "[64:ff9b:1::1]",  # local-use NAT64
]


@pytest.mark.parametrize("host", PRIVATE_LITERALS)
def test_private_ip_literal_is_refused(host: str) -> None:
    refused = refusal(f"https://{host}/hook", resolver=FakeResolver())
    assert refused.reason == "host_not_allowed"
    assert "not a public address" in refused.message


@pytest.mark.parametrize("host", PRIVATE_LITERALS)
def test_private_ip_literal_is_accepted_where_any_address_is(host: str) -> None:
    target = check_callback_url(
        f"http://{host}:8080/hook", allow_http=True, reach=ANY_ADDRESS, resolver=exploding_resolver
    )
    assert target.addresses == (str(ipaddress.ip_address(host.strip("[]"))),)


# --- refused addresses: names that resolve to them ------------------------------------------

RESOLVES_PRIVATE = {
    "internal.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "localhost": ["127.0.0.1", "::1"],
    "v6only.example": ["fd12:3456::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "sixtofour.example": ["2002:c0a8:101::1"],
    "cgnat.example": ["100.64.1.1"],
    "multicast.example": ["224.0.0.251"],
    "zero.example": ["0.0.0.0"],  # noqa: S104 - a resolver answer under test
    "linklocal6.example": ["fe80::1%eth0"],
    # Public first, private later: every answer counts, not only the first.
    "mixed.example": [PUBLIC_V4, "10.0.0.5"],
    "mixed6.example": [PUBLIC_V6, "::1"],
    "mixed-last.example": [PUBLIC_V4, "8.8.8.8", PUBLIC_V6, "192.168.0.10"],
}


@pytest.mark.parametrize("host", sorted(RESOLVES_PRIVATE))
def test_name_resolving_to_a_private_address_is_refused(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    resolver = FakeResolver(RESOLVES_PRIVATE)
    refused = refusal(f"https://{host}/hook", resolver=resolver)
    assert refused.reason == "host_not_allowed"
    assert refused.message == f"{host} resolves to an address that is not public"
    assert resolver.calls == [(host, 443)]
    # The operator's log names the address the consumer's message does not.
    assert any(
        str(ipaddress.ip_address(answer.split("%")[0])) in record.getMessage()
        for record in caplog.records
        for answer in RESOLVES_PRIVATE[host]
    )


@pytest.mark.parametrize("reach", [PUBLIC_ONLY, ANY_ADDRESS - {Reach.NETWORK}])
def test_a_refusal_names_no_address_dns_gave(reach: frozenset[Reach]) -> None:
    # A consumer reads the refusal (a callback's last_error): it must not map internal names.
    resolver = FakeResolver({"db.corp.internal": ["10.0.3.7"]})
    with pytest.raises(CallbackRefused) as caught:
        check_callback_url(
            "https://db.corp.internal/", allow_http=False, reach=reach, resolver=resolver
        )
    assert caught.value.reason == "host_not_allowed"
    assert "10.0.3.7" not in str(caught.value)
    assert "db.corp.internal resolves to" in caught.value.message


@pytest.mark.parametrize("host", sorted(RESOLVES_PRIVATE))
def test_any_address_still_resolves_and_returns_every_address(host: str) -> None:
    resolver = FakeResolver(RESOLVES_PRIVATE)
    target = check_callback_url(
        f"https://{host}:8443/", allow_http=False, reach=ANY_ADDRESS, resolver=resolver
    )
    assert resolver.calls == [(host, 8443)]
    assert target.addresses == tuple(
        str(ipaddress.ip_address(a)) for a in dict.fromkeys(RESOLVES_PRIVATE[host])
    )


# Hosts the system resolver (inet_aton) reads as an address, and the address it reads.
NUMERIC_HOSTS = {
    "2852039166": "169.254.169.254",
    "0xa9fea9fe": "169.254.169.254",
    "0251.0376.0251.0376": "169.254.169.254",
    "169.254.43518": "169.254.169.254",
    "169.254.169.254.": "169.254.169.254",
    "2130706433": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "017700000001": "127.0.0.1",
    "127.1": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "0": "0.0.0.0",  # noqa: S104 - a destination under test, nothing binds to it
    "010.0.0.1": "8.0.0.1",
    "134744072": "8.8.8.8",
}


@pytest.mark.parametrize(("host", "address"), sorted(NUMERIC_HOSTS.items()))
def test_numeric_host_forms_are_the_address_the_resolver_reads(host: str, address: str) -> None:
    assert str(ip_literal(host)) == address
    if host.endswith("."):
        return  # inet_aton refuses the dot the URL standard allows; the address is the same
    assert socket.inet_ntoa(socket.inet_aton(host)) == address


@pytest.mark.parametrize(
    "host", ["08", "0x", "1.2.3.256", "256.1.1", "4294967296", "1.2.3.4.5", "1..2", "a1", "1e3"]
)
def test_numbers_no_resolver_reads_as_an_address_are_names(host: str) -> None:
    assert ip_literal(host) is None


@pytest.mark.parametrize(("host", "address"), sorted(NUMERIC_HOSTS.items()))
def test_numeric_host_forms_are_literals_checked_without_dns(host: str, address: str) -> None:
    url = f"https://{host}/hook"
    if is_public_address(address):
        target = check_callback_url(url, allow_http=False, resolver=exploding_resolver)
        assert (target.host, target.addresses) == (host, (address,))
        check_at_admission(url, None)
        return
    refused = refusal(url, resolver=FakeResolver({host: [PUBLIC_V4]}))
    assert (refused.reason, refused.message) == (
        "host_not_allowed",
        f"{host} is not a public address",
    )
    # Admission reads the host with the same parser: a 400, never a callback that dies.
    with pytest.raises(CallbackRefused) as caught:
        check_at_admission(url, None)
    assert caught.value.reason == "host_not_allowed"


# --- resolution failures ---------------------------------------------------------------------


def _gaierror(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def _unicode_error(host: str, port: int) -> list[str]:
    raise UnicodeError("label too long")


def _empty(host: str, port: int) -> list[str]:
    return []


def _garbage(host: str, port: int) -> list[str]:
    return [PUBLIC_V4, "not-an-address"]


def _no_data(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NODATA, "No address associated with hostname")


@pytest.mark.parametrize("resolver", [_gaierror, _no_data, _unicode_error, _empty, _garbage])
@pytest.mark.parametrize("reach", [PUBLIC_ONLY, ANY_ADDRESS])
def test_resolution_failure_is_unresolvable(resolver: Resolver, reach: frozenset[Reach]) -> None:
    with pytest.raises(CallbackRefused) as caught:
        check_callback_url(
            "https://nowhere.example/",
            allow_http=False,
            reach=reach,
            resolver=resolver,
        )
    assert caught.value.reason == "unresolvable"
    assert "nowhere.example" in caught.value.message


# --- syntax refusals (the same with and without DNS) -----------------------------------------

SYNTAX_REFUSALS = [
    # scheme
    ("http://example.com/", False, "scheme_not_allowed"),
    ("ftp://example.com/", True, "scheme_not_allowed"),
    ("file:///etc/passwd", True, "scheme_not_allowed"),
    ("gopher://example.com/", True, "scheme_not_allowed"),
    ("javascript:alert(1)", True, "scheme_not_allowed"),
    ("ws://example.com/", True, "scheme_not_allowed"),
    ("example.com/hook", True, "scheme_not_allowed"),
    ("//example.com/hook", True, "scheme_not_allowed"),
    ("/relative/hook", True, "scheme_not_allowed"),
    # credentials
    ("https://user:pass@example.com/", True, "userinfo_not_allowed"),
    ("https://user@example.com/", True, "userinfo_not_allowed"),
    ("https://:pass@example.com/", True, "userinfo_not_allowed"),
    ("https://@example.com/", True, "userinfo_not_allowed"),
    ("https://example.com@127.0.0.1/", True, "userinfo_not_allowed"),
    ("https://evil.example\\@good.example/", True, "userinfo_not_allowed"),
    # host
    ("https://", True, "invalid_url"),
    ("https:///hook", True, "invalid_url"),
    ("https://:443/hook", True, "invalid_url"),
    ("https:hook", True, "invalid_url"),
    ("https://-leading-hyphen.example/", True, "invalid_url"),
    ("https://a..b.example/", True, "invalid_url"),
    ("https://under\\score.example/", True, "invalid_url"),
    ("https://" + "a" * 64 + ".example/", True, "invalid_url"),
    ("https://" + ".".join(["a" * 60] * 5) + "/", True, "invalid_url"),
    ("https://[::1/", True, "invalid_url"),
    ("https://[not-ipv6]/", True, "invalid_url"),
    ("https://[1.2.3.4]/", True, "invalid_url"),
    ("https://[fe80::1%25eth0]/", True, "invalid_url"),
    ("https://::1/", True, "invalid_url"),
    # port
    ("https://example.com:0/", True, "invalid_url"),
    ("https://example.com:65536/", True, "invalid_url"),
    ("https://example.com:99999/", True, "invalid_url"),
    ("https://example.com:-1/", True, "invalid_url"),
    ("https://example.com:abc/", True, "invalid_url"),
    ("https://example.com:443x/", True, "invalid_url"),
    # characters that must not reach a request line (urlsplit would silently drop some)
    ("", True, "invalid_url"),
    ("https://exa mple.com/", True, "invalid_url"),
    ("https://exa\tmple.com/", True, "invalid_url"),
    ("https://example.com/\r\nX-Injected: 1", True, "invalid_url"),
    ("https://example.com/a\nb", True, "invalid_url"),
    ("https://example.com/\x00", True, "invalid_url"),
    (" https://example.com/", True, "invalid_url"),
    ("https://exämple.com/", True, "invalid_url"),
]


@pytest.mark.parametrize(("url", "allow_http", "reason"), SYNTAX_REFUSALS)
def test_syntax_refusal(url: str, allow_http: bool, reason: str) -> None:
    with pytest.raises(CallbackRefused) as caught:
        parse_callback_url(url, allow_http=allow_http)
    assert caught.value.reason == reason
    assert caught.value.message
    # The full check refuses the same way, before asking DNS, even where any address is allowed.
    with pytest.raises(CallbackRefused) as full:
        check_callback_url(
            url, allow_http=allow_http, reach=ANY_ADDRESS, resolver=exploding_resolver
        )
    assert full.value.reason == reason


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "https://does-not-exist.invalid/",
        "https://10.0.0.1/",  # addresses are judged only by the full check
        "https://[::1]:8443/",
        "http://127.0.0.1:3000/cb",
        "https://2130706433/",
    ],
)
def test_syntax_check_does_no_dns(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dns(*args: object, **kwargs: object) -> list[object]:
        raise AssertionError("the syntax check must not resolve")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    parse_callback_url(url, allow_http=True)  # passes: no exception, no DNS


def test_refusal_carries_reason_and_message() -> None:
    refused = refusal("ftp://example.com/")
    assert isinstance(refused, Exception)
    assert refused.reason == "scheme_not_allowed"
    assert "'ftp'" in refused.message
    assert str(refused) == f"scheme_not_allowed: {refused.message}"


# --- is_public_address -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        (PUBLIC_V4, True),
        ("100.63.255.255", True),  # just below carrier-grade NAT
        ("100.128.0.0", True),  # just above it
        ("172.15.255.255", True),
        ("172.32.0.0", True),
        ("223.255.255.255", True),
        (PUBLIC_V6, True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("2002:808:808::1", True),
        ("64:ff9b::808:808", True),
        *((a.strip("[]"), False) for a in PRIVATE_LITERALS),
        ("fe80::1%eth0", False),
        ("", False),
        ("example.com", False),
        ("2130706433", False),
        ("0x7f.1", False),
        ("127.1", False),
        ("999.1.1.1", False),
        ("1.2.3.4/32", False),
        ("[::1]", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def _raising(error: BaseException) -> Resolver:
    def resolve(host: str, port: int) -> list[str]:
        raise error

    return resolve


TRANSIENT_DNS_FAILURES = [
    socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
    socket.gaierror(socket.EAI_FAIL, "Non-recoverable failure in name resolution"),
    socket.gaierror(socket.EAI_SYSTEM, "System error"),
    OSError("network is unreachable"),
    TimeoutError("timed out"),
    RuntimeError("a resolver bug"),
]


@pytest.mark.parametrize("error", TRANSIENT_DNS_FAILURES, ids=repr)
@pytest.mark.parametrize("reach", [PUBLIC_ONLY, ANY_ADDRESS])
def test_a_resolver_that_cannot_answer_now_is_transient_not_a_refusal(
    error: BaseException, reach: frozenset[Reach]
) -> None:
    # One resolver blip (a DNS server's rate limit) must not dead-letter a callback.
    with pytest.raises(DnsUnavailableError) as caught:
        check_callback_url(
            "https://hooks.example/", allow_http=False, reach=reach, resolver=_raising(error)
        )
    assert isinstance(caught.value, OSError)
    assert not isinstance(caught.value, CallbackRefused)
    assert "hooks.example cannot be resolved now" in str(caught.value)
    verdict = classify_exception(caught.value)
    assert (verdict.outcome, verdict.status) == (Outcome.RETRY, None)
    assert verdict.error.startswith("DnsUnavailableError: hooks.example cannot be resolved now")


class StalledResolver:
    """Answers only once released: a tenant's DNS server that does not answer."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, host: str, port: int) -> list[str]:
        self.release.wait(30)
        return [PUBLIC_V4]


def test_a_lookup_is_over_by_the_deadline_passed_down() -> None:
    stalled = StalledResolver()
    try:
        started = time.monotonic()
        with pytest.raises(DnsUnavailableError, match="timed out"):
            check_at_delivery("https://slow-dns.example/", None, stalled, Deadline.after_ms(200))
        # A bound, not a timing: far below the 30 s the lookup would take.
        assert time.monotonic() - started < 5
    finally:
        stalled.release.set()


def test_a_lookup_without_a_deadline_ends_with_the_invocation() -> None:
    stalled = StalledResolver()
    try:
        started = time.monotonic()
        # 300 ms left once the answer's margin is kept: less than LOOKUP_TIMEOUT_MS.
        with invocation(lambda: ANSWER_MARGIN_MS + 300), pytest.raises(DnsUnavailableError):
            check_at_delivery("https://slow-dns.example/", None, stalled)
        assert time.monotonic() - started < LOOKUP_TIMEOUT_MS / 1000
    finally:
        stalled.release.set()


def test_a_lookup_that_answers_in_time_is_used() -> None:
    target = check_at_delivery(
        "https://fast.example/", None, FakeResolver(), Deadline.after_ms(5000)
    )
    assert target.addresses == (PUBLIC_V4,)


# --- system_resolver -------------------------------------------------------------------------


def test_system_resolver_keeps_unique_addresses_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []

    def fake_getaddrinfo(host: str, port: int, *args: object, **kwargs: object) -> list[object]:
        calls.append((host, port))
        stream, tcp = socket.SOCK_STREAM, socket.IPPROTO_TCP
        return [
            (socket.AF_INET6, stream, tcp, "", (PUBLIC_V6, port, 0, 0)),
            (socket.AF_INET, stream, tcp, "", (PUBLIC_V4, port)),
            (socket.AF_INET6, stream, tcp, "", (PUBLIC_V6, port, 0, 0)),
            (socket.AF_INET, stream, tcp, "", ("8.8.8.8", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    assert system_resolver("example.com", 443) == [PUBLIC_V6, PUBLIC_V4, "8.8.8.8"]
    assert calls == [("example.com", 443)]


def test_system_resolver_resolves_a_numeric_host_without_network() -> None:
    assert system_resolver("127.0.0.1", 443) == ["127.0.0.1"]


def test_system_resolver_failure_is_unresolvable(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", failing)
    with pytest.raises(CallbackRefused) as caught:
        check_callback_url("https://example.com/", allow_http=False, reach=PUBLIC_ONLY)
    assert caught.value.reason == "unresolvable"


def test_system_resolver_temporary_failure_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    # What getaddrinfo raises when the VPC resolver drops a query (its per-interface limit).
    def failing(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", failing)
    with pytest.raises(DnsUnavailableError, match="Temporary failure in name resolution"):
        check_at_delivery("https://example.com/", None)


# --- properties ------------------------------------------------------------------------------

NON_PUBLIC_V4 = [
    ipaddress.IPv4Network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "0.0.0.0/8",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


@st.composite
def non_public_v4(draw: st.DrawFn) -> ipaddress.IPv4Address:
    network = draw(st.sampled_from(NON_PUBLIC_V4))
    offset = draw(st.integers(0, network.num_addresses - 1))
    return network[offset]


@given(st.integers(0, 2**24 - 1))
def test_every_ten_slash_eight_address_is_refused(offset: int) -> None:
    address = ipaddress.ip_network("10.0.0.0/8")[offset]
    assert not is_public_address(str(address))
    for url, resolver in (
        (f"https://{address}/", FakeResolver()),
        ("https://name.example/", FakeResolver({"name.example": [PUBLIC_V4, str(address)]})),
    ):
        with pytest.raises(CallbackRefused) as caught:
            check_callback_url(url, allow_http=False, reach=PUBLIC_ONLY, resolver=resolver)
        assert caught.value.reason == "host_not_allowed"


@given(non_public_v4(), st.sampled_from(["{}", "::ffff:{}", "[::ffff:{}]"]))
def test_non_public_ipv4_is_refused_in_every_form(
    address: ipaddress.IPv4Address, form: str
) -> None:
    host = form.format(address)
    literal_host = host if host.startswith("[") or ":" not in host else f"[{host}]"
    assert not is_public_address(host.strip("[]"))
    with pytest.raises(CallbackRefused) as caught:
        check_callback_url(
            f"https://{literal_host}/",
            allow_http=False,
            reach=PUBLIC_ONLY,
            resolver=exploding_resolver,
        )
    assert caught.value.reason == "host_not_allowed"
    sixtofour = ipaddress.IPv6Address((0x2002 << 112) | (int(address) << 80))
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(address))
    assert not is_public_address(str(sixtofour))
    assert not is_public_address(str(nat64))


URLISH = st.one_of(
    st.text(max_size=80),
    st.builds(
        "{}://{}{}{}".format,
        st.sampled_from(["https", "http", "HTTPS", "ftp", ""]),
        st.text(alphabet=st.sampled_from("abc019.-_:@[]%/?#\\ \t\n\x00é"), max_size=30),
        st.sampled_from(["", ":443", ":0", ":65536", ":x"]),
        st.text(alphabet=st.sampled_from("ab/?#=& \r\n%"), max_size=20),
    ),
)


@given(URLISH, st.booleans(), st.booleans())
def test_every_refusal_is_callback_refused(url: str, allow_http: bool, any_address: bool) -> None:
    try:
        parse_callback_url(url, allow_http=allow_http)
        syntax_reason = None
    except CallbackRefused as refused:
        syntax_reason = refused.reason
    try:
        result: CallbackTarget | CallbackRefused = check_callback_url(
            url,
            allow_http=allow_http,
            reach=ANY_ADDRESS if any_address else PUBLIC_ONLY,
            resolver=FakeResolver({"localhost": ["127.0.0.1"]}),
        )
    except CallbackRefused as refused:
        result = refused
    if isinstance(result, CallbackRefused):
        # A syntax refusal is the full check's refusal too; DNS can only add refusals.
        assert syntax_reason is None or result.reason == syntax_reason
        return
    target = result
    assert syntax_reason is None
    assert target.scheme in (("https", "http") if allow_http else ("https",))
    assert 0 < target.port < 65536
    assert target.path_and_query.startswith("/")
    assert "#" not in target.path_and_query
    assert not any(c.isspace() for c in target.path_and_query)
    assert target.addresses
    assert any_address or all(is_public_address(a) for a in target.addresses)
