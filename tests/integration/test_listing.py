"""GET /jobs: the documented filters and an opaque cursor (design §1 item 5)."""

from __future__ import annotations

import base64
import functools
import itertools
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.domain import JobRecord
from jobstream.lifecycle.identity import derive_job_id
from jobstream.runtime import Runtime
from jobstream.service import jobs as jobs_service
from jobstream.store import keys
from jobstream.store.codec import to_item
from jobstream.store.jobs import JobQuery, decode_cursor, encode_cursor, record_to_item
from jobstream.store.listing import LISTING_BATCH, STATUS_READS
from jobstream.store.ports import LISTING_BUDGET
from jobstream.store.records import correlation_entry
from jobstream.store.shards import ReadBudget
from tests.integration.test_cli import base_url, run  # noqa: F401 - base_url: a fixture
from tests.support.harness import START_MS, Api, Clock, canonical_task
from tests.support.state import mark_failed, mark_succeeded
from tests.support.validation import validate, validate_error


@pytest.fixture
def seven_jobs(api: Api, clock: Clock) -> list[str]:
    ids = []
    for index in range(7):
        clock.advance(1_000)
        correlation = "even" if index % 2 == 0 else "odd"
        response = api.post(
            "/jobs", canonical_task(idempotency_key=f"key-{index}", correlation_id=correlation)
        )
        ids.append(response.body["job"]["job_id"])
    return ids


def collect(api: Api, query: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(100):
        suffix = f"&cursor={cursor}" if cursor else ""
        response = api.get(f"/jobs?{query}{suffix}")
        assert response.status == 200, response.body
        validate(response.body, "JobPage")
        ids += [job["job_id"] for job in response.body["jobs"]]
        cursor = response.body.get("next_cursor")
        if not cursor:
            return ids
    raise AssertionError("listing never ended")


def test_lists_newest_first_with_pages(api: Api, seven_jobs: list[str]) -> None:
    assert collect(api, "limit=3") == list(reversed(seven_jobs))
    assert collect(api, "") == list(reversed(seven_jobs))


def test_filters_by_correlation(api: Api, seven_jobs: list[str]) -> None:
    assert collect(api, "correlation_id=odd&limit=2") == [
        seven_jobs[5],
        seven_jobs[3],
        seven_jobs[1],
    ]


def test_filters_by_status(api: Api, rt: Runtime, clock: Clock, seven_jobs: list[str]) -> None:
    mark_failed(rt, seven_jobs[2], at=clock.advance(1), reason="no_candidate")
    mark_failed(rt, seven_jobs[4], at=clock.advance(1), reason="no_candidate")
    assert collect(api, "status=failed&limit=1") == [seven_jobs[4], seven_jobs[2]]
    assert collect(api, "status=failed&correlation_id=even") == [seven_jobs[4], seven_jobs[2]]
    assert len(collect(api, "status=queued&limit=2")) == 5


def test_idempotency_key_is_exact_and_combines_with_filters(
    api: Api, seven_jobs: list[str]
) -> None:
    assert collect(api, "idempotency_key=key-3") == [seven_jobs[3]]
    assert collect(api, "idempotency_key=KEY-3") == []
    assert collect(api, "idempotency_key=key-3&correlation_id=even") == []
    assert collect(api, "idempotency_key=unknown") == []


def test_the_key_lookup_trims_the_key_as_admission_does(api: Api) -> None:
    """Issue 22: admission knows a job by its trimmed key; the lookup now trims it too (as
    JavaScript trims: U+3000 and U+FEFF included), and refuses what admission refuses in
    admission's words."""
    job = api.post("/jobs", canonical_task(idempotency_key="\u3000 padded key\t")).body["job"]
    assert job["idempotency_key"] == "padded key"
    for key in ("padded%20key", "%20%20padded%20key%09", "%EF%BB%BFpadded%20key%E3%80%80"):
        assert collect(api, f"idempotency_key={key}") == [job["job_id"]], key
    longest = "k" * 200
    assert collect(api, f"idempotency_key=%20{longest}%20") == []
    refused = api.get(f"/jobs?idempotency_key={longest}k")
    assert refused.status == 400
    assert refused.body == api.post("/jobs", canonical_task(idempotency_key=longest + "k")).body
    assert refused.body["error"]["message"] == "idempotency_key must be at most 200 characters"


@pytest.mark.parametrize(
    "query",
    [
        "idempotency_key=",
        "idempotency_key=%20",
        "idempotency_key=a&idempotency_key=b",
        "limit=0",
        "limit=501",
        "limit=ten",
        # More digits than int() reads (4,300): a 400 like any other bad limit, not a 500.
        "limit=" + "9" * 5_000,
        "limit=1" + "0" * 4_999,
        "status=done",
        "cursor=not-a-cursor",
        "cursor=",
    ],
)
def test_bad_filters_are_400(api: Api, query: str) -> None:
    response = api.get(f"/jobs?{query}")
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"


def _cursor(**start_key: str) -> str:
    raw = json.dumps(start_key).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


JOB_A = "job_" + "A" * 32
JOB_B = "job_" + "B" * 32


@pytest.mark.parametrize(
    "start_key",
    [
        # Shaped by hand: DynamoDB would refuse a key over 1 KiB, or text that is not UTF-8.
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": "1" * 13 + "#" + "x" * 2000},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_A}\ud800"},
        {"pk": "JOB#" + "y" * 3000, "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_A}"},
        {"pk": f"JOB#{JOB_A}", "sk": "EVT#0000000001", "gsi1sk": f"{'1' * 13}#{JOB_A}"},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_B}"},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"1#{JOB_A}"},
        # A result entry's keys are both a result entry's, on the tenant's index only.
        {"pk": f"JOB#{JOB_A}", "sk": "#RESULT", "gsi1sk": f"{'1' * 13}#{JOB_A}"},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_A}#R"},
        {"pk": f"JOB#{JOB_A}", "sk": "#RESULT", "gsi2sk": f"{'1' * 13}#{JOB_A}#R"},
        {"pk": f"JOB#{JOB_A}", "sk": "#RESULT", "gsi1sk": f"{'1' * 13}#{JOB_B}#R"},
    ],
)
def test_a_cursor_not_shaped_like_ours_is_400(api: Api, start_key: dict[str, str]) -> None:
    cursor = _cursor(**start_key).replace("%", "%25")
    response = api.get(f"/jobs?cursor={cursor}")
    assert response.status == 400, response.body
    assert response.body["error"]["detail"] == {"field": "cursor"}


