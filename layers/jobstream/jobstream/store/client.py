"""The DynamoDB client every store uses (jobstream/aws.py: created on first use, retried)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from jobstream.aws import retrying_client
from jobstream.retries import RetryingClient

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


@cache
def dynamodb_client() -> DynamoDBClient:
    """The client every store uses: each call retried on transient failures (jobstream.retries)."""
    return cast("DynamoDBClient", retrying_client("dynamodb"))


def call_built(
    client: DynamoDBClient, operation: str, build: Callable[[], Mapping[str, Any]]
) -> Any:
    """`operation` with its request built again for each attempt (`RetryingClient.call_built`):
    for a write that carries a value of its send time, such as the feed's stamp."""
    return cast("RetryingClient", client).call_built(operation, build)


def error_code(error: Exception) -> str:
    """The AWS error code of a botocore ClientError, or '' for anything else."""
    response: Any = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


class TableStore:
    """A store of the one table: its name, and its client (created on first use)."""

    def __init__(
        self, table_name: str, client_factory: Callable[[], DynamoDBClient] = dynamodb_client
    ) -> None:
        self.table_name = table_name
        self.client_factory = client_factory

    @property
    def client(self) -> DynamoDBClient:
        return self.client_factory()

    def connect(self) -> None:
        """Create the client now (before threads share it)."""
        self.client_factory()
