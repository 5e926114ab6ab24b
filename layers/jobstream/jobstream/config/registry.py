"""Where the consumer registry is read from, kept current without a deploy.

- Secrets Manager (`JOBSTREAM_TENANTS_SECRET`): read with the functions' own retried client
  (config/stored.py) and used for `JOBSTREAM_TENANTS_MAX_AGE_S` by the caller's clock, so a
  rotation is in force within that time. The client is made only when this source is configured.
- A file (`JOBSTREAM_TENANTS`): re-read whenever it changes on disk.
- Inline (`Settings.tenants`): the `JOBSTREAM_API_TOKENS` shorthand, or a test's registry.

A document is parsed once per distinct text. A secret that cannot be fetched while an earlier
value is known keeps that value (logged), for at most `JOBSTREAM_TENANTS_MAX_STALE_S` after the
last successful read: a short outage of Secrets Manager does not take the API down, and a long
one does not keep a revoked token or a removed tenant in force for ever. After a failed read the
known value is used without another try for RETRY_AFTER_FAILURE_MS (within that bound), so an
outage costs each environment one slow request that often; with no value known, every request
meanwhile is refused at once. Past the bound, or with no value known, it is
RegistryUnavailableError: a transient cause, which the API answers with a retryable 503 and a
callback by waiting, without an attempt. An invalid document is a ConfigurationError: the API
answers 503 (not retryable) until it is fixed, and an outage meanwhile does not bring back the
registry it replaced (the text in force is the one last read).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Final

from jobstream.clock import now_ms as wall_clock_ms
from jobstream.config import stored
from jobstream.config.settings import ConfigurationError, Settings
from jobstream.config.tenants import RegistryError, TenantRegistry, parse_registry

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# Parsed documents by source, with the text (or file stamp) they came from.
_parsed: dict[str, tuple[object, TenantRegistry]] = {}
# Each secret's text as last read successfully, and when (epoch ms of the caller's clock).
_read: dict[str, tuple[int, str]] = {}
# When the last read of each secret failed, while it has not been read since.
_failed_at: dict[str, int] = {}
# After a failed read, how long the registry read before is used without another try.
RETRY_AFTER_FAILURE_MS: Final = 5_000
# How long a read took (seconds; tests replace it): the caller's clock is read before it.
elapsed_clock = time.monotonic


class RegistryUnavailableError(ConfigurationError):
    """The registry cannot be read now and no value recent enough is known: transient (another
    try may succeed), unlike an invalid document."""


def load_registry(settings: Settings, now_ms: int | None = None) -> TenantRegistry:
    """The registry as it is now (`now_ms`: the caller's clock); RegistryUnavailableError when it
    cannot be read now, ConfigurationError when it is invalid."""
    if settings.tenants_secret is not None:
        now = wall_clock_ms() if now_ms is None else now_ms
        return _from_secret(settings, now)
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


def _from_secret(settings: Settings, now_ms: int) -> TenantRegistry:
    secret_id = str(settings.tenants_secret)
    key = f"secret:{secret_id}"
    read = _read.get(key)
    if read is not None and 0 <= now_ms - read[0] < settings.tenants_max_age_s * 1000:
        text = read[1]  # within the cache age: no call per request (a clock set back reads)
    elif _failed_moments_ago(key, now_ms, read, settings):
        if read is None:
            # Nothing was ever read here: every request meanwhile is refused at once (a
            # retryable 503), not each after a slow read of its own.
            raise RegistryUnavailableError(
                "JOBSTREAM_TENANTS_SECRET: the tenants secret could not be read moments ago"
            )
        # The text read before stands in without another try: an outage costs one slow request
        # per environment this often, not every request the client's retries (nor a throttled
        # Secrets Manager every request's calls).
        text = read[1]
    else:
        text = _fetch_or_keep(settings, key, read, now_ms)
    known = _parsed.get(key)
    if known is not None and known[0] == text:
        return known[1]
    # An invalid text is a ConfigurationError each time it is met, whatever was valid before:
    # the registry in force is the one last read, never an older one it replaced.
    return _parse_and_keep(key, text, text, "JOBSTREAM_TENANTS_SECRET")


def _fetch_or_keep(settings: Settings, key: str, read: tuple[int, str] | None, now_ms: int) -> str:
    """The secret's text read now; when that fails, the text read before while it is within
    the stale bound (RegistryUnavailableError past it, or with nothing read before)."""
    started_s = elapsed_clock()
    try:
        text = fetch_secret(key.removeprefix("secret:"))
    except RegistryUnavailableError as error:
        # The pause counts from the end of the failed read: its retries (or a hung store's
        # timeouts) may have taken most of RETRY_AFTER_FAILURE_MS already.
        spent_ms = max(0, round((elapsed_clock() - started_s) * 1000))
        with _lock:
            _failed_at[key] = now_ms + spent_ms
        if read is None:
            raise
        age_s = (now_ms - read[0]) / 1000
        if age_s > settings.tenants_max_stale_s:
            # An operator who revoked a token expects it refused: past the bound, no answer
            # rests on a registry that old.
            raise RegistryUnavailableError(
                f"{error} (the registry read {age_s:.0f} s ago is older than "
                f"JOBSTREAM_TENANTS_MAX_STALE_S = {settings.tenants_max_stale_s} s)"
            ) from None
        logger.warning("tenants secret unreadable; keeping the registry read %.0f s ago", age_s)
        return read[1]
    with _lock:
        _read[key] = (now_ms, text)
        _failed_at.pop(key, None)
    return text


def _failed_moments_ago(
    key: str, now_ms: int, read: tuple[int, str] | None, settings: Settings
) -> bool:
    """Whether a read failed within RETRY_AFTER_FAILURE_MS while the text read before (if any)
    is still within the stale bound (past it, every request tries: it would be refused anyway).
    A request's clock, read as it began, may be just before the end of a read that failed
    meanwhile; one set back further reads again."""
    failed_at = _failed_at.get(key)
    return (
        failed_at is not None
        and -RETRY_AFTER_FAILURE_MS <= now_ms - failed_at < RETRY_AFTER_FAILURE_MS
        and (read is None or now_ms - read[0] <= settings.tenants_max_stale_s * 1000)
    )


def _parse_and_keep(key: str, stamp: object, text: str | bytes, source: str) -> TenantRegistry:
    """The registry `text` holds, kept under `key` with the stamp of what it was read from."""
    try:
        registry = parse_registry(text)
    except RegistryError as error:
        raise ConfigurationError(f"{source} is invalid: {error}") from None
    with _lock:
        _parsed[key] = (stamp, registry)
    return registry


def fetch_secret(secret_id: str) -> str:
    """The secret's text, read now (config/stored.py); RegistryUnavailableError when it cannot
    be read (after the client's retries): another try later may succeed."""
    try:
        text = stored.secret_text(secret_id)
    except stored.StoreUnreadableError as error:
        raise RegistryUnavailableError(
            f"JOBSTREAM_TENANTS_SECRET: cannot read the tenants secret: {error}"
        ) from None
    except stored.StoreClientError as error:
        raise ConfigurationError(f"JOBSTREAM_TENANTS_SECRET: {error}") from None
    if text is None:
        raise ConfigurationError("JOBSTREAM_TENANTS_SECRET: the secret holds no text")
    return text


def forget_reads() -> None:
    """Drop what was read and parsed (a new environment's state: the next use reads again)."""
    with _lock:
        _parsed.clear()
        _read.clear()
        _failed_at.clear()


def forget_cached() -> None:
    """Drop every cached document, read and client (tests; a new endpoint)."""
    forget_reads()
    stored.forget_clients()
