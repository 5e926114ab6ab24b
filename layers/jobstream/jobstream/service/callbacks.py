"""Callback delivery: one attempt per queue message, idempotent under duplicates.

An attempt reads the callback with its job (one read). A first attempt soon after its event
POSTs without claiming the callback: nothing but a duplicate message can meet it before its
outcome (the sweep looks at it only HANDOFF_GRACE_MS after its event), its outcome's one
conditional write counts the attempt, and a duplicate that races it POSTs at most once more
(callbacks are at-least-once; receivers dedupe by event id and idempotency key). Any other
attempt (a retry, a re-send, a message late after a backlog) claims the callback first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from jobstream import observability
from jobstream.backoff import parse_retry_after, retry_delay_ms
from jobstream.config.settings import ConfigurationError, Settings
from jobstream.config.tenants import TenantConfig
from jobstream.deadline import request_deadline
from jobstream.delivery.classify import Outcome, Verdict, classify_exception, classify_status
from jobstream.delivery.signing import signed_post_headers
from jobstream.domain import (
    AttemptAnswer,
    CallbackRecord,
    CallbackState,
    Endpoint,
    IntentRef,
    JobRecord,
)
from jobstream.errors import JobstreamError
from jobstream.jobtypes import registry
from jobstream.lifecycle.log import body_shows_result, callback_body
from jobstream.outbound.guard import check_at_delivery
from jobstream.protocol.events import callback_event_id, callback_idempotency_key
from jobstream.queue import parse_callback_message
from jobstream.runtime import Runtime
from jobstream.service import callback_coverage, endpoints
from jobstream.service.messages import parse_or_drop
from jobstream.store.ports import HANDOFF_GRACE_MS, MAX_CALLBACK_ATTEMPTS

logger = logging.getLogger(__name__)

# An attempt's lease covers the request's timeout plus time to record the outcome.
LEASE_MARGIN_MS = 30_000
# Time an attempt needs besides the POST itself: the claim, the outcome, the visibility change
# (each AWS call at most one hung attempt: retries.RetryPolicy.attempt_ms). A POST ends this
# long before the invocation's deadline at the latest.
OUTCOME_MARGIN_MS: Final = 5_000
# The longest retry wait a message spends in flight. A standard queue holds about 120,000
# messages in flight for all tenants together: a longer wait deletes the message, and the sweep
# re-sends the callback when it is due (`next_attempt_at`, on the sweep index since mark_retry),
# so a receiver that is down for hours holds no message in flight for those hours.
IN_FLIGHT_WAIT_MAX_MS: Final = 300_000
# How long a callback waits, without an attempt, while the consumer registry cannot be read.
REGISTRY_UNREADABLE_RETRY_MS: Final = 30_000
# The callback queue's maxReceiveCount (template.yaml): a message received that often would go to
# the dead-letter queue unsettled; one received once fewer is left to the sweep instead.
QUEUE_MAX_RECEIVES: Final = 8


class Disposition(StrEnum):
    """What the queue should do with the message after an attempt."""

    DONE = "done"  # delete it: delivered, dead-lettered, or nothing left to do
    RETRY = "retry"  # keep it: it comes back after `delay_ms`


@dataclass(frozen=True, slots=True)
class AttemptResult:
    disposition: Disposition
    delay_ms: int = 0
    outcome: str = ""


def deliver(rt: Runtime, ref: IntentRef, *, without_result: bool = False) -> AttemptResult:
    """One attempt for the intent a message names; idempotent under duplicate messages.
    `without_result`: the message says its event's body shows no result (not read)."""
    now = rt.clock()
    settings = rt.settings
    current, job = _read(rt, ref, without_result=without_result)
    if current is None:
        return _not_claimed(rt, current, job, now)
    if job is not None and current.created_at < job.created_at:
        job = None  # an event of an earlier job under the same key: that job is gone
    claimless = _claimless(settings, current, now)
    if not claimless and not _claimable(current, now):
        return _not_claimed(rt, current, job, now)
    tenant = _tenant_of(rt, job)
    if isinstance(tenant, AttemptResult):
        return tenant
    taken = current if claimless else _claim(rt, ref, job, now)
    if isinstance(taken, AttemptResult):
        return taken
    intent = taken
    observability.bind(event_id=callback_event_id(intent))
    body = callback_body(job, intent, now, words=registry) if job is not None else None
    if job is None or body is None:
        # Nothing left to send: the job is gone (past its retention).
        answer = AttemptAnswer(None, "the job no longer exists")
        return _dead(rt, intent, answer, now=now, job=None)
    passed = endpoints.gate(rt, endpoints.endpoint_of(job.tenant, job.callback_url), now=now)
    if passed.endpoint is not None and passed.passage is endpoints.Passage.HOLD:
        return _park(rt, intent, passed.endpoint, None, job=job)
    verdict, retry_after_ms = _attempt(rt, intent, job, tenant, body)
    return _outcome(rt, intent, passed, verdict, retry_after_ms, job=job)


