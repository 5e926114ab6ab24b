"""`python -m bench`: DynamoDB calls and capacity per operation, flat paging cost, cold imports,
local throughput and callback latency.

Numbers, not assertions: the report goes to docs/performance.md and to stdout.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.bill import Stack, whole_bill
from bench.bill import report_lines as bill_lines
from bench.billing import BillingMeter, use_moto_credentials
from bench.capacity import report_lines as capacity_lines
from bench.cold_start import ColdStarts, cold_imports
from bench.cold_start import report_lines as cold_start_lines
from bench.cost import (
    EVERY_FEATURE_SCENARIO,
    QUOTAS_SCENARIO,
    RESOURCE_SCENARIO,
    TABLE_NAME,
    JobCost,
    measure_costs,
    report_lines,
    table_from_template,
)
from bench.end_to_end import EndToEnd
from bench.end_to_end import measure as end_to_end
from bench.end_to_end import report_lines as end_to_end_lines
from bench.invocations import Invocation, Series, series_of

REPOSITORY = Path(__file__).resolve().parent.parent
REPORT = REPOSITORY / "docs" / "performance.md"
PRIOR_EVENT_COUNTS = (10, 10_000)
SWEEP_FINISHED = (10, 10_000)

use_moto_credentials()


# The wait given to every AWS call to count an operation's round trips (below).
ROUND_TRIP_S = 0.1


@dataclass
class Meter:
    """Counts DynamoDB and SQS calls, and bills DynamoDB's units by AWS's rules (bench.billing:
    moto's own capacity figures are constants)."""

    billing: BillingMeter
    calls: list[str] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)
    # The (start, end) of each call's wait while `network()` is on.
    waits: list[tuple[float, float]] = field(default_factory=list)

    def after_call(self, model: Any, **_: Any) -> None:
        self.calls.append(model.name)

    def attach(self, dynamodb: Any, *others: Any) -> None:
        """Count and bill `dynamodb`'s calls; count those of `others` (SQS)."""
        self.billing.attach(dynamodb)
        for client in (dynamodb, *others):
            self.attach_other(client)

    def _network(self, **_: Any) -> None:
        started = time.perf_counter()
        time.sleep(ROUND_TRIP_S)
        self.waits.append((started, time.perf_counter()))

    @property
    def round_trips(self) -> int:
        """The longest chain of waits one after another (calls made at once overlap: the
        sleep releases the interpreter): the round trips a network would show."""
        chain, last_end = 0, float("-inf")
        for started, ended in sorted(self.waits, key=lambda wait: wait[1]):
            if started >= last_end:
                chain, last_end = chain + 1, ended
        return chain

    @contextmanager
    def network(self) -> Iterator[None]:
        """Every call waits ROUND_TRIP_S first, as over a network."""
        self.waits.clear()
        for client in self.clients:
            service = client.meta.service_model.endpoint_prefix
            client.meta.events.register(f"before-call.{service}", self._network, "network")
        try:
            yield
        finally:
            for client in self.clients:
                service = client.meta.service_model.endpoint_prefix
                client.meta.events.unregister(f"before-call.{service}", unique_id="network")

    def attach_other(self, client: Any) -> None:
        """Count the calls of one more client (not billed: no DynamoDB table behind it)."""
        service = client.meta.service_model.endpoint_prefix
        client.meta.events.register(f"after-call.{service}", self.after_call)
        self.clients.append(client)

    @property
    def read_units(self) -> float:
        return self.billing.bill.read_units

    @property
    def write_units(self) -> float:
        return self.billing.bill.write_units

    def reset(self) -> None:
        self.calls.clear()
        self.billing.bill.reset()


@dataclass
class Row:
    operation: str
    calls: list[str]
    read_units: float
    write_units: float
    millis: float
    round_trips: int = 0
    # The custom metrics one run publishes (name and dimension values).
    metric_series: frozenset[Series] = frozenset()


