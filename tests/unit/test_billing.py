"""The bench's DynamoDB billing model: item sizes and units by AWS's published rules."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from bench.billing import (
    BillingMeter,
    Index,
    Table,
    index_write_units,
    read_units,
    write_units,
)
from bench.cost import table_from_template
from jobstream.store.item_size import item_size, number_size
from jobstream_local.resources import create_tables
from jobstream_local.template import Template


def test_sizes_follow_dynamodb_rules() -> None:
    assert item_size({"name": {"S": "héllo"}}) == 4 + 6
    assert number_size("123") == 3  # two significant digits per byte, plus one
    assert number_size("-1200") == 2  # leading and trailing zeroes do not count
    assert number_size("0.000012") == 2
    assert item_size({"flag": {"BOOL": True}, "none": {"NULL": True}}) == 4 + 1 + 4 + 1
    # A list or map: 3 bytes, plus each element and 1 byte per element.
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "7"}]}}) == 1 + 3 + (2 + 1) + (2 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)
    assert item_size({"s": {"SS": ["a", "bc"]}}) == 1 + 3
    assert item_size(None) == 0


def test_units_round_up_per_kilobyte_and_per_four() -> None:
    assert write_units(0) == 1
    assert write_units(1024) == 1
    assert write_units(1025) == 2
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(10, consistent=False) == 0.5


INDEX_ALL = Index("all", "g", "h", "ALL")
INDEX_KEYS = Index("keys", "g", "h", "KEYS_ONLY")
TABLE = Table("t", "pk", "sk", (INDEX_ALL, INDEX_KEYS))


def item(**values: str) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"S": "s"}, **{k: {"S": v} for k, v in values.items()}}


@pytest.mark.parametrize(
    ("index", "before", "after", "units"),
    [
        (INDEX_ALL, None, item(g="1", h="1"), 1),  # an entry appears
        (INDEX_ALL, item(g="1", h="1"), item(), 1),  # and disappears
        (INDEX_ALL, item(g="1", h="1"), item(g="1", h="2"), 2),  # a key move: delete + put
        (INDEX_ALL, item(g="1", h="1", x="a"), item(g="1", h="1", x="b"), 1),
        (INDEX_KEYS, item(g="1", h="1", x="a"), item(g="1", h="1", x="b"), 0),  # not projected
        (INDEX_ALL, item(x="a"), item(x="b"), 0),  # never in the index
        (INDEX_ALL, item(g="1", h="1", x="a" * 2000), item(g="1", h="1", x="b" * 2000), 2),
    ],
)
def test_index_writes_by_projection(
    index: Index, before: dict[str, Any] | None, after: dict[str, Any] | None, units: int
) -> None:
    assert index_write_units(index, TABLE, before, after) == units


def test_the_meter_bills_real_writes_and_reads(aws: None) -> None:
    name = f"billing-{uuid.uuid4().hex[:8]}"
    template = Template.load()
    create_tables(template, boto3.client("dynamodb"), name_for=lambda _logical_id: name)
    client = boto3.client("dynamodb")
    meter = BillingMeter(table_from_template(template, name), boto3.client("dynamodb"))
    meter.attach(client)
    job = {
        "pk": {"S": "JOB#a"},
        "sk": {"S": "#JOB"},
        "gsi1pk": {"S": "T#t"},
        "gsi1sk": {"S": "1#a"},
        "blob": {"S": "x" * 1500},
    }
    client.put_item(TableName=name, Item=job)
    # 2 KB in the table; the tenant index projects what a document shows, not `blob`: 1 unit.
    assert meter.bill.table_write_units == 2
    assert meter.bill.index_write_units == {"tenant_jobs": 1}
    meter.bill.reset()
    client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": name,
                    "Key": {"pk": job["pk"], "sk": job["sk"]},
                    "UpdateExpression": "SET small = :v",
                    "ExpressionAttributeValues": {":v": {"N": "1"}},
                }
            }
        ]
    )
    assert meter.bill.table_write_units == 4  # a transaction doubles the 2 KB write
    assert meter.bill.index_write_units == {}  # nothing the index holds changed
    client.update_item(
        TableName=name,
        Key={"pk": job["pk"], "sk": job["sk"]},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "running"}},
    )
    assert meter.bill.index_write_units == {"tenant_jobs": 1}  # the status is projected
    meter.bill.reset()
    client.get_item(TableName=name, Key={"pk": job["pk"], "sk": job["sk"]}, ConsistentRead=True)
    client.query(
        TableName=name,
        IndexName="tenant_jobs",
        KeyConditionExpression="gsi1pk = :p",
        FilterExpression="#s = :none",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":p": {"S": "T#t"}, ":none": {"S": "queued"}},
    )
    # The filter drops the item, but it was read: 1 (consistent get) + 0.5 (index query).
    assert meter.bill.read_units == 1.5
    assert meter.bill.requests == {"dynamodb:GetItem": 1, "dynamodb:Query": 1}
