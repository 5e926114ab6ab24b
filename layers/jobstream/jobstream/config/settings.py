"""The one settings model. Same variable names on AWS (template parameters) and locally."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from jobstream.config.targets import TargetsFile
from jobstream.delivery.signing import decode_secret

DEFAULT_TARGETS_FILE: Final = Path(__file__).with_name("targets.default.json")
# The reference producer's floor for liveness budgets; below it a budget is a configuration error.
MIN_BUDGET_MS: Final = 60_000

# Lambda's longest invocation.
MAX_LAMBDA_TIMEOUT_S: Final = 900

PositiveMs = Annotated[int, Field(ge=1)]
BudgetMs = Annotated[int, Field(ge=MIN_BUDGET_MS)]


class ConfigurationError(Exception):
    """Configuration that must stop start-up; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    token: str


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    table_name: Annotated[str, Field(min_length=1)]
    api_tokens: Annotated[tuple[Tenant, ...], Field(min_length=1)]
    targets_path: Path
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
    # Callbacks: where intents are handed off, how they are sent, and what targets are allowed.
    work_queue_url: str | None = None
    callback_queue_url: str | None = None
    callback_dead_letter_url: str | None = None
    callback_token: SecretStr | None = None
    callback_signing_secret: SecretStr | None = None
    callback_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = 15_000
    callback_retry_base_ms: PositiveMs = 30_000
    callback_retry_max_ms: PositiveMs = 21_600_000
    callback_allow_http: bool = False
    callback_allow_private: bool = False
    # How long one scheduled sweep may work before it stops and leaves the rest to the next.
    sweep_budget_ms: Annotated[int, Field(ge=100)] = 20_000
    # How long a finished job and all its items are kept (DynamoDB TTL), and so how long its
    # idempotency key keeps naming it.
    retention_days: Annotated[int, Field(ge=1, le=3650)] = 30

    @field_validator("callback_signing_secret")
    @classmethod
    def _check_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            decode_secret(value.get_secret_value())
        return value

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: object) -> object:
        return parse_api_tokens(value) if isinstance(value, str) else value


# Settings field -> environment variable.
ENVIRONMENT: Final[dict[str, str]] = {
    "table_name": "JOBSTREAM_TABLE",
    "api_tokens": "JOBSTREAM_API_TOKENS",
    "targets_path": "JOBSTREAM_TARGETS",
    "queued_timeout_ms": "JOBSTREAM_QUEUED_TIMEOUT_MS",
    "stall_timeout_ms": "JOBSTREAM_STALL_TIMEOUT_MS",
    "heartbeat_interval_ms": "JOBSTREAM_HEARTBEAT_INTERVAL_MS",
    "lease_ms": "JOBSTREAM_LEASE_MS",
    "default_deadline_ms": "JOBSTREAM_DEFAULT_DEADLINE_MS",
    "work_queue_url": "JOBSTREAM_WORK_QUEUE_URL",
    "callback_queue_url": "JOBSTREAM_CALLBACK_QUEUE_URL",
    "callback_dead_letter_url": "JOBSTREAM_CALLBACK_DLQ_URL",
    "callback_token": "JOBSTREAM_CALLBACK_TOKEN",
    "callback_signing_secret": "JOBSTREAM_CALLBACK_SIGNING_SECRET",
    "callback_timeout_ms": "JOBSTREAM_CALLBACK_TIMEOUT_MS",
    "callback_retry_base_ms": "JOBSTREAM_CALLBACK_RETRY_BASE_MS",
    "callback_retry_max_ms": "JOBSTREAM_CALLBACK_RETRY_MAX_MS",
    "callback_allow_http": "JOBSTREAM_CALLBACK_ALLOW_HTTP",
    "callback_allow_private": "JOBSTREAM_CALLBACK_ALLOW_PRIVATE",
    "sweep_budget_ms": "JOBSTREAM_SWEEP_BUDGET_MS",
    "retention_days": "JOBSTREAM_RETENTION_DAYS",
    "worker_timeout_s": "JOBSTREAM_WORKER_TIMEOUT_S",
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
        tenants.append(Tenant(name=name, token=token))
    if len({tenant.token for tenant in tenants}) != len(tenants):
        raise ValueError("a token is listed more than once")
    return tuple(tenants)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and check the settings; any invalid value raises ConfigurationError naming it."""
    env = os.environ if environ is None else environ
    raw: dict[str, object] = {}
    for field_name, variable in ENVIRONMENT.items():
        value = env.get(variable)
        if value is not None and value.strip() != "":
            raw[field_name] = value.strip()
    raw.setdefault("targets_path", str(DEFAULT_TARGETS_FILE))
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as error:
        raise ConfigurationError(_describe(error)) from None
    checked_targets(settings)
    return settings


def checked_targets(settings: Settings) -> TargetsFile:
    """The targets file, refused when an enabled target could run longer than the worker's
    Lambda timeout allows: its jobs would be cut off mid-run and end `expired`."""
    targets = load_targets(settings.targets_path)
    limit_ms = settings.worker_timeout_s * 1000
    for target in targets.enabled:
        ceiling = target.timeout_ms or settings.default_deadline_ms
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
    for item in error.errors():
        field_name = str(item["loc"][0]) if item["loc"] else "settings"
        variable = ENVIRONMENT.get(field_name, field_name)
        message = item["msg"]
        if item["type"] == "missing":
            message = "is required"
        problems.append(f"{variable} {message}")
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
