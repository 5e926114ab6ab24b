"""The consumer registry: who may call the API, and what each tenant's callbacks carry.

One JSON document, the same shape in Secrets Manager (AWS) and in a local file:

    {"tenants": {"telepost": {
        "api_tokens": [{"sha256": "<hex of the token>", "expires_at": "2030-01-01T00:00:00Z"}],
        "callback_token": "<bearer token the consumer issued>",
        "signing_secrets": [{"secret": "whsec_…", "expires_at": null}],
        "callback_origins": ["http://telepost:8080"],
        "alert_url": "http://telepost:8080/jobstream-alerts",
        "quotas": {"max_open_jobs": 1000, "admissions_per_minute": 600}}},
     "removed_tenants": {"beta": {"removed_at": "2030-01-01T00:00:00Z"}}}

API tokens are stored as SHA-256 digests (tokens are high-entropy random strings, so a plain
digest is enough) and are compared in constant time. Every unexpired token and signing secret
is in force, which is how a rotation overlaps: two tokens are accepted, and a callback carries one
signature per secret. Tenant names are a safe alphabet: no name can reach another tenant's keys.

A tenant's name is its identity: its job ids and listing keys derive from it, and its jobs stay in
the table after it is removed. So a removal leaves a tombstone (`removed_tenants`): the name is
never in force again by accident (a consumer added under it would inherit the old one's jobs),
only by a deliberate restore, which brings back the same consumer. A tombstone holds no
credentials, and a name is never in force and removed at once.

A tenant's `quotas` (both optional, absent: unlimited) bound how many of its jobs may be open at
once and how many it may admit per minute (store/quotas.py counts them).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from jobstream.config.signing_secrets import decode_secret
from jobstream.errors import JobstreamError
from jobstream.outbound.origins import OriginPattern, parse_origins
from jobstream.outbound.url import OutboundRefused, parse_url
from jobstream.tenant_names import TENANT_NAME_PATTERN, check_tenant_name

# The shape of a SHA-256 digest in hex, not a secret.
TOKEN_DIGEST_PATTERN: Final = r"^[0-9a-f]{64}$"  # noqa: S105

TenantName = Annotated[str, Field(pattern=TENANT_NAME_PATTERN)]


def token_digest(token: str) -> str:
    """The stored form of an API token: SHA-256 of its UTF-8 bytes, lower-case hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _epoch_ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ApiToken(_Strict):
    sha256: Annotated[StrictStr, Field(pattern=TOKEN_DIGEST_PATTERN)]
    expires_at: AwareDatetime | None = None
    created_at: AwareDatetime | None = None

    def valid_at(self, now_ms: int) -> bool:
        expires = _epoch_ms(self.expires_at)
        return expires is None or now_ms < expires


class SigningSecret(_Strict):
    secret: Annotated[StrictStr, Field(repr=False)]
    expires_at: AwareDatetime | None = None
    created_at: AwareDatetime | None = None

    @field_validator("secret")
    @classmethod
    def _check(cls, value: str) -> str:
        decode_secret(value)  # its message never contains the secret
        return value

    def valid_at(self, now_ms: int) -> bool:
        expires = _epoch_ms(self.expires_at)
        return expires is None or now_ms < expires


class TenantQuotas(_Strict):
    """How much one tenant may admit (None: unlimited). A refusal is a 429 `quota_exceeded`."""

    max_open_jobs: Annotated[StrictInt, Field(ge=1)] | None = None
    admissions_per_minute: Annotated[StrictInt, Field(ge=1)] | None = None

    @property
    def limited(self) -> bool:
        return self.max_open_jobs is not None or self.admissions_per_minute is not None


