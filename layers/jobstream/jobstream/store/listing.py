"""`GET /jobs`: a tenant's jobs, newest first, read from the listing indexes (and the table).

The tenant's index (`tenant_jobs`) shows a queued or finished job, and a small result, as a
document shows it (store/listed.py): a page of such jobs is read from the index alone. A running
job's entry, a correlation id's listing, an entry written before the index held what it shows,
and a result too large for its own entry are read from the table, a batch at a time.

A correlation id's listing merges two places: a job's first event's entry in `tenant_jobs`,
under the correlation id's partition key (store/records.py `correlation_entry`: keys only,
written once), and, for a job the release before admitted, its own item's in `by_correlation`
(keys and status, rewritten as its status changed), read until those jobs pass their retention.
A status filter is applied to an entry without a status once its job is read.

What one request reads of an index is bounded (`LISTING_BUDGET`), whatever its filters match:
a status filter is applied to the index entries as they are read, and when the budget runs out
first the listing stops there, and its cursor resumes just after the last entry read, matching
or not (docs/capacity.md, "Reads"). A page may then hold fewer jobs than asked, or none, and
still have a cursor; a listing without one has no more jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from jobstream.domain import JobRecord, JobStatus, ShownJob
from jobstream.retries import default_policy
from jobstream.store import keys, listed, results
from jobstream.store.codec import from_attribute, to_attribute
from jobstream.store.ports import InvalidCursorError, JobQuery, ListedJob
from jobstream.store.records import item_to_record, job_key, part_key, with_parts
from jobstream.store.results import from_result_attribute
from jobstream.store.shards import MergedQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Jobs read from the table per BatchGetItem (with their results: at most 100 keys a request).
LISTING_BATCH: Final = 50
# What one status-filtered request reads of the table to learn the status of entries that do
# not hold it (a correlation id's first events' entries): past it, the listing stops with a
# cursor, as when its index budget runs out, so that a filter matching few of many jobs costs
# bounded reads a request (a few chunks of LISTING_BATCH), not its whole budget of entries.
STATUS_READS: Final = 2 * LISTING_BATCH
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
        partition = keys.correlation_pk(query.tenant, query.correlation_id)
        # A job's entry is its first event's (`tenant_jobs`), or its own item's in
        # `by_correlation` when the release before admitted it: both, merged.
        places = [
            _Place(keys.TENANT_INDEX, "gsi1pk", "gsi1sk", partition),
            _Place(keys.CORRELATION_INDEX, "gsi2pk", CORRELATION_SORT, partition),
        ]
        # Either may hold the whole page (the older empties as its jobs pass their retention);
        # a filtered request takes at most STATUS_READS entries without a status.
        first = _first_read(query, 1, 1)
        if query.status:
            first = min(first, STATUS_READS)
        limit = min(first, query.budget.items // len(places))
        resume_sort = CORRELATION_SORT
    else:
        places = [
            _Place(keys.TENANT_INDEX, "gsi1pk", "gsi1sk", partition)
            for partition in keys.tenant_partitions(query.tenant)
        ]
        # A succeeded job's small result has an entry of its own: two entries a job.
        limit = _first_read(query, len(places), 2)
        resume_sort = "gsi1sk"
    if query.start_key and set(query.start_key) != {keys.PK, keys.SK, resume_sort}:
        raise InvalidCursorError("cursor does not belong to this listing")
    start = query.start_key
    requests = [_request(table_name, place, start, resume_sort, limit) for place in places]
    merged = MergedQuery(
        client,
        requests,
        sort_key=[place.sort_name for place in places],
        descending=True,
        budget=query.budget,
    )
    return JobListing(client, table_name, merged, (keys.PK, keys.SK, resume_sort), query)


# The sort key a correlation id's listing resumes by (its cursors' since that listing began).
CORRELATION_SORT: Final = "gsi2sk"


@dataclass(frozen=True, slots=True)
class _Place:
    """One partition of an index a listing reads: the index, its key names, the partition."""

    index: str
    pk_name: str
    sort_name: str
    partition: str


def _request(
    table_name: str,
    place: _Place,
    start_key: Mapping[str, Any] | None,
    resume_sort: str,
    limit: int,
) -> QueryInputTypeDef:
    """The query of one place, newest first, from just below the start key's sort value."""
    condition = "#p = :p"
    names = {"#p": place.pk_name}
    values: dict[str, Any] = {":p": to_attribute(place.partition)}
    if start_key:
        condition += " AND #s < :after"
        names["#s"] = place.sort_name
        values[":after"] = to_attribute(start_key[resume_sort])
    return {
        "TableName": table_name,
        "IndexName": place.index,
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": False,
        "Limit": limit,
        "ReturnConsumedCapacity": "TOTAL",
    }