def measure(meter: Meter, operation: str, action: Callable[[], Any], repeat: int = 5) -> Row:
    """The calls and units of one run of `action`; its median time over `repeat` more; and its
    round trips: the calls of one more run that follow one another, each made to wait first
    as over a network (`Meter.round_trips`)."""
    action()  # warm: the first call of a process pays client set-up
    meter.reset()
    started = time.perf_counter()
    action()
    elapsed = (time.perf_counter() - started) * 1000
    row = Row(operation, list(meter.calls), meter.read_units, meter.write_units, elapsed)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    row.millis = statistics.median(timings)
    with meter.network():
        action()
    row.round_trips = meter.round_trips
    return row


def operations() -> list[Row]:
    sys.path[:0] = [str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)]
    import boto3
    from moto import mock_aws

    from jobstream.config.settings import DEFAULT_TARGETS_FILE, Settings
    from jobstream.config.tenants import shorthand_registry
    from jobstream.delivery.http import HttpResult
    from jobstream.queue import sqs_client
    from jobstream.runtime import Runtime
    from jobstream.service import admission, jobs
    from jobstream.store.client import dynamodb_client
    from jobstream.store.jobs import JobStore
    from jobstream_local.moto_patches import patch_moto
    from jobstream_local.resources import create_queues, create_tables
    from jobstream_local.template import Template

    patch_moto()
    rows: list[Row] = []
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(Template.load(), client, name_for=lambda _: "bench-jobs")
        queues = create_queues(
            Template.load(), boto3.client("sqs"), name_for=lambda n: f"bench-{n}"
        )
        settings = Settings(
            table_name="bench-jobs",
            tenants=shorthand_registry(
                [("bench", "bench-token"), ("pages", "pages-token"), ("done", "done-token")]
            ),
            targets_path=DEFAULT_TARGETS_FILE,
            # Both queues, as deployed: admission hands off to each after its commit.
            work_queue_url=queues["WorkQueue"]["Ref"],
            callback_queue_url=queues["CallbackQueue"]["Ref"],
            callback_dead_letter_url=queues["CallbackDeadLetterQueue"]["Ref"],
        )
        rt = Runtime(
            settings=settings,
            store=JobStore("bench-jobs"),
            # No DNS and no network: a public address, and a receiver that answers 204.
            resolver=lambda _host, _port: ["93.184.215.14"],
            poster=lambda _target, _body, _headers, _timeout: HttpResult(204, "", None),
        )
        meter = Meter(BillingMeter(table_from_template(Template.load(), "bench-jobs"), client))
        meter.attach(dynamodb_client(), sqs_client())

        def task(key: str) -> dict[str, Any]:
            return {
                "protocol_version": "1",
                "job_type": "candidate_search",
                "idempotency_key": key,
                "callback_url": "https://consumer.example.test/events",
                "params": {"target_id": "demo-illustration", "query": {"tags": ["landscape"]}},
            }

        counter = iter(range(1_000_000))
        rows.append(measure(meter, "capabilities", lambda: jobs.capabilities(rt)))
        rows.append(
            measure(
                meter,
                "admission (new)",
                lambda: admission.submit(rt, "bench", task(f"new-{next(counter)}"), None),
            )
        )
        rows += _cold_registry_rows(rt, meter, admission, task, counter)
        _, body = admission.submit(rt, "bench", task("replayed"), None)
        job_id = body["job"]["job_id"]
        rows.append(
            measure(
                meter,
                "admission (replay)",
                lambda: admission.submit(rt, "bench", task("replayed"), None),
            )
        )
        rows.append(measure(meter, "get job", lambda: jobs.get_job(rt, "bench", job_id, None)))
        rows.append(
            measure(meter, "list jobs (limit 100)", lambda: jobs.list_jobs(rt, "bench", {}, None))
        )
        # A full page: 100 of a tenant's 300 jobs, spread over its tenant_jobs shards.
        for index in range(300):
            admission.submit(rt, "pages", task(f"page-{index}"), None)
        rows.append(
            measure(
                meter,
                "list jobs (a page of 100 of 300)",
                lambda: jobs.list_jobs(rt, "pages", {"limit": ["100"]}, None),
            )
        )
        rows.append(_succeeded_page_row(rt, meter, admission, task))
        rows.append(
            measure(
                meter,
                "list jobs by key",
                lambda: jobs.list_jobs(rt, "bench", {"idempotency_key": ["replayed"]}, None),
            )
        )
        ids = [
            admission.submit(rt, "bench", task(f"c-{i}"), None)[1]["job"]["job_id"]
            for i in range(9)
        ]
        pending = iter(ids)
        rows.append(
            measure(
                meter, "cancel (queued job)", lambda: jobs.cancel(rt, "bench", next(pending), None)
            )
        )
        rows.append(
            measure(
                meter, "cancel (already cancelled)", lambda: jobs.cancel(rt, "bench", ids[0], None)
            )
        )
        rows += _callback_rows(rt, meter, admission)
        rows.append(_dispatcher_row(rt, meter, admission))
        rows.append(_job_lifetime_row(rt, meter, admission))
        rows.append(_heartbeat_row(rt, client, meter, admission))
        rows += _stream_rows(rt, client, meter)
    return rows


