"""Credentials kept in AWS's stores: a Secrets Manager secret or an SSM SecureString parameter.

Read with the functions' own retried clients (jobstream/aws.py), made on first use, one per store
and endpoint: only a deployment that keeps a credential there pays for the client. How long a
value is used before it is read again is each caller's choice (the registry's cache age, the
Pixiv token's).
"""

from __future__ import annotations

import threading
from typing import Any

from jobstream.aws import endpoint_url, retrying_client
from jobstream.errors import JobstreamError
from jobstream.retries import OutOfTimeError, transient

_lock = threading.Lock()
# Clients by (service, endpoint); only the tests change the endpoint.
_clients: dict[tuple[str, str | None], Any] = {}


class StoreUnreadableError(JobstreamError):
    """The store did not answer with the value (refused, throttled, unreachable, out of time,
    after the client's retries): the message names what was read, never a value. `passing`: the
    cause may pass (throttled, unreachable, out of time), unlike a refusal or a missing name."""

    def __init__(self, message: str, *, passing: bool = False) -> None:
        super().__init__(message)
        self.passing = passing


class StoreClientError(JobstreamError):
    """No client of the store can be made here (no region, a malformed endpoint): configuration,
    which no retry cures."""


def secret_text(secret_id: str) -> str | None:
    """A Secrets Manager secret's text (its string, or its binary as UTF-8); None when it holds
    neither."""
    answer = _call("secretsmanager", "get_secret_value", secret_id, SecretId=secret_id)
    text = answer.get("SecretString")
    if isinstance(text, str):
        return text
    binary = answer.get("SecretBinary")
    return binary.decode("utf-8", "replace") if isinstance(binary, bytes) else None


def parameter_text(name: str) -> str | None:
    """An SSM parameter's value, decrypted (a SecureString); None when it has none."""
    answer = _call("ssm", "get_parameter", name, Name=name, WithDecryption=True)
    value = answer.get("Parameter", {}).get("Value")
    return value if isinstance(value, str) else None


def client(service: str) -> Any:
    """The store's client for the current endpoint, made on first use."""
    key = (service, endpoint_url())
    with _lock:  # threads that meet no client yet wait for the one being made
        made = _clients.get(key)
        if made is None:
            from botocore.exceptions import BotoCoreError  # noqa: PLC0415 - with the client

            try:
                made = _clients[key] = retrying_client(service)
            except (BotoCoreError, ValueError) as error:
                raise StoreClientError(f"cannot make a {service} client: {error}") from None
        return made


def forget_clients() -> None:
    """Drop the clients (tests: a new endpoint)."""
    with _lock:
        _clients.clear()


def _call(service: str, operation: str, name: str, **request: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - with the client

    store = client(service)
    try:
        return getattr(store, operation)(**request)
    except (BotoCoreError, ClientError, OutOfTimeError) as error:
        raise StoreUnreadableError(
            f"cannot read {name}: {error}", passing=transient(error) is not None
        ) from None
