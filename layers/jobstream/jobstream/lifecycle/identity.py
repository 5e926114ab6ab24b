"""Job ids: derived from the tenant and the exact trimmed idempotency key, URL-safe, forever."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Final

from jobstream.tenant_names import check_tenant_name

# What derive_job_id makes: "job_" and 24 bytes, URL-safe base64 (32 characters).
JOB_ID_PATTERN: Final = r"job_[A-Za-z0-9_-]{32}"
_JOB_ID: Final = re.compile(JOB_ID_PATTERN)


def is_job_id(text: str) -> bool:
    """Whether `text` is shaped like a job id: anything else names no job (and is never sent to
    DynamoDB, which refuses a key over 2 KB instead of finding nothing)."""
    return _JOB_ID.fullmatch(text) is not None


def derive_job_id(tenant: str, idempotency_key: str) -> str:
    # Case-sensitive on purpose: keys differing only in case are different jobs. A tenant name
    # holds no NUL, so the first NUL ends it: (tenant, key) pairs never share a hashed text.
    text = f"{check_tenant_name(tenant)}\x00{idempotency_key}"
    digest = hashlib.sha256(text.encode()).digest()
    return "job_" + base64.urlsafe_b64encode(digest[:24]).decode()
