"""Signing secrets as the registry and the settings spell them: `whsec_` and the base64 of the key
(Standard Webhooks); delivery/signing.py signs with the key."""

from __future__ import annotations

import base64
import binascii
from typing import Final

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret


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
