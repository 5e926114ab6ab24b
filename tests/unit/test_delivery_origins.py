"""Where a listed origin may lead, on AWS and elsewhere: an exact origin an operator vouched for
may reach private addresses, but on AWS never this host (loopback: Lambda's runtime API) or its
link (169.254.0.0/16, fe80::/10: the platform's endpoints); locally and in the tests it may."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from jobstream.jobtypes.asset_fetch.fetch import fetch
from jobstream.jobtypes.sources.base import SourceError
from jobstream.observability import LAMBDA_FUNCTION_VARIABLE
from jobstream.outbound.addresses import reach_of
from jobstream.outbound.guard import check_at_admission, check_at_delivery
from jobstream.outbound.origins import parse_origins, runs_on_aws
from jobstream.outbound.url import OutboundRefused as CallbackRefused
from tests.support.recorded_http import Canned, recorded_server

RUNTIME_API = "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next"
# Exact origins naming this host and its link, as an operator might list them.
LOCAL_ORIGINS = parse_origins(
    ["http://127.0.0.1:*", "http://[::1]:*", "http://169.254.169.254", "http://[fe80::1]:*"]
)

# Names under an exact origin, resolving to this host or its link in each of their spellings.
RESOLVES_HERE = {
    "127.0.0.1": "loopback",
    "127.3.4.5": "loopback",
    "::1": "loopback",
    "0.0.0.0": "this network",  # noqa: S104 - a resolver answer under test: connects to this host
    "::": "unspecified",
    "::ffff:127.0.0.1": "IPv4-mapped loopback",
    "::127.0.0.1": "IPv4-compatible loopback",
    "64:ff9b::7f00:1": "NAT64 of loopback",
    "2002:7f00:1::1": "6to4 of loopback",
    "169.254.169.254": "instance metadata",
    "169.254.170.2": "container credentials",
    "169.254.100.1": "link-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local with a zone",
    "::ffff:169.254.169.254": "IPv4-mapped metadata",
    "64:ff9b::a9fe:a9fe": "NAT64 of metadata",
    "255.255.255.255": "limited broadcast",
}


@pytest.fixture
def on_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "jobstream-WorkerFunction")


def resolving_to(address: str) -> Callable[[str, int], list[str]]:
    return lambda _host, _port: [address]


def test_the_settings_say_whether_this_process_runs_on_aws() -> None:
    assert runs_on_aws({LAMBDA_FUNCTION_VARIABLE: "jobstream-ApiFunction"})
    assert not runs_on_aws({})
    assert not runs_on_aws({LAMBDA_FUNCTION_VARIABLE: " "})


@pytest.mark.usefixtures("on_aws")
@pytest.mark.parametrize(
    "url",
    [
        RUNTIME_API,
        "http://[::1]:9001/2018-06-01/runtime/invocation/next",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]:8080/",
    ],
)
def test_on_aws_an_exact_origin_never_admits_this_host_or_its_link(url: str) -> None:
    with pytest.raises(CallbackRefused) as caught:
        check_at_admission(url, LOCAL_ORIGINS)
    assert caught.value.reason == "host_not_allowed"
    assert "never reached from AWS" in caught.value.message


@pytest.mark.usefixtures("on_aws")
@pytest.mark.parametrize("address", sorted(RESOLVES_HERE))
def test_on_aws_an_exact_origin_never_delivers_to_this_host_or_its_link(address: str) -> None:
    origins = parse_origins(["http://receiver.internal:*"])
    with pytest.raises(CallbackRefused) as caught:
        check_at_delivery("http://receiver.internal:8080/hook", origins, resolving_to(address))
    assert caught.value.reason == "host_not_allowed"
    leads = reach_of(ipaddress.ip_address(address))
    assert caught.value.message == (
        f"receiver.internal resolves to {leads}, never reached from AWS, even for a listed origin"
    )


@pytest.mark.usefixtures("on_aws")
@pytest.mark.parametrize("address", ["10.0.0.5", "172.18.0.5", "192.168.1.10", "fd00::5"])
def test_on_aws_an_exact_origin_still_reaches_a_private_network(address: str) -> None:
    # A co-located consumer (TelePost's own deployment) on the VPC's private addresses.
    origins = parse_origins(["http://telepost:8080"])
    target = check_at_delivery("http://telepost:8080/hook", origins, resolving_to(address))
    assert target.addresses == (address,)


@pytest.mark.parametrize("address", sorted(RESOLVES_HERE))
def test_off_aws_an_exact_origin_reaches_this_host(address: str) -> None:
    # The local stack and the tests' receivers listen on loopback.
    origins = parse_origins(["http://receiver.internal:*"])
    target = check_at_delivery("http://receiver.internal:8080/h", origins, resolving_to(address))
    assert len(target.addresses) == 1
    check_at_admission(RUNTIME_API, LOCAL_ORIGINS)


def test_on_aws_an_asset_download_never_reaches_this_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same rule for asset_fetch's exact origins: nothing is requested.
    with recorded_server({"/img.png": Canned(body=b"png")}) as server:

        def download() -> bytes:
            return fetch(
                server.url("/img.png"),
                asset_id="a1",
                origins=parse_origins([server.base_url]),
                headers={},
                max_bytes=100,
                timeout_s=5,
                checkpoint=lambda: None,
            ).body

        assert download() == b"png"  # off AWS: a local source
        monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "jobstream-WorkerFunction")
        with pytest.raises(SourceError) as caught:
            download()
    assert caught.value.reason == "download_failed"
    assert "host_not_allowed" in caught.value.message
    assert len(server.requests) == 1