def _cold_registry_rows(
    rt: Any, meter: Meter, admission: Any, task: Callable[[str], dict[str, Any]], counter: Any
) -> list[Row]:
    """Admission as deployed, the registry a secret: the HTTP shell authenticates the request
    against it first (http/api.py), a Secrets Manager read when its cache is cold (a new
    environment, and again every JOBSTREAM_TENANTS_MAX_AGE_S), none when warm."""
    from dataclasses import replace

    import boto3

    from jobstream.config import registry, stored

    secrets = boto3.client("secretsmanager")
    arn = secrets.create_secret(Name="bench-tenants", SecretString=rt.tenants().to_json())["ARN"]
    with_secret = replace(
        rt,
        settings=rt.settings.model_copy(
            update={"tenants": None, "tenants_secret": arn, "tenants_max_age_s": 60}
        ),
    )
    registry.forget_cached()
    meter.attach_other(stored.client("secretsmanager"))

    def admit(*, cold: bool) -> Any:
        if cold:
            registry.forget_reads()  # a new environment: nothing read yet
        with_secret.tenants()
        return admission.submit(with_secret, "bench", task(f"new-{next(counter)}"), None)

    return [
        measure(meter, "admission (new, cold registry)", partial(admit, cold=True)),
        measure(meter, "admission (new, warm registry)", partial(admit, cold=False)),
    ]


def _succeeded_page_row(
    rt: Any, meter: Meter, admission: Any, task: Callable[[str], dict[str, Any]]
) -> Row:
    """A full page of succeeded jobs (each with its 1-candidate result): 100 of 150."""
    from jobstream.service import jobs
    from jobstream.service.execution import execute

    for index in range(150):
        job_id = admission.submit(rt, "done", task(f"done-{index}"), None)[1]["job"]["job_id"]
        _expect(execute(rt, job_id) == "succeeded", "a listed job succeeds")

    def page() -> None:
        listed = jobs.list_jobs(rt, "done", {"limit": ["100"]}, None)["jobs"]
        _expect(
            len(listed) == 100 and all(job["result"]["candidates"] for job in listed),
            "a page of 100 succeeded jobs with their results",
        )

    return measure(meter, "list jobs (a page of 100 succeeded of 150)", page)


def _dispatcher_row(rt: Any, meter: Meter, admission: Any) -> Row:
    """The dispatcher's batch for one admission's commit (the job and its first callback, as
    the table's stream delivers them)."""
    from jobstream.service.dispatcher import dispatch_records

    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "dispatched",
        "callback_url": "https://consumer.example.test/events",
        "params": {"target_id": "demo-illustration"},
    }
    job_id = admission.submit(rt, "bench", task, None)[1]["job"]["job_id"]
    records = [
        {
            "eventName": "INSERT",
            "dynamodb": {
                "NewImage": {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": sk}, **image},
                "SequenceNumber": str(number),
            },
        }
        for number, (sk, image) in enumerate(
            [
                ("#JOB", {"event_count": {"N": "1"}}),
                ("EVT#0000000001", {"state": {"S": "pending"}, "attempts": {"N": "0"}}),
            ]
        )
    ]
    return measure(
        meter,
        "dispatcher: one admission's stream records",
        lambda: _expect(dispatch_records(rt, records) == [], "dispatch"),
    )


def _job_lifetime_row(rt: Any, meter: Meter, admission: Any) -> Row:
    """Every DynamoDB and SQS call of one job from admission to its terminal state (no callback
    deliveries: those are counted per callback above)."""
    from jobstream.service.execution import execute

    keys = iter(range(1_000))

    def lifetime() -> None:
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"lifetime-{next(keys)}",
            "callback_url": "https://consumer.example.test/events",
            "params": {"target_id": "demo-illustration"},
        }
        job_id = admission.submit(rt, "bench", task, None)[1]["job"]["job_id"]
        execute(rt, job_id)

    return measure(meter, "job lifetime: admission -> succeeded", lifetime)