def test_a_listing_stopped_on_a_result_entry_pages_on(
    api: Api, rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose read budget ends on a succeeded job's result entry hands out a cursor the
    API takes back: the next page starts at that job."""
    ids = []
    for index in range(40):
        clock.advance(1_000)
        ids.append(
            api.post("/jobs", canonical_task(idempotency_key=f"r-{index}")).body["job"]["job_id"]
        )
    for job_id in ids[1:]:
        mark_succeeded(rt, job_id, at=clock())
    mark_failed(rt, ids[0], at=clock(), reason="no_candidate")
    small = ReadBudget(queries=keys.TENANT_SHARDS + 4, items=keys.TENANT_SHARDS + 8)
    monkeypatch.setattr(jobs_service, "JobQuery", functools.partial(JobQuery, budget=small))
    cursor, seen, stopped_on_results = None, [], 0
    for _ in range(60):
        page = api.get("/jobs?status=failed" + (f"&cursor={cursor}" if cursor else ""))
        assert page.status == 200, page.body
        seen += [job["job_id"] for job in page.body["jobs"]]
        cursor = page.body.get("next_cursor")
        if cursor is None:
            break
        stopped_on_results += (decode_cursor(cursor) or {}).get("sk") == keys.RESULT_SK
    assert seen == [ids[0]]
    assert stopped_on_results > 0  # the case under test happened


def test_a_cursor_shaped_like_ours_pages_on(api: Api, seven_jobs: list[str]) -> None:
    first = api.get("/jobs?limit=3").body
    start_key = json.loads(base64.urlsafe_b64decode(first["next_cursor"] + "==="))
    rebuilt = _cursor(**start_key)
    assert (
        api.get(f"/jobs?limit=3&cursor={rebuilt}").body["jobs"]
        == (api.get(f"/jobs?limit=3&cursor={first['next_cursor']}").body["jobs"])
    )


def test_a_correlation_filter_longer_than_any_job_can_carry_is_400(api: Api) -> None:
    response = api.get(f"/jobs?correlation_id={'c' * 201}")
    assert response.status == 400
    assert response.body["error"]["message"] == "correlation_id must be at most 200 characters"
    assert api.get(f"/jobs?correlation_id={'c' * 200}").body["jobs"] == []


def test_cursor_from_another_listing_is_rejected(api: Api, seven_jobs: list[str]) -> None:
    cursor = api.get("/jobs?limit=2").body["next_cursor"]
    response = api.get(f"/jobs?correlation_id=odd&cursor={cursor}")
    assert response.status == 400
    validate_error(response.body)


# -- across shards: the tenant's jobs lie on TENANT_SHARDS index keys -------------------------


def test_a_tenants_jobs_on_many_shards_list_as_one(api: Api, rt: Runtime, clock: Clock) -> None:
    ids = []
    for index in range(30):
        # Ties in time too: the job id orders jobs admitted in the same millisecond.
        clock.advance(index % 2)
        response = api.post(
            "/jobs",
            canonical_task(idempotency_key=f"many-{index}", correlation_id=f"c{index % 3}"),
        )
        ids.append(response.body["job"]["job_id"])
    assert len({keys.shard_of(job_id, keys.TENANT_SHARDS) for job_id in ids}) >= 10
    created = {job_id: rt.store.get_job(job_id).created_at for job_id in ids}  # type: ignore[union-attr]
    newest_first = sorted(ids, key=lambda job_id: (created[job_id], job_id), reverse=True)
    for limit in (4, 30, 31):
        assert collect(api, f"limit={limit}") == newest_first, limit
    for failed in ids[::5]:
        mark_failed(rt, failed, at=clock.advance(1), reason="no_candidate")
    wanted = [job_id for job_id in newest_first if job_id in ids[::5]]
    assert collect(api, "status=failed&limit=4") == wanted
    assert collect(api, "status=queued&limit=10") == [j for j in newest_first if j not in wanted]
    assert collect(api, "correlation_id=c1&limit=3") == [
        job_id for job_id in newest_first if ids.index(job_id) % 3 == 1
    ]


def test_a_full_last_page_ends_the_listing_within_one_more_page(api: Api, clock: Clock) -> None:
    for index in range(6):
        clock.advance(1)
        api.post("/jobs", canonical_task(idempotency_key=f"six-{index}"))
    first = api.get("/jobs?limit=6").body
    assert len(first["jobs"]) == 6
    if "next_cursor" in first:
        assert api.get(f"/jobs?limit=6&cursor={first['next_cursor']}").body["jobs"] == []


@st.composite
def stored_jobs(draw: st.DrawFn) -> list[tuple[str, int, str, str | None, str]]:
    """(idempotency key, created_at, status, correlation id, who admitted it: ADMITTERS) of a
    tenant's jobs."""
    count = draw(st.integers(0, 20))
    return [
        (
            f"key-{index}",
            draw(st.integers(0, 5)),  # few distinct times: ties are ordered by job id
            # Succeeded jobs have a result entry of their own, just after the job's.
            draw(st.sampled_from(["queued", "running", "failed", "succeeded"])),
            draw(st.sampled_from([None, "x", "y"])),
            draw(st.sampled_from(ADMITTERS)),
        )
        for index in range(count)
    ]


# Where a job's correlation entry is: on its first event's item (this release), on its job
# item (the release before), or on both (this release in the first step of an upgrade).
ADMITTERS = ("this release", "the release before", "the first step of an upgrade")


def admitted_items(record: JobRecord, admitter: str) -> list[dict[str, Any]]:
    """The job's item and its first event's, as `admitter` writes them."""
    first_event = {
        keys.PK: keys.job_pk(record.job_id),
        keys.SK: keys.event_sk(1),
        "kind": "job.accepted",
        "at": record.created_at,
        **({} if admitter == "the release before" else correlation_entry(record, 1)),
    }
    previous_formats = admitter != "this release"
    return [record_to_item(record, previous_formats=previous_formats), to_item(first_event)]


def store_job(rt: Runtime, record: JobRecord, admitter: str) -> None:
    for item in admitted_items(record, admitter):
        rt.store.client.put_item(TableName=rt.store.table_name, Item=item)


def _record(tenant: str, key: str, created_at: int, status: str, correlation: str | None) -> Any:
    return JobRecord(
        job_id=derive_job_id(tenant, key),
        tenant=tenant,
        job_type="candidate_search",
        idempotency_key=key,
        params={},
        params_canonical="{}",
        target_id="t",
        status=status,
        created_at=START_MS + created_at,
        updated_at=START_MS + created_at,
        correlation_id=correlation,
    )


@st.composite
def listings(draw: st.DrawFn) -> tuple[str | None, ReadBudget]:
    """A correlation filter or none, and a read budget: the production one, or one small
    enough to stop a listing of a few jobs anywhere (at least one read of each partition)."""
    correlation = draw(st.sampled_from([None, "x"]))
    # A correlation id's listing reads its two places (`tenant_jobs`, `by_correlation`).
    partitions = 2 if correlation else keys.TENANT_SHARDS
    small = st.builds(
        ReadBudget,
        queries=st.integers(partitions, partitions + 4),
        items=st.integers(partitions, partitions + 8),
    )
    return correlation, draw(st.just(LISTING_BUDGET) | small)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=stored_jobs(),
    limit=st.integers(1, 12),
    status=st.sampled_from([None, "queued", "failed", "succeeded"]),
    listing=listings(),
)
def test_sharded_pages_walk_the_model_newest_first(
    rt: Runtime,
    *,
    jobs: list[tuple[str, int, str, str | None, str]],
    limit: int,
    status: str | None,
    listing: tuple[str | None, ReadBudget],
) -> None:
    """Pages of any size, any filter, under any read budget, followed by their cursors, give
    each matching job once, newest first, over every shard (a correlation id's: over both
    places of its entries), each page reading within its budget; another tenant's jobs never
    show."""
    correlation, budget = listing
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    client = rt.store.client
    model = []
    others = [(f"other-{n}", 3, "queued", "x", admitter) for n, admitter in enumerate(ADMITTERS)]
    for key, created_at, job_status, correlation_id, admitter in [*jobs, *others]:
        owner = tenant if not key.startswith("other") else f"{tenant}-other"
        record = _record(owner, key, created_at, job_status, correlation_id)
        store_job(rt, record, admitter)
        if job_status == "succeeded":
            rt.store.put_result(record, {"scanned": created_at}, expires_at=2_000_000_000)
        if (
            owner == tenant
            and status in (None, job_status)
            and correlation in (None, correlation_id)
        ):
            model.append((keys.created_sk(record.created_at, record.job_id), record.job_id))
    expected = [job_id for _, job_id in sorted(model, reverse=True)]
    got: list[str] = []
    start = None
    # Every page reads at least one index entry past its start: the walk ends.
    for _ in range(len(jobs) + 3):
        with index_reads(client) as reads:
            records, start = list_page(
                rt.store,
                JobQuery(
                    tenant,
                    correlation_id=correlation,
                    status=status,
                    limit=limit,
                    start_key=start,
                    budget=budget,
                ),
            )
        assert reads.within(budget)
        assert len(records) <= limit
        got += [record.job_id for record in records]
        if start is None:
            break
        assert decode_cursor(encode_cursor(start)) == start
    assert start is None, "the listing never ended"
    assert got == expected


