"""The local stack's changes to moto answer exactly what moto (and DynamoDB / SQS) would.

Queries read one partition instead of sorting the table: checked against a model of the items
written, for table and (sparse) index queries, both directions, key ranges and pagination.
SQS queue attributes are computed per name: checked equal to moto's own computation.
An empty attribute name is refused as DynamoDB refuses it, wherever a request carries one.
SQS message move tasks, which moto lacks, move a dead-letter queue's messages as AWS does.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PARTITIONS = ["a", "b", "c"]

Item = tuple[str, int, str | None, int]  # pk, sk, g (sparse index key), gr (index range key)


def _table(client: Any) -> str:
    name = f"patched-{uuid.uuid4().hex[:10]}"
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
            {"AttributeName": "g", "AttributeType": "S"},
            {"AttributeName": "gr", "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "sparse",
                "KeySchema": [
                    {"AttributeName": "g", "KeyType": "HASH"},
                    {"AttributeName": "gr", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    return name


def _put(client: Any, table: str, items: list[Item]) -> None:
    for pk, sk, g, gr in items:
        item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"N": str(sk)}, "gr": {"N": str(gr)}}
        if g is not None:
            item["g"] = {"S": g}
        client.put_item(TableName=table, Item=item)


def _all_pages(client: Any, limit: int | None, **query: Any) -> list[tuple[str, int]]:
    keys: list[tuple[str, int]] = []
    start: dict[str, Any] | None = None
    while True:
        extra: dict[str, Any] = {} if limit is None else {"Limit": limit}
        if start is not None:
            extra["ExclusiveStartKey"] = start
        page = client.query(**query, **extra)
        keys += [(item["pk"]["S"], int(item["sk"]["N"])) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if start is None:
            return keys


items_strategy = st.lists(
    st.tuples(
        st.sampled_from(PARTITIONS),
        st.integers(0, 50),
        st.sampled_from(["x", "y", None]),
    ),
    max_size=40,
    unique_by=lambda item: (item[0], item[1]),
).flatmap(
    # Index range keys from a small set: ties are where sorted and unsorted candidates differ.
    lambda rows: st.lists(st.integers(0, 3), min_size=len(rows), max_size=len(rows)).map(
        lambda ranks: [(pk, sk, g, rank) for (pk, sk, g), rank in zip(rows, ranks, strict=True)]
    )
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=items_strategy,
    partition=st.sampled_from(PARTITIONS),
    low=st.integers(0, 50),
    forward=st.booleans(),
    limit=st.sampled_from([None, 1, 3]),
)
def test_a_table_query_returns_its_partition_in_key_order(
    aws: None, *, items: list[Item], partition: str, low: int, forward: bool, limit: int | None
) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    _put(client, table, items)
    got = _all_pages(
        client,
        limit,
        TableName=table,
        KeyConditionExpression="pk = :p AND sk >= :low",
        ExpressionAttributeValues={":p": {"S": partition}, ":low": {"N": str(low)}},
        ScanIndexForward=forward,
    )
    expected = sorted(
        ((pk, sk) for pk, sk, _g, _gr in items if pk == partition and sk >= low),
        key=lambda key: key[1],
        reverse=not forward,
    )
    assert got == expected
    # A partition nobody wrote stays empty, and asking for it creates nothing.
    partitions = len(_moto_table(table).items)
    assert (
        _all_pages(
            client,
            limit,
            TableName=table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "never-written"}},
        )
        == []
    )
    assert len(_moto_table(table).items) == partitions
    assert client.scan(TableName=table, Select="COUNT")["Count"] == len(items)


def _moto_table(name: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[name]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=items_strategy,
    index_key=st.sampled_from(["x", "y"]),
    forward=st.booleans(),
    limit=st.sampled_from([None, 1, 4]),
)
def test_a_sparse_index_query_returns_only_indexed_items_in_index_order(
    aws: None, items: list[Item], index_key: str, forward: bool, limit: int | None
) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    _put(client, table, items)
    got = _all_pages(
        client,
        limit,
        TableName=table,
        IndexName="sparse",
        KeyConditionExpression="g = :g",
        ExpressionAttributeValues={":g": {"S": index_key}},
        ScanIndexForward=forward,
    )
    # Equal index keys: moto orders them by the table's key (DynamoDB leaves it open; the
    # store's index keys are unique).
    indexed = sorted((gr, pk, sk) for pk, sk, g, gr in items if g == index_key)
    expected = [(pk, sk) for _gr, pk, sk in (indexed if forward else reversed(indexed))]
    assert got == expected


def _sqs_queue(name: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    return sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[name]


@pytest.mark.parametrize("kind", ["standard", "fifo", "encrypted"])
def test_queue_attributes_equal_motos_own(aws: None, kind: str) -> None:
    sqs = boto3.client("sqs")
    suffix = uuid.uuid4().hex[:10]
    fifo = {"FifoQueue": "true"} if kind == "fifo" else {}
    dead = sqs.create_queue(
        QueueName=f"dead-{suffix}" + (".fifo" if fifo else ""), Attributes=fifo
    )["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = {
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 3}),
        "DelaySeconds": "0",
    }
    name = f"live-{suffix}"
    if kind == "fifo":
        name += ".fifo"
        attributes |= {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    if kind == "encrypted":
        attributes |= {"KmsMasterKeyId": "alias/aws/sqs"}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    group = {"MessageGroupId": "g"} if kind == "fifo" else {}
    for body in ["one", "two", "three"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, **group)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)  # one in flight
    if kind == "standard":
        sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)

    queue = _sqs_queue(name)
    computed_by_moto = type(queue).moto_attributes.fget(queue)
    assert dict(queue.attributes) == computed_by_moto
    answered = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert answered == {
        key: str(value) for key, value in computed_by_moto.items() if value is not None
    }
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    expected_visible = "1" if kind == "fifo" else "2"  # a FIFO group waits for its in-flight one
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert counts["ApproximateNumberOfMessagesDelayed"] == ("1" if kind == "standard" else "0")
    assert counts["ApproximateNumberOfMessages"] in {expected_visible, "2"}


def test_fifo_content_based_deduplication_still_applies(aws: None) -> None:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(
        QueueName=f"dedup-{uuid.uuid4().hex[:10]}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for _ in range(3):
        sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert counts["Attributes"]["ApproximateNumberOfMessages"] == "1"


def _requests_with_an_empty_name(table: str) -> dict[str, tuple[str, dict[str, Any]]]:
    key = {"pk": {"S": "a"}, "sk": {"N": "1"}}
    nested = {"M": {"outer": {"L": [{"M": {"": {"S": "x"}}}]}}}
    return {
        "top-level attribute": ("put_item", {"Item": {**key, "": {"S": "x"}}}),
        "map key deep in a value": ("put_item", {"Item": {**key, "doc": nested}}),
        "update value": (
            "update_item",
            {
                "Key": key,
                "UpdateExpression": "SET doc = :d",
                "ExpressionAttributeValues": {":d": nested},
            },
        ),
        "attribute name alias": (
            "update_item",
            {
                "Key": key,
                "UpdateExpression": "SET #n = :v",
                "ExpressionAttributeNames": {"#n": ""},
                "ExpressionAttributeValues": {":v": {"S": "x"}},
            },
        ),
        "transaction": (
            "transact_write_items",
            {"TransactItems": [{"Put": {"TableName": table, "Item": {**key, "doc": nested}}}]},
        ),
        "query start key": (
            "query",
            {
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
                "ExclusiveStartKey": {**key, "": {"S": "x"}},
            },
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "top-level attribute",
        "map key deep in a value",
        "update value",
        "attribute name alias",
        "transaction",
        "query start key",
    ],
)
def test_an_empty_attribute_name_is_refused_and_writes_nothing(aws: None, case: str) -> None:
    # As DynamoDB does: a ValidationException at once, rather than an item no read can return.
    client = boto3.client("dynamodb")
    table = _table(client)
    operation, parameters = _requests_with_an_empty_name(table)[case]
    if operation != "transact_write_items":
        parameters = {"TableName": table, **parameters}
    with pytest.raises(client.exceptions.ClientError) as refused:
        getattr(client, operation)(**parameters)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == "Empty attribute name"
    assert client.scan(TableName=table)["Items"] == []


def test_names_that_are_not_empty_are_stored_as_sent(aws: None) -> None:
    client = boto3.client("dynamodb")
    table = _table(client)
    doc = {"M": {"S": {"S": "type tag as a name"}, " ": {"M": {"#": {"NULL": True}}}}}
    client.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"N": "1"}, "doc": doc})
    item = client.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})["Item"]
    assert item["doc"] == doc


def _queues_with_dead_letters(sqs: Any) -> tuple[str, str, str, str]:
    """A source queue and its dead-letter queue: their URLs and ARNs."""
    suffix = uuid.uuid4().hex[:10]
    dead_url = sqs.create_queue(QueueName=f"dead-{suffix}")["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1})
    source_url = sqs.create_queue(
        QueueName=f"source-{suffix}", Attributes={"RedrivePolicy": policy}
    )["QueueUrl"]
    source_arn = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    return source_url, source_arn, dead_url, dead_arn


def _bodies(sqs: Any, url: str) -> list[str]:
    found: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        found += [message["Body"] for message in messages]
    return sorted(found)


@pytest.mark.parametrize("named_destination", [True, False])
def test_a_message_move_task_moves_every_dead_letter(aws: None, named_destination: bool) -> None:
    sqs = boto3.client("sqs")
    source_url, source_arn, dead_url, dead_arn = _queues_with_dead_letters(sqs)
    bodies = sorted(f"message {n}" for n in range(23))  # more than one receive's worth
    for body in bodies:
        sqs.send_message(QueueUrl=dead_url, MessageBody=body)
    request = {"SourceArn": dead_arn}
    if named_destination:
        request["DestinationArn"] = source_arn
    handle = sqs.start_message_move_task(**request)["TaskHandle"]
    assert handle
    assert _bodies(sqs, dead_url) == []
    assert _bodies(sqs, source_url) == bodies


def test_a_message_move_task_from_an_unknown_queue_is_a_client_error(aws: None) -> None:
    from botocore.exceptions import ClientError

    sqs = boto3.client("sqs")
    with pytest.raises(ClientError):
        sqs.start_message_move_task(SourceArn="arn:aws:sqs:us-east-1:123456789012:nothing-here")