def _first_read(query: JobQuery, shards: int, entries_per_job: int) -> int:
    """Entries each partition's first query asks for: its share of the page (a job and, on the
    tenant's index, its result's entry: `entries_per_job`) and one more. A status filter may
    skip most entries: its first reads take 7/8 of the budget at once, the rest going to the
    partitions that run out first (about 94% of what the budget reads is then used:
    docs/capacity.md). Never more than one read of each partition can take."""
    share = query.budget.items // shards
    size = -(-query.limit // shards) * entries_per_job + 1
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
        self._status_reads = 0
        self._stopped_on_status_reads = False
        self._jobs = self._listed()

    def __iter__(self) -> Iterator[ListedJob]:
        return self._jobs

    @property
    def resume_key(self) -> dict[str, Any] | None:
        """Once the jobs are all taken: the start key just after the last index entry read
        (matching or not) when the read budget (or STATUS_READS) stopped the listing, None when
        no job is left."""
        if not self._merged.stopped_short and not self._stopped_on_status_reads:
            return None
        if self._last_entry is not None:
            return _resume_key(self._last_entry, self._resume_names)
        # The budget covers a first read of every partition, and a query without a filter
        # returns an entry unless its partition has none left: the merge always yields one.
        raise RuntimeError("a listing stopped before reading any index entry")

    def _entries(self) -> Iterator[_Entry]:
        """The job entries whose status matches the filter (as the index has it), each with
        the result entry read just before it, noting where the read is."""
        result: Mapping[str, Any] | None = None
        previous_job: Mapping[str, str] | None = None  # the last entry's partition key
        for read in self._merged:
            entry = _as_job_entry(read) if self._query.correlation_id else read
            self._last_entry = entry
            if self._query.correlation_id:
                if entry[keys.PK] == previous_job:
                    # Its job's entry in the other place, merged just after (the same sort
                    # key): a job the first step of an upgrade admitted is in both.
                    continue
                previous_job = entry[keys.PK]
            if listed.is_result_entry(entry):
                result = entry  # its job's entry comes next, newest first
                continue
            own = result if result is not None and _result_of(entry, result) else None
            result = None
            # An entry without a status (a first event's) is filtered once its job is read.
            if self._query.status is None or _entry_status(entry) in (None, self._query.status):
                yield _Entry(entry, own)

    def _listed(self) -> Iterator[ListedJob]:
        # Batches up to the page's count; past it, one job at a time: a page only needs to know
        # that another job follows (its cursor), and a byte-bounded page stops early anyway.
        query = self._query
        entries = self._entries()
        listed_count = 0
        while True:
            if query.status is not None and query.correlation_id:
                # Which entries match shows once their jobs are read: a batch at a time.
                wanted = LISTING_BATCH
            elif listed_count >= query.limit:
                wanted = 1
            else:
                wanted = min(LISTING_BATCH, query.limit - listed_count)
            chunk = list(islice(entries, wanted))
            if not chunk:
                return
            for job in _read_jobs(
                self._client, self._table_name, chunk, self._resume_names, query.status
            ):
                listed_count += 1
                yield job
            if query.status is not None:
                self._status_reads += sum(_entry_status(entry.job) is None for entry in chunk)
                if self._status_reads >= STATUS_READS:
                    # Every entry up to the last one taken has been read: resume after it.
                    self._stopped_on_status_reads = True
                    return


@dataclass(frozen=True, slots=True)
class _Entry:
    """A job's index entry, and its result's entry when the index holds one."""

    job: Mapping[str, Any]
    result: Mapping[str, Any] | None


def _result_of(job_entry: Mapping[str, Any], result_entry: Mapping[str, Any]) -> bool:
    """Whether a result entry is this job entry's: its sort key names the same job and the same
    admission of it (an earlier job under the same key sorts elsewhere)."""
    return bool(result_entry["gsi1sk"]["S"] == job_entry["gsi1sk"]["S"] + listed.RESULT_SUFFIX)


def _as_job_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A correlation id's entry as its job's own (its keys and the sort key a cursor resumes
    by): a first event's entry (`tenant_jobs`) names the job by its partition key."""
    if CORRELATION_SORT in entry:
        return entry
    return {
        keys.PK: entry[keys.PK],
        keys.SK: to_attribute(keys.JOB_SK),
        CORRELATION_SORT: entry["gsi1sk"],
    }


# An entry's status under which its job may show a result: its result is read with it.
_MAY_SHOW_A_RESULT: Final = (None, JobStatus.SUCCEEDED)


def _entry_status(entry: Mapping[str, Any]) -> str | None:
    status: str | None = entry.get("status", {}).get("S")
    return status


def _resume_key(entry: Mapping[str, Any], resume_names: tuple[str, ...]) -> dict[str, Any]:
    return {name: from_attribute(entry[name]) for name in resume_names}


def _shown(entry: _Entry) -> ShownJob | None:
    """The job as the index shows it, its result with it; None when the table must say."""
    view = listed.view(entry.job)
    if view is None or view.status is not JobStatus.SUCCEEDED:
        return view
    if entry.result is None:
        return None  # a result too large for the index, or its entry not there yet
    return replace(view, result=from_result_attribute(entry.result[results.ATTRIBUTE]))


def _read_jobs(
    client: DynamoDBClient,
    table_name: str,
    entries: Sequence[_Entry],
    resume_names: tuple[str, ...],
    status: str | None,
) -> Iterator[ListedJob]:
    """The jobs of index entries, in the entries' order: as the index shows them, else read
    from the table in one batch."""
    shown = [_shown(entry) for entry in entries]
    wanted = []
    for entry, job in zip(entries, shown, strict=True):
        if job is not None:
            continue
        job_id = keys.job_id_of(entry.job[keys.PK]["S"])
        wanted.append(job_key(job_id))
        # A result with its job when the job may show as succeeded: by its entry, or, without
        # a status on the entry, by the filter.
        known = _entry_status(entry.job)
        if known == JobStatus.SUCCEEDED or (known is None and status in _MAY_SHOW_A_RESULT):
            wanted.append(part_key(job_id, keys.RESULT_SK))
    found = {
        (item[keys.PK]["S"], item[keys.SK]["S"]): item
        for item in batch_get(client, table_name, wanted, consistent=False)
    }
    for entry, from_index in zip(entries, shown, strict=True):
        job = from_index or _from_table(client, table_name, entry.job, found)
        if job is None or (from_index is None and status is not None and job.status != status):
            continue  # gone since the index was read, or its status moved on since
        if CORRELATION_SORT in entry.job and entry.job[CORRELATION_SORT] != to_attribute(
            keys.created_sk(job.created_at, job.job_id)
        ):
            continue  # an earlier job's first event under the same key, not yet rewritten
        yield ListedJob(job, _resume_key(entry.job, resume_names))


def _from_table(
    client: DynamoDBClient,
    table_name: str,
    entry: Mapping[str, Any],
    found: Mapping[tuple[str, str], Mapping[str, Any]],
) -> JobRecord | None:
    """An entry's job as the batch read it from the table (None: past its retention)."""
    pk = entry[keys.PK]["S"]
    item = found.get((pk, keys.JOB_SK))
    if item is None:
        return None
    record = item_to_record(item)
    if record.status is JobStatus.SUCCEEDED:
        result = found.get((pk, keys.RESULT_SK))
        if result is None and _entry_status(entry) not in _MAY_SHOW_A_RESULT:
            # It succeeded after the index was read: its result was not asked for.
            result = _one(client, table_name, part_key(record.job_id, keys.RESULT_SK))
        record = with_parts(record, [result] if result is not None else [])
    return record


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
