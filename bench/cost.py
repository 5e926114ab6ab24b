"""What one job costs on AWS: its DynamoDB units by AWS's billing rules, its SQS requests, its
Lambda invocations, and the price of a million such jobs.

A job's life as a consumer lives it: admitted with a callback URL, run by the worker, its events
each delivered by callback, its stream paged once (`unacked=1`) and acknowledged once through
the last event. The services run for real against moto in-process; `bench.billing` bills every
DynamoDB request by the items it really wrote and read. After every commit the dispatcher runs
over the table's stream (the template's filter, then the real handler), as Lambda would invoke
it for a lone commit: its SQS sends and invocations are counted, its stream reads are not (Lambda
reads a stream it triggers on for free). The bench's own checks read through a client of their
own, never billed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final

from bench.assumptions import (
    HTTP_API_REQUEST,
    ITEM_OVERHEAD_BYTES,
    LAMBDA_REQUEST,
    PRICE_PER_MILLION,
    PRICES_AS_OF,
    READ_UNIT,
    SQS_REQUEST,
    WRITE_UNIT,
)
from bench.billing import Bill, BillingMeter, Table
from bench.capacity import partition_kind
from bench.invocations import Invocation, Recorder, Series
from jobstream.store.item_size import item_size

TABLE_NAME: Final = "cost-jobs"
QUOTAS_SCENARIO: Final = "1-candidate result, tenant with quotas"
RESOURCE_SCENARIO: Final = "1-candidate result, target on a paced resource"
EVERY_FEATURE_SCENARIO: Final = "1-candidate result, every feature on"
# What issue 28 asks of a 1-candidate job with every per-tenant feature on (write units).
EVERY_FEATURE_TARGET_UNITS: Final = 30
# The bench's shared resource: two slots and a pace, as a Pixiv account would be configured.
BENCH_RESOURCE: Final = {"max_concurrent": 2, "per_minute": 600}


@dataclass(frozen=True)
class JobCost:
    scenario: str
    candidates: int
    bill: Bill
    events: int
    callbacks: int
    http_requests: int
    lambda_invocations: int
    # Each Lambda invocation of the life, as measured (bench.invocations).
    invocations: tuple[Invocation, ...] = ()
    # What the job keeps stored until its retention ends: its items and their index entries,
    # DynamoDB's 100 bytes of overhead each included.
    table_bytes: int = 0
    index_bytes: int = 0
    # The size of its result's item (`#RESULT`): what a listing reads of it; and what that item
    # would take with the result kept as a DynamoDB map (as results were before compression).
    result_bytes: int = 0
    result_map_bytes: int = 0
    # The CloudWatch metrics (name, dimensions) its life's EMF documents define.
    metric_series: frozenset[Series] = frozenset()
    # Write units (table and indexes) by step of the life, in order.
    write_units_by_step: tuple[tuple[str, float], ...] = ()

    @property
    def sqs_requests(self) -> int:
        return sum(count for name, count in self.bill.requests.items() if name.startswith("sqs:"))

    def dollars_per_million(self) -> dict[str, float]:
        """The price of one million such jobs, by line (compute time is not included)."""
        return {
            "DynamoDB writes": self.bill.write_units * PRICE_PER_MILLION[WRITE_UNIT],
            "DynamoDB reads": self.bill.read_units * PRICE_PER_MILLION[READ_UNIT],
            # Each message is sent, received and deleted once: the receive and delete are the
            # event source mapping's (one per batch; counted per message, the worst case).
            "SQS": 3 * self.sqs_sends * PRICE_PER_MILLION[SQS_REQUEST],
            "Lambda requests": self.lambda_invocations * PRICE_PER_MILLION[LAMBDA_REQUEST],
            "HTTP API": self.http_requests * PRICE_PER_MILLION[HTTP_API_REQUEST],
        }

    @property
    def aws_calls(self) -> int:
        """DynamoDB and SQS requests of the whole life (the dispatcher's sends included)."""
        return sum(self.bill.requests.values())

    @property
    def sqs_sends(self) -> int:
        return sum(
            count
            for name, count in self.bill.requests.items()
            if name in {"sqs:SendMessage", "sqs:SendMessageBatch"}
        )


@dataclass
class Life:
    """What a job's life runs on: the runtime, the meter, the receiver's log, the dispatcher's
    invocations, and a store for the bench's own reads (not billed)."""

    rt: Any
    meter: BillingMeter
    posted: list[str]
    dispatches: list[int]
    unmetered: Any
    recorder: Recorder
    table: Table
    reader: Any  # a client of the table that is not metered


# Runs of the 1-candidate job whose compute is measured (the median is taken, bench.bill).
COMPUTE_RUNS: Final = 5


def job_lifetime_costs(life: Life) -> list[JobCost]:
    """The 1-candidate and the 20-candidate job, each measured over its whole life; the first
    again for a tenant with quotas (its counter charged at admission, released at the end), on
    a paced resource, and with both (with the feed and endpoint health, which every job has:
    every feature on).
    The 1-candidate job's first life is followed by COMPUTE_RUNS - 1 more (their compute only
    is kept: `repeat_compute`)."""
    first = _one_job(life, "1-candidate result", {"target_id": "demo-illustration"})
    return [
        first,
        _one_job(
            replace(life, rt=_with_quotas(life.rt)),
            QUOTAS_SCENARIO,
            {"target_id": "demo-illustration"},
        ),
        _on_a_resource(life, RESOURCE_SCENARIO),
        _on_a_resource(replace(life, rt=_with_quotas(life.rt)), EVERY_FEATURE_SCENARIO),
        _one_job(
            life,
            "20-candidate result",
            {
                "target_id": "demo-illustration",
                "query": {"tags": ["landscape"]},
                "constraints": {"limit": 20, "scan_limit": 200},
            },
        ),
    ]


def _on_a_resource(life: Life, scenario: str) -> JobCost:
    """The 1-candidate job on a target naming a paced shared resource (service/resources.py):
    its slot taken with its source request's turn, then given back. Measured after one job
    of warm-up, as it is in steady state (the resource's item exists: its first use creates it
    with one more write)."""
    paced = replace(life, rt=_with_resource(life.rt))
    _one_job(paced, scenario, {"target_id": "demo-illustration"}, run=-1)
    return _one_job(paced, scenario, {"target_id": "demo-illustration"})


def _with_resource(rt: Any) -> Any:
    """`rt` reading a targets file whose demo target names the bench's resource."""
    import json
    import tempfile
    from pathlib import Path

    document = json.loads(rt.settings.targets_path.read_text(encoding="utf-8"))
    document["resources"] = {"bench": BENCH_RESOURCE}
    for target in document["targets"]:
        target["resource"] = "bench"
    path = Path(tempfile.mkdtemp(prefix="bench-targets-")) / "targets.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return replace(rt, settings=rt.settings.model_copy(update={"targets_path": path}))


def _with_quotas(rt: Any) -> Any:
    """`rt` with its tenant under both quotas (well above one job: the charge is measured, not
    a refusal)."""
    from jobstream.config.tenants import TenantQuotas

    registry = rt.tenants()
    tenant = registry.get("bench").model_copy(
        update={"quotas": TenantQuotas(max_open_jobs=1_000, admissions_per_minute=6_000)}
    )
    return replace(
        rt, settings=rt.settings.model_copy(update={"tenants": registry.replace("bench", tenant)})
    )


def repeat_compute(life: Life) -> list[tuple[Invocation, ...]]:
    """The invocations of more lives of the 1-candidate job (for the median of its compute)."""
    return [
        _one_job(life, "1-candidate result", {"target_id": "demo-illustration"}, run).invocations
        for run in range(1, COMPUTE_RUNS)
    ]


def _sent_callbacks(rt: Any, job_id: str) -> dict[int, str]:
    """The callback messages the dispatcher sent for the job, by sequence, taken off the queue
    (Lambda's poller would; its receive and delete are billed by the SQS line, not metered)."""
    import boto3

    from jobstream.queue import parse_message_body

    sqs = boto3.client("sqs")
    found: dict[int, str] = {}
    while True:
        received = sqs.receive_message(
            QueueUrl=rt.settings.callback_queue_url, MaxNumberOfMessages=10
        ).get("Messages", [])
        if not received:
            return found
        for message in received:
            sqs.delete_message(
                QueueUrl=rt.settings.callback_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
            ref = parse_message_body(message["Body"])
            if ref.job_id == job_id:
                found[ref.sequence] = message["Body"]


def _one_job(life: Life, scenario: str, params: Mapping[str, Any], run: int = 0) -> JobCost:
    from jobstream.service import admission
    from jobstream.service.callbacks import handle_message
    from jobstream.service.events import acknowledge, events_page
    from jobstream.service.execution import execute

    rt, meter, poster_log, recorder = life.rt, life.meter, life.posted, life.recorder
    meter.bill.reset()
    poster_log.clear()
    life.dispatches.clear()
    recorder.reset()
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": f"cost-{scenario}-{run}",
        # As the real consumer sends them: a correlation id and a few short labels.
        "correlation_id": "review-chain:135",
        "labels": {"origin": "moderation", "tenant": "bot1"},
        "callback_url": "https://consumer.example.test/events",
        "params": dict(params),
    }
    steps: dict[str, float] = {}

    def metered(step: str, function: str, call: Callable[[], Any]) -> Any:
        before = meter.bill.write_units
        try:
            return recorder.run(function, call)
        finally:
            steps[step] = steps.get(step, 0.0) + meter.bill.write_units - before

    with recorder.capturing():
        status, body = metered(
            "admission",
            "AdmissionFunction",
            lambda: _answered(recorder, admission.submit(rt, "bench", task, None)),
        )
        _expect(status == 202, "admission")
        job_id = body["job"]["job_id"]
        _expect(
            metered("worker run", "WorkerFunction", lambda: execute(rt, job_id)) == "succeeded",
            "the job runs to succeeded",
        )
        record = life.unmetered.get_job(job_id)
        events = record.event_count
        # Accepted, started, the outcome: a run this short writes no `job.progress` (none within
        # 5 s of `job.started`); each event is one commit, the dispatcher runs after each.
        _expect(events == 3, "3 events: accepted, started, succeeded")
        _expect(len(life.dispatches) == events, "the dispatcher ran after each of the 3 commits")
        # Each callback from the message the dispatcher sent for it (what it says decides
        # what the attempt reads).
        sent = _sent_callbacks(rt, job_id)
        _expect(sorted(sent) == list(range(1, events + 1)), "a message for every event")
        for sequence in sorted(sent):
            metered(
                "callbacks",
                "CallbacksFunction",
                partial(handle_message, rt, sent[sequence], "receipt"),
            )
        _expect(len(poster_log) == events, "every event is delivered by callback")
        page = metered(
            "events page",
            "EventsFunction",
            lambda: _answered(recorder, events_page(rt, "bench", job_id, {"unacked": ["1"]}, None)),
        )
        _expect(len(page["events"]) == events, "the page holds every event")
        through = {"ack_through": page["events"][-1]["event_id"]}
        ack = metered(
            "ack",
            "AckFunction",
            lambda: _answered(recorder, acknowledge(rt, "bench", job_id, through, None)),
        )
    _expect(ack["unacked"] == 0, "the ack moves the cursor to the end")
    job = life.unmetered.get_job(job_id)
    candidates = len((job.result or {}).get("candidates", []))
    table_bytes, index_bytes, result_bytes = stored_bytes(life, job_id)
    return JobCost(
        scenario=scenario,
        candidates=candidates,
        bill=_copy(meter.bill),
        events=events,
        callbacks=len(poster_log),
        # POST /jobs, GET events, POST ack.
        http_requests=3,
        # Three HTTP functions, one worker run, one callback invocation per event, and one
        # dispatcher invocation per commit (the most: commits close together share one).
        lambda_invocations=3 + 1 + events + len(life.dispatches),
        invocations=tuple(recorder.invocations),
        table_bytes=table_bytes,
        index_bytes=index_bytes,
        result_bytes=result_bytes,
        result_map_bytes=_as_map_bytes(job.result) if job.result is not None else 0,
        metric_series=frozenset(recorder.series),
        write_units_by_step=tuple(steps.items()),
    )


def _answered(recorder: Recorder, answer: Any) -> Any:
    """An HTTP function's answer, its body counted as egress."""
    body = answer[1] if isinstance(answer, tuple) else answer
    recorder.egress(len(json.dumps(body, separators=(",", ":")).encode("utf-8")))
    return answer


def stored_bytes(life: Life, job_id: str) -> tuple[int, int, int]:
    """The bytes the job's items and their index entries keep stored (each with DynamoDB's
    per-item overhead), read after its life; and its result item's size."""
    from jobstream.store import keys

    items = life.reader.query(
        TableName=life.table.name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.job_pk(job_id)}},
        ConsistentRead=True,
    )["Items"]
    table_bytes = sum(item_size(item) + ITEM_OVERHEAD_BYTES for item in items)
    index_bytes = 0
    for index in life.table.indexes:
        for item in items:
            entry = index.entry(item, life.table.key_names)
            if entry is not None:
                index_bytes += item_size(entry) + ITEM_OVERHEAD_BYTES
    result_bytes = sum(item_size(item) for item in items if item[keys.SK]["S"] == keys.RESULT_SK)
    return table_bytes, index_bytes, result_bytes


