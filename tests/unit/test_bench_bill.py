"""The whole bill's arithmetic (bench/bill.py): each line from what was measured and assumed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from bench import assumptions as a
from bench.bill import Stack, cpu_factor, own_seconds, whole_bill
from bench.billing import Bill
from bench.cold_start import ColdImport
from bench.cost import JobCost
from bench.invocations import Invocation, Series
from jobstream_local.template import Template

CALLBACKS = "CallbacksFunction"
WORKER = "WorkerFunction"


@dataclass
class IdleSweep:
    round_trips: int = 9
    read_units: float = 32.5
    calls: list[str] = field(default_factory=lambda: ["Query"] * 64)
    metric_series: frozenset[Series] = frozenset({("sweep_duration_ms", (("service", "s"),))})


def _stack() -> Stack:
    return Stack.from_template(Template.load())


def _job(invocations: list[Invocation], series: frozenset[Series] = frozenset()) -> JobCost:
    return JobCost(
        scenario="1-candidate result",
        candidates=1,
        bill=Bill(table_write_units=10.0, read_units=4.0),
        events=4,
        callbacks=4,
        http_requests=3,
        lambda_invocations=len(invocations),
        invocations=tuple(invocations),
        table_bytes=3_000,
        index_bytes=1_000,
        metric_series=series,
    )


def _imports(seconds: float) -> list[ColdImport]:
    return [
        ColdImport(name, seconds, 1.0, 1.0, seconds, seconds, 1.0, seconds, seconds, 1.0)
        for name in ("callbacks", "worker")
    ]


def test_the_cpu_share_scales_compute_below_one_vcpu_only() -> None:
    assert cpu_factor(a.FULL_VCPU_MB) == 1.0
    assert cpu_factor(2 * a.FULL_VCPU_MB) == 1.0
    assert cpu_factor(a.FULL_VCPU_MB // 2) == pytest.approx(2.0, rel=0.01)


def test_compute_is_the_median_over_lives_per_function() -> None:
    runs = [
        [Invocation(WORKER, own_s=0.1), Invocation(WORKER, own_s=0.1)],
        [Invocation(WORKER, own_s=0.9)],
        [Invocation(WORKER, own_s=0.3)],
    ]
    assert own_seconds(runs) == {WORKER: pytest.approx(0.3)}


def test_duration_adds_each_call_and_each_callbacks_receiver() -> None:
    stack = _stack()
    job = _job([Invocation(CALLBACKS, calls=4, own_s=0.01, reads_registry=True)])
    bill = whole_bill(job, [], _imports(0.5), stack, IdleSweep())
    expected = (
        0.01 * cpu_factor(stack.memory_mb[CALLBACKS]) + 4 * a.AWS_CALL_S + a.CALLBACK_RECEIVER_S
    )
    assert bill.duration_s[CALLBACKS] == pytest.approx(expected)
    dollars = expected * stack.memory_mb[CALLBACKS] / 1024 * a.LAMBDA_GB_SECOND * 1_000_000
    assert bill.at_scale["Lambda duration"] == pytest.approx(dollars)


def test_secret_reads_are_capped_by_the_cache_at_scale_and_not_at_low_traffic() -> None:
    stack = _stack()
    job = _job([Invocation(CALLBACKS, reads_registry=True) for _ in range(4)])
    bill = whole_bill(job, [], _imports(0.5), stack, IdleSweep())
    per_call = a.PRICE_PER_MILLION[a.SECRETS_CALL] / 1_000_000
    assert bill.registry_reads == 4
    assert bill.low_traffic["Secrets Manager reads"] == pytest.approx(4 * 1_000_000 * per_call)
    # One warm environment reads once per cache age, whatever its traffic.
    reads = a.SECONDS_PER_MONTH / stack.registry_max_age_s
    at_scale = reads * per_call * 1_000_000 / a.JOBS_PER_MONTH
    assert bill.at_scale["Secrets Manager reads"] == pytest.approx(at_scale)


def test_every_invocation_starts_cold_at_low_traffic() -> None:
    stack = _stack()
    job = _job([Invocation(WORKER), Invocation(CALLBACKS), Invocation(CALLBACKS)])
    cold = whole_bill(job, [], _imports(0.5), stack, IdleSweep())
    slower = whole_bill(job, [], _imports(1.0), stack, IdleSweep())
    assert slower.low_traffic["Lambda INIT (cold starts)"] == pytest.approx(
        2 * cold.low_traffic["Lambda INIT (cold starts)"]
    )
    worker_gb_s = 0.5 * cpu_factor(stack.memory_mb[WORKER]) * stack.memory_mb[WORKER] / 1024
    callbacks_gb_s = (
        0.5 * cpu_factor(stack.memory_mb[CALLBACKS]) * stack.memory_mb[CALLBACKS] / 1024
    )
    expected = (worker_gb_s + 2 * callbacks_gb_s) * a.LAMBDA_GB_SECOND * 1_000_000
    assert cold.low_traffic["Lambda INIT (cold starts)"] == pytest.approx(expected)
    assert cold.at_scale["Lambda INIT (cold starts)"] < expected / 100


def test_all_in_adds_the_fixed_months_share() -> None:
    bill = whole_bill(_job([Invocation(WORKER)]), [], _imports(0.5), _stack(), IdleSweep())
    fixed = sum(bill.fixed_monthly.values())
    assert fixed > 0
    per_million = 1_000_000 / a.JOBS_PER_MONTH
    assert bill.all_in_at_scale == pytest.approx(sum(bill.at_scale.values()) + fixed * per_million)


def _log_bytes(stack: Stack, invocations: list[Invocation]) -> int:
    return whole_bill(_job(invocations), [], _imports(0.5), stack, IdleSweep()).log_bytes


def test_lambdas_own_lines_are_billed_only_where_the_platform_level_keeps_them() -> None:
    stack = _stack()
    assert stack.platform_log_level == "WARN"  # the template's default
    invocations = [Invocation(WORKER, log_bytes=300, log_events=1, log_events_untimed=1)]
    left_out = _log_bytes(stack, invocations)
    # The worker's EMF line, its event overhead and the timestamp Lambda may add; 3 access lines.
    own = 300 + a.LOG_EVENT_OVERHEAD_BYTES + a.ADDED_TIMESTAMP_BYTES
    assert left_out == own + 3 * (stack.access_log_bytes + a.LOG_EVENT_OVERHEAD_BYTES)
    for level in ("INFO", "DEBUG"):
        kept = _log_bytes(replace(stack, platform_log_level=level), invocations)
        platform = a.PLATFORM_LOG_BYTES + a.PLATFORM_LOG_EVENTS * a.LOG_EVENT_OVERHEAD_BYTES
        assert kept - left_out == platform


def test_custom_metrics_are_billed_for_the_series_a_healthy_hour_publishes() -> None:
    total = ("events_recorded", (("service", "s"),))
    by_type = ("events_recorded", (("service", "s"), ("type", "job.requested")))
    job = _job([Invocation(WORKER)], frozenset({total, by_type}))
    bill = whole_bill(job, [], _imports(0.5), _stack(), IdleSweep())
    (line,) = [name for name in bill.fixed_monthly if name.startswith("EMF custom metrics")]
    # The job's two series and the sweep's one, each a month of hours.
    assert bill.fixed_monthly[line] == pytest.approx(3 * a.CUSTOM_METRIC_MONTH)
    from jobstream.observability import METRICS

    assert f"the other {len(METRICS) - 2} metrics" in line
