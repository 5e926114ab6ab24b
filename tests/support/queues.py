"""A callback queue for tests that look at what is sent rather than deliver it."""

from __future__ import annotations

from collections.abc import Sequence

from jobstream.domain import IntentRef
from jobstream.queue import CallbackQueue


class SentCallbacks(CallbackQueue):
    """The callback queue, reduced to the intents it is asked to send (nothing reaches SQS)."""

    def __init__(self) -> None:
        super().__init__(url="sent", dead_letter_url=None)
        self.sent: list[IntentRef] = []

    def send(
        self,
        refs: Sequence[IntentRef],
        tenants: Sequence[str | None] | None = None,
        without_result: Sequence[bool] | None = None,
    ) -> int:
        self.sent.extend(refs)
        return len(refs)

    def take(self) -> list[IntentRef]:
        """What was sent since the last take, as a queue's poller would receive it."""
        taken, self.sent = self.sent, []
        return taken
