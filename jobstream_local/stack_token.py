"""The bearer token a local stack gives `jobstream --local`: one it knows is valid for itself.

With the one-tenant shorthand (`JOBSTREAM_API_TOKENS`, the default), its first token. A registry
file or secret stores digests only, so no token can be read back from it: the stack issues itself
one, for tenant `local` (added with the local callback origins if the registry lacks it, or one
more token beside its others), by the same edit as `jobstream tenants` (under the file's lock; on
the secret, a version made current only from the one read), and withdraws it when it stops. A
removed `local` is not brought back behind the operator's back: the stack then has no token, and
says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from jobstream.config.settings import parse_api_tokens
from jobstream.config.tenants import TenantRegistry
from jobstream_cli.errors import CliError
from jobstream_cli.tenant_registry import (
    FileStore,
    RegistryStore,
    SecretStore,
    add_api_token,
    add_tenant,
    drop_api_token,
    new_api_token,
)

# The stack's own tenant, as in the shorthand's default (`local=local-dev-token`).
LOCAL_TENANT = "local"


@dataclass(frozen=True)
class StackToken:
    """The token, or why there is none; where it was issued, if the stack issued it."""

    token: str | None
    missing_because: str | None = None
    issued_in: RegistryStore | None = None

    def withdraw(self) -> None:
        """Drop the token the stack issued itself (nothing for the shorthand's)."""
        store, token = self.issued_in, self.token
        if store is not None and token is not None:
            store.edit(lambda registry: (drop_api_token(registry, LOCAL_TENANT, token), None))


def stack_token(env: Mapping[str, str], origins: Sequence[str], endpoint: str) -> StackToken:
    """The token for the registry `env` names (the stack's functions read the same one)."""
    shorthand = (env.get("JOBSTREAM_API_TOKENS") or "").strip()
    if shorthand:
        return StackToken(parse_api_tokens(shorthand)[0].token)
    store = _store(env, endpoint)
    token = new_api_token()
    now = datetime.now(tz=UTC).replace(microsecond=0)
    try:
        store.edit(lambda registry: (_with_token(registry, token, now, origins), None))
    except CliError as error:
        return StackToken(None, missing_because=f"{store.description}: {error}")
    return StackToken(token, issued_in=store)


def _store(env: Mapping[str, str], endpoint: str) -> RegistryStore:
    secret = (env.get("JOBSTREAM_TENANTS_SECRET") or "").strip()
    if secret:
        import boto3

        return SecretStore(secret, boto3.client("secretsmanager", endpoint_url=endpoint))
    return FileStore(Path(env["JOBSTREAM_TENANTS"].strip()))


def _with_token(
    registry: TenantRegistry, token: str, now: datetime, origins: Sequence[str]
) -> TenantRegistry:
    if registry.get(LOCAL_TENANT) is None and registry.removed(LOCAL_TENANT) is None:
        added, _ = add_tenant(
            registry,
            LOCAL_TENANT,
            now=now,
            origins=list(origins),
            signing_secret=False,
            api_token=token,
        )
        return added
    # A removed `local` stays removed: add_api_token refuses it, naming --restore.
    return add_api_token(registry, LOCAL_TENANT, token, now=now)