def _heartbeat_row(rt: Any, client: Any, meter: Meter, admission: Any) -> Row:
    """A running job's heartbeat (every JOBSTREAM_HEARTBEAT_INTERVAL_MS): its lease renewed.
    The job, with a correlation id, is marked running by the bench's own client."""
    from jobstream.domain import JobStatus
    from jobstream.store import keys
    from jobstream.store.codec import to_item

    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "heartbeat",
        "correlation_id": "review-chain:135",
        "params": {"target_id": "demo-illustration"},
    }
    job_id = admission.submit(rt, "bench", task, None)[1]["job"]["job_id"]
    client.update_item(
        TableName=rt.settings.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK}),
        UpdateExpression="SET #s = :running, lease_owner = :owner",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_item({":running": JobStatus.RUNNING.value, ":owner": "w"}),
    )
    beats = iter(range(1, 1_000))

    def heartbeat() -> None:
        now = rt.clock() + next(beats)
        _expect(rt.store.renew_lease(job_id, "w", now=now, lease_ms=60_000), "heartbeat")

    return measure(meter, "heartbeat (a running job with a correlation id)", heartbeat)


def _callback_rows(rt: Any, meter: Meter, admission: Any) -> list[Row]:
    from jobstream.domain import IntentRef
    from jobstream.queue import message_body
    from jobstream.service.callbacks import handle_message

    refs = []
    for index in range(9):
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"callback-{index}",
            "callback_url": "https://consumer.example.test/events",
            "params": {"target_id": "demo-illustration"},
        }
        job_id = admission.submit(rt, "bench", task, None)[1]["job"]["job_id"]
        refs.append(IntentRef(job_id, 1))
    pending = iter(refs)
    # As the dispatcher sends them: job.accepted shows no result (its message says so).
    return [
        measure(
            meter,
            "callback delivered (one queue message)",
            lambda: handle_message(rt, message_body(next(pending), without_result=True), "receipt"),
        ),
        measure(
            meter,
            "callback message for a delivered intent",
            lambda: handle_message(rt, message_body(refs[0], without_result=True), "receipt"),
        ),
    ]


def sweep_rows() -> list[Row]:
    """The sweep's cost with 10 and 10,000 finished jobs beside the same small backlog."""
    import boto3
    from moto import mock_aws

    from jobstream.config.settings import DEFAULT_TARGETS_FILE, Settings
    from jobstream.config.tenants import shorthand_registry
    from jobstream.queue import sqs_client
    from jobstream.runtime import Runtime
    from jobstream.service import admission
    from jobstream.service.sweep import sweep
    from jobstream.store.client import dynamodb_client
    from jobstream.store.jobs import JobStore
    from jobstream_local.resources import create_tables
    from jobstream_local.template import Template

    rows = []
    with mock_aws():
        dynamodb_client.cache_clear()
        client = boto3.client("dynamodb")
        for finished in SWEEP_FINISHED:
            table = f"sweep-{finished}"
            create_tables(Template.load(), client, name_for=partial(_same_name, table))
            settings = Settings(
                table_name=table,
                tenants=shorthand_registry([("bench", "bench-token"), ("pages", "pages-token")]),
                targets_path=DEFAULT_TARGETS_FILE,
            )
            rt = Runtime(settings=settings, store=JobStore(table))
            meter = Meter(BillingMeter(table_from_template(Template.load(), table), client))
            meter.attach(dynamodb_client(), sqs_client())
            if finished == SWEEP_FINISHED[0]:
                # What every minute costs with nothing to do (the bill's fixed part).
                rows.append(idle_sweep_row(meter, partial(sweep, rt)))
            _finished_jobs(client, table, finished)
            for index in range(5):
                task = {
                    "protocol_version": "1",
                    "job_type": "candidate_search",
                    "idempotency_key": f"open-{index}",
                    "params": {"target_id": "demo-illustration"},
                }
                admission.submit(rt, "bench", task, None)
            rows.append(
                measure(meter, f"sweep: 5 open jobs, {finished} finished", partial(sweep, rt))
            )
    return rows