def _claim(
    rt: Runtime, ref: IntentRef, job: JobRecord | None, now: int
) -> CallbackRecord | AttemptResult:
    """The callback claimed for this attempt, or what its message should do when another
    attempt took or closed it since it was read."""
    claimed = rt.callbacks.claim(
        ref, now=now, lease_ms=rt.settings.callback_timeout_ms + LEASE_MARGIN_MS
    )
    if claimed is None:
        # Taken or closed since it was read: as it is now.
        return _not_claimed(rt, rt.callbacks.get(ref), job, now)
    return claimed


def _read(
    rt: Runtime, ref: IntentRef, *, without_result: bool
) -> tuple[CallbackRecord | None, JobRecord | None]:
    """The callback and its job, with the job's result unless the message said its body shows
    none; read again with it if the callback turns out to show one."""
    current, job = rt.callbacks.get_with_job(ref, with_result=not without_result)
    if without_result and current is not None and body_shows_result(current.kind):
        # The slot holds another event than the message's (a later job's under the same key).
        return rt.callbacks.get_with_job(ref)
    return current, job


def _claimless(settings: Settings, current: CallbackRecord, now: int) -> bool:
    """Whether this attempt goes without a claim: the callback's first, due, sent by the
    dispatcher alone (`resent_at` absent: no sweep, redrive or resume has sent it), and young
    enough that the attempt, its outcome included (the lease a claim would take), is over
    before the sweep would look at it (HANDOFF_GRACE_MS after its event)."""
    return (
        current.state is CallbackState.PENDING
        and current.attempts == 0
        and current.next_attempt_at <= now
        and current.resent_at is None
        and now + settings.callback_timeout_ms + LEASE_MARGIN_MS
        < current.created_at + HANDOFF_GRACE_MS
    )


def _claimable(current: CallbackRecord, now: int) -> bool:
    """Whether `claim` would take the callback as read (its condition): due and open, or an
    attempt's whose lease has lapsed, with attempts left. Any other is settled from the read,
    without a write."""
    due = current.state in {CallbackState.PENDING, CallbackState.RETRY_WAIT} and (
        current.next_attempt_at <= now
    )
    abandoned = current.state is CallbackState.IN_FLIGHT and (current.lease_until or 0) < now
    return (due or abandoned) and current.attempts < MAX_CALLBACK_ATTEMPTS


def _duplicate() -> AttemptResult:
    """The attempt's outcome was not recorded: another attempt claimed or closed the callback
    meanwhile (a duplicate message, or a re-send after a lapsed lease), and that one records
    its own. This POST went out all the same (callbacks are at-least-once)."""
    observability.count("callbacks_duplicate_attempts")
    return AttemptResult(Disposition.DONE, outcome="settled")


def _outcome(
    rt: Runtime,
    intent: CallbackRecord,
    passed: endpoints.Gate,
    verdict: Verdict,
    retry_after_ms: int | None,
    *,
    job: JobRecord,
) -> AttemptResult:
    """Record how the attempt went, for the callback and for its endpoint (and on the lists of
    its job's tenant: retrying, dead)."""
    finished_at = rt.clock()
    tenant = job.tenant
    if verdict.outcome is Outcome.DELIVERED:
        callback_coverage.hand_over(rt, intent, job)
        recorded = rt.callbacks.mark_delivered(intent, now=finished_at, status=verdict.status)
        # The receiver answered: its endpoint's health says so, whoever records the callback.
        endpoints.after_delivery(rt, passed, now=finished_at)
        if recorded is None:
            return _duplicate()
        callback_coverage.release_job(rt, intent, job)
        observability.count("callbacks_delivered")
        return AttemptResult(Disposition.DONE, outcome="delivered")
    answer = AttemptAnswer(verdict.status, verdict.error)
    if passed.endpoint is not None and endpoints.holds_after_failure(
        rt, passed, verdict, now=finished_at
    ):
        return _park(rt, intent, passed.endpoint, answer, job=job)
    made = intent.attempts_made
    if verdict.outcome in {Outcome.DEAD, Outcome.GONE} or made >= intent.max_attempts:
        return _dead(rt, intent, answer, now=finished_at, job=job)
    settings = rt.settings
    delay = retry_delay_ms(
        made,
        base_ms=settings.callback_retry_base_ms,
        max_ms=settings.callback_retry_max_ms,
        retry_after_ms=retry_after_ms,
    )
    next_attempt_at = finished_at + delay
    if (
        rt.callbacks.mark_retry(intent, answer, next_attempt_at=next_attempt_at, tenant=tenant)
        is None
    ):
        return _duplicate()
    # Waiting under an entry of its own now, a terminal callback covers its job's others.
    callback_coverage.release_job(rt, intent, job)
    observability.count("callbacks_retried")
    return AttemptResult(Disposition.RETRY, delay_ms=delay, outcome="retry")


