"""The local stack's changes to moto answer exactly what moto (and DynamoDB / SQS) would.

Queries read one partition instead of sorting the table: checked against a model of the items
written, for table and (sparse) index queries, both directions, key ranges and pagination.
SQS queue attributes are computed per name: checked equal to moto's own computation.
An empty attribute name is refused as DynamoDB refuses it, wherever a request carries one.
A cancelled transaction leaves no trace, and no transaction copies a table.
SQS message move tasks, which moto lacks, move a dead-letter queue's messages as AWS does.
Update and condition expressions parsed once per text, and items answered without moto's walk of
their shape: every answer equal to moto's own (its parse and its walk put back for comparison).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.domain import StoredEvent
from jobstream.runtime import Runtime
from jobstream.store.jobs import CallbackIntent, NewEvent
from jobstream.store.shards import MergedQuery

PARTITIONS = ["a", "b", "c"]

Item = tuple[str, int, str | None, int]  # pk, sk, g (sparse index key), gr (index range key)


def _table(client: Any, *, prefix: str = "patched", sparse_index: bool = True) -> str:
    """A table keyed (pk S, sk N); with `sparse_index`, also the index `sparse` on (g S, gr N)."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    keys = [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "N"},
    ]
    index: dict[str, Any] = {}
    if sparse_index:
        keys += [
            {"AttributeName": "g", "AttributeType": "S"},
            {"AttributeName": "gr", "AttributeType": "N"},
        ]
        index["GlobalSecondaryIndexes"] = [
            {
                "IndexName": "sparse",
                "KeySchema": [
                    {"AttributeName": "g", "KeyType": "HASH"},
                    {"AttributeName": "gr", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ]
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=keys,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        **index,
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


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


# -------------------------------------------------------------- all-or-nothing transactions


def _key(pk: str, sk: int) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def _seeded(client: Any) -> str:
    """A table with an item to update in place, one a condition refuses, and an index entry."""
    table = _table(client)
    client.put_item(
        TableName=table,
        Item={**_key("a", 1), "n": {"N": "1"}, "doc": {"M": {"x": {"L": [{"S": "keep"}]}}}},
    )
    client.put_item(TableName=table, Item={**_key("b", 1), "g": {"S": "x"}, "gr": {"N": "1"}})
    return table


def _put_op(table: str, pk: str, sk: int, **attributes: Any) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": {**_key(pk, sk), **attributes}}}


def _update_a(table: str) -> dict[str, Any]:
    # Changes an existing item in place: the nested value too, and its index entry.
    return {
        "Update": {
            "TableName": table,
            "Key": _key("a", 1),
            "UpdateExpression": "SET n = n + :one, doc.x[0] = :gone, g = :g, gr = :gr",
            "ExpressionAttributeValues": {
                ":one": {"N": "1"},
                ":gone": {"S": "gone"},
                ":g": {"S": "x"},
                ":gr": {"N": "0"},
            },
        }
    }


def _refused_condition(table: str) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": _key("b", 1),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


TRANSACTIONS = {
    # A condition fails on the last item, after new items, an in-place update and a new
    # partition were written.
    "condition fails on the last item": lambda t: [
        _put_op(t, "c", 1, g={"S": "x"}, gr={"N": "2"}),
        _update_a(t),
        {
            "Update": {
                "TableName": t,
                "Key": _key("new-partition", 1),
                "UpdateExpression": "SET n = :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
        _refused_condition(t),
    ],
    "condition fails on the first item": lambda t: [_refused_condition(t), _update_a(t)],
    # A number DynamoDB cannot store, in the middle: what a refused admission's job item did.
    "invalid number mid-transaction": lambda t: [
        _update_a(t),
        _put_op(t, "c", 1, n={"N": "1e300"}),
        _put_op(t, "c", 2, g={"S": "x"}, gr={"N": "3"}),
    ],
    "item too large mid-transaction": lambda t: [
        _put_op(t, "c", 1),
        _put_op(t, "c", 2, big={"S": "x" * 410_000}),
        _update_a(t),
    ],
    "two actions on one item": lambda t: [_update_a(t), _put_op(t, "c", 1), _update_a(t)],
}


@pytest.mark.parametrize("case", sorted(TRANSACTIONS))
def test_a_cancelled_transaction_leaves_no_trace(aws: None, case: str) -> None:
    """As DynamoDB: whatever stops a transaction, none of its writes remain (not the items it
    wrote before, not an update made in place, not an index entry, not a new partition)."""
    client = boto3.client("dynamodb")
    table = _seeded(client)
    before = client.scan(TableName=table)["Items"]
    partitions = len(_moto_table(table).items)
    with pytest.raises(client.exceptions.ClientError):
        client.transact_write_items(TransactItems=TRANSACTIONS[case](table))
    assert client.scan(TableName=table)["Items"] == before
    assert len(_moto_table(table).items) == partitions
    indexed = client.query(
        TableName=table,
        IndexName="sparse",
        KeyConditionExpression="g = :g",
        ExpressionAttributeValues={":g": {"S": "x"}},
    )["Items"]
    assert [(item["pk"]["S"], item["sk"]["N"]) for item in indexed] == [("b", "1")]


def test_a_transaction_that_holds_is_applied_whole(aws: None) -> None:
    client = boto3.client("dynamodb")
    table = _seeded(client)
    client.transact_write_items(TransactItems=[_put_op(table, "c", 1), _update_a(table)])
    item = client.get_item(TableName=table, Key=_key("a", 1))["Item"]
    assert item["n"] == {"N": "2"}
    assert item["doc"]["M"]["x"]["L"] == [{"S": "gone"}]
    assert "Item" in client.get_item(TableName=table, Key=_key("c", 1))


def test_a_transaction_copies_the_items_it_names_never_a_table(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cost follows the transaction, not the table: no table is copied, applied or refused."""
    from moto.dynamodb.models.table import Table

    def refuse(self: Any, memo: Any) -> Any:
        raise AssertionError("a whole table was copied")

    client = boto3.client("dynamodb")
    table = _seeded(client)
    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    client.transact_write_items(TransactItems=[_put_op(table, "c", 1), _update_a(table)])
    with pytest.raises(client.exceptions.ClientError):
        client.transact_write_items(TransactItems=[_update_a(table), _refused_condition(table)])


def test_a_refused_admission_leaves_no_job_event_or_callback(crt: Runtime) -> None:
    """The admission's transaction fails on the job item (a number DynamoDB cannot store):
    neither its event nor its callback intent remains, so the sweep sends no callback for a
    job that does not exist."""
    from jobstream.service import admission
    from jobstream.service.sweep import sweep
    from jobstream.store import keys
    from tests.support.harness import canonical_task
    from tests.support.state import whole_table

    task = canonical_task(callback_url="https://consumer.example.test/hooks")
    status, body = admission.submit(crt, "acme", task, None)
    job_id = body["job"]["job_id"]
    stored = crt.store.get_job(job_id)
    assert status == 202
    assert stored is not None
    unstorable = replace(stored, job_id=job_id[:-4] + "XXXX", deadline_at=int(1e300))
    accepted = StoredEvent(unstorable.job_id, 1, "job.requested", unstorable.created_at)
    intent = CallbackIntent()
    before = whole_table(crt)
    with pytest.raises(ClientError):
        crt.store.create_job(
            unstorable,
            NewEvent(accepted, expires_at=2_000_000_000, intent=intent),
            now_s=stored.created_at // 1000,
        )
    assert whole_table(crt) == before
    crt.clock.advance(keys.HANDOFF_GRACE_MS * 2)  # type: ignore[attr-defined]
    assert sweep(crt).callbacks_resent == 1  # the first job's own, nothing for the refused one


# -- the store's sharded reads: one query per partition, merged --------------------------------

unique_items = st.lists(
    st.tuples(
        st.sampled_from(PARTITIONS),
        st.integers(0, 50),
        st.sampled_from(["x", "y", "z", None]),
        st.integers(0, 500),
    ),
    max_size=40,
    unique_by=(lambda item: (item[0], item[1]), lambda item: item[3]),
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=unique_items,
    shards=st.sampled_from([["x"], ["x", "y"], ["z", "y", "x"]]),
    forward=st.booleans(),
    limit=st.sampled_from([1, 2, 5]),
    low=st.sampled_from([None, 10, 40]),
)
def test_a_merged_read_of_shards_is_their_union_in_index_order(
    aws: None,
    *,
    items: list[Item],
    shards: list[str],
    forward: bool,
    limit: int,
    low: int | None,
) -> None:
    """store/shards.py: MergedQuery over index partitions (the store's shards) answers what
    one partition holding all their items would, in either direction, with filters and small
    reads; taking a few items reads no further than it must."""
    client = boto3.client("dynamodb")
    table = _table(client)
    _put(client, table, items)
    requests = []
    for shard in shards:
        request: dict[str, Any] = {
            "TableName": table,
            "IndexName": "sparse",
            "KeyConditionExpression": "g = :g",
            "ExpressionAttributeValues": {":g": {"S": shard}},
            "ScanIndexForward": forward,
            "Limit": limit,
        }
        if low is not None:
            request["FilterExpression"] = "sk >= :low"
            request["ExpressionAttributeValues"][":low"] = {"N": str(low)}
        requests.append(request)
    merged = MergedQuery(client, requests, sort_key="gr", descending=not forward)
    got = [(item["pk"]["S"], int(item["sk"]["N"])) for item in merged]
    wanted = sorted(
        (gr, pk, sk) for pk, sk, g, gr in items if g in shards and (low is None or sk >= low)
    )
    if not forward:
        wanted.reverse()
    assert got == [(pk, sk) for _gr, pk, sk in wanted]
    assert list(merged) == []  # nothing left unread: iterating again yields nothing


# ------------------------------------------------------------------- SQS message move tasks


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


# ------------------------------------------- expressions parsed once, items answered as they are


@contextmanager
def _motos_own_parsing_and_answers() -> Iterator[None]:
    """moto's own expression parsing and answer walk, as before the patches, for a while."""
    from moto.core.serialize import BaseJSONSerializer
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import ast_nodes, expressions, validators

    parser: Any = expressions.UpdateExpressionParser
    traverser: Any = ast_nodes.DepthFirstTraverser
    patched = [
        (BaseJSONSerializer, "_serialize_type_structure", "moto_serialize_type_structure"),
        (BaseJSONSerializer, "_serialize_type_map", "moto_serialize_type_map"),
        (ConditionExpressionParser, "_lex_condition_expression", "moto_lex"),
        (parser, "make", "moto_make"),
        (traverser, "nodes_to_be_processed", "moto_nodes_to_be_processed"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patched]
    fast_copy = validators.deepcopy
    for owner, name, original in patched:
        setattr(owner, name, owner.__dict__[original])
    validators.deepcopy = copy.deepcopy
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        validators.deepcopy = fast_copy


def _answer(call: Any, **request: Any) -> Any:
    """An answer without its per-request metadata (nor the table its capacity names), or the
    error code it raised."""
    try:
        response = call(**request)
    except ClientError as error:
        return ("error", error.response["Error"]["Code"])
    response.pop("ResponseMetadata", None)
    response.pop("ConsumedCapacity", None)
    return response


scalars = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=8)),
    st.builds(
        lambda n: {"N": str(n)},
        st.integers(-(10**12), 10**12) | st.decimals(-1e6, 1e6, places=3, allow_nan=False),
    ),
    st.builds(lambda b: {"B": b}, st.binary(min_size=1, max_size=8)),
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(
        lambda s: {"SS": sorted(s)},
        st.sets(st.text(min_size=1, max_size=4), min_size=1, max_size=3),
    ),
    st.builds(
        lambda s: {"NS": sorted(str(n) for n in s)},
        st.sets(st.integers(0, 99), min_size=1, max_size=3),
    ),
    st.builds(
        lambda s: {"BS": sorted(s)},
        st.sets(st.binary(min_size=1, max_size=4), min_size=1, max_size=3),
    ),
)
attribute_values = st.recursive(
    scalars,
    lambda inner: (
        st.builds(lambda items: {"L": items}, st.lists(inner, max_size=3))
        | st.builds(
            lambda fields: {"M": fields},
            st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3),
        )
    ),
    max_leaves=8,
)
attribute_maps = st.dictionaries(
    st.text(min_size=1, max_size=6).filter(lambda name: name not in {"pk", "sk"}),
    attribute_values,
    max_size=5,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attributes=attribute_maps)
def test_items_are_answered_as_motos_own_walk_answers_them(
    aws: None, attributes: dict[str, Any]
) -> None:
    client = boto3.client("dynamodb")
    table = _table(client, prefix="answers", sparse_index=False)
    key = {"pk": {"S": "p"}, "sk": {"N": "1"}}
    client.put_item(TableName=table, Item={**key, **attributes})
    requests: list[tuple[Any, dict[str, Any]]] = [
        (client.get_item, {"TableName": table, "Key": key, "ConsistentRead": True}),
        (
            client.query,
            {
                "TableName": table,
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "p"}},
            },
        ),
        (client.scan, {"TableName": table}),
        (
            client.batch_get_item,
            {"RequestItems": {table: {"Keys": [key], "ConsistentRead": True}}},
        ),
        (
            client.update_item,
            {
                "TableName": table,
                "Key": key,
                "UpdateExpression": "SET touched = :t",
                "ExpressionAttributeValues": {":t": {"BOOL": True}},
                "ReturnValues": "ALL_NEW",
            },
        ),
    ]
    for call, request in requests:
        fast = _answer(call, **request)
        with _motos_own_parsing_and_answers():
            own = _answer(call, **request)
        assert fast == own, call


update_requests = st.sampled_from(
    [
        ("SET #a = :n", None),
        ("SET #a = #a + :n", "attribute_exists(#a)"),
        ("SET #a = if_not_exists(#a, :zero) + :n", None),
        ("SET #l = list_append(if_not_exists(#l, :empty), :items)", None),
        ("SET #m.#k = :n", "attribute_exists(#m)"),
        ("SET #m = if_not_exists(#m, :map)", "NOT contains(#s, :word) OR attribute_not_exists(#s)"),
        ("ADD #s :words", None),
        ("DELETE #s :words", "size(#s) > :zero"),
        ("REMOVE #a, #l[0]", "attribute_exists(#a) AND #a <> :zero"),
        ("SET #a = :n REMOVE #l ADD #s :words", "#a < :n OR attribute_not_exists(#a)"),
        ("SET #a = #b", None),  # refers to an attribute that does not exist: refused
        ("SET #a = :n, #a = :zero", None),  # two paths overlap: refused
    ]
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(update_requests, st.integers(-5, 5)), min_size=1, max_size=12))
def test_updates_and_conditions_act_as_motos_own_parse_acts(
    aws: None, steps: list[tuple[tuple[str, str | None], int]]
) -> None:
    """The same updates, in the same order, on two tables: one under the cached parses, the other
    under moto's own; every answer (new item or refusal) and the final items are the same."""
    client = boto3.client("dynamodb")
    tables = (
        _table(client, prefix="answers", sparse_index=False),
        _table(client, prefix="answers", sparse_index=False),
    )
    names = {"#a": "a", "#b": "b", "#l": "l", "#m": "m", "#k": "k", "#s": "s"}
    answers: list[list[Any]] = [[], []]
    for (update, condition), number in steps:
        values = {
            ":n": {"N": str(number)},
            ":zero": {"N": "0"},
            ":empty": {"L": []},
            ":items": {"L": [{"N": str(number)}]},
            ":map": {"M": {"k": {"N": "1"}}},
            ":words": {"SS": [f"w{abs(number) % 3}"]},
            ":word": {"S": "w0"},
        }
        used = {name: value for name, value in values.items() if name in f"{update} {condition}"}
        for index, table in enumerate(tables):
            request: dict[str, Any] = {
                "TableName": table,
                "Key": {"pk": {"S": "p"}, "sk": {"N": "1"}},
                "UpdateExpression": update,
                "ExpressionAttributeNames": {
                    name: value for name, value in names.items() if name in f"{update} {condition}"
                },
                "ExpressionAttributeValues": used,
                "ReturnValues": "ALL_NEW",
            }
            if not used:
                del request["ExpressionAttributeValues"]
            if condition is not None:
                request["ConditionExpression"] = condition
            if index == 0:
                answers[0].append(_answer(client.update_item, **request))
            else:
                with _motos_own_parsing_and_answers():
                    answers[1].append(_answer(client.update_item, **request))
    assert answers[0] == answers[1]
    final = [client.scan(TableName=table, ConsistentRead=True)["Items"] for table in tables]
    assert final[0] == final[1]


def test_handler_methods_are_listed_as_moto_lists_them() -> None:
    from moto.core import responses
    from moto.dynamodb.responses import DynamoHandler
    from moto.sqs.responses import SQSResponse

    listed: Any = responses
    for handler in (DynamoHandler, SQSResponse):
        assert listed.method_names_from_class(handler) == listed.moto_method_names_from_class(
            handler
        )

    class Handler(SQSResponse):
        pass

    before = listed.method_names_from_class(Handler)
    Handler.added_action = lambda self: None  # type: ignore[attr-defined]
    assert listed.method_names_from_class(Handler) == sorted([*before, "added_action"])


def test_an_unlabelled_secret_read_answers_the_version_awscurrent_was_moved_to(aws: None) -> None:
    client = boto3.client("secretsmanager")
    name = f"moved-{uuid.uuid4().hex[:8]}"
    first = client.create_secret(Name=name, SecretString="one")["VersionId"]
    second = client.put_secret_value(SecretId=name, SecretString="two", VersionStages=["staged"])[
        "VersionId"
    ]
    # Written under another label: the current version is still the first.
    assert client.get_secret_value(SecretId=name)["SecretString"] == "one"
    client.update_secret_version_stage(
        SecretId=name, VersionStage="AWSCURRENT", MoveToVersionId=second, RemoveFromVersionId=first
    )
    unlabelled = client.get_secret_value(SecretId=name)
    labelled = client.get_secret_value(SecretId=name, VersionStage="AWSCURRENT")
    assert (unlabelled["VersionId"], unlabelled["SecretString"]) == (second, "two")
    assert labelled["VersionId"] == second
    # The move is refused once AWSCURRENT has left the version named: a compare-and-swap.
    with pytest.raises(ClientError) as refused:
        client.update_secret_version_stage(
            SecretId=name,
            VersionStage="AWSCURRENT",
            MoveToVersionId=first,
            RemoveFromVersionId=first,
        )
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"
    assert client.get_secret_value(SecretId=name)["VersionId"] == second


def test_a_standard_queue_serves_its_message_groups_in_turn(aws: None) -> None:
    """SQS fair queues, as the local stack's moto serves them: a tenant that sends 30 messages
    and then another that sends 3 - the second's are handed out among the first few, not
    after the backlog; each group's own keep their order."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"fair-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for group, count in (("noisy", 30), ("quiet", 3)):
        for number in range(count):
            sqs.send_message(QueueUrl=url, MessageBody=f"{group}-{number}", MessageGroupId=group)
    received = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages"):
        (message,) = messages
        received.append(message["Body"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert received[:6] == [f"{group}-{n}" for n in range(3) for group in ("noisy", "quiet")]
    assert received[6:] == [f"noisy-{n}" for n in range(3, 30)]