def idle_sweep_row(meter: Meter, run: Callable[[], Any]) -> Row:
    """The idle sweep's calls and units, and the metrics it publishes every minute."""
    from jobstream import observability

    observability.emf_documents()  # what earlier measures left pending
    row = measure(meter, "sweep: idle (no job)", run)
    row.metric_series = frozenset(
        series for document in observability.emf_documents() for series in series_of(document)
    )
    return row


def _same_name(name: str, _logical_id: str) -> str:
    return name


def _finished_jobs(client: Any, table: str, count: int) -> None:
    """Finished jobs written directly: a job row with its terminal event recorded."""
    from jobstream.store import keys
    from jobstream.store.codec import to_item

    items = [
        {
            "PutRequest": {
                "Item": to_item(
                    {
                        keys.PK: keys.job_pk(f"job_done_{index}"),
                        keys.SK: keys.JOB_SK,
                        "status": "succeeded",
                        "recorded_kinds": frozenset({"job.requested", "job.outcome_succeeded"}),
                    }
                )
            }
        }
        for index in range(count)
    ]
    for start in range(0, len(items), 25):
        client.batch_write_item(RequestItems={table: items[start : start + 25]})


def _stream_rows(rt: Any, client: Any, meter: Meter) -> list[Row]:
    """Page and ack against a job with few and with many prior events."""
    from jobstream.service import events

    rows: list[Row] = []
    for prior in PRIOR_EVENT_COUNTS:
        long_job = _job_with_events(rt, client, prior)
        last = _progress_id(long_job, prior)
        before_last = _progress_id(long_job, prior - 1)
        page_after = partial(
            events.events_page, rt, "bench", long_job, {"after": [before_last]}, None
        )
        # Measure the path meant: the page after a real id holds exactly the last event.
        _expect([e["event_id"] for e in page_after()["events"]] == [last], "page after")
        rows.append(measure(meter, f"page after {prior - 1} prior events", page_after))
        rows.append(
            measure(
                meter,
                f"page unacked, {prior} events",
                partial(events.events_page, rt, "bench", long_job, {"unacked": ["1"]}, None),
            )
        )
        acks = iter(range(2, prior + 1))
        rows.append(
            measure(
                meter,
                f"ack (moves) with {prior} events",
                partial(_ack_next, rt, long_job, acks),
            )
        )
        moved = rt.store.get_job(long_job)
        _expect(
            moved is not None and moved.ack_sequence == next(acks, prior + 1) - 1, "ack (moves)"
        )
        rows.append(
            measure(
                meter,
                f"ack (replayed) with {prior} events",
                partial(events.acknowledge, rt, "bench", long_job, {"ack_through": last}, None),
            )
        )
        acked = rt.store.get_job(long_job)
        _expect(acked is not None and acked.ack_sequence == prior, "ack (replayed)")
    return rows


def _ack_next(rt: Any, job_id: str, sequences: Iterator[int]) -> Any:
    from jobstream.service import events

    return events.acknowledge(
        rt, "bench", job_id, {"ack_through": _progress_id(job_id, next(sequences))}, None
    )


# Creation time of each job `_job_with_events` wrote: its event n is at `created + n`.
_CREATED: dict[str, int] = {}


def _progress_id(job_id: str, sequence: int) -> str:
    """The id of a progress event `_job_with_events` wrote."""
    from jobstream.protocol.events import event_id

    return event_id(job_id, _CREATED[job_id] + sequence, sequence)


def _expect(holds: bool, operation: str) -> None:
    # A benchmark of the wrong path (say, an ack that names no event) measures nothing useful.
    if not holds:
        raise RuntimeError(f"bench: {operation} did not do what it measures")


