"""The DynamoDB client, created on first use so that importing a handler stays cheap.

boto3 honours AWS_ENDPOINT_URL, which the local stack sets. `sam local` only passes variables the
template declares, so JOBSTREAM_AWS_ENDPOINT_URL (empty on AWS) points functions there instead.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from jobstream.retries import RetryingClient, client_config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


ENDPOINT_VARIABLE = "JOBSTREAM_AWS_ENDPOINT_URL"


@cache
def dynamodb_client() -> DynamoDBClient:
    """The client every store uses: each call retried on transient failures (jobstream.retries)."""
    import boto3  # noqa: PLC0415 - deferred: boto3 costs ~0.2 s of cold start

    client = boto3.client(
        "dynamodb", endpoint_url=os.environ.get(ENDPOINT_VARIABLE) or None, config=client_config()
    )
    return cast("DynamoDBClient", RetryingClient(client, "dynamodb"))


def error_code(error: Exception) -> str:
    """The AWS error code of a botocore ClientError, or '' for anything else."""
    response: Any = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
