"""`GET /jobs`: a tenant's jobs, newest first, read from the listing indexes and the table.

The listing indexes (`by_tenant`, `by_correlation`) project the keys and `status` only, so that
the only job writes they see are the three that change its status (a job item is rewritten on
every state change, progress and heartbeat included). A page's jobs are then read from the
table, a batch at a time, with their results where they succeeded.

What one request reads of an index is bounded (`LISTING_BUDGET`), whatever its filters match:
a status filter is applied to the index entries as they are read, and when the budget runs out
first the listing stops there, and its cursor resumes just after the last entry read, matching
or not (docs/capacity.md, "Reads"). A page may then hold fewer jobs than asked, or none, and
still have a cursor; a listing without one has no more jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from jobstream.domain import JobStatus
from jobstream.retries import default_policy
from jobstream.store import keys
from jobstream.store.codec import from_attribute, to_attribute
from jobstream.store.ports import InvalidCursorError, JobQuery, ListedJob
from jobstream.store.records import item_to_record, job_key, part_key, with_parts
from jobstream.store.shards import MergedQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Jobs read from the table per BatchGetItem (with their results: at most 100 keys a request).
LISTING_BATCH: Final = 50
# BatchGetItem may leave keys unprocessed under throttling: ask again this many times.
_BATCH_READ_ATTEMPTS: Final = 3


def iter_jobs(client: DynamoDBClient, table_name: str, query: JobQuery) -> JobListing:
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
        "Limit": _first_read(query, len(partitions)),
        "ReturnConsumedCapacity": "TOTAL",
    }
    requests: list[QueryInputTypeDef] = [
        {
            **base,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {**values, ":p": to_attribute(partition)},
        }
        for partition in partitions
    ]
    merged = MergedQuery(client, requests, sort_key=sort_name, descending=True, budget=query.budget)
    return JobListing(client, table_name, merged, (keys.PK, keys.SK, sort_name), query)


def _first_read(query: JobQuery, shards: int) -> int:
    """Entries each partition's first query asks for: its share of the page and one more.
    A status filter may skip most entries: its first reads take 7/8 of the budget at once,
    the rest going to the partitions that run out first (about 94% of what the budget reads
    is then used: docs/capacity.md). Never more than one read of each partition can take."""
    share = query.budget.items // shards
    size = -(-query.limit // shards) + 1
    if query.status:
        size = max(size, share - share // 8)
    return min(size, share)


class JobListing:
    """The jobs of one listing request, newest first (iterate once). When the read budget ends
    the listing before the index does, `resume_key` then says where the next request starts."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        merged: MergedQuery,
        resume_names: tuple[str, ...],
        query: JobQuery,
    ) -> None:
        self._client = client
        self._table_name = table_name
        self._merged = merged
        self._resume_names = resume_names
        self._query = query
        self._last_entry: Mapping[str, Any] | None = None
        self._jobs = self._listed()

    def __iter__(self) -> Iterator[ListedJob]:
        return self._jobs

    @property
    def resume_key(self) -> dict[str, Any] | None:
        """Once the jobs are all taken: the start key just after the last index entry read
        (matching or not) when the read budget stopped the listing, None when no job is left."""
        if not self._merged.stopped_short:
            return None
        if self._last_entry is not None:
            return _resume_key(self._last_entry, self._resume_names)
        # The budget covers a first read of every partition, and a query without a filter
        # returns an entry unless its partition has none left: the merge always yields one.
        raise RuntimeError("a listing stopped before reading any index entry")

    def _entries(self) -> Iterator[Mapping[str, Any]]:
        """The index entries whose status matches the filter (as the index has it), noting
        where the read is."""
        for entry in self._merged:
            self._last_entry = entry
            if self._query.status is None or _entry_status(entry) == self._query.status:
                yield entry

    def _listed(self) -> Iterator[ListedJob]:
        # Batches up to the page's count; past it, one job at a time: a page only needs to know
        # that another job follows (its cursor), and a byte-bounded page stops early anyway.
        query = self._query
        entries = self._entries()
        listed = 0
        while True:
            wanted = min(LISTING_BATCH, query.limit - listed) if listed < query.limit else 1
            chunk = list(islice(entries, wanted))
            if not chunk:
                return
            for job in _read_jobs(
                self._client, self._table_name, chunk, self._resume_names, query.status
            ):
                listed += 1
                yield job


def _entry_status(entry: Mapping[str, Any]) -> str | None:
    status: str | None = entry.get("status", {}).get("S")
    return status


def _resume_key(entry: Mapping[str, Any], resume_names: tuple[str, ...]) -> dict[str, Any]:
    return {name: from_attribute(entry[name]) for name in resume_names}


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
        if _entry_status(entry) == JobStatus.SUCCEEDED:
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
            if result is None and _entry_status(entry) != JobStatus.SUCCEEDED:
                # It succeeded after the index was read: its result was not asked for.
                result = _one(client, table_name, part_key(record.job_id, keys.RESULT_SK))
            record = with_parts(record, [result] if result is not None else [])
        if status is not None and record.status != status:
            continue  # its status moved on since the index was read
        yield ListedJob(record, _resume_key(entry, resume_names))


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
