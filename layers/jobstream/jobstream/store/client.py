"""The DynamoDB client every store uses (jobstream/aws.py: created on first use, retried)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, cast

from jobstream.aws import retrying_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


@cache
def dynamodb_client() -> DynamoDBClient:
    """The client every store uses: each call retried on transient failures (jobstream.retries)."""
    return cast("DynamoDBClient", retrying_client("dynamodb"))


def error_code(error: Exception) -> str:
    """The AWS error code of a botocore ClientError, or '' for anything else."""
    response: Any = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
