"""The local stack's moto refuses what DynamoDB refuses for item size and numbers, by DynamoDB's
rules (jobstream_local/moto_limits.py): what AWS stores is stored, what it refuses is refused
and leaves the item as it was."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from jobstream.store.item_size import MAX_ITEM_BYTES, item_size
from tests.integration.test_moto_patches import _table

KEY = {"pk": {"S": "a"}, "sk": {"N": "1"}}


def _item_of(size: int) -> dict[str, Any]:
    """An item of exactly `size` bytes by DynamoDB's rules."""
    room = size - item_size({**KEY, "x": {"S": ""}})
    item = {**KEY, "x": {"S": "a" * room}}
    assert item_size(item) == size
    return item


def _put(client: Any, table: str, how: str, item: dict[str, Any]) -> None:
    if how == "put":
        client.put_item(TableName=table, Item=item)
    elif how == "transaction":
        client.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": item}}])
    else:
        client.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": item}}]})


def _refused(call: Any) -> str:
    with pytest.raises(boto3.client("dynamodb").exceptions.ClientError) as refused:
        call()
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    message: str = refused.value.response["Error"]["Message"]
    return message


@pytest.mark.parametrize("how", ["put", "transaction", "batch"])
def test_an_item_of_400_kib_is_stored_and_one_byte_more_is_refused(aws: None, how: str) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    # moto alone refused this one (its own limit is 405,000 bytes): DynamoDB stores it.
    _put(client, table, how, _item_of(MAX_ITEM_BYTES))
    assert item_size(client.get_item(TableName=table, Key=KEY)["Item"]) == MAX_ITEM_BYTES
    client.delete_item(TableName=table, Key=KEY)
    message = _refused(lambda: _put(client, table, how, _item_of(MAX_ITEM_BYTES + 1)))
    assert message == "Item size has exceeded the maximum allowed size"
    assert client.scan(TableName=table)["Items"] == []


def test_lists_and_maps_count_their_overhead(aws: None) -> None:
    """3 bytes a list and 1 an element: moto alone stored this 500 KB item (it counted 250 KB)."""
    client = boto3.client("dynamodb")
    table = _table(client)
    item = {**KEY, "l": {"L": [{"S": "a"}] * 250_000}}
    assert item_size(item) > MAX_ITEM_BYTES
    _refused(lambda: client.put_item(TableName=table, Item=item))
    assert client.scan(TableName=table)["Items"] == []


@pytest.mark.parametrize("in_transaction", [False, True])
def test_an_update_that_would_outgrow_the_item_leaves_it_as_it_was(
    aws: None, in_transaction: bool
) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    before = _item_of(300_000)
    client.put_item(TableName=table, Item=before)
    update = {
        "TableName": table,
        "Key": KEY,
        "UpdateExpression": "SET y = :y, z = :z REMOVE x",
        "ExpressionAttributeValues": {":y": {"S": "b" * 150_000}, ":z": {"S": "c" * 300_000}},
    }
    if in_transaction:
        message = _refused(lambda: client.transact_write_items(TransactItems=[{"Update": update}]))
    else:
        message = _refused(lambda: client.update_item(**update))
    assert message == "Item size to update has exceeded the maximum allowed size"
    assert client.get_item(TableName=table, Key=KEY)["Item"] == before
    # An update whose item fits is applied.
    update["ExpressionAttributeValues"][":z"] = {"S": "c" * 200_000}
    client.update_item(**update)
    after = client.get_item(TableName=table, Key=KEY)["Item"]
    assert set(after) == {"pk", "sk", "y", "z"}


@pytest.mark.parametrize(
    ("number", "stored"),
    [
        ("9" * 38, True),
        ("1e125", True),
        ("1e-130", True),
        ("9" * 39, False),
        ("1" + "0" * 126, False),
        ("1e-131", False),
    ],
)
def test_numbers_are_held_to_38_digits_and_dynamodbs_range(
    aws: None, number: str, stored: bool
) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    item = {**KEY, "n": {"M": {"deep": {"L": [{"N": number}]}}}}
    update = {
        "TableName": table,
        "Key": KEY,
        "UpdateExpression": "SET m = :m",
        "ExpressionAttributeValues": {":m": {"N": number}},
    }
    if stored:
        client.put_item(TableName=table, Item=item)
        client.update_item(**update)
        assert len(client.scan(TableName=table)["Items"]) == 1
        return
    _refused(lambda: client.put_item(TableName=table, Item=item))
    _refused(lambda: client.update_item(**update))
    _refused(
        lambda: client.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": item}}]
        )
    )
    assert client.scan(TableName=table)["Items"] == []
