"""What a tenant's callback origins (config/origins.py) let a callback reach.

A tenant without a list may use any https origin
whose addresses are public. A tenant with a list may use only the origins it names; a listed
origin with an exact host may also be http and reach private addresses (an operator vouched for
that host), a wildcard host stays public-only. Nothing here resolves a name: admission checks
without DNS, delivery resolves and pins (ssrf.check_callback_url).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobstream.callback_url import (
    CallbackRefused,
    ParsedUrl,
    RefusalReason,
    ip_literal,
    is_public_address,
    parse_callback_url,
)
from jobstream.config.origins import OriginPattern
from jobstream.delivery.ssrf import CallbackTarget, Resolver, check_callback_url, system_resolver


@dataclass(frozen=True, slots=True)
class Access:
    """What a callback URL may do under a tenant's origins."""

    allow_http: bool
    allow_private: bool


def access_for(url: ParsedUrl, origins: Sequence[OriginPattern] | None) -> Access:
    """The access `origins` grant `url`; CallbackRefused when they grant none."""
    if origins is None:
        if url.scheme != "https":
            raise CallbackRefused(
                RefusalReason.SCHEME_NOT_ALLOWED, f"the scheme must be https, not {url.scheme!r}"
            )
        return Access(allow_http=False, allow_private=False)
    matched = [pattern for pattern in origins if pattern.matches(url)]
    if not matched:
        raise CallbackRefused(
            RefusalReason.ORIGIN_NOT_ALLOWED,
            f"{url.scheme}://{url.netloc} is not one of the callback origins allowed for this "
            "consumer",
        )
    return Access(
        allow_http=url.scheme == "http",
        allow_private=any(not pattern.wildcard_host for pattern in matched),
    )


def check_at_admission(url: str, origins: Sequence[OriginPattern] | None) -> None:
    """Syntax, scheme, the tenant's origins and a literal IP address: no DNS lookup."""
    parsed = parse_callback_url(url, allow_http=True)
    access = access_for(parsed, origins)
    literal = ip_literal(parsed.host)
    if literal is not None and not access.allow_private and not is_public_address(str(literal)):
        raise CallbackRefused(RefusalReason.HOST_NOT_ALLOWED, f"{literal} is not a public address")


def check_at_delivery(
    url: str, origins: Sequence[OriginPattern] | None, resolver: Resolver = system_resolver
) -> CallbackTarget:
    """The admission checks under the origins as they are now, then resolve and pin."""
    access = access_for(parse_callback_url(url, allow_http=True), origins)
    return check_callback_url(
        url, allow_http=access.allow_http, allow_private=access.allow_private, resolver=resolver
    )
