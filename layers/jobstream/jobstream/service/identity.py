"""Job ids: derived from the tenant and the exact trimmed idempotency key, URL-safe, forever."""

from __future__ import annotations

import base64
import hashlib


def derive_job_id(tenant: str, idempotency_key: str) -> str:
    # Case-sensitive on purpose: keys differing only in case are different jobs.
    digest = hashlib.sha256(f"{tenant}\x00{idempotency_key}".encode()).digest()
    return "job_" + base64.urlsafe_b64encode(digest[:24]).decode()
