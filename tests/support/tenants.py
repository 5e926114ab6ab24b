"""Changing a runtime's consumer registry in tests (the registry is immutable: a copy each time)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jobstream.config.tenants import TenantConfig, TenantRegistry, registry_from
from jobstream.runtime import Runtime

# Where the suite's HTTP receivers listen (tests/support/receiver.py).
LOOPBACK_ORIGIN = "http://127.0.0.1:*"


def with_registry(rt: Runtime, registry: TenantRegistry) -> Runtime:
    return replace(rt, settings=rt.settings.model_copy(update={"tenants": registry}))


def with_tenant(rt: Runtime, name: str, **changes: Any) -> Runtime:
    """`rt` with tenant `name` changed (created if absent); None for a field clears it."""
    registry = rt.tenants()
    current = registry.get(name) or TenantConfig()
    values = {**current.model_dump(), **changes}
    return with_registry(rt, registry.replace(name, TenantConfig.model_validate(values)))


def without_tenant(rt: Runtime, name: str) -> Runtime:
    return with_registry(rt, rt.tenants().replace(name, None))


def secrets(*values: str, expires_at: str | None = None) -> list[dict[str, Any]]:
    """Signing-secret entries, newest first."""
    return [{"secret": value, "expires_at": expires_at} for value in values]


def registry(tenants: dict[str, dict[str, Any]]) -> TenantRegistry:
    return registry_from({"tenants": tenants})
