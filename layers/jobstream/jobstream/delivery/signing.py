"""Standard Webhooks signatures (https://www.standardwebhooks.com), with no third-party package.

The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the signature is
`v1,` + base64(HMAC-SHA256(secret key, content)), and the key is the base64 after `whsec_`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SIGNATURE_VERSION: Final = "v1"
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


def decode_secret(secret: str) -> bytes:
    """The raw key of a `whsec_<base64>` secret; ValueError says what is wrong with it."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"the signing secret must start with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError(
            f"the signing secret must be {SECRET_PREFIX!r} followed by valid base64"
        ) from None
    if not key:
        raise ValueError("the signing secret's key is empty")
    return key


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


def _sign_with_key(key: bytes, message_id: str, timestamp: int, body: str) -> str:
    content = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"
