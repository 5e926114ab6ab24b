"""`GET /jobs`: a tenant's jobs, newest first, read from the listing indexes and the table.

The listing indexes (`by_tenant`, `by_correlation`) project the keys and `status` only, so that
the only job writes they see are the three that change its status (a job item is rewritten on
every state change, progress and heartbeat included). A page's jobs are then read from the
table, a batch at a time, with their results where they succeeded.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from jobstream.domain import JobRecord, JobStatus
from jobstream.retries import default_policy
from jobstream.store import keys
from jobstream.store.codec import from_attribute, to_attribute
from jobstream.store.records import item_to_record, job_key, part_key, with_parts
from jobstream.store.shards import MergedQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Jobs read from the table per BatchGetItem (with their results: at most 100 keys a request).
LISTING_BATCH: Final = 50
# BatchGetItem may leave keys unprocessed under throttling: ask again this many times.
_BATCH_READ_ATTEMPTS: Final = 3


class InvalidCursorError(ValueError):
    """A listing cursor that this listing did not issue."""


@dataclass(frozen=True, slots=True)
class ListedJob:
    """A job of a listing, and the start key that resumes the listing just after it."""

    record: JobRecord
    resume_key: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobQuery:
    tenant: str
    correlation_id: str | None = None
    status: str | None = None
    limit: int = 100
    start_key: dict[str, Any] | None = None


def iter_jobs(client: DynamoDBClient, table_name: str, query: JobQuery) -> Iterator[ListedJob]:
    """A tenant's jobs, newest first, each with the start key that resumes the listing just
    after it. Read lazily: a caller that stops early, as a page bounded by bytes does, has read
    at most one batch of jobs beyond what it used. InvalidCursorError (at once, before any
    read) for a start key this listing did not issue.

    A tenant's jobs are spread over TENANT_SHARDS partitions: one query per shard, merged
    newest first. The resume key holds the sort key of the job, which orders jobs across every
    shard, so the next page starts below it in each (docs/capacity.md).
    """
    if query.correlation_id:
        index, pk_name, sort_name = keys.CORRELATION_INDEX, "gsi2pk", "gsi2sk"
        partitions = [keys.correlation_pk(query.tenant, query.correlation_id)]
    else:
        index, pk_name, sort_name = keys.TENANT_INDEX, "gsi1pk", "gsi1sk"
        partitions = keys.tenant_partitions(query.tenant)
    condition = "#p = :p"
    names = {"#p": pk_name}
    values: dict[str, Any] = {}
    if query.start_key:
        if set(query.start_key) != {keys.PK, keys.SK, sort_name}:
            raise InvalidCursorError("cursor does not belong to this listing")
        condition += " AND #s < :after"
        names["#s"] = sort_name
        values[":after"] = to_attribute(query.start_key[sort_name])
    base: QueryInputTypeDef = {
        "TableName": table_name,
        "IndexName": index,
        "KeyConditionExpression": condition,
        "ScanIndexForward": False,
        # Each shard holds about 1/n of the page: read that much (and one more) at a time.
        "Limit": min(query.limit + 1, -(-query.limit // len(partitions)) + 1),
        "ReturnConsumedCapacity": "TOTAL",
    }
    if query.status:
        # The index holds each job's status: non-matching jobs are never read from the table.
        base["FilterExpression"] = "#status = :status"
        names["#status"] = "status"
        values[":status"] = to_attribute(query.status)
    requests: list[QueryInputTypeDef] = [
        {
            **base,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {**values, ":p": to_attribute(partition)},
        }
        for partition in partitions
    ]
    merged = MergedQuery(
        client,
        requests,
        sort_key=sort_name,
        descending=True,
    )
    return _listed(client, table_name, iter(merged), (keys.PK, keys.SK, sort_name), query)


def _listed(
    client: DynamoDBClient,
    table_name: str,
    entries: Iterator[Mapping[str, Any]],
    resume_names: tuple[str, ...],
    query: JobQuery,
) -> Iterator[ListedJob]:
    # Batches up to the page's count; past it, one job at a time: a page only needs to know
    # that another job follows (its cursor), and a byte-bounded page stops early anyway.
    listed = 0
    while True:
        wanted = min(LISTING_BATCH, query.limit - listed) if listed < query.limit else 1
        chunk = list(islice(entries, wanted))
        if not chunk:
            return
        for job in _read_jobs(client, table_name, chunk, resume_names, query.status):
            listed += 1
            yield job


def _read_jobs(
    client: DynamoDBClient,
    table_name: str,
    entries: Sequence[Mapping[str, Any]],
    resume_names: tuple[str, ...],
    status: str | None,
) -> Iterator[ListedJob]:
    """The jobs of index entries, read from the table in one batch, in the entries' order."""
    wanted = []
    for entry in entries:
        job_id = keys.job_id_of(entry[keys.PK]["S"])
        wanted.append(job_key(job_id))
        if entry.get("status", {}).get("S") == JobStatus.SUCCEEDED:
            wanted.append(part_key(job_id, keys.RESULT_SK))
    found = {
        (item[keys.PK]["S"], item[keys.SK]["S"]): item
        for item in batch_get(client, table_name, wanted, consistent=False)
    }
    for entry in entries:
        pk = entry[keys.PK]["S"]
        job = found.get((pk, keys.JOB_SK))
        if job is None:
            continue  # gone since the index was read (past its retention)
        record = item_to_record(job)
        if record.status is JobStatus.SUCCEEDED:
            result = found.get((pk, keys.RESULT_SK))
            if result is None and entry.get("status", {}).get("S") != JobStatus.SUCCEEDED:
                # It succeeded after the index was read: its result was not asked for.
                result = _one(client, table_name, part_key(record.job_id, keys.RESULT_SK))
            record = with_parts(record, [result] if result is not None else [])
        if status is not None and record.status != status:
            continue  # its status moved on since the index was read
        resume_key = {name: from_attribute(entry[name]) for name in resume_names}
        yield ListedJob(record, resume_key)


