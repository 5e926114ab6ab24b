"""Callback endpoint health, per (tenant, callback origin): one receiver that is down stops
spending its callbacks' attempts, and tells its tenant and the operator (docs/operations.md).

- **Paused** after sustained failure: a run of at least PAUSE_AFTER_FAILURES consecutive failed
  attempts (5xx, 429, network errors, timeouts: every retryable verdict, of any of the
  endpoint's callbacks) that began at least PAUSE_AFTER_MS before the latest one, with no
  delivery in between. Both together: a burst of failures in one second (a receiver restarting)
  is no outage, and neither is one slow failure a minute. While paused, its callbacks are
  parked (their attempt given back: nothing is dead-lettered for it) and one real callback an
  interval (`endpoint_probe_interval_ms`) goes as the probe. A delivered probe resumes it.
- **Disabled** by a `410 Gone`: nothing is attempted, no probe, until an operator (or the
  tenant) enables it again (`jobstream tenants enable-endpoint`).
- **Resumed**: its parked backlog is sent at once, oldest event first, without waiting for
  each callback's own backoff: the first page by the attempt that resumed it, the rest by the
  sweep.

Every transition is made by one conditional write (store/endpoints.py), so it happens, and is
announced (endpoint_alerts.py), once however many workers or duplicate messages meet it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from jobstream.delivery.classify import Outcome, Verdict
from jobstream.domain import AttemptAnswer, CallbackRecord, Endpoint, EndpointHealth, EndpointState
from jobstream.outbound.url import OutboundRefused, parse_url
from jobstream.runtime import Runtime
from jobstream.service.endpoint_alerts import Transition, announce
from jobstream.service.handoff import hand_off
from jobstream.store.ports import HANDOFF_GRACE_MS

# The run of failures that pauses an endpoint: this many attempts in a row, over at least this
# long. With the default backoff (30 s base) one callback alone takes about 4 minutes to fail
# 5 times, so an outage pauses its endpoint before any callback spends its 8 attempts.
PAUSE_AFTER_FAILURES: Final = 5
PAUSE_AFTER_MS: Final = 30_000
# Parked callbacks the attempt that resumes an endpoint sends itself (the sweep sends the rest):
# an attempt's invocation has a callback's time left, not a backlog's.
DRAIN_INLINE: Final = 100
# Parked callbacks one sweep sends per endpoint per read.
DRAIN_PAGE: Final = 500


class Passage(StrEnum):
    """What the endpoint's health lets an attempt do."""

    SEND = "send"  # healthy: an ordinary attempt
    PROBE = "probe"  # paused, and this attempt took the interval's probe
    HOLD = "hold"  # paused or disabled: park the callback, attempt nothing


@dataclass(frozen=True, slots=True)
class Gate:
    """An attempt's endpoint (None: its URL names no origin, it is refused anyway), the
    endpoint's health as read before the attempt, and what it may do."""

    endpoint: Endpoint | None
    health: EndpointHealth | None = None
    passage: Passage = Passage.SEND


def endpoint_of(tenant: str, url: str | None) -> Endpoint | None:
    """The endpoint a callback URL belongs to: its tenant and its origin (`scheme://host:port`)."""
    try:
        parsed = parse_url(url or "", allow_http=True)
    except OutboundRefused:
        return None
    return Endpoint(tenant, f"{parsed.scheme}://{parsed.netloc}")


def gate(rt: Runtime, endpoint: Endpoint | None, *, now: int) -> Gate:
    """Read the endpoint's health before an attempt; a paused one's due probe is taken here."""
    if endpoint is None:
        return Gate(None)
    health = rt.endpoints.get(endpoint)
    if health.state is EndpointState.HEALTHY:
        return Gate(endpoint, health)
    probe_due = health.state is EndpointState.PAUSED and (health.next_probe_at or 0) <= now
    if probe_due and rt.endpoints.take_probe(
        endpoint, now=now, next_probe_at=now + rt.settings.endpoint_probe_interval_ms
    ):
        return Gate(endpoint, health, Passage.PROBE)
    return Gate(endpoint, health, Passage.HOLD)


def park(
    rt: Runtime, intent: CallbackRecord, endpoint: Endpoint, answer: AttemptAnswer | None
) -> bool:
    """Hold a callback back until its endpoint resumes; its attempt is not spent. False when
    the attempt no longer holds the callback (another recorded it meanwhile)."""
    return rt.callbacks.park(intent, answer, endpoint=endpoint) is not None


def after_delivery(rt: Runtime, passed: Gate, *, now: int) -> None:
    """A callback went through: a paused endpoint resumes, a run of failures ends."""
    if passed.endpoint is None or passed.health is None:
        return
    if passed.health.state is EndpointState.PAUSED:
        # The probe, or an attempt that read the health just before the pause: either way
        # the receiver answers again.
        resume(rt, passed.endpoint, now=now, was=EndpointState.PAUSED)
    elif passed.health.failures:
        rt.endpoints.record_success(passed.endpoint)


