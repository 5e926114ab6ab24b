"""The one settings model. Same variable names on AWS (template parameters) and locally."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from jobstream.config.signing_secrets import decode_secret
from jobstream.config.targets import TargetsFile
from jobstream.config.tenants import TenantRegistry, shorthand_registry
from jobstream.errors import JobstreamError
from jobstream.outbound.origins import parse_origins
from jobstream.tenant_names import check_tenant_name

DEFAULT_TARGETS_FILE: Final = Path(__file__).with_name("targets.default.json")
# The reference producer's floor for liveness budgets; below it a budget is a configuration error.
MIN_BUDGET_MS: Final = 60_000

# Lambda's longest invocation.
MAX_LAMBDA_TIMEOUT_S: Final = 900

PositiveMs = Annotated[int, Field(ge=1)]
BudgetMs = Annotated[int, Field(ge=MIN_BUDGET_MS)]


class ConfigurationError(JobstreamError):
    """Configuration that must stop start-up; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One `tenant=token` pair of the JOBSTREAM_API_TOKENS shorthand."""

    name: str
    token: str


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    table_name: Annotated[str, Field(min_length=1)]
    targets_path: Path
    # The consumer registry comes from exactly one source: a Secrets Manager secret (AWS), a
    # file (local), or inline (the JOBSTREAM_API_TOKENS shorthand, or a test's own registry).
    tenants_secret: Annotated[str, Field(min_length=1)] | None = None
    tenants_path: Path | None = None
    tenants: TenantRegistry | None = None
    # The JOBSTREAM_API_TOKENS shorthand as given (Settings(api_tokens=…) still builds); it is
    # turned into `tenants` when the settings are made, and only `tenants` is ever read.
    api_tokens: tuple[Tenant, ...] | None = Field(default=None, repr=False, exclude=True)
    # How long a fetched secret is used before it is read again (0: every time).
    tenants_max_age_s: Annotated[int, Field(ge=0, le=3600)] = 60
    # How long past its last successful read a secret that cannot be read again is still trusted
    # (a revocation made meanwhile is not seen); after it, requests answer a retryable 503.
    tenants_max_stale_s: Annotated[int, Field(ge=0, le=86_400)] = 300
    queued_timeout_ms: BudgetMs = 1_800_000
    stall_timeout_ms: BudgetMs = 900_000
    heartbeat_interval_ms: PositiveMs = 30_000
    lease_ms: PositiveMs = 180_000
    # The execution ceiling of targets without timeout_ms; like every target's ceiling it must
    # fit in the worker's Lambda timeout (checked with the targets file).
    default_deadline_ms: Annotated[int, Field(ge=1000)] = 900_000
    # The worker function's timeout (template parameter WorkerTimeoutSeconds, also its Lambda
    # Timeout): no job may be allowed to run longer than the invocation that runs it.
    worker_timeout_s: Annotated[int, Field(ge=1, le=MAX_LAMBDA_TIMEOUT_S)] = MAX_LAMBDA_TIMEOUT_S
    # Callbacks: where intents are handed off and how they are sent (credentials and allowed
    # origins are per tenant, in the registry).
    work_queue_url: str | None = None
    callback_queue_url: str | None = None
    callback_dead_letter_url: str | None = None
    callback_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = 15_000
    callback_retry_base_ms: PositiveMs = 30_000
    callback_retry_max_ms: PositiveMs = 21_600_000
    # How often a paused callback endpoint is tried with one real callback (service/endpoints.py).
    endpoint_probe_interval_ms: Annotated[int, Field(ge=1000, le=86_400_000)] = 60_000
    # The SNS topic told of every endpoint transition (the operator's alerts); None: no topic.
    endpoint_alerts_topic_arn: str | None = None
    # How long one scheduled sweep may work before it stops and leaves the rest to the next.
    sweep_budget_ms: Annotated[int, Field(ge=100)] = 20_000
    # How long a finished job and all its items are kept (DynamoDB TTL), and so how long its
    # idempotency key keeps naming it.
    retention_days: Annotated[int, Field(ge=1, le=3650)] = 30
    # The tenant's feed (GET /events) shows an event only this long after it committed: a
    # write still in flight, or an index entry still on its way, is never passed by a cursor.
    # It covers one attempt of a write (each attempt is stamped anew) and the index's update.
    feed_settle_ms: Annotated[int, Field(ge=0, le=10_000)] = 250
    # How often a long-poll of the feed reads again while it waits.
    feed_poll_ms: Annotated[int, Field(ge=20, le=5_000)] = 250
    # The first deployment of an upgrade from the release before `tenant_jobs`: write only what
    # that release reads (results as maps, labels where it looks, a correlation id's entry on
    # the job item), so it can be rolled back to.
    write_previous_formats: bool = False

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Settings:
        # pydantic would store an unknown key silently, and a copy does not validate (the
        # shorthand would not reach `tenants`): both must fail loudly.
        refused = sorted(set(update or {}) - (set(type(self).model_fields) - {"api_tokens"}))
        if refused:
            raise TypeError(f"Settings.model_copy cannot set {', '.join(refused)}: set `tenants`")
        return super().model_copy(update=update, deep=deep)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """`api_tokens` (+ the callback shorthand) become the inline registry."""
        if not isinstance(data, dict) or not any(key in data for key in SHORTHAND):
            return data
        values = dict(data)
        shorthand = {key: values.pop(key) for key in SHORTHAND if key in values}
        pairs = _shorthand_pairs(shorthand, values)
        secret = _plain(shorthand.get("callback_signing_secret"))
        with _blaming(SHORTHAND["callback_signing_secret"]):
            if secret is not None:
                decode_secret(secret)
        origins = _shorthand_origins(shorthand.get("callback_origins"))
        values["tenants"] = shorthand_registry(
            [(pair.name, pair.token) for pair in pairs],
            callback_token=_plain(shorthand.get("callback_token")),
            signing_secret=secret,
            callback_origins=origins,
        )
        values["api_tokens"] = tuple(pairs)
        return values

    @model_validator(mode="after")
    def _one_registry_source(self) -> Settings:
        sources = [
            variable
            for variable, value in (
                ("JOBSTREAM_TENANTS_SECRET", self.tenants_secret),
                ("JOBSTREAM_TENANTS", self.tenants_path),
                ("JOBSTREAM_API_TOKENS", self.tenants),
            )
            if value is not None
        ]
        if len(sources) != 1:
            raise ValueError(
                "the consumer registry needs exactly one source: JOBSTREAM_TENANTS_SECRET "
                "(AWS), JOBSTREAM_TENANTS (a file) or JOBSTREAM_API_TOKENS (one-tenant "
                f"shorthand); {' and '.join(sources) + ' are set' if sources else 'none is set'}"
            )
        return self


@contextmanager
def _blaming(variable: str) -> Iterator[None]:
    """A ValueError inside names `variable` (its message never holds the value)."""
    try:
        yield
    except ValueError as error:
        raise ValueError(f"{variable}: {error}") from None


def _plain(value: object) -> str | None:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return None if value is None else str(value)


# Settings field -> environment variable.
ENVIRONMENT: Final[dict[str, str]] = {
    "table_name": "JOBSTREAM_TABLE",
    "targets_path": "JOBSTREAM_TARGETS",
    "tenants_secret": "JOBSTREAM_TENANTS_SECRET",
    "tenants_path": "JOBSTREAM_TENANTS",
    "tenants_max_age_s": "JOBSTREAM_TENANTS_MAX_AGE_S",
    "tenants_max_stale_s": "JOBSTREAM_TENANTS_MAX_STALE_S",
    "queued_timeout_ms": "JOBSTREAM_QUEUED_TIMEOUT_MS",
    "feed_settle_ms": "JOBSTREAM_FEED_SETTLE_MS",
    "feed_poll_ms": "JOBSTREAM_FEED_POLL_MS",
    "stall_timeout_ms": "JOBSTREAM_STALL_TIMEOUT_MS",
    "heartbeat_interval_ms": "JOBSTREAM_HEARTBEAT_INTERVAL_MS",
    "lease_ms": "JOBSTREAM_LEASE_MS",
    "default_deadline_ms": "JOBSTREAM_DEFAULT_DEADLINE_MS",
    "work_queue_url": "JOBSTREAM_WORK_QUEUE_URL",
    "callback_queue_url": "JOBSTREAM_CALLBACK_QUEUE_URL",
    "callback_dead_letter_url": "JOBSTREAM_CALLBACK_DLQ_URL",
    "callback_timeout_ms": "JOBSTREAM_CALLBACK_TIMEOUT_MS",
    "callback_retry_base_ms": "JOBSTREAM_CALLBACK_RETRY_BASE_MS",
    "callback_retry_max_ms": "JOBSTREAM_CALLBACK_RETRY_MAX_MS",
    "endpoint_probe_interval_ms": "JOBSTREAM_ENDPOINT_PROBE_INTERVAL_MS",
    "endpoint_alerts_topic_arn": "JOBSTREAM_ENDPOINT_ALERTS_TOPIC_ARN",
    "sweep_budget_ms": "JOBSTREAM_SWEEP_BUDGET_MS",
    "retention_days": "JOBSTREAM_RETENTION_DAYS",
    "worker_timeout_s": "JOBSTREAM_WORKER_TIMEOUT_S",
    "write_previous_formats": "JOBSTREAM_WRITE_PREVIOUS_FORMATS",
}
# The one-tenant shorthand (local runs, tests): secrets in the environment, so never on AWS,
# where the template sets none of them.
SHORTHAND: Final[dict[str, str]] = {
    "api_tokens": "JOBSTREAM_API_TOKENS",
    "callback_token": "JOBSTREAM_CALLBACK_TOKEN",
    "callback_signing_secret": "JOBSTREAM_CALLBACK_SIGNING_SECRET",
    "callback_origins": "JOBSTREAM_CALLBACK_ORIGINS",
}
# Variables that no longer do anything, and what replaced them: set, they stop start-up rather
# than being silently ignored.
RETIRED: Final[dict[str, str]] = {
    "JOBSTREAM_CALLBACK_ALLOW_HTTP": (
        "http and private callback origins are allowed per tenant: list them in the tenant's "
        "callback_origins (or JOBSTREAM_CALLBACK_ORIGINS with the one-tenant shorthand)"
    ),
    "JOBSTREAM_CALLBACK_ALLOW_PRIVATE": (
        "http and private callback origins are allowed per tenant: list them in the tenant's "
        "callback_origins (or JOBSTREAM_CALLBACK_ORIGINS with the one-tenant shorthand)"
    ),
}


def parse_api_tokens(value: str) -> tuple[Tenant, ...]:
    """`tenant=token,tenant=token`; a token may belong to one tenant only."""
    tenants: list[Tenant] = []
    for pair in value.split(","):
        if not pair.strip():
            continue
        name, sep, token = pair.partition("=")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token:
            raise ValueError("each entry must be tenant=token with both parts non-empty")
        tenants.append(Tenant(name=check_tenant_name(name), token=token))
    if len({tenant.token for tenant in tenants}) != len(tenants):
        raise ValueError("a token is listed more than once")
    return tuple(tenants)


def _shorthand_pairs(shorthand: dict[str, Any], values: dict[str, Any]) -> Any:
    """The shorthand's tenant/token pairs; without them the rest of the shorthand means nothing."""
    pairs = shorthand.get("api_tokens")
    if pairs is None:
        names = ", ".join(SHORTHAND[key] for key in shorthand)
        raise ValueError(f"{names} need JOBSTREAM_API_TOKENS (the one-tenant shorthand)")
    with _blaming(SHORTHAND["api_tokens"]):
        if isinstance(pairs, str):
            pairs = parse_api_tokens(pairs)
        if not pairs:
            raise ValueError("names no tenant")
        if values.get("tenants") is not None:
            raise ValueError("give the shorthand or a registry (`tenants`), not both")
    return pairs


