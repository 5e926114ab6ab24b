"""Managing the consumer registry: where it is stored, and the edits an operator makes.

The registry is the document `jobstream.config.tenants` reads: a local file (JOBSTREAM_TENANTS)
or a Secrets Manager secret (JOBSTREAM_TENANTS_SECRET). Every edit reads the document, changes
one tenant and writes the whole document back, validated by the functions' own parser; an edit
never loses another one made at the same time (a lock on the file; on the secret, a new version
made current only if the one read still is). New API
tokens and signing secrets are generated here (high-entropy random) and returned once: only
a token's digest is stored.
"""

from __future__ import annotations

import base64
import fcntl
import os
import random
import re
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from botocore.exceptions import ClientError
from pydantic import ValidationError

from jobstream.config.tenants import (
    RegistryError,
    TenantConfig,
    TenantRegistry,
    describe_errors,
    parse_registry,
    token_digest,
)
from jobstream.tenant_names import check_tenant_name
from jobstream_cli.errors import CliError

# A prefix makes a leaked token recognisable to secret scanners; 32 random bytes after it.
TOKEN_PREFIX: Final = "jst_"  # noqa: S105 - a prefix, not a token
TOKEN_BYTES: Final = 32
SECRET_BYTES: Final = 32  # Standard Webhooks: 24 to 64 bytes
DEFAULT_OVERLAP: Final = timedelta(hours=24)
# Secrets Manager's labels: the functions read AWSCURRENT only, so a written version waits under
# a label of our own (the last one written keeps it) until the edit promotes it. Not AWSPENDING:
# that one belongs to rotation.
CURRENT: Final = "AWSCURRENT"
WRITTEN: Final = "jobstream-edit"
EDIT_ATTEMPTS: Final = 5
_DURATION: Final = re.compile(r"(\d+)([smhd]?)", re.ASCII)
_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def new_api_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def new_signing_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def parse_duration(text: str) -> timedelta:
    """`0`, `90s`, `30m`, `24h`, `7d`; ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"{text!r} is not a duration (examples: 0, 30m, 24h, 7d)")
    return timedelta(seconds=int(match[1]) * _UNITS[match[2]])


# ------------------------------------------------------------------------------------- storage


R = TypeVar("R")
# One edit: from the registry as read, the registry to write and what the command reports. It
# may run more than once (the secret is read again when another edit landed first).
Change = Callable[[TenantRegistry], tuple[TenantRegistry, R]]


class RegistryStore(Protocol):
    """Where the registry document lives."""

    @property
    def description(self) -> str: ...

    @property
    def takes_effect(self) -> str: ...

    def edit(self, change: Change[R]) -> R: ...

    def read(self) -> TenantRegistry: ...


@dataclass
class FileStore:
    """A local file; edits hold an exclusive lock and replace the file atomically (mkstemp's
    0600: only its owner reads the secrets in it)."""

    path: Path

    @property
    def description(self) -> str:
        return f"file {self.path}"

    @property
    def takes_effect(self) -> str:
        return "in force at the next request (the file is re-read when it changes)"

    def read(self) -> TenantRegistry:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return TenantRegistry()
        except OSError as error:
            raise CliError(f"cannot read {self.path}: {error.strerror}") from None
        return _parsed(text, self.description)

    def edit(self, change: Change[R]) -> R:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = lock_path.open("a")
        except OSError as error:
            raise CliError(f"cannot lock {self.path}: {error.strerror}") from None
        with lock:
            # One writer at a time: a concurrent edit waits instead of losing this one.
            fcntl.flock(lock, fcntl.LOCK_EX)
            registry, result = change(self.read())
            self._write(registry.to_json())
            return result

    def _write(self, text: str) -> None:
        handle, temporary = tempfile.mkstemp(prefix=".tenants-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            # Atomic: a reader sees the old document or the new one, never half of one.
            Path(temporary).replace(self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


@dataclass
class SecretStore:
    """A Secrets Manager secret (the deployed stack's TenantsSecret)."""

    secret_id: str
    client: Any
    pause: Callable[[float], None] = time.sleep

    @property
    def description(self) -> str:
        return f"secret {self.secret_id}"

    @property
    def takes_effect(self) -> str:
        return (
            "in force within the functions' cache age (JOBSTREAM_TENANTS_MAX_AGE_S, 60 s by "
            "default)"
        )

    def read(self) -> TenantRegistry:
        return self._read_current()[1]

    def edit(self, change: Change[R]) -> R:
        """Write the changed registry as a new version, then make it current only if the version
        it was read from still is: an edit that landed in between is read again and kept."""
        for attempt in range(EDIT_ATTEMPTS):
            if attempt:
                # Apart, so that edits racing each other stop colliding (each try leaves a version).
                self.pause(random.uniform(0.1, 0.5) * attempt)  # noqa: S311 - not a secret
            version, registry = self._read_current()
            changed, result = change(registry)
            written = self.client.put_secret_value(
                SecretId=self.secret_id, SecretString=changed.to_json(), VersionStages=[WRITTEN]
            )
            if self._promote(written["VersionId"], version):
                return result
        raise CliError(
            f"{self.description} kept changing while this edit ran ({EDIT_ATTEMPTS} tries); "
            "nothing of it took effect: run it again"
        )

    def _read_current(self) -> tuple[str, TenantRegistry]:
        response = self.client.get_secret_value(SecretId=self.secret_id, VersionStage=CURRENT)
        text = response.get("SecretString")
        if text is None:
            raise CliError(f"{self.description} holds binary data, not a registry document")
        return response["VersionId"], _parsed(text, self.description)

    def _promote(self, written: str, read: str) -> bool:
        """Move AWSCURRENT from the version read to the one written. Secrets Manager refuses the
        move when AWSCURRENT is no longer on `read` (its one compare-and-swap): False when another
        edit moved it. A refusal of a resend whose first try landed (botocore repeats a request
        whose answer was lost) is this edit's own success."""
        try:
            self.client.update_secret_version_stage(
                SecretId=self.secret_id,
                VersionStage=CURRENT,
                MoveToVersionId=written,
                RemoveFromVersionId=read,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "InvalidParameterException":
                raise
            current = self._read_current()[0]
            if current == read:
                raise
            return current == written
        return True


def _parsed(text: str | bytes, where: str) -> TenantRegistry:
    try:
        return parse_registry(text)
    except RegistryError as error:
        raise CliError(f"{where} is not a valid registry: {error}") from None


# --------------------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class Issued:
    """What an edit generated, shown once."""

    tenant: str
    api_token: str | None = None
    signing_secret: str | None = None


def _tenant(registry: TenantRegistry, name: str) -> TenantConfig:
    tenant = registry.get(name)
    if tenant is not None:
        return tenant
    tombstone = registry.removed(name)
    if tombstone is not None:
        raise CliError(
            f"tenant {name!r} was removed on {_iso(tombstone.removed_at)} (`jobstream tenants add "
            f"{name} --restore` brings it back)"
        )
    raise CliError(f"no tenant {name!r} (see `jobstream tenants list`)")


def _config(current: TenantConfig | None, **changes: Any) -> TenantConfig:
    try:
        return TenantConfig.model_validate({**(current or TenantConfig()).model_dump(), **changes})
    except ValidationError as error:
        # One line, and never the value (it may be a secret).
        raise CliError(describe_errors(error)) from None


def _checked(registry: Callable[[], TenantRegistry]) -> TenantRegistry:
    """The registry an edit makes, or its refusal as one line (the document's own checks)."""
    try:
        return registry()
    except RegistryError as error:
        raise CliError(str(error)) from None


def _changed(registry: TenantRegistry, name: str, **changes: Any) -> TenantRegistry:
    updated = _config(registry.get(name), **changes)
    return _checked(lambda: registry.replace(name, updated))


def _live(entries: Any, now: datetime) -> list[dict[str, Any]]:
    """Entries still in force at `now`, as plain values (expired ones are dropped for good)."""
    return [
        entry.model_dump()
        for entry in entries
        if entry.expires_at is None or entry.expires_at > now
    ]


def _overlapped(entries: list[dict[str, Any]], until: datetime) -> list[dict[str, Any]]:
    """Every entry ends at `until` at the latest (the rotation's overlap)."""
    return [{**entry, "expires_at": min(entry["expires_at"] or until, until)} for entry in entries]


def add_tenant(
    registry: TenantRegistry,
    name: str,
    *,
    now: datetime,
    origins: list[str] | None,
    signing_secret: bool,
    api_token: str | None = None,
    restore: bool = False,
) -> tuple[TenantRegistry, Issued]:
    """A new tenant, or with `restore` a removed one back (the same consumer: its jobs are its
    own again), with new credentials either way (a removal dropped the old ones)."""
    try:
        check_tenant_name(name)
    except ValueError as error:
        raise CliError(str(error)) from None
    _check_addable(registry, name, restore=restore)
    token = api_token if api_token is not None else new_api_token()
    secret = new_signing_secret() if signing_secret else None
    tenant = _config(
        None,
        api_tokens=[{"sha256": token_digest(token), "created_at": now}],
        signing_secrets=[{"secret": secret, "created_at": now}] if secret else [],
        callback_origins=origins,
    )
    if restore:
        updated = _checked(lambda: registry.restore(name, tenant))
    else:
        updated = _checked(lambda: registry.replace(name, tenant))
    return updated, Issued(name, None if api_token is not None else token, secret)


def _check_addable(registry: TenantRegistry, name: str, *, restore: bool) -> None:
    """A name is added once: a removed one only comes back on purpose (its jobs come with it)."""
    if registry.get(name) is not None:
        raise CliError(f"tenant {name!r} exists already (rotate its token instead)")
    tombstone = registry.removed(name)
    if tombstone is not None and not restore:
        raise CliError(
            f"tenant {name!r} was removed on {_iso(tombstone.removed_at)} and its jobs are still "
            f"its own: `jobstream tenants add {name} --restore` brings that consumer back; a new "
            "consumer needs a new name"
        )
    if tombstone is None and restore:
        raise CliError(
            f"tenant {name!r} was never removed: nothing to restore (add it without --restore)"
        )


def add_api_token(
    registry: TenantRegistry, name: str, token: str, *, now: datetime
) -> TenantRegistry:
    """One more API token for tenant `name`, its others untouched (no rotation)."""
    tenant = _tenant(registry, name)
    fresh = {"sha256": token_digest(token), "created_at": now}
    return _changed(registry, name, api_tokens=[*tenant.model_dump()["api_tokens"], fresh])


def drop_api_token(registry: TenantRegistry, name: str, token: str) -> TenantRegistry:
    """Tenant `name` without API token `token` (unchanged when it is gone already)."""
    tenant = registry.get(name)
    if tenant is None:
        return registry
    digest = token_digest(token)
    kept = [entry.model_dump() for entry in tenant.api_tokens if entry.sha256 != digest]
    return _changed(registry, name, api_tokens=kept)


def rotate_token(
    registry: TenantRegistry, name: str, *, now: datetime, overlap: timedelta
) -> tuple[TenantRegistry, Issued]:
    """A new token; the old ones stay valid for `overlap`, then are refused."""
    tenant = _tenant(registry, name)
    token = new_api_token()
    kept = _overlapped(_live(tenant.api_tokens, now), now + overlap) if overlap else []
    fresh = {"sha256": token_digest(token), "created_at": now, "expires_at": None}
    return _changed(registry, name, api_tokens=[fresh, *kept]), Issued(name, api_token=token)


def rotate_secret(
    registry: TenantRegistry, name: str, *, now: datetime, overlap: timedelta
) -> tuple[TenantRegistry, Issued]:
    """A new signing secret; during `overlap` callbacks carry both signatures."""
    tenant = _tenant(registry, name)
    secret = new_signing_secret()
    kept = _overlapped(_live(tenant.signing_secrets, now), now + overlap) if overlap else []
    fresh = {"secret": secret, "created_at": now, "expires_at": None}
    updated = _changed(registry, name, signing_secrets=[fresh, *kept])
    return updated, Issued(name, signing_secret=secret)


def set_callback_token(registry: TenantRegistry, name: str, token: str | None) -> TenantRegistry:
    _tenant(registry, name)
    return _changed(registry, name, callback_token=token)


def set_origins(registry: TenantRegistry, name: str, origins: list[str] | None) -> TenantRegistry:
    _tenant(registry, name)
    return _changed(registry, name, callback_origins=origins)


def set_quotas(
    registry: TenantRegistry, name: str, changes: dict[str, int | None]
) -> TenantRegistry:
    """Change some of a tenant's quotas (None: that one unlimited); the others stay. A tenant
    left with no quota has none (`quotas` dropped)."""
    current = _tenant(registry, name).quotas
    quotas = {**(current.model_dump() if current is not None else {}), **changes}
    limited = {quota: value for quota, value in quotas.items() if value is not None}
    return _changed(registry, name, quotas=limited or None)


def remove_tenant(registry: TenantRegistry, name: str, *, now: datetime) -> TenantRegistry:
    """Tenant `name` out of force, its credentials dropped, its name kept by a tombstone."""
    _tenant(registry, name)
    return _checked(lambda: registry.remove(name, now))


def summary(registry: TenantRegistry, now: datetime) -> list[dict[str, Any]]:
    """Every tenant without a secret in it: what is set, what is in force, what expires; removed
    ones too (their names are taken)."""
    rows = [_row(name, registry.tenants[name], now) for name in registry.tenants]
    rows += [
        {**_row(name, TenantConfig(), now), "removed_at": _iso(tombstone.removed_at)}
        for name, tombstone in registry.removed_tenants.items()
    ]
    return sorted(rows, key=lambda row: str(row["tenant"]))


def _row(name: str, tenant: TenantConfig, now: datetime) -> dict[str, Any]:
    return {
        "tenant": name,
        "api_tokens": [
            {
                "sha256_prefix": token.sha256[:12],
                "created_at": _iso(token.created_at),
                "expires_at": _iso(token.expires_at),
                "in_force": token.expires_at is None or token.expires_at > now,
            }
            for token in tenant.api_tokens
        ],
        "callback_token": tenant.callback_token is not None,
        "signing_secrets": [
            {
                "created_at": _iso(entry.created_at),
                "expires_at": _iso(entry.expires_at),
                "in_force": entry.expires_at is None or entry.expires_at > now,
            }
            for entry in tenant.signing_secrets
        ],
        "callback_origins": (
            None if tenant.callback_origins is None else list(tenant.callback_origins)
        ),
        "quotas": tenant.quotas.model_dump(exclude_none=True) if tenant.quotas else None,
        "removed_at": None,
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")
