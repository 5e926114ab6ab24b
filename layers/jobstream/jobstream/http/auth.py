"""Bearer authentication: a token names a tenant of the consumer registry."""

from __future__ import annotations

from collections.abc import Mapping

from jobstream.config.tenants import TenantRegistry
from jobstream.protocol.errors import ErrorCode, ProtocolError
from jobstream.protocol.js import js_trim

BEARER_PREFIX = "Bearer "


def authenticate(headers: Mapping[str, str], registry: TenantRegistry, now_ms: int) -> str:
    """The caller's tenant; 401 `auth_error` for a missing, unknown or expired token."""
    header = headers.get("authorization", "")
    presented = js_trim(header[len(BEARER_PREFIX) :]) if header.startswith(BEARER_PREFIX) else ""
    # Constant time over every stored digest (TenantRegistry.authenticate); a header that is
    # not valid text is a wrong token, never an error.
    matched = registry.authenticate(presented, now_ms)
    if matched is None:
        raise ProtocolError(ErrorCode.AUTH_ERROR, "missing or invalid bearer token")
    return matched
