"""The guard with a URL's text and an explicit reach: what the guard's tests drive, the access an
origin list would grant set by hand."""

from __future__ import annotations

from jobstream.outbound.addresses import PUBLIC_ONLY, Reach
from jobstream.outbound.guard import PinnedTarget, Resolver, resolve_and_pin, system_resolver
from jobstream.outbound.url import parse_url


def check_url(
    url: str,
    *,
    allow_http: bool,
    reach: frozenset[Reach] = PUBLIC_ONLY,
    resolver: Resolver = system_resolver,
) -> PinnedTarget:
    """Check `url` and resolve its host; every address must lead where `reach` allows."""
    return resolve_and_pin(parse_url(url, allow_http=allow_http), reach, resolver)
