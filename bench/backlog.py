"""`python -m bench.backlog`: what the sweep sends while 1,000 jobs wait for busy workers.

In-process (moto): 1,000 jobs are admitted and dispatched (the dispatcher's real sends to the
work queue), and no worker takes any of them (the workers are at their cap) for 10 minutes of a
fake clock: a sweep a minute. Counted: the work messages sent per job (the dispatcher's and the
sweep's: at most one copy each, sent on the job's age once its dispatch is older than the
re-dispatch bound, whatever the queue holds), against the rule before (every job still queued
60 s after its last dispatch sent again at every sweep); then 5 messages are lost (received and
deleted) and the drain of the backlog follows, a sweep a minute: every job ends up with a
message, the lost ones included.

Prints the figures and writes them as the "Backlog: the sweep's re-dispatch" section of
docs/load.md; exit status 1 when a criterion failed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from bench.billing import use_moto_credentials
from bench.fairness import report_section

SECTION: Final = "## Backlog: the sweep's re-dispatch"
JOBS: Final = 1_000
SWEEPS: Final = 10
LOST: Final = 5
MINUTE_MS: Final = 60_000


@dataclass
class Figures:
    jobs: int
    dispatched: int
    sweeps: int
    resent_during_backlog: int
    held_back: int
    rule_before: int
    lost: int
    resent_after_loss: int
    sweeps_to_recover: int
    unserved: int

    @property
    def sends_per_job(self) -> float:
        return (self.dispatched + self.resent_during_backlog) / self.jobs

    @property
    def sends_per_job_before(self) -> float:
        return (self.dispatched + self.rule_before) / self.jobs

    def passed(self) -> bool:
        # One copy a job at most: a re-dispatch bound (half the job's wait) passed in the backlog.
        return self.resent_during_backlog <= self.jobs and self.unserved == 0


def measure() -> Figures:
    use_moto_credentials()
    import boto3
    from moto import mock_aws

    from bench.cost import dispatcher
    from bench.invocations import Recorder
    from jobstream.config.settings import DEFAULT_TARGETS_FILE, Settings, parse_api_tokens
    from jobstream.queue import sqs_client
    from jobstream.runtime import Runtime
    from jobstream.service import admission
    from jobstream.service.sweep import sweep
    from jobstream.store.client import dynamodb_client
    from jobstream.store.jobs import JobStore
    from jobstream_local.moto_patches import patch_moto
    from jobstream_local.resources import create_queues, create_tables
    from jobstream_local.template import Template

    patch_moto()
    with mock_aws():
        dynamodb_client.cache_clear()
        sqs_client.cache_clear()
        template = Template.load()
        tables = create_tables(template, boto3.client("dynamodb"), name_for=lambda _: "backlog")
        queues = create_queues(template, boto3.client("sqs"), name_for=lambda n: f"backlog-{n}")
        work_url = queues["WorkQueue"]["Ref"]
        settings = Settings(
            table_name="backlog",
            api_tokens=parse_api_tokens("bench=bench-token"),
            targets_path=DEFAULT_TARGETS_FILE,
            work_queue_url=work_url,
            sweep_budget_ms=600_000,
        )
        clock = _Clock()
        rt = Runtime(settings=settings, store=JobStore("backlog"), clock=clock)
        sends = _count_sends(sqs_client())
        drain = dispatcher(rt, tables["JobsTable"]["StreamArn"], [], Recorder())
        for n in range(JOBS):
            task = {
                "protocol_version": "1",
                "job_type": "candidate_search",
                "idempotency_key": f"backlog-{n:05d}",
                "params": {"target_id": "demo-illustration"},
            }
            status, _ = admission.submit(rt, "bench", task, None)
            if status != 202:
                raise RuntimeError(f"admission answered {status}")
            if n % 100 == 99:
                drain()
        drain()
        dispatched = sends.messages
        resent = held = 0
        for _ in range(SWEEPS):
            clock.now += MINUTE_MS
            report = sweep(rt)
            resent += report.jobs_redispatched
            held += report.redispatches_held_back
        # The rule before: every queued job 60 s past its last dispatch, sent again each sweep.
        rule_before = JOBS * SWEEPS
        sqs = boto3.client("sqs")
        lost = _lose(sqs, work_url, LOST)
        served, resent_after, sweeps_to_recover = _drain_backlog(rt, sqs, work_url, clock, sweep)
        return Figures(
            jobs=JOBS,
            dispatched=dispatched,
            sweeps=SWEEPS,
            resent_during_backlog=resent,
            held_back=held,
            rule_before=rule_before,
            lost=lost,
            resent_after_loss=resent_after,
            sweeps_to_recover=sweeps_to_recover,
            unserved=JOBS - len(served),
        )


class _Clock:
    def __init__(self) -> None:
        import time

        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@dataclass
class _Sends:
    messages: int = 0


def _count_sends(client: Any) -> _Sends:
    counted = _Sends()

    def count(params: dict[str, Any], **_: Any) -> None:
        counted.messages += len(params.get("Entries", [])) or 1

    client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", count)
    client.meta.events.register("before-parameter-build.sqs.SendMessage", count)
    return counted


def _lose(sqs: Any, url: str, count: int) -> int:
    """Receive and delete `count` messages: lost, as a message SQS dropped would be."""
    lost = 0
    while lost < count:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count - lost).get(
            "Messages", []
        )
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            lost += 1
    return lost


def _drain_backlog(
    rt: Any, sqs: Any, url: str, clock: _Clock, sweep: Any
) -> tuple[set[str], int, int]:
    """Workers free up: each minute they take 250 messages (a job's message taken is the job
    served; its copies are no-ops), then the sweep runs. Until every job has been served."""
    import json

    served: set[str] = set()
    resent = 0
    minutes = 0
    while len(served) < JOBS and minutes < 30:
        minutes += 1
        taken = 0
        while taken < 250:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                break
            for message in messages:
                job_id = json.loads(message["Body"])["job_id"]
                if job_id not in served:
                    served.add(job_id)
                    _finish(rt, job_id)
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                taken += 1
        clock.now += MINUTE_MS
        resent += sweep(rt).jobs_redispatched
    return served, resent, minutes


def _finish(rt: Any, job_id: str) -> None:
    """The job served: cancelled here (the fastest way out of `queued`; the run is not measured)."""
    from jobstream.service import jobs

    record = rt.store.get_job_item(job_id)
    jobs.cancel(rt, record.tenant, job_id, None)


def report_lines(figures: Figures) -> list[str]:
    per_job = figures.jobs
    intro = (
        f"Written by `python -m bench.backlog` (in `make load`): {figures.jobs:,} jobs admitted "
        f"and dispatched, no worker free for {figures.sweeps} minutes (a sweep a minute), then "
        f"{figures.lost} messages lost and the backlog drained at 250 messages a minute."
    )
    rows = [
        ("the dispatcher", figures.dispatched),
        ("the sweep during the backlog", figures.resent_during_backlog),
        (
            "the rule before (every queued job 60 s past its dispatch, every sweep)",
            figures.rule_before,
        ),
        (
            f"the sweep after {figures.lost} messages were lost, until the backlog drained",
            figures.resent_after_loss,
        ),
    ]
    verdict = "PASS" if figures.passed() else "FAIL"
    summary = (
        f"Sends per job during the backlog: {figures.sends_per_job:.2f} (the rule before: "
        f"{figures.sends_per_job_before:.2f}); {figures.held_back:,} re-sends held back because "
        f"the queue held the jobs' messages and their dispatch was younger than the re-dispatch "
        f"bound (a copy each at most once it passed). Every job served in "
        f"{figures.sweeps_to_recover} minutes of drain, the {figures.lost} lost ones included: "
        f"{verdict} ({figures.unserved} never served)."
    )
    table = [f"| {what} | {sent:,} | {sent / per_job:.3f} |" for what, sent in rows]
    return [
        SECTION,
        "",
        intro,
        "",
        "| | work messages sent | per job |",
        "|---|---:|---:|",
        *table,
        "",
        summary,
        "",
    ]


def main() -> int:
    figures = measure()
    return report_section(report_lines(figures), SECTION, passed=figures.passed())


if __name__ == "__main__":
    sys.exit(main())