def holds_after_failure(rt: Runtime, passed: Gate, verdict: Verdict, *, now: int) -> bool:
    """Count a failed attempt against its endpoint; True when the callback is to be parked
    (a 410 disabled the endpoint, the endpoint is paused now, or this was its probe)."""
    endpoint = passed.endpoint
    if endpoint is None or verdict.outcome is Outcome.DEAD:
        # A permanent answer about this callback (a 404, a refused URL), not the endpoint's.
        return False
    if verdict.outcome is Outcome.GONE:
        if rt.endpoints.disable(endpoint, now=now, error=verdict.error):
            announce(rt, Transition.DISABLED, endpoint, now=now, reason=verdict.error)
        return True
    health = rt.endpoints.record_failure(endpoint, now=now, error=verdict.error)
    return passed.passage is Passage.PROBE or _paused(rt, health, now=now)


def _paused(rt: Runtime, health: EndpointHealth, *, now: int) -> bool:
    """True when the endpoint holds its callbacks back, pausing it when its run says so."""
    if health.state is not EndpointState.HEALTHY:
        return True
    sustained = (
        health.failures >= PAUSE_AFTER_FAILURES
        and (health.failing_since or now) <= now - PAUSE_AFTER_MS
    )
    if not sustained:
        return False
    endpoint = health.endpoint
    if rt.endpoints.pause(
        endpoint,
        now=now,
        failures=PAUSE_AFTER_FAILURES,
        failing_before=now - PAUSE_AFTER_MS,
        probe_at=now + rt.settings.endpoint_probe_interval_ms,
    ):
        reason = f"{health.failures} failed attempts in a row: {health.last_error or ''}"
        announce(rt, Transition.PAUSED, endpoint, now=now, reason=reason)
        return True
    # Another worker's failure paused it first (or a delivery ended the run meanwhile).
    return rt.endpoints.get(endpoint).state is not EndpointState.HEALTHY


def resume(
    rt: Runtime, endpoint: Endpoint, *, now: int, was: EndpointState, drain_now: bool = True
) -> bool:
    """paused or disabled -> healthy, announced, and (`drain_now`) the first page of its
    backlog sent; otherwise the sweep sends it (a resumed endpoint stays on its list)."""
    if not rt.endpoints.resume(endpoint, now=now, was=was):
        return False
    announce(rt, Transition.RESUMED, endpoint, now=now, reason=f"was {was.value}")
    if drain_now:
        drain(rt, endpoint, now=now, limit=DRAIN_INLINE)
    return True


def enable(rt: Runtime, endpoint: Endpoint, *, drain_now: bool = True) -> bool:
    """An operator's (or the tenant's) re-enable: a disabled or paused endpoint resumes now;
    False when it was neither. A request path passes `drain_now=False`: no request sends to a
    queue, and the next sweep (within a minute) sends the backlog."""
    now = rt.clock()
    return any(
        resume(rt, endpoint, now=now, was=was, drain_now=drain_now)
        for was in (EndpointState.DISABLED, EndpointState.PAUSED)
    )


def drain(rt: Runtime, endpoint: Endpoint, *, now: int, limit: int) -> int:
    """Send up to `limit` parked callbacks, oldest event first, due now; how many were sent."""
    refs = rt.callbacks.parked(endpoint, limit=limit)
    # Each is reopened before it is sent: a lost send is re-sent by the sweep (it is back in
    # the hand-off shards); one another drain reopened first is not sent twice from here.
    reopened = [ref for ref in refs if rt.callbacks.unpark(ref, now=now)]
    hand_off(rt, reopened, endpoint.tenant)
    return len(reopened)


def look_after(rt: Runtime, endpoint: Endpoint, *, now: int) -> int:
    """The sweep's care of a held endpoint: a paused one's due probe is released (its oldest
    parked callback: no traffic may come to carry it), a resumed one's backlog drained, and a
    drained one leaves the sweep's list. How many callbacks it sent."""
    health = rt.endpoints.get(endpoint)
    if health.state is EndpointState.PAUSED:
        if (health.next_probe_at or 0) > now:
            return 0
        return drain(rt, endpoint, now=now, limit=1)
    if health.state is EndpointState.DISABLED:
        return 0
    sent = drain(rt, endpoint, now=now, limit=DRAIN_PAGE)
    if sent == 0:
        rt.endpoints.settle(endpoint, settled_before=now - HANDOFF_GRACE_MS)
    return sent


def health_report(rt: Runtime, tenants: list[str]) -> list[dict[str, object]]:
    """Every recorded endpoint of `tenants` and its health (for the operator's CLI)."""
    return [
        {
            "tenant": health.endpoint.tenant,
            "origin": health.endpoint.origin,
            "state": health.state.value,
            "changed_at": health.changed_at,
            "failures": health.failures,
            "next_probe_at": health.next_probe_at,
            "last_error": health.last_error,
        }
        for tenant in tenants
        for health in rt.endpoints.of_tenant(tenant)
    ]