def list_page(store: Any, query: JobQuery) -> tuple[list[JobRecord], dict[str, Any] | None]:
    """One page of the store's lazy listing, as the service takes it: `limit` jobs, and the
    resume key of the last one when another follows, or where the read budget stopped."""
    listing = store.iter_jobs(query)
    listed = list(itertools.islice(listing, query.limit + 1))
    page = listed[: query.limit]
    if len(listed) > query.limit:
        return [job.record for job in page], page[-1].resume_key
    return [job.record for job in page], listing.resume_key


@dataclass
class IndexReads:
    """The `Limit` and `ScannedCount` (entries DynamoDB evaluated and bills) of each Query."""

    limits: list[int] = field(default_factory=list)
    scanned: list[int] = field(default_factory=list)
    table_keys: int = 0  # the keys asked of the table (BatchGetItem)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def within(self, budget: ReadBudget) -> bool:
        return (
            len(self.limits) <= budget.queries
            and sum(self.limits) <= budget.items
            and sum(self.scanned) <= budget.items
        )


@contextmanager
def index_reads(client: Any) -> Iterator[IndexReads]:
    """The Queries `client` makes while open (the listing makes its first ones in parallel)."""
    reads = IndexReads()

    def asked(params: dict[str, Any], **_: Any) -> None:
        with reads._lock:
            reads.limits.append(params.get("Limit", 10**9))

    def answered(parsed: dict[str, Any], **_: Any) -> None:
        with reads._lock:
            reads.scanned.append(parsed.get("ScannedCount", 0))

    def asked_of_the_table(params: dict[str, Any], **_: Any) -> None:
        with reads._lock:
            reads.table_keys += sum(len(asked["Keys"]) for asked in params["RequestItems"].values())

    events = client.meta.events
    events.register("provide-client-params.dynamodb.Query", asked, "reads-asked")
    events.register("after-call.dynamodb.Query", answered, "reads-answered")
    events.register("provide-client-params.dynamodb.BatchGetItem", asked_of_the_table, "table")
    try:
        yield reads
    finally:
        events.unregister("provide-client-params.dynamodb.Query", unique_id="reads-asked")
        events.unregister("after-call.dynamodb.Query", unique_id="reads-answered")
        events.unregister("provide-client-params.dynamodb.BatchGetItem", unique_id="table")