def _as_map_bytes(result: Mapping[str, Any]) -> int:
    """The result item's size with its result kept as a DynamoDB map (its keys, generation and
    expiry as written)."""
    from jobstream.store import keys
    from jobstream.store.codec import to_attribute, to_item

    item = to_item({keys.PK: "JOB#" + "j" * 36, keys.SK: keys.RESULT_SK})
    item |= to_item({"job_created_at": 10**12, keys.TTL_ATTRIBUTE: 10**9})
    return item_size({**item, "result": to_attribute(dict(result))})


def _copy(bill: Bill) -> Bill:
    return Bill(
        table_write_units=bill.table_write_units,
        index_write_units=dict(bill.index_write_units),
        read_units=bill.read_units,
        requests=dict(bill.requests),
        key_write_units=dict(bill.key_write_units),
        key_read_units=dict(bill.key_read_units),
    )


def _expect(holds: bool, what: str) -> None:
    if not holds:
        raise RuntimeError(f"bench: {what} did not happen; the cost measured would be wrong")


def table_from_template(template: Any, name: str) -> Table:
    """The template's one table as its parameters deploy it (jobstream_local's Template)."""
    (properties,) = template.tables().values()
    return Table.from_template(name, properties)


def measure_costs() -> tuple[list[JobCost], list[tuple[Invocation, ...]]]:
    """Both jobs' lives against moto in-process, billed; and the invocations of more lives of
    the 1-candidate job (its compute, for a median)."""
    import boto3
    from moto import mock_aws

    from jobstream.config.settings import DEFAULT_TARGETS_FILE, Settings, parse_api_tokens
    from jobstream.delivery.http import HttpResult
    from jobstream.queue import sqs_client
    from jobstream.store.client import dynamodb_client
    from jobstream.store.jobs import JobStore
    from jobstream_local.moto_patches import patch_moto
    from jobstream_local.resources import create_queues, create_tables
    from jobstream_local.template import Template

    patch_moto()
    posted: list[str] = []
    recorder = Recorder()

    def receiver(_target: Any, body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        posted.append(body.decode("utf-8"))
        recorder.egress(len(body))
        return HttpResult(204, "", None)

    with mock_aws():
        dynamodb_client.cache_clear()
        sqs_client.cache_clear()
        template = Template.load()
        tables = create_tables(template, boto3.client("dynamodb"), name_for=lambda _: TABLE_NAME)
        queues = create_queues(template, boto3.client("sqs"), name_for=lambda n: f"cost-{n}")
        settings = Settings(
            table_name=TABLE_NAME,
            api_tokens=parse_api_tokens("bench=bench-token"),
            targets_path=DEFAULT_TARGETS_FILE,
            work_queue_url=queues["WorkQueue"]["Ref"],
            callback_queue_url=queues["CallbackQueue"]["Ref"],
            callback_dead_letter_url=queues["CallbackDeadLetterQueue"]["Ref"],
        )
        dispatches: list[int] = []
        store = dispatching_store(TABLE_NAME)
        rt = recording_runtime(recorder)(
            settings=settings,
            store=store,
            resolver=lambda _host, _port: ["93.184.215.14"],
            poster=receiver,
        )
        store.dispatcher = dispatcher(rt, tables["JobsTable"]["StreamArn"], dispatches, recorder)
        table = table_from_template(template, TABLE_NAME)
        meter = BillingMeter(table, boto3.client("dynamodb"), key_kind=partition_kind)
        meter.attach(dynamodb_client())
        meter.attach(sqs_client(), "sqs")
        recorder.timed_client(dynamodb_client())
        recorder.timed_client(sqs_client())
        plain = boto3.client("dynamodb")
        life = Life(
            rt,
            meter,
            posted,
            dispatches,
            JobStore(TABLE_NAME, lambda: plain),
            recorder,
            table,
            plain,
        )
        return job_lifetime_costs(life), repeat_compute(life)


def recording_runtime(recorder: Recorder) -> Any:
    """The Runtime, noting each invocation that asks for the consumer registry (on AWS, a
    Secrets Manager read whenever its cache is cold)."""
    from jobstream.config.tenants import TenantRegistry
    from jobstream.runtime import Runtime

    class RecordingRuntime(Runtime):
        def tenants(self) -> TenantRegistry:
            recorder.registry_read()
            return super().tenants()

    return RecordingRuntime


def dispatching_store(table_name: str) -> Any:
    """The store, running `store.dispatcher` over the stream after each commit."""
    from jobstream.store.jobs import JobStore

    class DispatchingStore(JobStore):
        dispatcher: Any = None

        def create_job(self, *args: Any, **kwargs: Any) -> bool:
            created = super().create_job(*args, **kwargs)
            if self.dispatcher is not None:
                self.dispatcher()
            return created

        def append_event(self, *args: Any, **kwargs: Any) -> None:
            super().append_event(*args, **kwargs)
            if self.dispatcher is not None:
                self.dispatcher()

    return DispatchingStore(table_name)


def dispatcher(rt: Any, stream_arn: str, invocations: list[int], recorder: Recorder) -> Any:
    """A drain of the table's stream through the template's event source (its filter) into the
    dispatcher's service (what its handler calls), each batch one invocation of the
    DispatcherFunction (`recorder`); `invocations` counts its batches."""
    import threading

    import boto3

    from jobstream.service.dispatcher import dispatch_records
    from jobstream_local.streams import StreamPoller
    from jobstream_local.template import Template

    (source,) = Template.load().stream_sources()

    def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        invocations.append(len(event["Records"]))
        failed = recorder.run("DispatcherFunction", lambda: dispatch_records(rt, event["Records"]))
        return {"batchItemFailures": [{"itemIdentifier": number} for number in failed]}

    poller = StreamPoller(
        streams=boto3.client("dynamodbstreams"),
        stream_arn=stream_arn,
        function_name=source.function.name,
        handler=handler,
        batch_size=source.batch_size,
        filters=source.filters,
        stopping=threading.Event(),
        starting_position=source.starting_position,
    )
    return poller.drain


@dataclass(frozen=True)
class Added:
    """What a scenario adds to the plain 1-candidate job."""

    write_units: float
    read_units: float
    aws_calls: int


def added_by(costs: list[JobCost], scenario: str) -> Added | None:
    """What `scenario` adds to the same job without its feature; None when either is absent."""
    by_scenario = {cost.scenario: cost for cost in costs}
    with_it, plain = by_scenario.get(scenario), by_scenario.get("1-candidate result")
    if with_it is None or plain is None:
        return None
    return Added(
        with_it.bill.write_units - plain.bill.write_units,
        with_it.bill.read_units - plain.bill.read_units,
        with_it.aws_calls - plain.aws_calls,
    )


def _quota_lines(costs: list[JobCost]) -> list[str]:
    """What a tenant's quotas add to its job, against the same job without them."""
    quotas = added_by(costs, QUOTAS_SCENARIO)
    if quotas is None:
        return []
    added, calls = quotas.write_units, quotas.aws_calls
    return [
        "",
        f"Quotas (`{QUOTAS_SCENARIO}`): {added:+g} write units per job and {calls:+d} AWS calls:",
        "the tenant's counter item (`QUOTA#<tenant>`, store/quotas.py) moves with the job: the",
        "admission's job write becomes a transaction with the counter's conditional update (2",
        "units, and 1 more: the job's write billed twice), and so does the terminal commit's job",
        "write (the same 3), no request of its own. A tenant without quotas",
        "pays nothing (the first row). The first admission of a minute in a function instance",
        "may try once more (a cancelled transaction) when another instance started the window.",
    ]


def _resource_lines(costs: list[JobCost]) -> list[str]:
    """What a shared resource's slot and pace add to a job, against the same job without."""
    slot = added_by(costs, RESOURCE_SCENARIO)
    if slot is None:
        return []
    writes, reads, calls = slot.write_units, slot.read_units, slot.aws_calls
    return [
        "",
        f"A slot (`{RESOURCE_SCENARIO}`, a resource of {BENCH_RESOURCE['max_concurrent']} slots",
        f"and {BENCH_RESOURCE['per_minute']} requests a minute): {writes:+g} write units,",
        f"{reads:+g} read units and {calls:+d} AWS calls per job: the slot taken with its first",
        "source request's turn (a consistent read, then one conditional update of the resource's",
        "item, `RESOURCE#<name>`, that takes the slot and moves the pace: service/resources.py",
        "`take_slot`), the slot given back (another), the release's look for the oldest waiter",
        "(a consistent Query, nobody waiting), and a look at the back-off when the turn comes",
        "(a consistent read). A Pixiv job makes two source requests (the token",
        "refresh, one search page): one turn more (a consistent read and a compare-and-set).",
        "An unpaced resource reads its back-off eventually consistently instead (no write); a",
        "target without a resource pays nothing (the first row). A job that finds every slot",
        "held adds its wait: a waiter put and deleted, its `slot_wait` progress, one more try.",
    ]


def _every_feature_lines(costs: list[JobCost]) -> list[str]:
    """The job with every feature on, against the target and the plain job."""
    every = added_by(costs, EVERY_FEATURE_SCENARIO)
    by_scenario = {cost.scenario: cost for cost in costs}
    if every is None:
        return []
    units = by_scenario[EVERY_FEATURE_SCENARIO].bill.write_units
    verdict = "met" if units <= EVERY_FEATURE_TARGET_UNITS else "not met"
    return [
        "",
        f"Every feature on (`{EVERY_FEATURE_SCENARIO}`: a tenant with quotas, a target on the",
        f"paced resource, the feed and endpoint health as every job has them): {units:g} write",
        f"units, {every.write_units:+g} on the plain job, the quotas' and the slot's together.",
        f"Target: at most {EVERY_FEATURE_TARGET_UNITS}: {verdict}. What is left to take: the",
        "quota counter is exact because it moves inside the job's own writes (a transaction at",
        "admission and at the end); written on its own it would cost 2 units, not 6, but",
        "a crash or a retried write could then count a job twice or never, and a tenant's",
        "open-jobs quota would drift. The plain job's largest removable block is the claim's",
        "rewrite of its `tenant_jobs` entry (1 unit): the index projects `status`; an index",
        "projecting only what changes at admission and at the end would not be written by the",
        "claim, but a projection cannot change on a deployed table (a new index, built and",
        "swapped over two deployments, each of which may create or delete one index only).",
    ]


# What each step's write units buy (the 1-candidate job: bench/cost.py `_one_job`).
_STEP_PURPOSE: Final = {
    "admission": (
        "the job (describing its first event) and its `job.accepted` event, "
        "two single conditional writes; the job's `tenant_jobs` entry, the event's `feed` entry "
        "and its entry under the job's correlation id (`tenant_jobs`, written once: "
        "store/records.py), and the job's `JOB#ACTIVE` entry (the sweep finds an open job, "
        "and through it its callbacks)"
    ),
    "worker run": (
        "the claim with `job.started` (the job's update, then the event's put), the result's own "
        "item (its compressed JSON) and its `tenant_jobs` entry when it fits in 1 KB, the "
        "job's end, then its terminal event (two single writes; the job stays in `JOB#ACTIVE`, "
        "covering the event and its callback); each commit's "
        "`tenant_jobs` and `feed` entries. A run under 5 s writes no "
        "`job.progress`"
    ),
    "callbacks": (
        "one conditional write per delivered callback (a first attempt claims nothing), and, "
        "the terminal one delivered, the job leaving `JOB#ACTIVE` (its update and the entry)"
    ),
    "events page": "nothing (a read)",
    "ack": "the consumer's cursor (`#ACK`), one conditional write",
}


def _floor_lines(cost: JobCost) -> list[str]:
    """Where the plain job's write units go, and how far they are from the floor."""
    lines = [
        "",
        f"Where the write units of the `{cost.scenario}` job go, step by step (measured):",
        "",
        "| step | write units | what they buy |",
        "|---|---:|---|",
    ]
    for step, units in cost.write_units_by_step:
        lines.append(f"| {step} | {units:g} | {_STEP_PURPOSE.get(step, '')} |")
    lines += [
        "",
        "The floor: under the protocol's durability rules a job's life needs one item write per",
        "state change of the job, per event, for its result and its cursor, and one per delivery",
        "recorded: 11 write units for 3 events (3 job writes, 3 events, the result, the cursor, 3",
        f"deliveries), all of them table writes; this job's are {cost.bill.table_write_units:g}.",
        "What the rest buys: every commit is two single conditional writes, the job's then its",
        "event's, the job's write describing the event (store/pending.py), so a crash between",
        "the two loses nothing (I10); the job then stays among the sweep's open jobs until its",
        "terminal callback is delivered (the terminal event's and its callback's cover), and",
        "leaving them is one more write of the job (1 unit). The index entries: `tenant_jobs`",
        "holds what a Job document shows of a queued or finished job (3 entries: admission,",
        "claim, end) and a result that fits in 1 KB (1 more), so a page of them reads the index",
        "alone; a job with a correlation id has one entry under it, its first event's, written",
        "with the event (1: in `tenant_jobs`, under the correlation id's partition key); the feed",
        "holds every event once (3); the sweep's cover costs 2 (the job's `JOB#ACTIVE` entry in",
        "and out), whatever the number of events, unless a callback fails an attempt. Each",
        "`job.progress` (a run over 5 s: at most one per 5 s) adds its commit (2), its feed",
        "entry (1) and its delivery (1).",
        "The description costs a consistent read (1 unit) when a process appends to a job whose",
        "last event it did not write itself (the worker's claim), and, for a job open longer than",
        "the hand-off grace (60 s), half a read unit a sweep (a minute): its last event read in",
        "the sweep's batch, in case its writer died before writing it.",
    ]
    return lines


def report_lines(costs: list[JobCost]) -> list[str]:
    lines = [
        "## What one job costs",
        "",
        "One job as a consumer lives it: admitted with a `callback_url` (a correlation id and two",
        "short labels, as TelePost sends), run, every event delivered by callback, its stream",
        "paged once (`unacked=1`) and acknowledged once. Units by DynamoDB's billing rules applied",
        "to the items really written and read (`bench/billing.py`: transactions x2 (a quota",
        "counter's only), index writes",
        "by projection, strongly consistent reads 1 unit per 4 KB). Every AWS request is counted,",
        "the dispatcher's included: it runs after each commit, as Lambda invokes it for a lone",
        "commit (the most invocations and sends; commits close together share one batch). Lambda",
        "invocations: 3 HTTP requests, 1 worker run, 1 per callback, 1 dispatcher per commit.",
        "",
        (
            "| job | events | AWS calls (DynamoDB + SQS) | table write units | index write units | "
            "write units | read units | SQS sends | Lambda invocations |"
        ),
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for cost in costs:
        calls = sum(n for name, n in cost.bill.requests.items() if name.startswith("dynamodb:"))
        by_index = ", ".join(
            f"{name} {units:g}" for name, units in sorted(cost.bill.index_write_units.items())
        )
        lines.append(
            f"| {cost.scenario} | {cost.events} | {calls} + {cost.aws_calls - calls} | "
            f"{cost.bill.table_write_units:g} | "
            f"{sum(cost.bill.index_write_units.values()):g} ({by_index or '-'}) | "
            f"{cost.bill.write_units:g} | {cost.bill.read_units:g} | {cost.sqs_sends} | "
            f"{cost.lambda_invocations} |"
        )
    lines += [
        "",
        f"### Per million jobs (list prices, us-east-1, assumed as of {PRICES_AS_OF})",
        "",
        "| job | " + " | ".join(costs[0].dollars_per_million()) + " | total |",
        "|---|" + "---:|" * (len(costs[0].dollars_per_million()) + 1),
    ]
    for cost in costs:
        lines_by = cost.dollars_per_million()
        lines.append(
            f"| {cost.scenario} | "
            + " | ".join(f"${value:,.2f}" for value in lines_by.values())
            + f" | ${sum(lines_by.values()):,.2f} |"
        )
    lines += _floor_lines(costs[0])
    lines += _quota_lines(costs)
    lines += _resource_lines(costs)
    lines += _every_feature_lines(costs)
    prices = ", ".join(f"{name} ${price}" for name, price in PRICE_PER_MILLION.items())
    lines += [
        "",
        f"Prices per million: {prices}. These five lines are what the design's requests cost;",
        "the whole bill (Lambda time, logs, secrets, storage, egress, the fixed costs) follows.",
        "",
    ]
    return lines
