"""Where the consumer registry is read from, kept current without a deploy.

- Secrets Manager (`JOBSTREAM_TENANTS_SECRET`): read through Powertools parameters and cached
  for `JOBSTREAM_TENANTS_MAX_AGE_S`, so a rotation is in force within that time. Powertools (and
  boto3) are imported only when this source is configured.
- A file (`JOBSTREAM_TENANTS`): re-read whenever it changes on disk.
- Inline (`Settings.tenants`): the `JOBSTREAM_API_TOKENS` shorthand, or a test's registry.

A document is parsed once per distinct text. A secret that cannot be fetched while an earlier
value is known keeps that value (logged): an outage of Secrets Manager does not take the API down.
An invalid document is a ConfigurationError: the API answers 503 until it is fixed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from jobstream.aws import endpoint_url
from jobstream.config.settings import ConfigurationError, Settings
from jobstream.config.tenants import RegistryError, TenantRegistry, parse_registry

logger = logging.getLogger("jobstream.config")

_lock = threading.Lock()
# Parsed documents by source, with the text (or file stamp) they came from.
_parsed: dict[str, tuple[object, TenantRegistry]] = {}
_providers: dict[str | None, Any] = {}


def load_registry(settings: Settings) -> TenantRegistry:
    """The registry as it is now; ConfigurationError when it cannot be had."""
    if settings.tenants_secret is not None:
        return _from_secret(settings.tenants_secret, settings.tenants_max_age_s)
    if settings.tenants_path is not None:
        return load_registry_file(settings.tenants_path)
    if settings.tenants is None:  # Settings guarantees one source
        raise ConfigurationError("no consumer registry is configured")
    return settings.tenants


def load_registry_file(path: Path) -> TenantRegistry:
    """The file's registry, parsed again only when the file changed."""
    try:
        stat = path.stat()
    except OSError as error:
        raise ConfigurationError(
            f"JOBSTREAM_TENANTS: cannot read {path.name}: {error.strerror}"
        ) from None
    # The inode too: an atomic replace (the CLI's writes) is a new file even within one tick.
    stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    key = f"file:{path}"
    cached = _parsed.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        text = path.read_bytes()
    except OSError as error:
        raise ConfigurationError(
            f"JOBSTREAM_TENANTS: cannot read {path.name}: {error.strerror}"
        ) from None
    return _parse_and_keep(key, stamp, text, f"JOBSTREAM_TENANTS: {path.name}")


def _from_secret(secret_id: str, max_age_s: int) -> TenantRegistry:
    key = f"secret:{secret_id}"
    known = _parsed.get(key)
    try:
        text = fetch_secret(secret_id, max_age_s)
    except ConfigurationError:
        if known is None:
            raise
        logger.warning("tenants secret unreadable; keeping the registry read before")
        return known[1]
    if known is not None and known[0] == text:
        return known[1]
    return _parse_and_keep(key, text, text, "JOBSTREAM_TENANTS_SECRET")


def _parse_and_keep(key: str, stamp: object, text: str | bytes, source: str) -> TenantRegistry:
    """The registry `text` holds, kept under `key` with the stamp of what it was read from."""
    try:
        registry = parse_registry(text)
    except RegistryError as error:
        raise ConfigurationError(f"{source} is invalid: {error}") from None
    with _lock:
        _parsed[key] = (stamp, registry)
    return registry


def fetch_secret(secret_id: str, max_age_s: int) -> str:
    """The secret's text through Powertools parameters (cached for `max_age_s`)."""
    from aws_lambda_powertools.utilities.parameters.exceptions import (  # noqa: PLC0415
        GetParameterError,
    )

    try:
        value = secrets_provider().get(
            secret_id, max_age=max_age_s or None, force_fetch=max_age_s == 0
        )
    except GetParameterError as error:
        raise ConfigurationError(
            f"JOBSTREAM_TENANTS_SECRET: cannot read the tenants secret: {error}"
        ) from None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise ConfigurationError("JOBSTREAM_TENANTS_SECRET: the secret holds no text")
    return value


def secrets_provider() -> Any:
    """One Powertools SecretsProvider per endpoint (the cache lives in it)."""
    endpoint = endpoint_url()
    provider = _providers.get(endpoint)
    if provider is None:
        # Imported on first use: only a deployment that reads a secret pays for it.
        import boto3  # noqa: PLC0415
        from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

        with _lock:
            provider = _providers.setdefault(
                endpoint,
                SecretsProvider(boto3_client=boto3.client("secretsmanager", endpoint_url=endpoint)),
            )
    return provider


def forget_cached() -> None:
    """Drop every cached document and provider (tests; a new endpoint or credentials)."""
    with _lock:
        _parsed.clear()
        _providers.clear()
