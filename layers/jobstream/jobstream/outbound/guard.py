"""The resolve-and-pin guard: which outbound URLs jobstream may send a request to, and the
addresses to pin.

A URL passes when its scheme is allowed, it carries no credentials, and every address its host
resolves to leads where its origin allows (by default: public addresses only; where an address
leads is the IANA table's word, addresses.py). The addresses are returned so the request
connects to exactly those, never to a second DNS answer (DNS rebinding). A host that is an IP
address in any spelling the system resolver reads as one (addresses.py: ip_literal) is its own
address, at admission and at delivery alike.

Only an answer is a refusal: a name that does not exist or has no address (EAI_NONAME,
EAI_NODATA), an address not allowed. A resolver that cannot answer now (EAI_AGAIN: a rate-limited
or unreachable DNS server; any other resolver error) or does not answer by the caller's deadline
raises DnsUnavailableError: an OSError, transient like a network error, for every caller alike (a
callback retries it with backoff and counts it against its endpoint's health; a download fails
retryably). A lookup runs in a thread of its own, waited for until the deadline; one that stalls
longer finishes on its own, and its answer is dropped.

A refusal's message is read by consumers (a callback's last_error, a job's error): it names
the URL's host as the consumer wrote it and never an address DNS gave for it, so a tenant cannot
use the producer's resolver to map internal names; the operator's log keeps the address.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from jobstream.deadline import Deadline, request_deadline
from jobstream.errors import JobstreamError
from jobstream.outbound.addresses import PUBLIC_ONLY, Reach, ip_literal, reach_of
from jobstream.outbound.origins import OriginPattern, access_for
from jobstream.outbound.url import OutboundRefused, OutboundUrl, RefusalReason, parse_url

logger = logging.getLogger(__name__)

Resolver = Callable[[str, int], list[str]]

# How long a lookup may take when the caller gives no deadline (never past the invocation's).
LOOKUP_TIMEOUT_MS: Final = 5000
# The resolver's answers that a name does not exist or has no address: the only failures that
# are the name's own. Any other (EAI_AGAIN above all) says nothing about the name.
_NO_SUCH_NAME: Final = frozenset(
    code
    for code in (
        socket.EAI_NONAME,
        getattr(socket, "EAI_NODATA", None),  # glibc: the name exists, with no address
        getattr(socket, "EAI_ADDRFAMILY", None),  # no address of the family asked for
    )
    if code is not None
)


class DnsUnavailableError(JobstreamError, OSError):
    """The host's name could not be resolved now: the resolver failed or did not answer in
    time. Says nothing about the name: worth another attempt, like a network error."""


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
        check_reach(str(literal), access.reach, host=parsed.host)


def check_at_delivery(
    url: str,
    origins: Sequence[OriginPattern] | None,
    resolver: Resolver = system_resolver,
    deadline: Deadline | None = None,
) -> PinnedTarget:
    """The admission checks under the origins as they are now, then resolve (by `deadline`:
    the request's, else LOOKUP_TIMEOUT_MS from now) and pin. Raises OutboundRefused, or
    DnsUnavailableError when the resolver gave no answer."""
    parsed = parse_url(url, allow_http=True)
    return resolve_and_pin(parsed, access_for(parsed, origins).reach, resolver, deadline)


def resolve_and_pin(
    url: OutboundUrl,
    reach: frozenset[Reach],
    resolver: Resolver,
    deadline: Deadline | None = None,
) -> PinnedTarget:
    """`url`'s addresses, each leading where `reach` allows: the only ones to connect to."""
    literal = ip_literal(url.host)
    if literal is not None:
        # An IP literal is its own (and only) address: no DNS query.
        addresses: tuple[str, ...] = (str(literal),)
    else:
        if deadline is None:
            deadline = request_deadline(LOOKUP_TIMEOUT_MS)
        addresses = _resolve(url.host, url.port, resolver, deadline)
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
    allows. The message names `host` (the URL's own) and never a resolved address."""
    leads = reach_of(ipaddress.ip_address(address))
    if leads in reach:
        return
    if ip_literal(host) is None:
        # The consumer reads the message: the address stays in the operator's log.
        logger.warning("outbound URL refused: %s resolves to %s (%s)", host, address, leads)
        subject, public = f"{host} resolves to", "an address that is not public"
    else:
        subject, public = f"{host} is", "not a public address"
    if reach == PUBLIC_ONLY:
        message = f"{subject} {public}"
    else:
        # Only on AWS: this host and its link are Lambda's own, whatever the origin says.
        message = f"{subject} {leads}, never reached from AWS, even for a listed origin"
    raise OutboundRefused(RefusalReason.HOST_NOT_ALLOWED, message)


def _resolve(host: str, port: int, resolver: Resolver, deadline: Deadline) -> tuple[str, ...]:
    answers = _lookup(host, port, resolver, deadline)
    addresses: list[str] = []
    for answer in answers:
        try:
            addresses.append(str(ipaddress.ip_address(answer)))
        except ValueError:
            logger.warning("outbound URL refused: %s resolved to %r", host, answer)
            raise OutboundRefused(
                RefusalReason.UNRESOLVABLE, f"{host} resolved to something not an IP address"
            ) from None
    if not addresses:
        raise OutboundRefused(RefusalReason.UNRESOLVABLE, f"{host} has no address")
    return tuple(dict.fromkeys(addresses))


def _lookup(host: str, port: int, resolver: Resolver, deadline: Deadline) -> list[str]:
    """The resolver's answer by `deadline`; OutboundRefused when it says the name does not
    exist, DnsUnavailableError when it failed otherwise or did not answer in time."""
    answer: list[list[str]] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(resolver(host, port))
        except BaseException as error:  # noqa: BLE001 - judged by the waiting caller
            failure.append(error)
        finally:
            done.set()

    # A daemon thread: a stalled lookup outlives its wait harmlessly, and no process waits on it.
    threading.Thread(target=run, name="dns-lookup", daemon=True).start()
    if not done.wait(deadline.remaining_s()):
        raise DnsUnavailableError(f"{host} cannot be resolved now: the DNS lookup timed out")
    if not failure:
        return answer[0]
    error = failure[0]
    if isinstance(error, socket.gaierror) and error.errno in _NO_SUCH_NAME:
        raise OutboundRefused(
            RefusalReason.UNRESOLVABLE, f"{host} cannot be resolved: {error}"
        ) from None
    if isinstance(error, UnicodeError | ValueError):
        # The name cannot even be asked for (a label too long to encode): the name's own.
        raise OutboundRefused(
            RefusalReason.UNRESOLVABLE, f"{host} cannot be resolved: {error}"
        ) from None
    if isinstance(error, Exception):
        # EAI_AGAIN, EAI_FAIL, a system error, anything else: the resolver's state, not the name's.
        raise DnsUnavailableError(f"{host} cannot be resolved now: {error}") from error
    raise error