def _job_with_events(rt: Any, client: Any, count: int) -> str:
    """A job whose stream holds `count` events (progress past the first), written directly."""
    from jobstream.service import admission
    from jobstream.store import keys
    from jobstream.store.codec import to_item

    _, body = admission.submit(
        rt,
        "bench",
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"long-{count}",
            "params": {"target_id": "demo-illustration"},
        },
        None,
    )
    job_id: str = body["job"]["job_id"]
    created: int = body["job"]["created_at"]
    _CREATED[job_id] = created
    items = [
        {
            "PutRequest": {
                "Item": to_item(
                    {
                        keys.PK: keys.job_pk(job_id),
                        keys.SK: keys.event_sk(sequence),
                        "kind": "job.progressed",
                        "at": created + sequence,
                    }
                )
            }
        }
        for sequence in range(2, count + 1)
    ]
    for start in range(0, len(items), 25):
        client.batch_write_item(RequestItems={rt.settings.table_name: items[start : start + 25]})
    client.update_item(
        TableName=rt.settings.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK}),
        UpdateExpression="SET event_count = :count, last_event_at = :last",
        ExpressionAttributeValues=to_item({":count": count, ":last": created + count}),
    )
    return job_id


def report(
    rows: list[Row],
    measured: tuple[list[JobCost], list[tuple[Invocation, ...]]],
    cold: ColdStarts,
    end_to_end: EndToEnd,
) -> str:
    from jobstream_local.template import Template

    costs, repeats = measured
    stack = Stack.from_template(Template.load())
    (idle_sweep,) = [row for row in rows if row.operation == "sweep: idle (no job)"]
    bill = whole_bill(costs[0], repeats, cold.rows, stack, idle_sweep)
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (numbers, not assertions; it rewrites this file). DynamoDB and",
        "SQS calls are counted with botocore event hooks against moto in-process, so call counts",
        "and request shapes are exact. Capacity units are billed by DynamoDB's own rules applied",
        "to the items really written and read (`bench/billing.py`; moto's own figures are",
        "constants): transactions x2, index writes by projection, strongly consistent reads 1",
        "unit per 4 KB. Milliseconds are moto's own and measure nothing about AWS.",
        "",
        *report_lines(costs),
        *bill_lines(bill, costs, stack),
        *capacity_lines(costs, TABLE_NAME),
        "## AWS calls per operation",
        "",
        "Every DynamoDB and SQS call an operation makes (what it reads and writes billed as",
        "above). Round trips: the calls it makes one after another, as a network shows them:",
        f"in one more run every call is made to wait {ROUND_TRIP_S * 1000:.0f} ms first, and the",
        "longest chain of those waits one after another is counted (calls made at once, such as",
        "a listing's first read of each shard, eight at a time, overlap). A request path's",
        "latency on AWS is about its round",
        "trips times a call's (~5-10 ms for DynamoDB and SQS in the same region) plus its own",
        "compute.",
        "",
        "| operation | AWS calls | round trips | which | read units | write units | ms (median) |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        which = ", ".join(_runs(row.calls)) or "-"
        lines.append(
            f"| {row.operation} | {len(row.calls)} | {row.round_trips} | {which} | "
            f"{row.read_units:g} | {row.write_units:g} | {row.millis:.2f} |"
        )
    lines += [
        "",
        "Targets: capabilities 0 calls; get 1; admission at most 3 round trips (GetItem or",
        "Query, then the job's put and its event's put: two single writes where one transaction",
        "billed both twice, one round trip more for 2 write units less; it sends nothing, the",
        "dispatcher hands the job and its callback to their queues from the table's stream) with",
        "the registry's cache warm, one",
        "more (GetSecretValue, first) in a new environment and whenever the cache's age",
        "(60 s) has passed; replay 1 read; page <= 2 calls;",
        "ack <= 2 calls; page and ack cost flat in the number of prior events. No write path",
        "(admission, cancel, reconcile, claim, progress, completion) sends to SQS: the",
        "dispatcher's two sends per admission are its own invocation's. A delivered callback",
        "at its first attempt, seconds after its event, costs one read of the callback with",
        "its job (the callback names its event, the body is rebuilt from the job; the job's",
        "result too for a terminal event, the only one whose body shows it: the dispatcher's",
        "message says which),",
        "one of its endpoint's health and one write, its outcome, which counts the attempt: no",
        "claim (a retry claims first); the sweep's cost follows the backlog, not the table.",
        "",
        *listing_lines(rows, costs),
    ]
    lines += cold_start_lines(cold)
    lines += end_to_end_lines(end_to_end)
    return "\n".join(lines)


