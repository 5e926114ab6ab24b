"""Job ids: derived from the tenant and the exact trimmed idempotency key, URL-safe, forever."""

from __future__ import annotations

import base64
import hashlib

from jobstream.tenant_names import check_tenant_name


def derive_job_id(tenant: str, idempotency_key: str) -> str:
    # Case-sensitive on purpose: keys differing only in case are different jobs. A tenant name
    # holds no NUL, so the first NUL ends it: (tenant, key) pairs never share a hashed text.
    text = f"{check_tenant_name(tenant)}\x00{idempotency_key}"
    digest = hashlib.sha256(text.encode()).digest()
    return "job_" + base64.urlsafe_b64encode(digest[:24]).decode()
