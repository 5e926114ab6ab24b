"""Bearer authentication: a token names a tenant."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping

from jobstream.config.settings import Tenant
from jobstream.protocol.errors import ErrorCode, ProtocolError
from jobstream.protocol.js import js_trim

BEARER_PREFIX = "Bearer "


def authenticate(headers: Mapping[str, str], tenants: Iterable[Tenant]) -> str:
    """The caller's tenant; 401 `auth_error` for a missing or unknown token."""
    header = headers.get("authorization", "")
    presented = js_trim(header[len(BEARER_PREFIX) :]) if header.startswith(BEARER_PREFIX) else ""
    matched: str | None = None
    for tenant in tenants:
        # Compare against every token so the time taken does not tell which one nearly matched.
        # surrogatepass: a header that is not valid text is a wrong token, never an error.
        if hmac.compare_digest(_bytes(presented), _bytes(tenant.token)) and presented:
            matched = tenant.name
    if matched is None:
        raise ProtocolError(ErrorCode.AUTH_ERROR, "missing or invalid bearer token", status=401)
    return matched


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
