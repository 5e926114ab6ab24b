"""Downloading one asset over HTTP under the SSRF rules, bounded in size and checked in between.

The URL must match one of the source's origins (outbound/origins.py): a wildcard origin
(`https://*.pximg.net`) admits public addresses only; an exact origin is a configured source and
may be private (a local test server). The host is resolved once, every address checked, and the
connection pinned to them (outbound/guard.py); redirects are not followed. The download is
over by its deadline (the DNS lookup included) and stops at a cancel however slowly the source
sends (outbound/http.py).

The guard's word on DNS is the callbacks' too: a name that does not exist, or resolves where the
origin does not allow, is refused (download_failed: a retry would be refused the same way); a
resolver that cannot answer now, or in time, is a network_error another run may cure.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPResponse
from typing import Final

from jobstream.deadline import Deadline, request_deadline
from jobstream.jobtypes.sources.base import SourceError
from jobstream.jobtypes.sources.retry_after import retry_after_ms
from jobstream.outbound.guard import (
    DnsUnavailableError,
    PinnedTarget,
    Resolver,
    check_at_delivery,
    system_resolver,
)
from jobstream.outbound.http import exchange
from jobstream.outbound.origins import OriginPattern
from jobstream.outbound.url import OutboundRefused
from jobstream.protocol.errors import Reason

CHUNK_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Fetched:
    body: bytes
    content_type: str | None


def too_large(asset_id: str, max_bytes: int) -> SourceError:
    return SourceError(
        Reason.DOWNLOAD_FAILED,
        f"asset {asset_id} is larger than the {max_bytes}-byte limit of an asset",
    )


def fetch(
    url: str,
    *,
    asset_id: str,
    origins: Sequence[OriginPattern],
    headers: Mapping[str, str],
    max_bytes: int,
    timeout_s: float,
    checkpoint: Callable[[], None],
    resolver: Resolver = system_resolver,
) -> Fetched:
    """GET `url`, over within `timeout_s` (wall-clock, and within the invocation); SourceError
    when refused, failed, timed out or larger than `max_bytes`. What `checkpoint` raises (a
    cancel, a lost lease, the job's deadline) stops the download at once and propagates."""
    deadline = request_deadline(timeout_s * 1000)
    target = _checked_target(url, asset_id, origins, resolver, deadline)

    def read(response: HTTPResponse) -> Fetched:
        _check_status(asset_id, response.status, response.getheader("Retry-After"))
        body = _read_bounded(response, asset_id, max_bytes, checkpoint)
        return Fetched(body, response.getheader("Content-Type"))

    try:
        return exchange(target, "GET", headers, deadline=deadline, read=read, interrupt=checkpoint)
    except TimeoutError:
        raise SourceError(
            Reason.DOWNLOAD_TIMEOUT, f"asset {asset_id}: the download timed out"
        ) from None
    except (ConnectionRefusedError, socket.gaierror) as error:
        raise SourceError(
            Reason.NETWORK_ERROR,
            f"asset {asset_id}: no address of {target.host} accepted a connection ({error})",
        ) from None
    except OSError as error:
        raise SourceError(
            Reason.NETWORK_ERROR, f"asset {asset_id}: {type(error).__name__}"
        ) from None


def _checked_target(
    url: str,
    asset_id: str,
    origins: Sequence[OriginPattern],
    resolver: Resolver,
    deadline: Deadline,
) -> PinnedTarget:
    """The URL checked against the source's origins, resolved and pinned (the SSRF rules)."""
    try:
        return check_at_delivery(url, origins, resolver, deadline)
    except DnsUnavailableError as error:
        # The resolver failed or stalled: it may answer on the job's next run.
        raise SourceError(Reason.NETWORK_ERROR, f"asset {asset_id}: {error}") from None
    except OutboundRefused as refusal:
        # The name does not exist, or leads where the origins do not allow: as final as for a
        # callback (the refusal names no resolved address).
        raise SourceError(
            Reason.DOWNLOAD_FAILED,
            f"asset {asset_id}: the URL is not fetched ({refusal.reason}: {refusal.message})",
        ) from None


def _read_bounded(
    response: HTTPResponse, asset_id: str, max_bytes: int, checkpoint: Callable[[], None]
) -> bytes:
    """The body, refused as soon as it is declared or read larger than `max_bytes`."""
    declared = response.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large(asset_id, max_bytes)
    body = bytearray()
    while chunk := response.read(CHUNK_BYTES):
        body.extend(chunk)
        if len(body) > max_bytes:
            raise too_large(asset_id, max_bytes)
        # A large download must not outlive a cancel, a lost lease or the deadline.
        checkpoint()
    return bytes(body)


def _check_status(asset_id: str, status: int, retry_after: str | None) -> None:
    if status == 200:
        return
    # A 429's or 503's Retry-After: when the job's retry may ask again.
    wait = retry_after_ms(status, retry_after)
    if status == 429:
        raise SourceError(
            Reason.RATE_LIMITED, f"asset {asset_id}: the source answered 429", retry_after_ms=wait
        )
    # Redirects are refused: their target would escape the checks above.
    raise SourceError(
        Reason.REMOTE_HTTP_ERROR,
        f"asset {asset_id}: the source answered HTTP {status}",
        retry_after_ms=wait,
        status=status,
    )
