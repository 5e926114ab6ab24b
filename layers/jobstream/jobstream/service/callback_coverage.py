"""How the sweep finds a callback whose hand-off was lost, without an index entry per event.

Most callbacks are delivered at once, so an entry of their own in the sweep index (written with
the event, removed by the delivery: two index writes each) would be paid for nothing. Instead:

- a job's callbacks are covered by the job while it is among the sweep's open jobs
  (JOB#ACTIVE), its terminal event's included: the sweep looks at its open callbacks once its
  first event is past the grace period (`resend_unindexed`). An ended job stays there until
  its terminal event is written and its terminal callback is closed or has an entry of its own
  (`release_job` after the callback's attempt): usually one delivery later. A grace period after
  its end, the sweep gives its terminal callback, still open, an entry of its own (sending it at
  once, and with it the job's others), and takes the job off (`look_after_ended`);
- a terminal callback with an entry of its own (one that failed an attempt, or recorded by the
  release before, or written late from its job's description) covers the job's other callbacks
  once the job has left JOB#ACTIVE. The sweep handling that entry looks at them too, and before
  a terminal callback leaves the hand-off shards, or its job leaves JOB#ACTIVE (delivered, dead
  or parked), every other open one without an entry gets its own (`hand_over`);
- a callback that fails an attempt, is parked, revived or unparked has an entry of its own.

So every open callback is always found by one of them (invariant I5).
"""

from __future__ import annotations

import logging
from typing import Final

from jobstream.domain import CallbackRecord, CallbackState, IntentRef, JobRecord
from jobstream.protocol.events import TERMINAL_KINDS
from jobstream.runtime import Runtime
from jobstream.service.handoff import hand_off
from jobstream.store.ports import HANDOFF_GRACE_MS

logger = logging.getLogger(__name__)
# How long after a re-send the sweep looks at a callback again: beyond one sweep interval (a
# minute) plus the queue's own delay at first, as long as it has been due at each re-send after,
# at most an hour: a receiver's backlog is re-sent a few times an hour, not at every sweep.
RESEND_FIRST_WAIT_MS: Final = 2 * HANDOFF_GRACE_MS
RESEND_MAX_WAIT_MS: Final = 60 * 60_000
# The states of an open callback that may have no entry of its own (its job covers it).
_UNINDEXED_OPEN: Final = frozenset({CallbackState.PENDING, CallbackState.IN_FLIGHT})


def resend_wait_ms(callback: CallbackRecord, resent_at: int) -> int:
    """How long after its re-send at `resent_at` the sweep looks at `callback` again: as long as
    it had been due then (since its event, its last failed attempt's retry time, a redrive or a
    resume: `next_attempt_at`), within RESEND_FIRST_WAIT_MS..RESEND_MAX_WAIT_MS. Each re-send
    no attempt answered doubles the wait, so a callback waiting in a receiver's backlog is
    re-sent ~log2(its wait / 2 minutes) times, not once a minute; an attempt starts it over."""
    return min(RESEND_MAX_WAIT_MS, max(RESEND_FIRST_WAIT_MS, resent_at - callback.next_attempt_at))


def _unindexed_open(
    callbacks: list[CallbackRecord], *, but: int | None = None
) -> list[CallbackRecord]:
    return [
        callback
        for callback in callbacks
        if callback.sequence != but and not callback.indexed and callback.state in _UNINDEXED_OPEN
    ]


def covers_job(intent: CallbackRecord) -> bool:
    """Whether `intent`'s entry in the sweep index covers its job's other callbacks."""
    return intent.kind in TERMINAL_KINDS


def hand_over(rt: Runtime, intent: CallbackRecord, job: JobRecord) -> None:
    """Before a terminal callback leaves the hand-off shards, or its job the open jobs: each of
    its job's open callbacks without an entry of its own gets one, due a grace period after its
    event, so that none is left without cover. Usually there is none (they were delivered
    first): one consistent read."""
    if not covers_job(intent):
        return
    # Consistent: a callback written a moment before the terminal event (a progress report)
    # must be seen, or nothing would cover it once this entry is gone.
    callbacks = rt.callbacks.of_job(job.job_id, since=job.created_at, consistent=True)
    _give_entries(rt, callbacks, but=intent.sequence)


