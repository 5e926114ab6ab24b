"""Standard Webhooks signatures (https://www.standardwebhooks.com), with no third-party package.

The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the signature is
`v1,` + base64(HMAC-SHA256(secret key, content)), and the key is the base64 after `whsec_`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

from jobstream.config.signing_secrets import decode_secret

SIGNATURE_VERSION: Final = "v1"
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The `v1,<base64>` signature of one message."""
    return _sign_with_key(decode_secret(secret), message_id, timestamp, body)


def webhook_headers(
    *, message_id: str, timestamp: int, body: str, secrets: Sequence[str]
) -> dict[str, str]:
    """The Standard Webhooks headers; one signature per secret, space-separated (during a
    rotation both the new and the old secret sign, so a verifier holding either accepts), and
    no signature header without a secret."""
    headers = {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp)}
    if secrets:
        headers[SIGNATURE_HEADER] = " ".join(
            sign(secret, message_id, timestamp, body) for secret in secrets
        )
    return headers


def signed_post_headers(
    *, message_id: str, timestamp: int, body: str, secrets: Sequence[str], bearer: str | None
) -> dict[str, str]:
    """Every header of a POST to a tenant (a callback, an alert): JSON, the idempotency key,
    the Standard Webhooks signature, and the tenant's bearer token when it issued one."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "jobstream-callbacks/1",
        "X-Idempotency-Key": message_id,
        **webhook_headers(message_id=message_id, timestamp=timestamp, body=body, secrets=secrets),
    }
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


def _sign_with_key(key: bytes, message_id: str, timestamp: int, body: str) -> str:
    content = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"
