"""Transient AWS failures end to end: a finished job's outcome is never thrown away, and an HTTP
route answers a transient cause with a retryable 503, never `500 retryable: false`."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from jobstream import observability
from jobstream.deadline import ANSWER_MARGIN_MS
from jobstream.jobtypes import runner
from jobstream.protocol.errors import Reason
from jobstream.queue import sqs_client
from jobstream.retries import RetryPolicy, default_policy
from jobstream.runtime import Runtime
from jobstream.service import admission, completion, execution
from jobstream.service.sweep import sweep
from jobstream.store import budgets, keys
from tests.support.dispatch import dispatch_stream
from tests.support.fat import result_of
from tests.support.faults import KINDS, REFUSAL, Faults, injected
from tests.support.harness import Api, _http_api, canonical_task
from tests.support.lambda_events import lambda_context, queue_handler, received_sqs_event
from tests.support.validation import validate_error

FOREVER = 10_000


def _worker() -> Any:
    return queue_handler("WorkQueue")


def _work_event(rt: Runtime) -> tuple[str, dict[str, Any]]:
    """A job admitted and its work message as the worker's SQS event carries it."""
    task = canonical_task(callback_url=None)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    job_id = admission.submit(rt, "acme", task, None)[1]["job"]["job_id"]
    dispatch_stream(rt)
    (message,) = boto3.client("sqs").receive_message(
        QueueUrl=rt.settings.work_queue_url or "", MaxNumberOfMessages=10
    )["Messages"]
    return job_id, received_sqs_event(message)


