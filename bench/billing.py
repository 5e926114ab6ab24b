"""DynamoDB on-demand billing by AWS's published rules, applied to the items really written.

moto reports constant capacity (0.5 for a GetItem, nothing for a transaction, nothing for index
writes), so the meter works the units out itself: it reads every item a write touches just
before and just after the write (through a client of its own, which it does not bill), sizes
them by DynamoDB's rules and bills:

- a table write: ceil(larger of the item's sizes before and after / 1 KB) write units, at least
  1; twice that inside TransactWriteItems (ConditionCheck entries included);
- an index write, per global secondary index, by its projection: an entry that appears or
  disappears is one write of its size; an entry whose index key changes is a delete and a put;
  an entry whose projected attributes change is one write of the larger size; an unchanged
  entry costs nothing. Index writes are billed at the standard rate, in or out of a transaction;
- a read: ceil(size / 4 KB) read units per item for GetItem and BatchGetItem, at least 1
  (strongly consistent) or 0.5 (eventually consistent); a Query is billed on the sum of the
  sizes of every item it evaluated (a filter does not lower it), rounded up to 4 KB per page;
  index queries are eventually consistent and read the projected entries.

Item size is `jobstream.store.item_size` (the rules the store keeps its size budgets by):
attribute names count; a string is its UTF-8 bytes; a number is 1 byte per two significant digits
plus 1; booleans and null are 1 byte; a list or map is 3 bytes plus its elements, each element
1 byte more than its own size; a set is the sum of its members.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jobstream.store.item_size import Item, item_size

WRITE_UNIT_BYTES: Final = 1024
READ_UNIT_BYTES: Final = 4096
WRITE_OPERATIONS: Final = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
)
READ_OPERATIONS: Final = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


@dataclass(frozen=True)
class Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    non_key_attributes: tuple[str, ...] = ()

    def entry(self, item: Item | None, table_keys: tuple[str, ...]) -> dict[str, Any] | None:
        """The index entry `item` has (its projected attributes), or None when it has none."""
        if not item or self.hash_key not in item or (self.range_key and self.range_key not in item):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = {*table_keys, self.hash_key, *([self.range_key] if self.range_key else [])}
        if self.projection == "INCLUDE":
            names.update(self.non_key_attributes)
        return {name: item[name] for name in names if name in item}

    def key(self, entry: Mapping[str, Any]) -> tuple[Any, ...]:
        return (entry.get(self.hash_key), entry.get(self.range_key) if self.range_key else None)


@dataclass(frozen=True)
class Table:
    name: str
    hash_key: str
    range_key: str | None
    indexes: tuple[Index, ...]

    @property
    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key, self.range_key) if self.range_key else (self.hash_key,)

    def key_of(self, item: Item) -> dict[str, Any]:
        return {name: item[name] for name in self.key_names}

    @classmethod
    def from_template(cls, name: str, properties: Mapping[str, Any]) -> Table:
        """The table and its indexes as an AWS::DynamoDB::Table resource declares them, its
        conditions evaluated (jobstream_local's `Template.tables`); ValueError for an index
        still under a condition."""

        def keys(schema: Iterable[Mapping[str, str]]) -> tuple[str, str | None]:
            by_type = {entry["KeyType"]: entry["AttributeName"] for entry in schema}
            return by_type["HASH"], by_type.get("RANGE")

        hash_key, range_key = keys(properties["KeySchema"])
        indexes = []
        for index in properties.get("GlobalSecondaryIndexes", []):
            if "IndexName" not in index:
                raise ValueError(f"an index not evaluated for the stack's parameters: {index}")
            index_hash, index_range = keys(index["KeySchema"])
            projection = index.get("Projection", {})
            indexes.append(
                Index(
                    name=index["IndexName"],
                    hash_key=index_hash,
                    range_key=index_range,
                    projection=projection.get("ProjectionType", "ALL"),
                    non_key_attributes=tuple(projection.get("NonKeyAttributes", ())),
                )
            )
        return cls(name, hash_key, range_key, tuple(indexes))


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


@dataclass
class Bill:
    """Units billed so far, by where they were spent."""

    table_write_units: float = 0.0
    index_write_units: dict[str, float] = field(default_factory=dict)
    read_units: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    # Write units by (table or index, kind of partition key): what each key must absorb.
    key_write_units: dict[tuple[str, str], float] = field(default_factory=dict)
    # Read units of GetItem and BatchGetItem by the kind of partition key read.
    key_read_units: dict[str, float] = field(default_factory=dict)

    @property
    def write_units(self) -> float:
        return self.table_write_units + sum(self.index_write_units.values())

    def add_index_write(self, index: str, units: float) -> None:
        self.index_write_units[index] = self.index_write_units.get(index, 0.0) + units

    def add_key_write(self, where: str, kind: str, units: float) -> None:
        self.key_write_units[(where, kind)] = self.key_write_units.get((where, kind), 0.0) + units

    def add_key_read(self, kind: str, units: float) -> None:
        self.key_read_units[kind] = self.key_read_units.get(kind, 0.0) + units

    def count(self, service: str, operation: str) -> None:
        name = f"{service}:{operation}"
        self.requests[name] = self.requests.get(name, 0) + 1

    def reset(self) -> None:
        self.table_write_units = self.read_units = 0.0
        self.index_write_units.clear()
        self.requests.clear()
        self.key_write_units.clear()
        self.key_read_units.clear()


def index_write_units(index: Index, table: Table, before: Item | None, after: Item | None) -> int:
    """What one item write costs `index`, by the entries it had before and has after."""
    return sum(units for _, units in index_writes(index, table, before, after))


def index_writes(
    index: Index, table: Table, before: Item | None, after: Item | None
) -> list[tuple[Any, int]]:
    """The index partitions one item write touches: (partition key value, write units) each."""
    old = index.entry(before, table.key_names)
    new = index.entry(after, table.key_names)
    if old is None and new is None:
        return []
    if old is None or new is None:
        entry = old or new or {}
        return [(entry[index.hash_key], write_units(item_size(entry)))]
    if index.key(old) != index.key(new):
        return [
            (old[index.hash_key], write_units(item_size(old))),
            (new[index.hash_key], write_units(item_size(new))),
        ]
    if old == new:
        return []
    return [(new[index.hash_key], write_units(max(item_size(old), item_size(new))))]


class BillingMeter:
    """Bills DynamoDB requests made through `client` (hooked) for one table, reading items
    through `reader`, a client of the same endpoint that is not hooked."""

    def __init__(
        self, table: Table, reader: Any, key_kind: Callable[[str, str], str] | None = None
    ) -> None:
        self.table = table
        self.reader = reader
        # (table or index name, partition key value) -> the kind of key it is, for
        # Bill.key_write_units; by default every value is its own kind.
        self.key_kind = key_kind or (lambda _where, value: value)
        self.bill = Bill()
        self._before: dict[int, list[tuple[dict[str, Any], Item | None, int]]] = {}

    def attach(self, client: Any, service: str = "dynamodb") -> None:
        events = client.meta.events
        if service == "dynamodb":
            events.register("provide-client-params.dynamodb", self._before_call)
            events.register("after-call.dynamodb", self._after_call)
        else:
            events.register(f"after-call.{service}", self._count_request(service))

    def _count_request(self, service: str) -> Any:
        def count(model: Any, **_: Any) -> None:
            self.bill.count(service, model.name)

        return count

    # -- writes ------------------------------------------------------------------------------

    def _keys_written(
        self, operation: str, params: Mapping[str, Any]
    ) -> list[tuple[dict[str, Any], int]]:
        """(key, multiplier) of every item a write request touches in this table."""
        if operation in {"PutItem", "UpdateItem", "DeleteItem"}:
            if params.get("TableName") != self.table.name:
                return []
            item = params.get("Item")
            return [(self.table.key_of(item) if item else dict(params["Key"]), 1)]
        if operation == "TransactWriteItems":
            touched = []
            for entry in params.get("TransactItems", []):
                ((_, request),) = entry.items()
                if request.get("TableName") == self.table.name:
                    key = (
                        self.table.key_of(request["Item"]) if "Item" in request else request["Key"]
                    )
                    touched.append((dict(key), 2))
            return touched
        if operation == "BatchWriteItem":
            touched = []
            for request in params.get("RequestItems", {}).get(self.table.name, []):
                if "PutRequest" in request:
                    touched.append((self.table.key_of(request["PutRequest"]["Item"]), 1))
                else:
                    touched.append((dict(request["DeleteRequest"]["Key"]), 1))
            return touched
        return []

    def _read(self, key: Mapping[str, Any]) -> Item | None:
        response = self.reader.get_item(TableName=self.table.name, Key=key, ConsistentRead=True)
        item: Item | None = response.get("Item")
        return item

    def _before_call(self, params: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        # after-call does not carry the request: keep what the reads are billed on.
        context["billing_params"] = dict(params)
        if model.name not in WRITE_OPERATIONS:
            return
        touched = self._keys_written(model.name, params)
        snapshot = [(key, self._read(key), multiplier) for key, multiplier in touched]
        context["billing_id"] = id(snapshot)
        self._before[id(snapshot)] = snapshot

    def _after_call(self, model: Any, parsed: Mapping[str, Any], context: Any, **_: Any) -> None:
        self.bill.count("dynamodb", model.name)
        if model.name in WRITE_OPERATIONS:
            self._bill_writes(context)
        elif model.name in READ_OPERATIONS:
            self._bill_reads(model.name, context.get("billing_params", {}), parsed)

    def _bill_writes(self, context: Any) -> None:
        snapshot = self._before.pop(context.get("billing_id", 0), [])
        for key, before, multiplier in snapshot:
            after = self._read(key)
            size = max(item_size(before), item_size(after))
            self.bill.table_write_units += multiplier * write_units(size)
            partition = key[self.table.hash_key]["S"]
            self.bill.add_key_write(
                self.table.name,
                self.key_kind(self.table.name, partition),
                multiplier * write_units(size),
            )
            for index in self.table.indexes:
                for value, units in index_writes(index, self.table, before, after):
                    self.bill.add_index_write(index.name, units)
                    self.bill.add_key_write(
                        index.name, self.key_kind(index.name, value["S"]), units
                    )

    # -- reads -------------------------------------------------------------------------------

    def _bill_reads(self, operation: str, params: Any, parsed: Mapping[str, Any]) -> None:
        if operation == "GetItem":
            consistent = bool(params.get("ConsistentRead"))
            units = read_units(item_size(parsed.get("Item")), consistent=consistent)
            self.bill.read_units += units
            self._read_of(params.get("Key", {}), units)
        elif operation == "BatchGetItem":
            request = params.get("RequestItems", {}).get(self.table.name, {})
            consistent = bool(request.get("ConsistentRead"))
            for item in parsed.get("Responses", {}).get(self.table.name, []):
                units = read_units(item_size(item), consistent=consistent)
                self.bill.read_units += units
                self._read_of(item, units)
            # A key asked for and not found still costs the minimum.
            missing = len(request.get("Keys", [])) - len(
                parsed.get("Responses", {}).get(self.table.name, [])
            )
            self.bill.read_units += missing * read_units(0, consistent=consistent)
        elif operation in {"Query", "Scan"}:
            consistent = bool(params.get("ConsistentRead")) and not params.get("IndexName")
            evaluated = self._evaluated(operation, params, parsed)
            self.bill.read_units += read_units(
                sum(item_size(item) for item in evaluated), consistent=consistent
            )

    def _read_of(self, key: Mapping[str, Any], units: float) -> None:
        value = key.get(self.table.hash_key, {}).get("S")
        if value is not None:
            self.bill.add_key_read(self.key_kind(self.table.name, value), units)

    def _evaluated(self, operation: str, params: Any, parsed: Mapping[str, Any]) -> list[Item]:
        """Every item a Query or Scan read, including those its filter then dropped."""
        if "FilterExpression" not in params:
            items: list[Item] = parsed.get("Items", [])
            return items
        unfiltered = {
            name: value
            for name, value in params.items()
            if name not in {"FilterExpression", "ReturnConsumedCapacity"}
        }
        used = (unfiltered.get("KeyConditionExpression") or "") + (
            unfiltered.get("ProjectionExpression") or ""
        )
        # Drop the names and values only the filter used: DynamoDB refuses unused ones.
        unfiltered["ExpressionAttributeNames"] = {
            name: value
            for name, value in (unfiltered.get("ExpressionAttributeNames") or {}).items()
            if name in used
        }
        unfiltered["ExpressionAttributeValues"] = {
            name: value
            for name, value in (unfiltered.get("ExpressionAttributeValues") or {}).items()
            if name in used
        }
        for name in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            if not unfiltered[name]:
                del unfiltered[name]
        reader = getattr(self.reader, operation.lower())
        evaluated: list[Item] = reader(**unfiltered).get("Items", [])
        return evaluated


def use_moto_credentials() -> None:
    """The benches run against moto in-process, never an account: fake credentials, one
    region, and no endpoint or profile of the caller's environment."""
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
    )
    for variable in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(variable, None)
