"""Opaque tokens bound to a tenant (the feed's and the callback listings' cursors). Pure.

A token is the text it carries and a check of (tenant, text), URL-safe base64: one that was
edited, or that another tenant was given, does not open. The check is not a secret: a cursor
gives no access (every read is of the caller's own data); it only keeps a wrong one from being
read as a place in the caller's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Final

_CHECK_BYTES: Final = 8
_SEPARATOR: Final = "|"


def _check(tenant: str, text: str) -> str:
    return hashlib.sha256(f"{tenant}\n{text}".encode()).digest()[:_CHECK_BYTES].hex()


def seal(tenant: str, text: str) -> str:
    raw = f"{text}{_SEPARATOR}{_check(tenant, text)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unseal(tenant: str, token: str) -> str | None:
    """The text `token` carries for `tenant`; None when it is not one sealed for it."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, binascii.Error):
        return None
    text, separator, check = raw.rpartition(_SEPARATOR)
    return text if separator and check == _check(tenant, text) else None
