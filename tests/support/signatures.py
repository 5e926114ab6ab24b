"""Checking the producer's callback signatures as a consumer does: with the consumer SDK's verifier
(jobstream_client.webhooks), written independently of the producer's signing."""

from __future__ import annotations

from collections.abc import Mapping

from jobstream_client.webhooks import (
    DEFAULT_TOLERANCE_S,
    CallbackVerificationError,
    verify_callback,
)


def signature_verifies(
    secret: str,
    headers: Mapping[str, str],
    body: str,
    *,
    now: int,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """A fresh timestamp and one `v1` signature by `secret`; an invalid secret raises ValueError."""
    try:
        verify_callback(headers, body, secret, tolerance_s=tolerance_s, now_s=now)
    except CallbackVerificationError as error:
        # The body is read as an Event only once the signature is proven.
        return error.reason == "body"
    return True
