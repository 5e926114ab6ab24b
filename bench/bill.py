"""The whole bill per million jobs: every line AWS charges for one job's life, and the fixed
monthly costs of a deployed stack, from what bench.cost measured, the cold starts bench.cold_start
measured, template.yaml, and bench.assumptions (prices and what cannot be measured here).

Two traffic levels: 1M jobs a month (0.39 a second: each function keeps a warm environment, the
registry is read once per cache age per environment, cold starts are the platform's recycling)
and low traffic (every invocation cold: a function that sees under one request a minute reads
the registry each time, one idle for more than some minutes starts cold each time).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench import assumptions as a
from bench.capacity import ENDPOINT_KIND
from bench.cold_start import ColdImport
from bench.cost import COMPUTE_RUNS, QUOTAS_SCENARIO, RESOURCE_SCENARIO, JobCost, added_by
from bench.invocations import Invocation, Series

HTTP_FUNCTIONS = frozenset({"AdmissionFunction", "JobsFunction", "EventsFunction", "AckFunction"})
# The functions whose invocations authenticate a request or sign a callback: they read the
# consumer registry (a Secrets Manager read when its cache is cold).
REGISTRY_READERS = HTTP_FUNCTIONS | {"CallbacksFunction"}
TARGET_PER_MILLION = 40.0  # dollars per million jobs at 1M jobs a month, every line
JOB_LINES = (
    "DynamoDB writes",
    "DynamoDB reads",
    "SQS",
    "Lambda requests",
    "HTTP API",
    "Lambda duration",
    "Lambda INIT (cold starts)",
    "CloudWatch Logs",
    "Secrets Manager reads",
    "DynamoDB storage",
    "DynamoDB PITR",
    "Data transfer out",
)


@dataclass(frozen=True)
class Stack:
    """What template.yaml sets that the bill depends on (parameters at their defaults)."""

    memory_mb: Mapping[str, int]  # by function logical id
    code: Mapping[str, str]  # function logical id -> its folder name under functions/
    retention_days: int
    log_retention_days: int
    registry_max_age_s: int
    alarms: int
    alarm_metrics: int  # an alarm on metric math is billed per metric it reads
    dashboards: int
    access_log_bytes: int  # one API access log line, its fields filled as they typically are
    queue_triggers: int
    platform_log_level: str  # Lambda's own lines kept (PlatformLogLevel's default)

    @property
    def platform_lines_kept(self) -> bool:
        return self.platform_log_level in a.PLATFORM_LOG_KEPT_AT

    @classmethod
    def from_template(cls, template: Any) -> Stack:
        document = template.document
        defaults = {
            name: spec.get("Default") for name, spec in document.get("Parameters", {}).items()
        }
        memory = int(document["Globals"]["Function"]["MemorySize"])
        functions = template.resources_of_type("AWS::Serverless::Function")
        api = next(iter(template.resources_of_type("AWS::Serverless::HttpApi").values()))
        access_format = api["AccessLogSettings"]["Format"]
        alarms = template.resources_of_type("AWS::CloudWatch::Alarm")
        return cls(
            memory_mb={
                name: int(props.get("MemorySize", memory)) for name, props in functions.items()
            },
            code={
                name: str(props["CodeUri"]).rsplit("/", 1)[-1] for name, props in functions.items()
            },
            retention_days=int(defaults["RetentionDays"]),
            log_retention_days=int(defaults["LogRetentionDays"]),
            registry_max_age_s=int(defaults["TenantsMaxAgeSeconds"]),
            alarms=len(alarms),
            alarm_metrics=sum(
                len([m for m in props.get("Metrics", []) if "MetricStat" in m]) or 1
                for props in alarms.values()
            ),
            dashboards=len(template.resources_of_type("AWS::CloudWatch::Dashboard")),
            access_log_bytes=_access_line_bytes(access_format),
            queue_triggers=len(template.queue_sources()),
            platform_log_level=str(defaults["PlatformLogLevel"]),
        )


def _access_line_bytes(access_format: str) -> int:
    """One access log line: each `$context` variable as long as a typical value (a request id,
    an IPv4 address, a time, a route, a status, sizes and latencies)."""
    import re

    typical = {
        "requestId": "Jh7aWhQ9IAMEVxQ=",
        "identity.sourceIp": "203.0.113.17",
        "requestTime": "04/Dec/2026:15:22:57 +0000",
        "routeKey": "POST /jobs",
        "status": "202",
        "responseLength": "1210",
        "responseLatency": "38",
        "integrationLatency": "35",
        "integrationErrorMessage": "-",
        "error.message": "-",
    }
    line = re.sub(r"\$context\.([A-Za-z.]+)", lambda m: typical.get(m.group(1), "-"), access_format)
    return len(line.encode("utf-8"))


def cpu_factor(memory_mb: int) -> float:
    """How much longer compute measured on one core takes at `memory_mb` (Lambda's CPU share)."""
    return max(1.0, a.FULL_VCPU_MB / memory_mb)


def gb_seconds(seconds: float, memory_mb: int) -> float:
    return seconds * memory_mb / 1024


@dataclass(frozen=True)
class Bill:
    """Dollars per million jobs, by line, at 1M jobs a month and at low traffic."""

    at_scale: dict[str, float]
    low_traffic: dict[str, float]
    fixed_monthly: dict[str, float]
    duration_s: dict[str, float]  # billed seconds per job, by function
    log_bytes: int
    egress_bytes: int
    registry_reads: int  # invocations per job that read the registry
    cold_start_s: dict[str, float]  # billed INIT + set-up seconds per cold start, by function

    def total(self, lines: Mapping[str, float]) -> float:
        return sum(lines.values())

    @property
    def all_in_at_scale(self) -> float:
        """Per million jobs at 1M jobs a month, the fixed monthly costs included."""
        return self.total(self.at_scale) + self.total(self.fixed_monthly) * (
            1_000_000 / a.JOBS_PER_MONTH
        )


def own_seconds(runs: Iterable[Iterable[Invocation]]) -> dict[str, float]:
    """The median over runs of each function's own compute per job."""
    per_run: list[dict[str, float]] = []
    for invocations in runs:
        totals: dict[str, float] = {}
        for invocation in invocations:
            totals[invocation.function] = totals.get(invocation.function, 0.0) + invocation.own_s
        per_run.append(totals)
    functions = {name for totals in per_run for name in totals}
    return {
        name: statistics.median(totals.get(name, 0.0) for totals in per_run) for name in functions
    }


def whole_bill(
    cost: JobCost,
    repeats: list[tuple[Invocation, ...]],
    imports: list[ColdImport],
    stack: Stack,
    idle_sweep: Any,
) -> Bill:
    invocations = cost.invocations
    own = own_seconds([invocations, *repeats])
    count = {name: sum(1 for i in invocations if i.function == name) for name in own}
    calls = {name: sum(i.calls for i in invocations if i.function == name) for name in own}
    duration = {
        name: own[name] * cpu_factor(stack.memory_mb[name])
        + calls[name] * a.AWS_CALL_S
        + (count[name] * a.CALLBACK_RECEIVER_S if name == "CallbacksFunction" else 0.0)
        for name in own
    }
    per_million = 1_000_000
    duration_dollars = (
        sum(gb_seconds(seconds, stack.memory_mb[name]) for name, seconds in duration.items())
        * a.LAMBDA_GB_SECOND
        * per_million
    )

    by_code = {row.function: row for row in imports}
    cold_start_s = {
        name: by_code[stack.code[name]].setup_cpu_seconds * cpu_factor(stack.memory_mb[name])
        for name in stack.memory_mb
        if stack.code[name] in by_code
    }

    def init_dollars(cold_starts: Mapping[str, float]) -> float:
        return (
            sum(
                gb_seconds(cold_start_s.get(name, 0.0), stack.memory_mb[name]) * starts
                for name, starts in cold_starts.items()
            )
            * a.LAMBDA_GB_SECOND
        )

    recycles = a.WARM_ENVIRONMENTS * a.SECONDS_PER_MONTH / a.ENVIRONMENT_LIFETIME_S
    init_at_scale = init_dollars(dict.fromkeys(stack.memory_mb, recycles)) * (
        per_million / a.JOBS_PER_MONTH
    )
    init_low = init_dollars({name: count[name] * per_million for name in count})

    readers = [i for i in invocations if i.function in REGISTRY_READERS or i.reads_registry]
    reader_counts: dict[str, int] = {}
    for invocation in readers:
        reader_counts[invocation.function] = reader_counts.get(invocation.function, 0) + 1
    reads_per_environment = a.SECONDS_PER_MONTH / stack.registry_max_age_s
    reads_at_scale = sum(
        min(n * a.JOBS_PER_MONTH, a.WARM_ENVIRONMENTS * reads_per_environment)
        for n in reader_counts.values()
    ) * (per_million / a.JOBS_PER_MONTH)
    secret_price = a.PRICE_PER_MILLION[a.SECRETS_CALL] / 1_000_000

    log_bytes = (
        sum(
            i.log_bytes
            + i.log_events * a.LOG_EVENT_OVERHEAD_BYTES
            + i.log_events_untimed * a.ADDED_TIMESTAMP_BYTES
            for i in invocations
        )
        + cost.lambda_invocations * platform_log_bytes(stack)
        + cost.http_requests * (stack.access_log_bytes + a.LOG_EVENT_OVERHEAD_BYTES)
    )
    logs = (
        log_bytes
        * per_million
        / a.GB
        * (
            a.CLOUDWATCH_LOGS_INGESTED_GB
            + a.LOG_STORED_SHARE * a.CLOUDWATCH_LOGS_STORED_GB_MONTH * stack.log_retention_days / 30
        )
    )
    months_kept = stack.retention_days / 30
    egress_bytes = (
        sum(i.egress_bytes for i in invocations)
        + (cost.http_requests + cost.callbacks) * a.HTTP_HEADER_BYTES
    )
    shared = {
        **cost.dollars_per_million(),
        "Lambda duration": duration_dollars,
        "CloudWatch Logs": logs,
        "DynamoDB storage": (cost.table_bytes + cost.index_bytes)
        * per_million
        / a.GB
        * months_kept
        * a.DYNAMODB_STORED_GB_MONTH,
        "DynamoDB PITR": cost.table_bytes
        * per_million
        / a.GB
        * months_kept
        * a.DYNAMODB_PITR_GB_MONTH,
        "Data transfer out": egress_bytes * per_million / a.GB * a.EGRESS_GB,
    }
    at_scale = {
        **shared,
        "Lambda INIT (cold starts)": init_at_scale,
        "Secrets Manager reads": reads_at_scale * secret_price,
    }
    low = {
        **shared,
        "Lambda INIT (cold starts)": init_low,
        "Secrets Manager reads": len(readers) * per_million * secret_price,
    }
    return Bill(
        at_scale={line: at_scale[line] for line in JOB_LINES},
        low_traffic={line: low[line] for line in JOB_LINES},
        fixed_monthly=fixed_monthly(stack, idle_sweep, hourly_series(cost, idle_sweep)),
        duration_s=duration,
        log_bytes=log_bytes,
        egress_bytes=egress_bytes,
        registry_reads=len(readers),
        cold_start_s=cold_start_s,
    )


def platform_log_bytes(stack: Stack) -> int:
    """Lambda's own lines an invocation adds to its log group, with their event overhead."""
    if not stack.platform_lines_kept:
        return 0
    return a.PLATFORM_LOG_BYTES + a.PLATFORM_LOG_EVENTS * a.LOG_EVENT_OVERHEAD_BYTES


def platform_lines_text(stack: Stack) -> str:
    kept = "kept" if stack.platform_lines_kept else "left out"
    return (
        f"Lambda's own start and report lines ({a.PLATFORM_LOG_BYTES} bytes an invocation) "
        f"{kept} at the template's PlatformLogLevel, {stack.platform_log_level}"
    )


def hourly_series(cost: JobCost, idle_sweep: Any) -> set[Series]:
    """Custom metrics published in every hour at 1M jobs a month (one job every ~2.6 s): those a
    job's life publishes (its counts, each per stack and per dimension value) and the sweep's,
    every minute. CloudWatch bills a custom metric by the hour, only for the hours it receives
    a value: the others (errors, retries, parked callbacks, resources) cost $0.30 / 730 for each
    hour in which they occur, nothing in a healthy hour."""
    return set(cost.metric_series) | set(idle_sweep.metric_series)


def fixed_monthly(stack: Stack, idle_sweep: Any, hourly: set[Series]) -> dict[str, float]:
    """What the stack costs a month with no job at all, and the custom metrics that a month
    of 1M jobs publishes every hour."""
    from jobstream.observability import METRICS

    occasional = len(set(METRICS) - {name for name, _ in hourly})
    minutes = a.SECONDS_PER_MONTH / 60
    sweep_memory = stack.memory_mb["ReconcileFunction"]
    sweep_seconds = idle_sweep.round_trips * a.AWS_CALL_S
    # Lambda's SQS pollers long-poll each triggered queue: about 5 pollers, a 20 s wait each.
    empty_receives = stack.queue_triggers * 5 * 3 * minutes
    return {
        "the consumer registry's secret": a.SECRET_MONTH,
        f"CloudWatch alarms ({stack.alarms}, on {stack.alarm_metrics} metrics)": (
            stack.alarm_metrics * a.ALARM_MONTH
        ),
        (
            f"EMF custom metrics (at 1M jobs a month, {len(hourly)} series published every "
            f"hour; the other {occasional} metrics are billed only for the hours they occur in)"
        ): len(hourly) * a.CUSTOM_METRIC_MONTH,
        f"CloudWatch dashboard ({stack.dashboards})": stack.dashboards * a.DASHBOARD_MONTH,
        (
            f"the sweep every minute, idle ({idle_sweep.read_units:g} read units, "
            f"{len(idle_sweep.calls)} calls)"
        ): minutes
        * (
            idle_sweep.read_units * a.PRICE_PER_MILLION[a.READ_UNIT] / 1_000_000
            + a.PRICE_PER_MILLION[a.LAMBDA_REQUEST] / 1_000_000
            + gb_seconds(sweep_seconds, sweep_memory) * a.LAMBDA_GB_SECOND
            + (platform_log_bytes(stack) / a.GB) * a.CLOUDWATCH_LOGS_INGESTED_GB
        ),
        f"SQS empty receives ({stack.queue_triggers} triggered queues)": empty_receives
        * a.PRICE_PER_MILLION[a.SQS_REQUEST]
        / 1_000_000,
    }


def feature_lines(costs: list[JobCost]) -> list[str]:
    """What each optional feature adds to one job, measured against the same job without it."""
    by_scenario = {cost.scenario: cost for cost in costs}
    plain = by_scenario["1-candidate result"]
    quotas = added_by(costs, QUOTAS_SCENARIO)
    write_price = a.PRICE_PER_MILLION[a.WRITE_UNIT]
    read_price = a.PRICE_PER_MILLION[a.READ_UNIT]
    feed_units = plain.bill.index_write_units.get("feed", 0.0)
    endpoint_reads = plain.bill.key_read_units.get(ENDPOINT_KIND, 0.0)
    endpoint_writes = sum(
        units for (_, kind), units in plain.bill.key_write_units.items() if kind == ENDPOINT_KIND
    )
    endpoint_dollars = endpoint_reads * read_price + endpoint_writes * write_price
    lines = [
        "| feature | what it adds to a 1-candidate job | per million jobs |",
        "|---|---|---:|",
    ]
    if quotas is not None:
        added = quotas.write_units
        lines.append(
            f"| quotas (a tenant with quotas) | {added:+g} write units (its counter, in a "
            "transaction with the admission's job write and with the terminal commit's, each of "
            f"which it bills twice) | ${added * write_price:,.2f} |"
        )
    lines += [
        (
            f"| feed (every tenant: the `feed` index) | {feed_units:g} index write units, one "
            "entry "
            f"per protocol event | ${feed_units * write_price:,.2f} |"
        ),
        (
            f"| endpoint health (every callback) | {endpoint_reads:g} read units and "
            f"{endpoint_writes:g} write units while the endpoint is healthy (its health item read "
            f"with each delivery, written only on a transition) | ${endpoint_dollars:,.2f} |"
        ),
    ]
    slot = added_by(costs, RESOURCE_SCENARIO)
    if slot is not None:
        writes, reads = slot.write_units, slot.read_units
        lines.append(
            f"| resource slots (a target on a paced resource) | {writes:+g} write units, "
            f"{reads:+g} read units (its slot taken with its first request's turn, "
            "and given back) | "
            f"${writes * write_price + reads * read_price:,.2f} |"
        )
    return lines


def _wrapped(paragraphs: Iterable[str]) -> list[str]:
    """Markdown bullets, wrapped as the rest of the report is."""
    import textwrap

    lines: list[str] = []
    for paragraph in paragraphs:
        lines += textwrap.wrap(f"- {paragraph}", width=92, subsequent_indent="  ")
    return lines


def _short(function: str) -> str:
    return function.removesuffix("Function").lower()


def _notes(bill: Bill, costs: list[JobCost], stack: Stack) -> list[str]:
    """How each line of the bill is counted, with the figures it rests on."""
    durations = ", ".join(
        f"{_short(name)} {seconds:.3f} s ({stack.memory_mb[name]} MB)"
        for name, seconds in sorted(bill.duration_s.items())
    )
    waiting = gb_seconds(1, stack.memory_mb["WorkerFunction"]) * a.LAMBDA_GB_SECOND * 1e6
    cold = ", ".join(
        f"{_short(name)} {seconds:.2f} s" for name, seconds in sorted(bill.cold_start_s.items())
    )
    first = costs[0]
    return [
        "DynamoDB, SQS, Lambda requests, HTTP API: the tables above (measured requests and units).",
        (
            "Lambda duration: each invocation of the life run in-process (bench/invocations.py): "
            "its "
            "own compute is its CPU time less the time inside AWS calls and less the invocations "
            "it "
            f"set off, the median of {COMPUTE_RUNS} lives, scaled by {a.FULL_VCPU_MB:,} MB / the "
            "function's memory (Lambda's CPU share; this machine's core taken as one vCPU), plus "
            f"{a.AWS_CALL_S * 1000:.0f} ms per AWS call and {a.CALLBACK_RECEIVER_S * 1000:.0f} ms "
            f"per callback for the receiver's answer. Billed seconds per job: {durations}. A job "
            "type's own waits (a real source's HTTP requests) are not in it: each second of them "
            f"costs ${waiting:,.2f} per million jobs."
        ),
        (
            "Lambda INIT: a cold start bills the import (INIT) and, in its first invocation, the "
            "set-up (the cold-start table below: their median CPU seconds here, scaled as above, "
            "an upper "
            f"bound if Lambda gives INIT more CPU): {cold}. At 1M jobs a month "
            f"{a.WARM_ENVIRONMENTS} warm environment per function, recycled every "
            f"{a.ENVIRONMENT_LIFETIME_S / 3600:g} h; at low traffic every invocation."
        ),
        (
            f"CloudWatch Logs: {bill.log_bytes:,} bytes ingested per job: what the life's "
            "invocations wrote (EMF metrics on stdout, JSON log lines on stderr, at Powertools' "
            "INFO: "
            f"the template sets no level; {a.ADDED_TIMESTAMP_BYTES} bytes more on each EMF line, "
            "for the timestamp Lambda's JSON log format may add to it), "
            f"{platform_lines_text(stack)}, "
            f"one API access line per HTTP request ({stack.access_log_bytes} "
            f"bytes, the template's format), {a.LOG_EVENT_OVERHEAD_BYTES} bytes per event; "
            f"${a.CLOUDWATCH_LOGS_INGESTED_GB}/GB ingested, and {a.LOG_STORED_SHARE:.0%} of it "
            f"stored {stack.log_retention_days} days at "
            f"${a.CLOUDWATCH_LOGS_STORED_GB_MONTH}/GB-month."
        ),
        (
            f"Secrets Manager: {bill.registry_reads} invocations of a job read the consumer "
            "registry "
            "(each HTTP request authenticates against it, each callback signs with it); a read is "
            "a "
            f"call when its cache (JOBSTREAM_TENANTS_MAX_AGE_S, {stack.registry_max_age_s} s) is "
            f"cold: at 1M jobs a month once per {stack.registry_max_age_s} s per warm environment, "
            "at low traffic every one."
        ),
        (
            f"Storage: the job's items and index entries ({first.table_bytes:,} + "
            f"{first.index_bytes:,} bytes, {a.ITEM_OVERHEAD_BYTES} bytes of overhead each) kept "
            f"{stack.retention_days} days (JOBSTREAM_RETENTION_DAYS) at "
            f"${a.DYNAMODB_STORED_GB_MONTH}/GB-month; PITR on the table's bytes (not its global "
            f"indexes) at ${a.DYNAMODB_PITR_GB_MONTH}/GB-month."
        ),
        (
            f"Data transfer out: {bill.egress_bytes:,} bytes per job (the HTTP responses' and the "
            f"callbacks' bodies, measured, and {a.HTTP_HEADER_BYTES} bytes of headers each) at "
            f"${a.EGRESS_GB}/GB."
        ),
        (
            f'Fixed: the sweep\'s idle run ("sweep: idle" below) every minute, billed as its round '
            f"trips x {a.AWS_CALL_S * 1000:.0f} ms; Lambda's SQS pollers long-poll each triggered "
            "queue (about 5 pollers, 20 s waits: empty receives are billed); alarms and the "
            "dashboard as the template declares them."
        ),
    ]


def report_lines(bill: Bill, costs: list[JobCost], stack: Stack) -> list[str]:
    fixed = bill.total(bill.fixed_monthly)
    return [
        "## The whole bill",
        "",
        "Every line AWS charges for the 1-candidate job above, per million jobs, at 1M jobs a",
        "month and at low traffic (every invocation cold: a function that sees under one",
        "request a minute reads the registry each time; one idle for more than some minutes",
        f"starts cold each time), at list prices as of {a.PRICES_AS_OF}. Every assumption is",
        "in one place, bench/assumptions.py; how each line is counted follows the tables.",
        "",
        "| line | at 1M jobs a month | at low traffic |",
        "|---|---:|---:|",
        *[
            f"| {line} | ${bill.at_scale[line]:,.2f} | ${bill.low_traffic[line]:,.2f} |"
            for line in JOB_LINES
        ],
        (
            f"| **every line, per million jobs** | **${bill.total(bill.at_scale):,.2f}** | "
            f"**${bill.total(bill.low_traffic):,.2f}** |"
        ),
        (
            f"| the fixed ${fixed:,.2f} a month, spread over 1M jobs | "
            f"${fixed * 1_000_000 / a.JOBS_PER_MONTH:,.2f} | - |"
        ),
        f"| **with the fixed costs** | **${bill.all_in_at_scale:,.2f}** | - |",
        "",
        (
            f"Target: every line, per million jobs, at most ${TARGET_PER_MILLION:,.0f} at 1M "
            "jobs a month: "
            f"{'met' if bill.total(bill.at_scale) <= TARGET_PER_MILLION else 'NOT met'}. The fixed"
        ),
        "costs come each month whatever the traffic (the table below); spread over 1M jobs they",
        "add the row above.",
        "",
        "Fixed monthly costs (no job at all):",
        "",
        "| item | $ a month |",
        "|---|---:|",
        *[f"| {item} | ${value:,.2f} |" for item, value in bill.fixed_monthly.items()],
        "",
        *_wrapped(_notes(bill, costs, stack)),
        "",
        "### Per feature",
        "",
        *feature_lines(costs),
        "",
    ]