class TenantConfig(_Strict):
    api_tokens: tuple[ApiToken, ...] = ()
    # Issued by the consumer, set by the operator; sent as `Authorization: Bearer …`.
    callback_token: Annotated[StrictStr, Field(min_length=1)] | None = Field(None, repr=False)
    signing_secrets: tuple[SigningSecret, ...] = ()
    # None: any public https origin. A list: only these (see outbound/origins.py).
    callback_origins: tuple[StrictStr, ...] | None = None
    # Where the tenant is told of its callback endpoints' transitions (paused, resumed,
    # disabled): a URL under its callback origins, signed like its callbacks. None: not told.
    alert_url: StrictStr | None = None

    @field_validator("alert_url")
    @classmethod
    def _check_alert_url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_url(value, allow_http=True)
            except OutboundRefused as error:
                raise ValueError(error.message) from None
        return value

    quotas: TenantQuotas | None = None

    @field_validator("callback_origins")
    @classmethod
    def _check_origins(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            parse_origins(value)
        return value

    @property
    def origins(self) -> tuple[OriginPattern, ...] | None:
        # Parsed on use (a few patterns): no cached state to go stale in a model_copy.
        return None if self.callback_origins is None else parse_origins(self.callback_origins)

    def signing_keys(self, now_ms: int) -> list[str]:
        """The secrets a callback sent at `now_ms` is signed with (one signature each)."""
        return [entry.secret for entry in self.signing_secrets if entry.valid_at(now_ms)]


class RemovedTenant(_Strict):
    """A tombstone: the name stays taken by the consumer that had it (and still owns its jobs)."""

    removed_at: AwareDatetime


class TenantRegistry(_Strict):
    tenants: dict[TenantName, TenantConfig] = Field(default_factory=dict)
    removed_tenants: dict[TenantName, RemovedTenant] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_removed_tenant_is_not_in_force(self) -> TenantRegistry:
        # A name in both would authenticate a removed consumer's tokens: refused, never guessed.
        both = sorted(self.tenants.keys() & self.removed_tenants.keys())
        if both:
            raise ValueError(
                f"tenant {both[0]!r} is both in force and removed (removed_tenants): restore it "
                "(`jobstream tenants add NAME --restore`) or drop it from one of them"
            )
        return self

    @model_validator(mode="after")
    def _a_token_names_one_tenant(self) -> TenantRegistry:
        seen: set[str] = set()
        for name, tenant in self.tenants.items():
            for token in tenant.api_tokens:
                if token.sha256 in seen:
                    raise ValueError(
                        f"an API token of tenant {name!r} is listed more than once "
                        "(a token names exactly one tenant)"
                    )
                seen.add(token.sha256)
        return self

    def get(self, name: str) -> TenantConfig | None:
        return self.tenants.get(name)

    def removed(self, name: str) -> RemovedTenant | None:
        """The tombstone of `name`, if it was removed (and not restored since)."""
        return self.removed_tenants.get(name)

    def authenticate(self, token: str, now_ms: int) -> str | None:
        """The tenant `token` belongs to, if it is one of its unexpired tokens."""
        if not token:
            return None
        presented = token_digest(token)
        matched: str | None = None
        for name, tenant in self.tenants.items():
            for entry in tenant.api_tokens:
                # Compare with every digest: the time taken does not tell which one nearly matched.
                if hmac.compare_digest(presented, entry.sha256) and entry.valid_at(now_ms):
                    matched = name
        return matched

    def replace(self, name: str, tenant: TenantConfig | None) -> TenantRegistry:
        """A copy with `name` set to `tenant` (None drops it, leaving no tombstone: `remove`
        does), validated again: a removed name is refused until `restore`."""
        tenants = {key: value for key, value in self.tenants.items() if key != name}
        if tenant is not None:
            tenants[name] = tenant
        return registry_from({"tenants": tenants, "removed_tenants": self.removed_tenants})

    def remove(self, name: str, removed_at: datetime) -> TenantRegistry:
        """A copy without tenant `name` and its credentials, its name kept by a tombstone."""
        removed = {**self.removed_tenants, name: RemovedTenant(removed_at=removed_at)}
        tenants = {key: value for key, value in self.tenants.items() if key != name}
        return registry_from({"tenants": tenants, "removed_tenants": removed})

    def restore(self, name: str, tenant: TenantConfig) -> TenantRegistry:
        """A copy where removed tenant `name` is in force again, as `tenant`: the same consumer,
        so its jobs are its own again."""
        removed = {key: value for key, value in self.removed_tenants.items() if key != name}
        tenants = {**self.tenants, name: tenant}
        return registry_from({"tenants": tenants, "removed_tenants": removed})

    def to_json(self) -> str:
        """The document's text, secrets included (for the registry's own storage only)."""
        document = self.model_dump(mode="json", exclude_none=True)
        if not self.removed_tenants:
            del document["removed_tenants"]  # a registry that never removed one reads as before
        return json.dumps(document, indent=2) + "\n"


class RegistryError(JobstreamError, ValueError):
    """A registry document that is not valid; the message never quotes a secret."""


def parse_registry(text: str | bytes) -> TenantRegistry:
    """Read a registry document; duplicate keys are an error, not a silent last-one-wins."""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as error:
        raise RegistryError(f"not valid JSON: {_first_line(error)}") from None
    return registry_from(data)


def registry_from(data: Any) -> TenantRegistry:
    try:
        return TenantRegistry.model_validate(data)
    except ValidationError as error:
        raise RegistryError(describe_errors(error)) from None


def describe_errors(error: ValidationError) -> str:
    """Where and what, never the offending value (it may be a secret)."""
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def _no_duplicates(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key[:80]!r} appears more than once")
        result[key] = value
    return result


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def shorthand_registry(
    pairs: Iterable[tuple[str, str]],
    *,
    callback_token: str | None = None,
    signing_secret: str | None = None,
    callback_origins: Iterable[str] | None = None,
) -> TenantRegistry:
    """The registry the `tenant=token` environment shorthand describes.

    Global callback credentials and origins would go to every tenant's callback URL, so they
    are accepted only when the shorthand names exactly one tenant.
    """
    tokens: dict[str, list[dict[str, str]]] = {}
    for name, token in pairs:
        tokens.setdefault(check_tenant_name(name), []).append({"sha256": token_digest(token)})
    per_tenant = {
        "callback_token": callback_token,
        "signing_secrets": [{"secret": signing_secret}] if signing_secret else None,
        "callback_origins": list(callback_origins) if callback_origins is not None else None,
    }
    given = {key: value for key, value in per_tenant.items() if value is not None}
    if given and len(tokens) != 1:
        raise RegistryError(
            "JOBSTREAM_CALLBACK_TOKEN, JOBSTREAM_CALLBACK_SIGNING_SECRET and "
            "JOBSTREAM_CALLBACK_ORIGINS belong to one consumer: they are allowed only when "
            f"JOBSTREAM_API_TOKENS names exactly one tenant (it names {len(tokens)}); "
            "use a tenants file (JOBSTREAM_TENANTS) for several"
        )
    return registry_from(
        {"tenants": {name: {"api_tokens": entries, **given} for name, entries in tokens.items()}}
    )
