"""For receivers of callbacks: check that a POSTed event really comes from the producer.

A producer signs each callback the Standard Webhooks way (https://www.standardwebhooks.com):
`webhook-signature: v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, the key
being the base64 after `whsec_` of the shared secret. While a secret is rotated the header may
carry several space-separated signatures, and a receiver may hold several secrets: one match of
any signature with any secret is enough. The bearer token (`Authorization: Bearer …`) is checked
too when the receiver issued one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from jobstream_client.errors import JobstreamError
from jobstream_client.models import Event

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret
DEFAULT_TOLERANCE_S: Final = 300


class CallbackVerificationError(JobstreamError):
    """The request is not a genuine, fresh callback. `reason` says which check failed:
    `token`, `headers`, `timestamp`, `signature` or `body`. Answer 401 (400 for `body`)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Headers(Protocol):
    def items(self) -> Iterable[tuple[str, str]]: ...


Secret = str | bytes


def secret_key(secret: Secret) -> bytes:
    """The HMAC key of a secret: `whsec_<base64>` (or the bare base64), or raw bytes."""
    if isinstance(secret, bytes):
        key = secret
    else:
        encoded = secret.removeprefix(SECRET_PREFIX)
        try:
            key = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise ValueError("a signing secret is 'whsec_' followed by base64") from None
    if not key:
        raise ValueError("the signing secret is empty")
    return key


def sign(secret: Secret, message_id: str, timestamp: int, body: bytes | str) -> str:
    """The `v1,<base64>` signature a producer sends (for tests and for producers in Python)."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    content = b"%s.%d.%s" % (message_id.encode("utf-8"), timestamp, raw)
    mac = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def verify_callback(
    headers: Mapping[str, str] | Headers,
    body: bytes | str,
    secret_or_secrets: Secret | Sequence[Secret] | None,
    *,
    token: str | Sequence[str] | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now_s: float | None = None,
) -> Event:
    """The callback's Event, once the request is proven genuine; else CallbackVerificationError.

    `body` must be the bytes exactly as received (a re-serialised body does not verify).
    `secret_or_secrets`: the shared secret, or all secrets currently valid (rotation); None
    when the producer only sends a bearer token. `token`: the bearer token(s) the receiver
    issued, None to skip that check. Timestamps further than `tolerance_s` from now (either
    way) are refused: a captured request cannot be replayed later.
    """
    secrets = _as_list(secret_or_secrets)
    tokens = _as_list(token)
    if not secrets and not tokens:
        raise ValueError("give the signing secret(s), the bearer token(s), or both")
    keys = [secret_key(secret) for secret in secrets]  # a bad secret is the caller's error
    fields = {name.lower(): value for name, value in headers.items()}
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if tokens:
        _check_token(fields.get("authorization"), tokens)
    if keys:
        _check_signature(fields, raw, keys, tolerance_s, time.time() if now_s is None else now_s)
    try:
        document: Any = json.loads(raw)
        return Event.from_dict(document)
    except ValueError as error:
        raise CallbackVerificationError("body", f"the body is not an Event: {error}") from None


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes):
        return [value]
    return list(value)


def _check_token(header: str | None, tokens: Sequence[str]) -> None:
    scheme, _, presented = (header or "").partition(" ")
    if scheme != "Bearer" or not presented.strip():
        raise CallbackVerificationError("token", "no bearer token")
    given = presented.strip().encode("utf-8")
    # Compare with every token so the time taken does not say which one (or whether one) matched.
    matches = [hmac.compare_digest(given, known.encode("utf-8")) for known in tokens]
    if not any(matches):
        raise CallbackVerificationError("token", "wrong bearer token")


def _check_signature(
    fields: Mapping[str, str], raw: bytes, keys: Sequence[bytes], tolerance_s: int, now_s: float
) -> None:
    message_id = fields.get("webhook-id")
    timestamp_text = (fields.get("webhook-timestamp") or "").strip()
    signatures = fields.get("webhook-signature")
    if not message_id or not timestamp_text or not signatures:
        raise CallbackVerificationError(
            "headers", "webhook-id, webhook-timestamp and webhook-signature are required"
        )
    if not (timestamp_text.isascii() and timestamp_text.isdigit()):
        raise CallbackVerificationError("timestamp", "webhook-timestamp is not whole seconds")
    timestamp = int(timestamp_text)
    if abs(now_s - timestamp) > tolerance_s:
        raise CallbackVerificationError(
            "timestamp", f"webhook-timestamp is more than {tolerance_s} s away from now"
        )
    content = b"%s.%d.%s" % (message_id.encode("utf-8"), timestamp, raw)
    expected = [hmac.new(key, content, hashlib.sha256).digest() for key in keys]
    matched = False
    for candidate in signatures.split():
        version, _, encoded = candidate.partition(",")
        if version != "v1":
            continue  # other schemes (v1a: asymmetric) are not ours to check
        try:
            presented = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            continue
        for digest in expected:
            matched |= hmac.compare_digest(presented, digest)
    if not matched:
        raise CallbackVerificationError("signature", "no webhook-signature matches")