def listing_lines(rows: list[Row], costs: list[JobCost]) -> list[str]:
    """What a page of jobs reads, and what the tenant index's projection costs each job."""
    import textwrap

    from jobstream.store import keys

    by_operation = {row.operation: row for row in rows}
    queued = by_operation["list jobs (a page of 100 of 300)"]
    succeeded = by_operation["list jobs (a page of 100 succeeded of 150)"]
    heartbeat = by_operation["heartbeat (a running job with a correlation id)"]
    first = costs[0]
    tenant_units = first.bill.index_write_units.get(keys.TENANT_INDEX, 0.0)
    correlation_units = first.bill.index_write_units.get(keys.CORRELATION_INDEX, 0.0)
    results = ", ".join(
        f"{cost.scenario} {cost.result_bytes:,} bytes ({cost.result_map_bytes:,} as a DynamoDB map)"
        for cost in costs
        if cost.result_bytes
        and cost.scenario not in {QUOTAS_SCENARIO, RESOURCE_SCENARIO, EVERY_FEATURE_SCENARIO}
    )
    paragraph = (
        f"Listings: the tenant's index (`{keys.TENANT_INDEX}`) holds what a Job document shows "
        "of a queued or finished job, and a succeeded job's result when its entry fits in 1 KB "
        "(one write unit): a page is a Query per index shard (16, and a few more where a "
        "shard's first read fell short) and no read of the table. A page of 100 queued jobs: "
        f"{queued.read_units:g} read units ({len(queued.calls)} queries, half a unit each at "
        f"least); of 100 succeeded jobs: {succeeded.read_units:g} ({len(succeeded.calls)} "
        "queries, their results with them); target: about 25 (61.5 and 111.5 when every "
        "page's jobs were read from the table, half a unit each at least). A running job, a "
        "larger result, an entry written before the index held these and a correlation id's "
        "listing (its entries: keys only) are read from the table (BatchGetItem). "
        f"What it costs each job: a 1-candidate job's life writes {tenant_units:g} units to "
        f"`{keys.TENANT_INDEX}` (its entry at admission, claim and end, each under 1 KB, its "
        "result's entry once, and its first event's entry under its correlation id, written "
        "once with the event) and "
        f"{correlation_units:g} to `{keys.CORRELATION_INDEX}` (which lists the jobs the release "
        "before admitted, and each tenant's dead and retrying callbacks). "
        "What changes while a job runs (its heartbeat, progress, attempt) is kept in the job's "
        "`listed` map only while it is not running (the claim removes it, the end writes it), "
        f'so a heartbeat writes the job alone ("heartbeat" above: {heartbeat.write_units:g} '
        f"write unit). A result is kept as its compressed JSON (the result item as stored: "
        f"{results}): every write and read of it is billed on that."
    )
    return [*textwrap.wrap(paragraph, width=88), ""]


def _runs(calls: list[str]) -> list[str]:
    """Consecutive repeats of a call folded: `Query x16`."""
    folded: list[str] = []
    count = 0
    for index, call in enumerate(calls):
        count += 1
        if index + 1 == len(calls) or calls[index + 1] != call:
            folded.append(call if count == 1 else f"{call} x{count}")
            count = 0
    return folded


def main() -> int:
    print("measuring DynamoDB calls per operation...", flush=True)
    rows = operations() + sweep_rows()
    print("measuring what one job costs...", flush=True)
    costs = measure_costs()
    print("building the layer and measuring cold imports...", flush=True)
    cold = cold_imports()
    print("measuring throughput and callback latency through the local stack...", flush=True)
    flows = end_to_end()
    text = report(rows, costs, cold, flows)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {REPORT.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