def _completion_failing(times: int, kind: str = "conflict") -> Faults:
    """The job's completion transaction fails `times` times in a row (with `kind`)."""
    return Faults(kinds=(kind,), at=1, times=times, matching="job.outcome_succeeded")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """Every metric counted, with its dimension (the handlers flush what they count)."""
    seen: list[tuple[str, str | None]] = []
    real = observability.count

    def count(name: str, value: int = 1, *, dimension: str | None = None) -> None:
        seen.extend([(name, dimension)] * value)
        real(name, value, dimension=dimension)

    monkeypatch.setattr(observability, "count", count)
    return seen


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The job ids the executor ran for."""
    ran: list[str] = []
    real = runner.run_job

    def counted(targets: Any, record: Any, context: Any) -> Any:
        ran.append(record.job_id)
        return real(targets, record, context)

    monkeypatch.setattr(execution, "run_job", counted)
    return ran


# ------------------------------------------------------------------------- item 1: completion


@pytest.mark.parametrize("kind", KINDS)
def test_a_completion_cancelled_by_a_race_or_throttled_is_retried(
    wrt: Runtime, kind: str, retries_without_sleeping: list[float]
) -> None:
    """DynamoDB cancels the completion (it raced the heartbeat's write to the job) or
    throttles it, a few times: the retries land it, with its result."""
    job_id, event = _work_event(wrt)
    faults = _completion_failing(times=3, kind=kind)
    with injected(faults):
        assert _worker()(event, None) == {"batchItemFailures": []}
    assert faults.fired == 3
    record = wrt.store.get_job(job_id)
    assert record is not None
    assert record.status == "succeeded"
    assert record.result is not None
    assert record.result["candidates"]
    # Bounded, jittered, growing waits between the tries (the test's policy records them).
    assert len(retries_without_sleeping) == 3
    assert retries_without_sleeping == sorted(retries_without_sleeping)


def _new_container(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker's process kept in memory is gone (the message reaches another one)."""
    monkeypatch.setattr(completion, "kept_in_process", type(completion.kept_in_process)())


def test_a_completion_outlasting_the_retries_lands_from_the_redelivered_message(
    wrt: Runtime, runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The completion still fails after the retries: the run gives the job up (its lease ends,
    its result is in its item), the work message is a batch item failure and comes back soon;
    its redelivery, in another process, lands the same outcome without running the job again."""
    job_id, event = _work_event(wrt)
    faults = _completion_failing(times=FOREVER)
    with injected(faults):
        result = _worker()(event, None)
    message_id = event["Records"][0]["messageId"]
    assert result == {"batchItemFailures": [{"itemIdentifier": message_id}]}
    assert "sqs.ChangeMessageVisibility" in faults.operations  # back in 20 s, not 90 minutes
    kept = wrt.store.get_job_item(job_id)
    assert kept is not None
    assert kept.status == "running"
    assert not kept.lease_active(wrt.clock())  # released: whoever comes next may land it
    stored = wrt.store.get_result(kept)
    assert stored is not None
    assert runs == [job_id]

    _new_container(monkeypatch)
    assert _worker()(event, None) == {"batchItemFailures": []}  # SQS delivers it again
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert done.status == "succeeded"
    assert done.result == stored
    assert done.pending_reason is None
    assert runs == [job_id]  # not run again
    events, _ = wrt.store.events_after(job_id, 0, 50)
    assert [e.kind for e in events].count("job.outcome_succeeded") == 1


def test_a_deferred_result_at_its_budget_is_landed_whole_by_another_process(
    wrt: Runtime, runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result at its 128 KiB budget whose text JSON would escape six times over (control
    characters): its deferred completion keeps it as it is stored (its own item, sized as
    written), never as text on the job item (768 KiB: refused, and the outcome lost), and a
    redelivery to a new process lands it whole without running the job again."""
    result = result_of(budgets.RESULT_BYTES, "\x01")
    monkeypatch.setattr(execution, "run_job", _runs_to(runs, result))
    job_id, event = _work_event(wrt)
    with injected(_completion_failing(times=FOREVER)):
        assert _worker()(event, None)["batchItemFailures"]
    _new_container(monkeypatch)
    assert _worker()(event, None) == {"batchItemFailures": []}
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert (done.status, done.result) == ("succeeded", result)
    assert runs == [job_id]


def _runs_to(runs: list[str], result: dict[str, Any]) -> Any:
    """An executor that finds `result` (and records that it ran)."""

    def run(targets: Any, record: Any, context: Any) -> runner.Outcome:
        runs.append(record.job_id)
        return runner.Outcome(result=result)

    return run


def test_a_completion_refused_fails_the_job_at_once(
    wrt: Runtime, runs: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """DynamoDB refuses the completion for good (ValidationException): the job fails
    `internal_error` at once, the refusal logged; no batch item failure, no second run."""
    job_id, event = _work_event(wrt)
    faults = Faults(kinds=(REFUSAL,), at=1, matching="job.outcome_succeeded")
    with injected(faults):
        assert _worker()(event, None) == {"batchItemFailures": []}
    assert faults.fired == 1
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert (done.status, done.reason, done.result) == ("failed", "internal_error", None)
    events, _ = wrt.store.events_after(job_id, 0, 50)
    kinds = [e.kind for e in events]
    assert kinds.count("job.outcome_failed") == 1
    assert "job.outcome_succeeded" not in kinds
    assert runs == [job_id]
    refused = [r for r in caplog.records if r.getMessage().startswith("completion refused")]
    assert refused
    assert refused[0].exc_info is not None


def test_an_outcome_kept_only_in_the_process_is_landed_without_running_again(
    wrt: Runtime, runs: list[str]
) -> None:
    """Neither the result nor the end of the lease could be written: the redelivery that
    reaches the same process still lands the outcome without a second run."""
    job_id, event = _work_event(wrt)
    result_fails = Faults(kinds=("throughput",), at=1, times=FOREVER, matching=keys.RESULT_SK)
    keeping_fails = Faults(kinds=("throughput",), at=1, times=FOREVER, matching=":released")
    # Both at once: the PutItem of the result and the UpdateItem that ends the lease.
    with injected(_Both(result_fails, keeping_fails)):
        _worker()(event, None)
    kept = wrt.store.get_job_item(job_id)
    assert kept is not None
    assert kept.status == "running"
    assert kept.lease_active(wrt.clock())
    assert wrt.store.get_result(kept) is None
    assert _worker()(event, None) == {"batchItemFailures": []}
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert done.status == "succeeded"
    assert runs == [job_id]


class _Both:
    """Two fault plans on the same calls."""

    def __init__(self, *plans: Faults) -> None:
        self.plans = plans

    def before(self, **kwargs: Any) -> None:
        for plan in self.plans:
            plan.before(**kwargs)

    def after(self, **kwargs: Any) -> None:
        for plan in self.plans:
            plan.after(**kwargs)


def test_the_sweep_lands_a_kept_outcome_instead_of_a_stall_verdict(
    wrt: Runtime, runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No redelivery manages it (the queue gave up): the sweep ends the job with its kept
    outcome, not `expired`, whenever it comes."""
    job_id, event = _work_event(wrt)
    with injected(_completion_failing(times=FOREVER)):
        _worker()(event, None)
    _new_container(monkeypatch)
    wrt.clock.advance(wrt.settings.stall_timeout_ms + wrt.settings.lease_ms)  # type: ignore[attr-defined]
    report = sweep(wrt)
    assert report.outcomes_landed == 1
    assert report.expired[Reason.STALLED_NO_HEARTBEAT] == 0
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert done.status == "succeeded"
    assert done.result is not None
    assert runs == [job_id]


def test_a_kept_failure_is_landed_by_the_sweep(
    wrt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure's completion deferred: its reason and message wait on the job (small), and the
    sweep ends the job with them."""
    job_id, event = _work_event(wrt)
    monkeypatch.setattr(
        execution, "run_job", lambda *_: runner.Outcome(reason=Reason.NO_CANDIDATE, message="none")
    )
    faults = Faults(kinds=("conflict",), at=1, times=FOREVER, matching="job.outcome_failed")
    with injected(faults):
        assert _worker()(event, None)["batchItemFailures"]
    kept = wrt.store.get_job_item(job_id)
    assert kept is not None
    assert (kept.status, kept.pending_reason, kept.pending_message) == (
        "running",
        "no_candidate",
        "none",
    )
    _new_container(monkeypatch)
    assert sweep(wrt).outcomes_landed == 1
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert (done.status, done.reason, done.reason_message) == ("failed", "no_candidate", "none")
    assert (done.pending_reason, done.pending_message) == (None, None)


def test_a_live_lease_keeps_the_sweep_from_landing_a_stored_result(wrt: Runtime) -> None:
    """A run stored its result and is completing (or died before it could): while its lease is
    live the sweep leaves the job to it; once the lease has lapsed, the sweep lands the result
    (the job does not wait for a stall verdict)."""
    job_id, _ = _work_event(wrt)
    claimed = execution.claim(wrt, job_id, "worker-1")
    assert claimed is not None
    result = {"candidates": [], "scanned": 2, "filtered": []}
    wrt.store.put_result(claimed, result, expires_at=10**10)
    assert sweep(wrt).outcomes_landed == 0
    record = wrt.store.get_job(job_id)
    assert record is not None
    assert record.status == "running"
    wrt.clock.advance(wrt.settings.lease_ms)  # type: ignore[attr-defined]
    assert sweep(wrt).outcomes_landed == 1
    done = wrt.store.get_job(job_id)
    assert done is not None
    assert (done.status, done.result) == ("succeeded", result)


def test_a_lost_claim_answer_resumes_the_claim(wrt: Runtime, runs: list[str]) -> None:
    """The claim was written and its answer lost; the retry is refused by the claim's own
    condition: the worker recognises its claim and runs the job (not `not-claimed`)."""
    job_id, event = _work_event(wrt)
    faults = Faults(
        kinds=("internal",), mode="after", at=1, times=1, matching="job.execution_started"
    )
    with injected(faults):
        assert _worker()(event, None) == {"batchItemFailures": []}
    assert faults.fired == 1
    record = wrt.store.get_job(job_id)
    assert record is not None
    assert record.status == "succeeded"
    assert runs == [job_id]


def test_a_claim_written_whose_answer_never_came_is_resumed_after_its_lease(
    wrt: Runtime, runs: list[str]
) -> None:
    """The claim was written but its answer lost and every retry refused: the invocation fails
    holding a lease it does not know of. Its message comes back once that lease has lapsed
    (not after the queue's 90 minutes, when the stall verdict would have ended the job), and
    resumes the job's one execution."""
    job_id, event = _work_event(wrt)
    faults = Faults(
        kinds=("internal",),
        mode="after",
        at=1,
        times=default_policy().attempts,
        matching="job.execution_started",
    )
    visibility: list[int] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        visibility.append(params["VisibilityTimeout"])

    sqs = sqs_client()
    sqs.meta.events.register("provide-client-params.sqs.ChangeMessageVisibility", seen, "seen")
    try:
        with injected(faults):
            assert _worker()(event, None)["batchItemFailures"]
    finally:
        sqs.meta.events.unregister(
            "provide-client-params.sqs.ChangeMessageVisibility", unique_id="seen"
        )
    back_in_ms = wrt.settings.lease_ms + execution.COMPLETION_RETRY_DELAY_MS
    assert visibility == [back_in_ms // 1000]
    assert back_in_ms < wrt.settings.stall_timeout_ms
    held = wrt.store.get_job_item(job_id)
    assert held is not None
    assert held.status == "running"
    assert runs == []
    wrt.clock.advance(back_in_ms)  # type: ignore[attr-defined]
    assert _worker()(event, None) == {"batchItemFailures": []}
    done = wrt.store.get_job(job_id)
    assert done is not None
    # The claim written without an answer was attempt 1; the run that took it over, 2.
    assert (done.status, done.attempt) == ("succeeded", 2)
    assert runs == [job_id]


def test_a_lost_take_over_answer_resumes_the_job(wrt: Runtime, runs: list[str]) -> None:
    """Taking over a job whose worker died was written and its answer lost; the retry is
    refused by the take-over's own write: the worker recognises it and runs the job."""
    job_id, event = _work_event(wrt)
    assert execution.claim(wrt, job_id, "worker-a") is not None
    wrt.clock.advance(wrt.settings.lease_ms)  # type: ignore[attr-defined]
    faults = Faults(kinds=("internal",), mode="after", at=1, times=1, matching=":lease_deadline")
    with injected(faults):
        assert _worker()(event, None) == {"batchItemFailures": []}
    assert faults.fired == 1
    record = wrt.store.get_job(job_id)
    assert record is not None
    # The worker that died held attempt 1; the take-over whose answer was lost runs 2.
    assert (record.status, record.attempt) == ("succeeded", 2)
    assert runs == [job_id]


def test_a_lost_completion_answer_is_its_own_completion(
    wrt: Runtime, counted: list[tuple[str, str | None]]
) -> None:
    """The completion was written and its answer lost; the retry is refused by its own write:
    reported (and counted) once as the outcome it is, not as a lost race."""
    _job_id, event = _work_event(wrt)
    faults = Faults(kinds=("internal",), mode="after", at=1, matching="job.outcome_succeeded")
    with injected(faults):
        outcome = execution.handle_work_message(wrt, event["Records"][0]["body"], "m-1")
    assert outcome == "succeeded"
    assert faults.fired == 1
    assert counted.count(("jobs_succeeded", None)) == 1


# --------------------------------------------------------------------------- item 2: the API


def _routes(job_id: str) -> dict[str, tuple[str, str, Any]]:
    return {
        "POST /jobs": ("POST", "/jobs", canonical_task(idempotency_key="another-key")),
        "GET /jobs": ("GET", "/jobs", None),
        "GET /jobs by key": ("GET", "/jobs?idempotency_key=another-key", None),
        "GET /jobs/{job_id}": ("GET", f"/jobs/{job_id}", None),
        "GET /jobs/{job_id}/events": ("GET", f"/jobs/{job_id}/events", None),
        "POST /jobs/{job_id}/events/ack": (
            "POST",
            f"/jobs/{job_id}/events/ack",
            {"ack_through": f"evt-{1}-1"},
        ),
        "POST /jobs/{job_id}/cancel": ("POST", f"/jobs/{job_id}/cancel", None),
    }


ROUTES = sorted(_routes("x"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", ROUTES)
def test_a_transient_cause_on_every_route_answers_a_retryable_503(
    rt: Runtime, api: Api, route: str, kind: str, counted: list[tuple[str, str | None]]
) -> None:
    """Every DynamoDB call of the route fails with `kind` through all the retries: a 503
    `resource_busy` envelope, `retryable: true`, with Retry-After; the same request succeeds
    once the cause is gone."""
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    method, target, body = _routes(job_id)[route]
    counted.clear()
    with injected(Faults(kinds=(kind,), at=1, times=FOREVER)):
        response = api.call(method, target, body)
    assert response.status == 503, response.body
    validate_error(response.body)
    assert response.body["error"]["code"] == "resource_busy"
    assert response.body["error"]["retryable"] is True
    assert response.headers["retry-after"] == "2"
    assert ("rejected", "resource_busy") in counted
    exhausted = [dimension for name, dimension in counted if name == "aws_retries_exhausted"]
    # One call gives up, or (a listing reads its shards at once) each call in flight.
    assert len(exhausted) == 1 or (route == "GET /jobs" and len(exhausted) >= 1)
    assert api.call(method, target, body).status < 300


def test_a_request_with_less_time_left_than_one_aws_attempt_is_a_503_at_once(
    rt: Runtime, api: Api
) -> None:
    """The HTTP shell hands the invocation's remaining time to the clients: with less left than
    one attempt may take (a hung connection's timeouts), no call starts, and the answer is a
    retryable 503 before Lambda's timeout, never a cut-off invocation."""
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    gateway = _http_api()
    bound, parameters = gateway.match("GET", f"/jobs/{job_id}") or (None, {})
    assert bound is not None
    event = gateway.event(
        method="GET",
        target=f"/jobs/{job_id}",
        headers={"host": api.host, "authorization": f"Bearer {api.token}"},
        body=b"",
        route=bound,
        parameters=parameters,
    )
    short = RetryPolicy().attempt_ms + ANSWER_MARGIN_MS - 100
    response = bound.handler(event, lambda_context("jobs", remaining_ms=short))
    assert response["statusCode"] == 503
    assert json.loads(response["body"])["error"]["code"] == "resource_busy"
    ample = bound.handler(event, lambda_context("jobs", remaining_ms=10_000))
    assert ample["statusCode"] == 200


def test_a_refusal_that_is_not_transient_is_still_a_500(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a true bug is internal_error: a ValidationException is not retried, not a 503."""
    error = ClientError({"Error": {"Code": "ValidationException", "Message": "bug"}}, "GetItem")

    def broken(job_id: str) -> None:
        raise error

    monkeypatch.setattr(rt.store, "get_job", broken)
    response = api.get("/jobs/job_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert response.status == 500
    assert response.body["error"] == {
        "code": "internal_error",
        "message": "internal error",
        "retryable": False,
    }
    assert "retry-after" not in response.headers


def test_an_admission_whose_answer_was_lost_is_answered_as_the_replay_it_is(
    wrt: Runtime,
) -> None:
    """The admission's job write was applied and its answer lost; the retry is refused (the
    job exists): the answer is the job (a replay). Its commit reached the table's stream: the
    dispatcher hands the job to the work queue once (no sweep needed). Its first event, which
    the write describes, the replay writes before it answers, whose callback the dispatcher
    then hands off once; nothing more for the consumer's later replay."""
    task = canonical_task(callback_url="https://consumer.example.test/hooks")
    faults = Faults(kinds=("internal",), mode="after", at=1, matching="params_canonical")
    with injected(faults):
        status, body = admission.submit(wrt, "acme", task, None)
    assert faults.fired == 1
    assert status == 200
    job_id = body["job"]["job_id"]
    assert body["job"]["status"] == "queued"
    dispatch_stream(wrt)
    sqs = boto3.client("sqs")
    work = sqs.receive_message(QueueUrl=wrt.settings.work_queue_url or "")["Messages"]
    assert [json.loads(m["Body"]) for m in work] == [{"job_id": job_id}]
    callbacks = wrt.settings.callback_queue_url or ""
    hooks = sqs.receive_message(QueueUrl=callbacks, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["sequence"] for m in hooks] == [1]
    assert execution.claim(wrt, job_id, "worker-1") is not None
    dispatch_stream(wrt)
    hooks = sqs.receive_message(QueueUrl=callbacks, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["sequence"] for m in hooks] == [2]
    # The consumer's own retry, later, is an ordinary replay: nothing is sent again.
    assert admission.submit(wrt, "acme", task, None)[0] == 200
    dispatch_stream(wrt)
    assert sqs.receive_message(QueueUrl=wrt.settings.work_queue_url or "").get("Messages") is None


def test_a_replay_by_another_request_sends_nothing(wrt: Runtime) -> None:
    task = canonical_task(callback_url="https://consumer.example.test/hooks")
    admission.submit(wrt, "acme", task, None)
    dispatch_stream(wrt)
    sqs = boto3.client("sqs")
    for url in (wrt.settings.work_queue_url, wrt.settings.callback_queue_url):
        sqs.purge_queue(QueueUrl=url or "")
    wrt.clock.advance(1)  # type: ignore[attr-defined]
    assert admission.submit(wrt, "acme", task, None)[0] == 200
    dispatch_stream(wrt)
    for url in (wrt.settings.work_queue_url, wrt.settings.callback_queue_url):
        assert sqs.receive_message(QueueUrl=url or "").get("Messages") is None


HOOK = "https://c.example.test/h"


def test_the_sweep_keeps_going_past_a_job_it_cannot_repair(wrt: Runtime) -> None:
    """Every read and write of one job keeps failing: its job is counted as an error (and so its
    callback, which the open job covers, is not looked at), and the other job's callback is
    still re-sent (retried at the next sweep)."""
    job_ids = [
        admission.submit(wrt, "acme", canonical_task(idempotency_key=key, callback_url=HOOK), None)[
            1
        ]["job"]["job_id"]
        for key in ("one", "two")
    ]
    wrt.clock.advance(keys.HANDOFF_GRACE_MS * 2)  # type: ignore[attr-defined]
    with injected(Faults(kinds=("throttling",), at=1, times=FOREVER, matching=job_ids[0])):
        report = sweep(wrt)
    assert report.callbacks_resent == 1
    # Its job, and the batch read that held it (then read one by one).
    assert report.errors == 2