# -- a request's reads are bounded (issue 22) ------------------------------------------------

MANY = LISTING_BUDGET.items + 76  # more index entries than one request may read


def test_every_request_reads_a_bounded_part_of_the_index(
    api: Api,
    rt: Runtime,
    base_url: str,  # noqa: F811 - test_cli's fixture, imported above
) -> None:
    """Issue 22: a filter that matches little made one request read the tenant's whole index
    (804 Queries for 1,600 jobs, past Lambda's timeout). Now each request, filtered or not, by
    tenant or by correlation id, reads at most LISTING_BUDGET of the index and stops there with
    a cursor (on a page short of `limit`, or empty); following the cursors still gives every
    matching job once, newest first."""
    # MANY queued jobs of acme under one correlation id; the oldest cancelled.
    records = [
        _record("acme", f"many-{n}", n, "cancelled" if n == 0 else "queued", "chain")
        for n in range(MANY)
    ]
    # Admitted by this release and by the one before, in turns: the entries in both places.
    items = [
        item
        for n, record in enumerate(records)
        for item in admitted_items(record, ADMITTERS[n % 2])
    ]
    for start in range(0, len(items), 25):
        rt.store.client.batch_write_item(
            RequestItems={
                rt.store.table_name: [
                    {"PutRequest": {"Item": item}} for item in items[start : start + 25]
                ]
            }
        )
    cancelled = [records[0].job_id]
    assert walk_within_budget(api, rt, "status=cancelled&limit=1") == (cancelled, True)
    # Half the entries hold no status (this release's, its first events'): a request reads at
    # most STATUS_READS of their jobs (and their results) from the table, then stops with a
    # cursor; the others are filtered on the index as they are read.
    at_most = 2 * (STATUS_READS + LISTING_BATCH)
    assert walk_within_budget(
        api, rt, "status=cancelled&correlation_id=chain", table_keys=at_most
    ) == (cancelled, True)
    # Unfiltered, the largest page (walks under small budgets: the property test above).
    newest_first = [record.job_id for record in reversed(records)]
    assert walk_within_budget(api, rt, "limit=500", pages=1) == (newest_first[:500], False)
    # The CLI follows the empty first page's cursor to the job.
    listed = run("jobs", "list", "--status", "cancelled", url=base_url, output="json")
    assert [job["job_id"] for job in json.loads(listed.stdout)["jobs"]] == cancelled


def walk_within_budget(
    api: Api, rt: Runtime, query: str, pages: int = 10, table_keys: int | None = None
) -> tuple[list[str], bool]:
    """The job ids of a listing's first `pages` pages, each request read within budget (and
    asking at most `table_keys` keys of the table), and whether the listing ended."""
    seen: list[str] = []
    cursor = None
    for _ in range(pages):
        with index_reads(rt.store.client) as reads:
            response = api.get(f"/jobs?{query}" + (f"&cursor={cursor}" if cursor else ""))
        assert response.status == 200, response.body
        validate(response.body, "JobPage")
        assert reads.within(LISTING_BUDGET), (query, len(reads.limits), sum(reads.scanned))
        assert table_keys is None or reads.table_keys <= table_keys, reads.table_keys
        seen += [job["job_id"] for job in response.body["jobs"]]
        cursor = response.body.get("next_cursor")
        if cursor is None:
            return seen, True
    return seen, False
