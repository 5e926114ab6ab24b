"""The boto3 clients, created on first use so that importing a handler stays cheap.

boto3 honours AWS_ENDPOINT_URL, which the local stack sets. `sam local` only passes variables the
template declares, so JOBSTREAM_AWS_ENDPOINT_URL (empty on AWS) points functions there instead.
"""

from __future__ import annotations

from typing import Any, Final

from jobstream.config.environment import variable
from jobstream.retries import RetryingClient, client_config

ENDPOINT_VARIABLE: Final = "JOBSTREAM_AWS_ENDPOINT_URL"


def endpoint_url() -> str | None:
    return variable(ENDPOINT_VARIABLE) or None


def retrying_client(service: str) -> Any:
    """A client of `service` whose every call is retried on transient failures (retries.py)."""
    import boto3  # noqa: PLC0415 - deferred: boto3 costs ~0.2 s of cold start

    # Typed by each caller (boto3-stubs types a client per literal service name).
    make_client: Any = boto3.client
    return RetryingClient(
        make_client(service, endpoint_url=endpoint_url(), config=client_config()), service
    )