def _shorthand_origins(origins: Any) -> Any:
    """The shorthand's callback origins (a comma-separated list in the environment), checked."""
    if isinstance(origins, str):
        origins = [part.strip() for part in origins.split(",") if part.strip()]
    with _blaming(SHORTHAND["callback_origins"]):
        if origins is not None:
            parse_origins(origins)
    return origins


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check the settings; any invalid value raises ConfigurationError naming it."""
    env = os.environ if environ is None else environ
    retired = [
        f"{variable} is no longer read: {hint}"
        for variable, hint in RETIRED.items()
        if (env.get(variable) or "").strip()
    ]
    if retired:
        raise ConfigurationError("invalid configuration: " + "; ".join(retired))
    raw: dict[str, object] = {}
    for field_name, variable in {**ENVIRONMENT, **SHORTHAND}.items():
        value = env.get(variable)
        if value is not None and value.strip() != "":
            raw[field_name] = value.strip()
    raw.setdefault("targets_path", str(DEFAULT_TARGETS_FILE))
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as error:
        raise ConfigurationError(_describe(error)) from None
    checked_targets(settings)
    if settings.tenants_path is not None:
        # Checked at start-up like the targets file; re-read on change afterwards.
        from jobstream.config.registry import load_registry_file  # noqa: PLC0415 - a cycle

        load_registry_file(settings.tenants_path)
    return settings


def checked_targets(settings: Settings) -> TargetsFile:
    """The targets file, refused when an enabled target could run longer than the worker's
    Lambda timeout allows: its jobs would be cut off mid-run and end `expired`."""
    targets = load_targets(settings.targets_path)
    limit_ms = settings.worker_timeout_s * 1000
    for target in targets.enabled:
        ceiling = target.ceiling_ms(settings.default_deadline_ms)
        if ceiling > limit_ms:
            source = (
                "its timeout_ms"
                if target.timeout_ms
                else f"{ENVIRONMENT['default_deadline_ms']} (it has no timeout_ms)"
            )
            raise ConfigurationError(
                f"JOBSTREAM_TARGETS: target {target.id!r} may run {ceiling} ms ({source}), "
                f"longer than the worker's timeout of {limit_ms} ms "
                f"({ENVIRONMENT['worker_timeout_s']}); its jobs would be cut off and end "
                f"expired: give it a timeout_ms of at most {limit_ms}"
            )
    return targets


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        field_name = str(item["loc"][0]) if item["loc"] else ""
        variable = ENVIRONMENT.get(field_name, field_name)
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "is required"
        problems.append(f"{variable} {message}" if variable else message)
    return "invalid configuration: " + "; ".join(problems)


_targets_cache: dict[Path, tuple[float, TargetsFile]] = {}


def load_targets(path: Path) -> TargetsFile:
    """The targets file, re-read when it changes on disk (configuration is live)."""
    try:
        mtime = path.stat().st_mtime
    except OSError as error:
        raise ConfigurationError(
            f"JOBSTREAM_TARGETS: cannot read {path.name}: {error.strerror}"
        ) from None
    cached = _targets_cache.get(path)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        targets = TargetsFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as error:
        raise ConfigurationError(f"JOBSTREAM_TARGETS: {path.name} is invalid: {error}") from None
    _targets_cache[path] = (mtime, targets)
    return targets