def _park(
    rt: Runtime,
    intent: CallbackRecord,
    endpoint: Endpoint,
    answer: AttemptAnswer | None,
    *,
    job: JobRecord,
) -> AttemptResult:
    """Its endpoint is paused or disabled: the callback waits for it, its attempt not spent;
    the message goes (a resume sends the callback again)."""
    callback_coverage.hand_over(rt, intent, job)
    if not endpoints.park(rt, intent, endpoint, answer):
        return _duplicate()
    callback_coverage.release_job(rt, intent, job)
    observability.count("callbacks_parked")
    return AttemptResult(Disposition.DONE, outcome="parked")


def _dead(
    rt: Runtime, intent: CallbackRecord, answer: AttemptAnswer, *, now: int, job: JobRecord | None
) -> AttemptResult:
    """Dead, listed for its job's tenant (`job` None: the job is gone, and no tenant lists it)."""
    if job is not None:
        callback_coverage.hand_over(rt, intent, job)
    tenant = job.tenant if job is not None else None
    if rt.callbacks.mark_dead(intent, answer, now=now, tenant=tenant) is None:
        return _duplicate()
    if job is not None:
        callback_coverage.release_job(rt, intent, job)
    observability.count("callbacks_dead_lettered")
    return _send_dead_letter(rt, intent.ref, now=now)


def _send_dead_letter(rt: Runtime, ref: IntentRef, *, now: int) -> AttemptResult:
    """The dead letter, then its record. Should the send fail, the message raises and comes
    back (SQS keeps it), and the callback, dead without a letter, gets one then."""
    rt.callback_queue.dead_letter(ref)
    rt.callbacks.mark_dead_lettered(ref, now=now)
    return AttemptResult(Disposition.DONE, outcome="dead")


class RetryLaterError(JobstreamError):
    """The message must come back later; its visibility has been set to the retry delay."""


def handle_message(rt: Runtime, body: str, receipt_handle: str, receive_count: int = 1) -> str:
    """Process one queue message (handed out `receive_count` times); raises RetryLaterError to
    keep it (a partial batch failure)."""
    # One message per record of a batch: no key may carry over from the previous one.
    observability.bind(job_id=None, event_id=None)
    message = parse_or_drop(parse_callback_message, body, "callback intent")
    if message is None:
        return "invalid"
    ref = message.ref
    observability.bind(job_id=ref.job_id)
    result = deliver(rt, ref, without_result=message.without_result)
    if result.disposition is Disposition.RETRY:
        # A long wait, or a message the queue would dead-letter unsettled at its next return:
        # deleted, and the callback (open: covered, invariant I5) re-sent by the sweep when due.
        if result.delay_ms > IN_FLIGHT_WAIT_MAX_MS or receive_count >= QUEUE_MAX_RECEIVES - 1:
            observability.count("callbacks_left_to_sweep")
            return "left_to_sweep"
        rt.callback_queue.delay(receipt_handle, result.delay_ms)
        raise RetryLaterError(f"{ref.item_id} retries in {result.delay_ms} ms")
    return result.outcome


def _tenant_of(rt: Runtime, job: JobRecord | None) -> TenantConfig | AttemptResult | None:
    """The job's tenant as the registry holds it now (None: removed, or no job), read before
    anything is claimed; what the message should do when the registry cannot be read."""
    if job is None:
        return None
    try:
        return rt.tenant(job.tenant)
    except ConfigurationError as error:
        return _registry_unreadable(error)