def _give_entries(rt: Runtime, callbacks: list[CallbackRecord], *, but: int | None = None) -> None:
    now = rt.clock()
    for callback in _unindexed_open(callbacks, but=but):
        due = max(callback.created_at, callback.resent_at or 0) + HANDOFF_GRACE_MS
        rt.callbacks.watch(callback.ref, due=due, now=now)


def release_job(rt: Runtime, intent: CallbackRecord, job: JobRecord) -> None:
    """After a terminal callback's attempt was recorded (delivered, parked, dead, or waiting for
    its retry under an entry of its own): when its job covered it (it had no entry of its own),
    the job leaves the sweep's open jobs, its other open callbacks handed over first (`hand_over`,
    for a closed one). A failure is left to the sweep (`look_after_ended`): the attempt stands."""
    if not covers_job(intent) or intent.indexed:
        return
    try:
        rt.store.leave_active(job.job_id, sequence=intent.sequence)
    except Exception:
        logger.warning(
            "could not take an ended job off the open jobs",
            extra={"job_id": job.job_id},
            exc_info=True,
        )


def look_after_ended(rt: Runtime, job: JobRecord, now: int) -> tuple[bool, CallbackRecord | None]:
    """The sweep's look at an ended job still among its open jobs, a grace period after its
    end (before, its writer, or its terminal callback's first attempt, may still be on the
    way): its terminal callback, still open without an entry of its own (its hand-off lost, or
    waiting in a queue), gets one, due at once, which covers the job's other callbacks once the
    job has left (the hand-off pass's `_resend_covered`); then the job leaves the open jobs. Its
    terminal event not written yet (its writer died), it stays: the sweep writes the event
    from the job's description, and takes the job off at its next look.

    Returns whether the job left the open jobs, and the terminal callback given its entry just
    now (the sweep sends it at once, and with it the job's others, as the hand-off pass would)."""
    if now - job.last_event_at < HANDOFF_GRACE_MS:
        return False, None
    given: CallbackRecord | None = None
    if job.callback_url:
        last = rt.callbacks.get(IntentRef(job.job_id, job.event_count))
        if last is None or last.created_at < job.created_at:
            return False, None  # not written yet (or an earlier job's under the same key)
        if not covers_job(last):
            # An event recorded after the end (it has an entry of its own): the terminal one
            # before it may still be the job's to cover, and every open one gets an entry.
            consistent = rt.callbacks.of_job(job.job_id, since=job.created_at, consistent=True)
            _give_entries(rt, consistent)
        elif not last.indexed and last.state in _UNINDEXED_OPEN:
            if not rt.callbacks.watch(last.ref, due=now, now=now):
                return False, None  # closed or given an entry meanwhile: the next look sees it
            given = last
    elif rt.store.unwritten_events([job]):
        return False, None
    return rt.store.leave_active(job.job_id, sequence=job.event_count), given


def resend_unindexed(rt: Runtime, job: JobRecord, now: int) -> int:
    """Send again the job's open callbacks without an entry of their own that no delivery
    closed within the grace period after their event, or the wait after their last re-send
    (`resend_wait_ms`); how many.

    A callback in flight under a live lease is left alone (its attempt may still close it)."""
    if not job.callback_url or now - job.created_at < HANDOFF_GRACE_MS:
        return 0  # nothing of it can be overdue yet
    callbacks = rt.callbacks.of_job(job.job_id, since=job.created_at, consistent=False)
    resent = 0
    for callback in _unindexed_open(callbacks):
        if now < _next_look(callback):
            continue
        if callback.state is CallbackState.IN_FLIGHT and (callback.lease_until or 0) >= now:
            continue
        # Noted first: a crash in between leaves it to the next look, a grace period later.
        if rt.callbacks.mark_resent(callback.ref, now=now):
            hand_off(rt, [callback.ref], job.tenant)
            resent += 1
    return resent


def _next_look(callback: CallbackRecord) -> int:
    if callback.resent_at is None:
        return callback.created_at + HANDOFF_GRACE_MS
    return callback.resent_at + resend_wait_ms(callback, callback.resent_at)
