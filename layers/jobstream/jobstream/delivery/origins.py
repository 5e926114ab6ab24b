"""What a tenant's callback origins (config/origins.py) let a callback reach.

A tenant without a list may use any https origin whose addresses are public. A tenant with a
list may use only the origins it names; a listed origin with an exact host may also be http and
reach non-public addresses (an operator vouched for that host), a wildcard host stays
public-only. On AWS no origin reaches this host (loopback: Lambda's runtime API) or its link
(169.254.0.0/16, fe80::/10: the platform's endpoints); the local stack and the tests may. Nothing
here resolves a name: admission checks without DNS, delivery resolves and pins
(ssrf.check_callback_url).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from jobstream.callback_url import (
    CallbackRefused,
    ParsedUrl,
    RefusalReason,
    ip_literal,
    parse_callback_url,
)
from jobstream.config.origins import OriginPattern
from jobstream.config.settings import runs_on_aws
from jobstream.delivery.ssrf import (
    ANY_ADDRESS,
    PUBLIC_ONLY,
    CallbackTarget,
    Resolver,
    check_callback_url,
    check_reach,
    system_resolver,
)
from jobstream.special_addresses import Reach

# What an exact origin reaches on AWS: anything but this host and its link.
BEYOND_THIS_HOST: Final = ANY_ADDRESS - {Reach.HOST, Reach.LINK}


@dataclass(frozen=True, slots=True)
class Access:
    """What a callback URL may do under a tenant's origins: its scheme, and where its
    addresses may lead."""

    allow_http: bool
    reach: frozenset[Reach]


def access_for(url: ParsedUrl, origins: Sequence[OriginPattern] | None) -> Access:
    """The access `origins` grant `url`; CallbackRefused when they grant none."""
    if origins is None:
        if url.scheme != "https":
            raise CallbackRefused(
                RefusalReason.SCHEME_NOT_ALLOWED, f"the scheme must be https, not {url.scheme!r}"
            )
        return Access(allow_http=False, reach=PUBLIC_ONLY)
    matched = [pattern for pattern in origins if pattern.matches(url)]
    if not matched:
        raise CallbackRefused(
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
    AWS (read each time: the settings say where this process runs)."""
    return BEYOND_THIS_HOST if runs_on_aws() else ANY_ADDRESS


def check_at_admission(url: str, origins: Sequence[OriginPattern] | None) -> None:
    """Syntax, scheme, the tenant's origins and a literal IP address: no DNS lookup."""
    parsed = parse_callback_url(url, allow_http=True)
    access = access_for(parsed, origins)
    literal = ip_literal(parsed.host)
    if literal is not None:
        check_reach(str(literal), access.reach, host=str(literal))


def check_at_delivery(
    url: str, origins: Sequence[OriginPattern] | None, resolver: Resolver = system_resolver
) -> CallbackTarget:
    """The admission checks under the origins as they are now, then resolve and pin."""
    access = access_for(parse_callback_url(url, allow_http=True), origins)
    return check_callback_url(
        url, allow_http=access.allow_http, reach=access.reach, resolver=resolver
    )
