"""I5 as liveness: the state machine of test_state_machine.py with every hand-off lost and
attempts that die after their claim; with the receiver healthy again, the sweep and the messages
it sends deliver every open callback within a few grace periods.

The state machine checks that each open callback has a cover (an entry of its own, or its job's);
this checks that the covers are acted on: a sweep that found a callback and never sent it, or
sent it too late, fails here and nowhere else.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test

from jobstream.domain import CallbackState, IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks, endpoints
from jobstream.service.callbacks import LEASE_MARGIN_MS
from jobstream.service.sweep import sweep
from jobstream.store.jobs import MAX_CALLBACK_ATTEMPTS
from jobstream.store.ports import HANDOFF_GRACE_MS
from tests.integration.test_state_machine import (
    FINAL_INTENT_STATES,
    MACHINE_SETTINGS,
    ServiceMachine,
    picks,
)
from tests.support.queues import SentCallbacks

# A sweep a minute, as deployed; how many a settling runs, and how late a callback may be.
SWEEP_EVERY_MS = HANDOFF_GRACE_MS + 1_000
SETTLING_SWEEPS = 8
LATE_MS = 4 * SWEEP_EVERY_MS


class LivenessMachine(ServiceMachine):
    """No dispatcher: every callback's first hand-off is lost, and the sweep must find it."""

    def __init__(self) -> None:
        super().__init__()
        self.messages = SentCallbacks()
        self.world.rt = self.rt = replace(self.world.rt, queue=self.messages)

    def pick_intent(self, pick: int, which: int) -> tuple[IntentRef, dict[str, Any]]:
        with_callback = sorted(
            (m for m in self.world.jobs.values() if m.callback), key=lambda m: m.job_id
        )
        model = with_callback[pick % len(with_callback)]
        intents = self.world.view(model.job_id).intents
        intent = intents[which % len(intents)]
        return IntentRef(model.job_id, intent["sequence"]), intent

    def has_callbacks(self) -> bool:
        return any(m.callback for m in self.world.jobs.values())

    @precondition(has_callbacks)
    @rule(pick=picks, which=picks)
    def claim_and_die(self, pick: int, which: int) -> None:
        """An attempt that claims its callback and dies before its outcome (its invocation
        timed out or crashed): only its lease lapsing frees the callback."""
        ref, _ = self.pick_intent(pick, which)
        lease_ms = self.rt.settings.callback_timeout_ms + LEASE_MARGIN_MS
        claimed = self.rt.callbacks.claim(ref, now=self.world.clock.now, lease_ms=lease_ms)
        event(f"claim_and_die: {claimed is not None}")

    @precondition(has_callbacks)
    @rule(pick=picks, which=picks, status=st.sampled_from([204, 503, 404]))
    def deliver(self, pick: int, which: int, status: int) -> None:
        ref, intent = self.pick_intent(pick, which)
        lapsed = (
            intent["state"] == CallbackState.IN_FLIGHT
            and intent["lease_until"] < self.world.clock.now
        )
        if not (lapsed and intent["attempts"] >= MAX_CALLBACK_ATTEMPTS):
            super().deliver(pick, which, status)
            return
        # Its last attempt died unrecorded: dead, without another POST.
        posts = len(self.world.posts)
        callbacks.deliver(self.rt, ref)
        after = self.rt.callbacks.get(ref)
        assert after is not None
        assert after.state == CallbackState.DEAD
        assert len(self.world.posts) == posts

    @rule()
    def deliver_sent(self) -> None:
        """The messages the sweeps sent arrive, the receiver healthy."""
        self.world.poster_status = 204
        for ref in self.messages.take():
            callbacks.deliver(self.rt, ref)

    @rule()
    def settle(self) -> None:
        """A sweep a minute, each one's messages delivered: every open callback is delivered
        within a few minutes of its event or of its retry's due time."""
        self.world.poster_status = 204
        for _ in range(SETTLING_SWEEPS):
            self.world.clock.advance(SWEEP_EVERY_MS)
            assert sweep(self.rt).errors == 0
            for ref in self.messages.take():
                callbacks.deliver(self.rt, ref)
        now = self.world.clock.now
        late = [
            (job_id, intent["sequence"], intent["kind"], intent["state"], now - intent["at"])
            for job_id, view in self.world.views().items()
            for intent in view.intents
            if intent["state"] not in FINAL_INTENT_STATES
            and max(intent["at"], intent["next_attempt_at"]) < now - LATE_MS
        ]
        assert not late, f"open callbacks left undelivered: {late}"


def test_the_sweep_delivers_every_callback_whose_hand_off_was_lost(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in test_state_machine.py: no endpoint is paused, so delivery is the callback's own.
    monkeypatch.setattr(endpoints, "PAUSE_AFTER_FAILURES", 10**9)

    class Machine(LivenessMachine):
        base = rt

    run_state_machine_as_test(Machine, settings=settings(MACHINE_SETTINGS, max_examples=15))