def _one(client: DynamoDBClient, table_name: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
    item: dict[str, Any] | None = client.get_item(
        TableName=table_name, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL"
    ).get("Item")
    return item


def batch_get(
    client: DynamoDBClient,
    table_name: str,
    wanted: Sequence[Mapping[str, Any]],
    *,
    consistent: bool,
) -> list[dict[str, Any]]:
    """The items of `wanted` that exist (any order), at most 100 keys a request; keys left
    unprocessed (throttling, or 16 MB of response) are asked again, then read one by one."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(wanted), 100):
        found += _batch_get_chunk(client, table_name, list(wanted[start : start + 100]), consistent)
    return found


def _batch_get_chunk(
    client: DynamoDBClient, table_name: str, wanted: list[Mapping[str, Any]], consistent: bool
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for attempt in range(_BATCH_READ_ATTEMPTS):
        if attempt:
            policy = default_policy()  # jittered, as AWS advises
            policy.sleep(policy.delay_ms(attempt) / 1000)
        response = client.batch_get_item(
            RequestItems={table_name: {"Keys": wanted, "ConsistentRead": consistent}},
            ReturnConsumedCapacity="TOTAL",
        )
        found += response.get("Responses", {}).get(table_name, [])
        unprocessed = response.get("UnprocessedKeys", {}).get(table_name)
        wanted = list(unprocessed["Keys"]) if unprocessed else []
        if not wanted:
            return found
    # Throttled throughout: read what is left one item at a time.
    for key in wanted:
        item = client.get_item(
            TableName=table_name, Key=key, ConsistentRead=consistent, ReturnConsumedCapacity="TOTAL"
        ).get("Item")
        if item is not None:
            found.append(item)
    return found


def encode_cursor(start_key: Mapping[str, Any]) -> str:
    raw = json.dumps(start_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_JOB_ID: Final = r"job_[A-Za-z0-9_-]{32}"
# Exactly the keys of a job row we could have returned as LastEvaluatedKey. A cursor is the
# client's text: anything else (another shape, a key too long for DynamoDB, text that is not
# UTF-8) must be a 400, never a request DynamoDB refuses.
_CREATED_SK: Final = re.compile(rf"[0-9]{{{keys.TIME_WIDTH}}}#({_JOB_ID})")
_CURSOR_VALUES: Final[dict[str, re.Pattern[str]]] = {
    keys.PK: re.compile(rf"JOB#({_JOB_ID})"),
    keys.SK: re.compile(re.escape(keys.JOB_SK)),
    "gsi1sk": _CREATED_SK,
    "gsi2sk": _CREATED_SK,
}


def decode_cursor(cursor: str) -> dict[str, Any] | None:
    """The start key a cursor carries, or None when it is not one we issued."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        return None
    if not isinstance(value, dict) or not value or not set(value) <= set(_CURSOR_VALUES):
        return None
    job_ids: set[str] = set()
    for name, item in value.items():
        match = _CURSOR_VALUES[name].fullmatch(item) if isinstance(item, str) else None
        if match is None:
            return None
        job_ids.update(match.groups())
    # Every key names the same job.
    return value if len(job_ids) <= 1 else None
