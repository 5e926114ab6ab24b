"""Standard Webhooks signatures (https://www.standardwebhooks.com), with no third-party package.

The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the signature is
`v1,` + base64(HMAC-SHA256(secret key, content)), and the key is the base64 after `whsec_`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SIGNATURE_VERSION: Final = "v1"
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"
DEFAULT_TOLERANCE_S: Final = 300


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


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: str,
    *,
    now: int,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """The receiver's check: a fresh timestamp and one matching `v1` signature.

    Header names match case-insensitively. An invalid secret is the caller's configuration
    error and raises ValueError rather than answering False.
    """
    key = decode_secret(secret)
    lowered = {name.lower(): value for name, value in headers.items()}
    message_id = lowered.get(ID_HEADER)
    timestamp_text = lowered.get(TIMESTAMP_HEADER)
    signatures = lowered.get(SIGNATURE_HEADER)
    if message_id is None or timestamp_text is None or signatures is None:
        return False
    timestamp_text = timestamp_text.strip()
    if not timestamp_text.isascii() or not timestamp_text.isdigit():
        return False
    timestamp = int(timestamp_text)
    # Outside the window a captured request is a replay, whatever its signature.
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = _sign_with_key(key, message_id, timestamp, body).encode()
    matched = False
    for candidate in signatures.split(" "):
        # Compare every candidate so the time taken does not depend on which one matched.
        if hmac.compare_digest(expected, candidate.encode("utf-8", "replace")):
            matched = True
    return matched


def _sign_with_key(key: bytes, message_id: str, timestamp: int, body: str) -> str:
    content = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"