def _registry_unreadable(error: ConfigurationError) -> AttemptResult:
    """The consumer registry cannot be read (our outage, or an invalid document): the callback
    is not claimed, spends none of its attempts and its endpoint is not blamed; its message
    comes back later (or the sweep re-sends it: every open callback is covered)."""
    logger.warning("callback waits for the consumer registry: %s", error)
    observability.count("callbacks_waiting_for_registry")
    return AttemptResult(
        Disposition.RETRY, delay_ms=REGISTRY_UNREADABLE_RETRY_MS, outcome="tenants_unavailable"
    )


def _not_claimed(
    rt: Runtime, current: CallbackRecord | None, job: JobRecord | None, now: int
) -> AttemptResult:
    """A callback this attempt may not take (`current`, as read; `job`: its job, None when
    gone): what its message should do."""
    if current is None or current.state == CallbackState.DELIVERED:
        # Delivered or unknown: acknowledged without a second POST.
        return AttemptResult(Disposition.DONE, outcome="settled")
    if current.state == CallbackState.PARKED:
        # Its endpoint holds it: the resume that ends that sends it again.
        return AttemptResult(Disposition.DONE, outcome="parked")
    if current.state == CallbackState.DEAD:
        return _dead_letter_if_missing(rt, current, now)
    if current.state != CallbackState.IN_FLIGHT and current.next_attempt_at > now:
        # Open and not due yet: an early duplicate, or this clock a few ms behind the one that
        # made it due. It comes back when due (never dropped: the sweep would wait a minute).
        return AttemptResult(Disposition.RETRY, delay_ms=current.next_attempt_at - now)
    abandoned = current.state == CallbackState.IN_FLIGHT and (current.lease_until or 0) < now
    if abandoned and current.attempts >= current.max_attempts:
        # The last attempt never recorded its outcome (its invocation died): no budget is left.
        answer = AttemptAnswer(None, "attempt_abandoned: the last attempt ended without an outcome")
        return _dead(rt, current, answer, now=now, job=job)
    # Another attempt holds it (or took it since); if that one dies, the sweep re-sends it
    # after its lease.
    return AttemptResult(Disposition.DONE, outcome="held")


def _dead_letter_if_missing(rt: Runtime, dead: CallbackRecord, now: int) -> AttemptResult:
    if dead.dead_lettered_at is None:
        # Dead without a dead letter (its send failed, and this message came back): no alarm
        # would see it until the DLQ has one.
        return _send_dead_letter(rt, dead.ref, now=now)
    return AttemptResult(Disposition.DONE, outcome="settled")


def _attempt(
    rt: Runtime, intent: CallbackRecord, job: JobRecord, tenant: TenantConfig | None, body: str
) -> tuple[Verdict, int | None]:
    """The verdict of one POST of `body`, and the wait the receiver asked for (Retry-After).

    `tenant`: the job's tenant's credentials and origins as read for this attempt, not at
    admission: a rotation in between is honoured, and a removed tenant's callbacks die rather
    than go out unsigned.
    """
    # One deadline for the whole request, its DNS answer included; never past the invocation's.
    deadline = request_deadline(rt.settings.callback_timeout_ms, reserve_ms=OUTCOME_MARGIN_MS)
    if tenant is None:
        return Verdict(
            Outcome.DEAD,
            None,
            f"tenant_removed: tenant {job.tenant!r} is no longer in the consumer registry, "
            "so its callbacks have no credentials",
        ), None
    now = rt.clock()
    message_id = callback_idempotency_key(intent)
    headers = signed_post_headers(
        message_id=message_id,
        timestamp=now // 1000,
        body=body,
        secrets=tenant.signing_keys(now),
        bearer=tenant.callback_token,
    )
    try:
        # Checked again at delivery, under the tenant's origins as they are now, and resolved
        # here (never at admission): the connection is pinned to the addresses checked.
        target = check_at_delivery(
            job.callback_url or "", tenant.origins, resolver=rt.resolver, deadline=deadline
        )
        response = rt.poster(target, body.encode("utf-8"), headers, deadline.remaining_s())
    except Exception as error:  # noqa: BLE001 - every failure is classified, none escapes
        return classify_exception(error), None
    verdict = classify_status(response.status, response.body_excerpt)
    return verdict, parse_retry_after(response.retry_after, now_ms=rt.clock())
