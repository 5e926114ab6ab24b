"""Faults at the boto3 boundary.

Crashes (design I10): for each operation, the invocation dies at each DynamoDB call — before the
call, or after it succeeded — and the client's retry and a sweep converge to the state a run
without the crash reaches.

Transient faults (what AWS raises: a transaction cancelled by a race, throttling, a server
error): at every DynamoDB and SQS call of every operation, each kind either is absorbed by the
retries (one failure of every call: the operation answers as without it) or outlasts them (one
call and all its retries: the HTTP answer is a retryable 503, the worker keeps its message);
then the client repeats what was refused, sweeps run, the queues are drained, and the final
state equals the fault-free run's, nothing lost. The `after` variants apply the call and lose
its answer: at every call at once, each retried to the store (moto does not honour a
transaction's ClientRequestToken, so the retry meets its own write: the harder case; AWS
answers it as the first try), and at each call in turn, its retries refused.

Refusals (ValidationException: what AWS answers a request it will never apply): at each call in
turn, nothing is applied and nothing retried; every job ends as in the fault-free run, or
`failed` `internal_error` when its completion was refused: terminal, nothing lost, nothing
doubled.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import boto3
import pytest

from jobstream.delivery.http import HttpResult
from jobstream.domain import JobRecord
from jobstream.lifecycle.identity import derive_job_id
from jobstream.protocol.events import callback_idempotency_key, event_id
from jobstream.retries import default_policy
from jobstream.runtime import Runtime
from jobstream.service import callbacks, execution
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.jobs import JobStore
from jobstream.store.sweep_index import record_legacy_shards_retired
from jobstream_local.resources import create_tables
from jobstream_local.template import Template
from tests.support.dispatch import dispatch_stream
from tests.support.faults import KINDS, REFUSAL, Faults, injected
from tests.support.harness import START_MS, Api, Clock, Response, canonical_task
from tests.support.isolated import on_own_table_and_queues
from tests.support.lambda_events import queue_handler, received_sqs_event
from tests.support.state import callback_intents, mark_failed
from tests.support.validation import validate_error

MODES = ("before", "after")


@pytest.fixture(autouse=True)
def few_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two shards per key: still sharded, but a sweep's or a listing's calls stay few enough
    to fail each of them in turn (the matrix is quadratic in the calls an operation makes)."""
    monkeypatch.setattr(keys, "TENANT_SHARDS", 2)
    monkeypatch.setattr(keys, "SWEEP_SHARDS", dict.fromkeys(keys.SweepBacklog, 2))


class CrashError(Exception):
    """The invocation dies here (not an AWS error: nothing retries it)."""


@dataclass
class Fault:
    """Crashes at the `at`-th DynamoDB call (1-based): before it is sent, or after it succeeded."""

    at: int
    mode: str
    calls: int = 0
    fired: bool = False

    def before(self, **_: Any) -> None:
        self.calls += 1
        if self.mode == "before" and self.calls == self.at:
            self.fired = True
            raise CrashError("before the call")

    def after(self, **_: Any) -> None:
        if self.mode == "after" and self.calls == self.at and not self.fired:
            self.fired = True
            # The write (if any) happened; the invocation dies before it learns so.
            raise CrashError("after the call")


@cache
def _template() -> Template:
    return Template.load()


@cache
def _dynamodb() -> Any:
    """The test's own DynamoDB client (uninstrumented)."""
    return boto3.client("dynamodb")


@cache
def _sqs() -> Any:
    """The test's own SQS client (the service's is the one faults are injected into)."""
    return boto3.client("sqs")


@contextmanager
def crashing(rt: Runtime, fault: Fault) -> Iterator[Fault]:
    events = rt.store.client.meta.events
    events.register("before-call.dynamodb", fault.before, unique_id="fault-before")
    events.register("after-call.dynamodb", fault.after, unique_id="fault-after")
    try:
        yield fault
    finally:
        events.unregister("before-call.dynamodb", unique_id="fault-before")
        events.unregister("after-call.dynamodb", unique_id="fault-after")


def fresh_runtime(rt: Runtime) -> Runtime:
    """The same runtime on a table of its own (for the fault-free run)."""
    table = f"ref-{uuid.uuid4().hex[:10]}"
    create_tables(_template(), _dynamodb(), name_for=lambda _: table)
    record_legacy_shards_retired(_dynamodb(), table, now=0)
    settings = rt.settings.model_copy(update={"table_name": table})
    return replace(rt, settings=settings, store=JobStore(table))


def state(rt: Runtime, job_id: str) -> dict[str, Any]:
    """What must converge: the job's protocol state and its stream, times left out."""
    record = rt.store.get_job(job_id)
    assert record is not None
    events, _ = rt.store.events_after(job_id, 0, 200)
    intents = callback_intents(rt, job_id)
    return {
        "status": record.status,
        "reason": record.reason,
        "kinds": [event.kind for event in events],
        "ack": record.ack_sequence,
        "intents": [intent["kind"] for intent in intents],
    }


Step = Callable[[Runtime, Api, Clock, str], str]


def admit(rt: Runtime, api: Api, clock: Clock, job_id: str) -> str:
    response = api.post("/jobs", canonical_task())
    return str(response.body["job"]["job_id"]) if response.status < 300 else job_id


def cancel(rt: Runtime, api: Api, clock: Clock, job_id: str) -> str:
    api.post(f"/jobs/{job_id}/cancel")
    return job_id


def page(rt: Runtime, api: Api, clock: Clock, job_id: str) -> str:
    api.get(f"/jobs/{job_id}/events")
    return job_id


def ack_second(rt: Runtime, api: Api, clock: Clock, job_id: str) -> str:
    # Looked up with a client of its own: only the ack's calls are counted and failed.
    uninstrumented = JobStore(rt.settings.table_name, client_factory=_dynamodb)
    events, _ = uninstrumented.events_after(job_id, 0, 2)
    api.post(f"/jobs/{job_id}/events/ack", {"ack_through": event_id(job_id, events[1].at, 2)})
    return job_id


def _nothing(rt: Runtime, api: Api, clock: Clock) -> str:
    return ""


def _admitted(rt: Runtime, api: Api, clock: Clock) -> str:
    return str(api.post("/jobs", canonical_task()).body["job"]["job_id"])


def _admitted_then_failed(rt: Runtime, api: Api, clock: Clock) -> str:
    job_id = _admitted(rt, api, clock)
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    return job_id


def _failed_and_read(rt: Runtime, api: Api, clock: Clock) -> str:
    job_id = _admitted_then_failed(rt, api, clock)
    api.get(f"/jobs/{job_id}/events")
    return job_id


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Runtime, Api, Clock], str]
    action: Step


CASES = [
    Case("admission", _nothing, admit),
    Case("cancel", _admitted, cancel),
    Case("reconcile on read", _admitted_then_failed, page),
    Case("ack", _failed_and_read, ack_second),
]
MAX_CALLS = 4


def run_case(case: Case, rt: Runtime, clock: Clock, fault: Fault | None) -> dict[str, Any]:
    from jobstream import runtime as runtime_module
    from jobstream.service.sweep import sweep

    api = Api(token="acme-token")
    previous = runtime_module.runtime
    runtime_module.runtime = lambda: rt  # type: ignore[assignment]
    try:
        job_id = case.setup(rt, api, clock)
        if fault is not None:
            with crashing(rt, fault):
                job_id = case.action(rt, api, clock, job_id)
        # The client retries (or, without a fault, makes) the call; the dispatcher reads the
        # table's stream, as Lambda runs it after every commit; a sweep runs once the hand-off
        # grace has passed (it writes an open job's event its writer died before writing).
        job_id = case.action(rt, api, clock, job_id)
        dispatch_stream(rt)
        clock.advance(keys.HANDOFF_GRACE_MS)
        sweep(rt)
        return state(rt, job_id)
    finally:
        runtime_module.runtime = previous  # type: ignore[assignment]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", range(1, MAX_CALLS + 1))
def test_a_crash_at_any_call_converges(
    rt: Runtime, clock: Clock, case: Case, mode: str, at: int
) -> None:
    # The fault-free run makes the call twice too: a retry of a success is part of the contract.
    expected = run_case(case, fresh_runtime(rt), Clock(clock.now), None)
    fault = Fault(at=at, mode=mode)
    assert run_case(case, rt, clock, fault) == expected
    if not fault.fired:
        pytest.skip(f"{case.name} makes fewer than {at} DynamoDB calls")


# The worker's calls for a quick job: its read, the claim, the result, the completion (no
# progress event within 5 s of `job.started`).
WORKER_CALLS = 4


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", range(1, WORKER_CALLS + 1))
def test_a_worker_crash_at_any_call_converges_on_redelivery(
    rt: Runtime, clock: Clock, mode: str, at: int
) -> None:
    """The worker fails at one DynamoDB call; SQS redelivers the same message once the dead
    invocation's lease has lapsed (its visibility timeout is longer); the job ends exactly as
    without the crash (same status, one of each lifecycle event): the redelivery lands the
    result the dead run stored, or resumes the job's execution."""
    from jobstream.service import execution

    def run(runtime: Runtime, fault: Fault | None) -> dict[str, Any]:
        api = Api(token="acme-token")
        from jobstream import runtime as runtime_module

        previous = runtime_module.runtime
        runtime_module.runtime = lambda: runtime  # type: ignore[assignment]
        try:
            task = canonical_task(callback_url=None)
            task["params"] = {"query": {"tags": ["botefuku"]}}
            job_id = str(api.post("/jobs", task).body["job"]["job_id"])
            body = json.dumps({"job_id": job_id})
            if fault is not None:
                with crashing(runtime, fault), contextlib.suppress(Exception):
                    # The invocation may fail (the message is redelivered) or absorb the fault.
                    execution.handle_work_message(runtime, body, "message-1")
            clock.advance(runtime.settings.lease_ms)
            execution.handle_work_message(runtime, body, "message-1")
            dispatch_stream(runtime)
            result = state(runtime, job_id)
            # Progress events depend on timing; the lifecycle must not.
            result["kinds"] = [kind for kind in result["kinds"] if kind != "job.progressed"]
            return result
        finally:
            runtime_module.runtime = previous  # type: ignore[assignment]

    expected = run(fresh_runtime(rt), None)
    fault = Fault(at=at, mode=mode)
    assert run(rt, fault) == expected
    if not fault.fired:
        pytest.skip(f"the worker makes fewer than {at} DynamoDB calls")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", range(1, 4))
def test_a_delivery_crash_at_any_call_still_delivers(
    crt: Runtime, queues: dict[str, Any], clock: Clock, mode: str, at: int
) -> None:
    """The delivery fails at one DynamoDB call; the message comes back, the sweep re-sends
    what was left in flight; the callback ends delivered (at least once: a receiver dedupes
    on X-Idempotency-Key)."""
    from jobstream.domain import IntentRef
    from jobstream.service import admission, callbacks
    from jobstream.service.sweep import sweep
    from jobstream.store import keys
    from tests.integration.test_callbacks import drain
    from tests.support.receiver import receiver

    with receiver(204) as hook:
        task = canonical_task(callback_url=hook.url)
        job_id = admission.submit(crt, "acme", task, None)[1]["job"]["job_id"]
        ref = IntentRef(job_id, 1)
        fault = Fault(at=at, mode=mode)
        with crashing(crt, fault), contextlib.suppress(Exception):
            callbacks.deliver(crt, ref)
        # The same message again (its invocation failed or it was kept), then time passes.
        callbacks.deliver(crt, ref)
        clock.advance(crt.settings.callback_timeout_ms + keys.HANDOFF_GRACE_MS * 3)
        sweep(crt)
        drain(crt, queues)
        record = crt.callbacks.get(ref)
        assert record is not None
        assert record.state == "delivered"
        assert 1 <= len(hook.requests) <= 2
        ids = {request.headers["x-idempotency-key"] for request in hook.requests}
        assert ids == {callback_idempotency_key(record)}
    if not fault.fired:
        pytest.skip(f"a delivery makes fewer than {at} DynamoDB calls")


# ------------------------------------------------------------------------- transient faults

TASK_KEY = "6eb50329-20f2-4ea7-b95b-e4676b50d9f1"
CALLBACK_URL = "https://consumer.example.test/hooks/jobstream"


@dataclass
class World:
    """One run of one operation: its own table and queues, a clock, a recording poster."""

    rt: Runtime
    clock: Clock
    api: Api
    job_ids: list[str] = field(default_factory=list)
    ack_through: str = ""
    message: dict[str, Any] | None = None
    claimed: JobRecord | None = None
    # What the client (or SQS) does again once the faults are gone: refused requests, kept
    # messages.
    again: list[Callable[[], Any]] = field(default_factory=list)
    dispatched: set[str] = field(default_factory=set)
    posted: list[str] = field(default_factory=list)
    # A refusal no retry cures is injected: an HTTP route answers 500 `internal_error`.
    refusals: bool = False
    # The jobs each run of an executor was for.
    runs: list[str] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return self.job_ids[0]


def new_world(base: Runtime, now: int) -> World:
    posted: list[str] = []

    def poster(target: Any, body: bytes, headers: Any, timeout_s: float) -> HttpResult:
        posted.append(json.loads(body)["type"])
        return HttpResult(204, "", None)

    clock = Clock(now)
    rt = replace(on_own_table_and_queues(base, "faults"), clock=clock, poster=poster)
    return World(rt=rt, clock=clock, api=Api(token="acme-token"), posted=posted)


def _receive(url: str | None) -> list[dict[str, Any]]:
    assert url
    response = _sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    messages: list[dict[str, Any]] = response.get("Messages", [])
    return messages


def _delete(url: str | None, message: dict[str, Any]) -> None:
    _sqs().delete_message(QueueUrl=url or "", ReceiptHandle=message["ReceiptHandle"])


def drain(w: World, *, work: bool = True) -> None:
    """Run the dispatcher over the stream; take the work queue's messages as dispatches seen;
    deliver every callback message."""
    dispatch_stream(w.rt)
    settings = w.rt.settings
    while work and (batch := _receive(settings.work_queue_url)):
        for message in batch:
            w.dispatched.add(json.loads(message["Body"])["job_id"])
            _delete(settings.work_queue_url, message)
    while batch := _receive(settings.callback_queue_url):
        for message in batch:
            with contextlib.suppress(callbacks.RetryLaterError):
                callbacks.handle_message(w.rt, message["Body"], message["ReceiptHandle"])
            _delete(settings.callback_queue_url, message)


def settle(w: World) -> None:
    """No more faults: what was refused is done again, then sweeps and deliveries run while
    time passes (every hand-off the faults lost is due again after its grace period)."""
    for again in w.again:
        again()
    # Two sweeps: the first finds every lost hand-off and abandoned attempt due (the longest
    # wait is an attempt's lease plus the grace period); the second lands outcomes kept past
    # their lease and re-sends what the first one's repairs left.
    for _ in range(2):
        w.clock.advance(2 * keys.HANDOFF_GRACE_MS)
        sweep(w.rt)
        drain(w)


def final_state(w: World) -> dict[str, Any]:
    """What must converge: each job's protocol state, stream, callbacks, dispatch; no times."""
    # Progress is best effort (dropped when its write fails); the lifecycle is not.
    result: dict[str, Any] = {"posted": sorted(set(w.posted) - {"job.progress"})}
    for job_id in w.job_ids:
        record = w.rt.store.get_job(job_id)
        assert record is not None
        events, _ = w.rt.store.events_after(job_id, 0, 200)
        intents = callback_intents(w.rt, job_id)
        result[job_id] = {
            "status": record.status,
            "reason": record.reason,
            "result": record.result,
            "kinds": [event.kind for event in events if event.kind != "job.progressed"],
            "ack": record.ack_sequence,
            "intents": [
                (intent["kind"], intent["state"])
                for intent in intents
                if intent["kind"] != "job.progressed"
            ],
            "dispatched": job_id in w.dispatched,
            "kept_outcome": (record.pending_reason, record.pending_message),
            # One execution (I6): a copy of a message, a redelivery never runs the job again.
            "runs": w.runs.count(job_id),
        }
    return result


def answered(w: World, response: Response, again: Callable[[], Response]) -> None:
    """A success, or a retryable 503 the client repeats later (which must then succeed); under
    a refusal no retry cures, a 500 `internal_error` the client repeats all the same."""
    if response.status == 503 or (w.refusals and response.status == 500):
        validate_error(response.body)
        if response.status == 500:
            assert response.body["error"]["code"] == "internal_error"
            assert response.body["error"]["retryable"] is False
        else:
            assert response.body["error"]["code"] == "resource_busy"
            assert response.body["error"]["retryable"] is True
            assert int(response.headers["retry-after"]) >= 1

        def repeat() -> None:
            response = again()
            assert response.status < 300, response.body

        w.again.append(repeat)
    else:
        assert response.status < 300, response.body


def _admit(w: World, key: str = TASK_KEY) -> str:
    job_id = derive_job_id("acme", key)
    w.job_ids.append(job_id)
    response = w.api.post("/jobs", canonical_task(idempotency_key=key, callback_url=CALLBACK_URL))
    assert response.status == 202, response.body
    return job_id


def _admitted_not_dispatched(w: World) -> None:
    _admit(w)


def _admitted_and_drained(w: World) -> None:
    _admit(w)
    drain(w)


def _failed_and_paged(w: World) -> None:
    _admitted_and_drained(w)
    mark_failed(w.rt, w.job_id, at=w.clock.advance(1_000), reason="no_candidate")
    w.api.get(f"/jobs/{w.job_id}/events")
    events, _ = w.rt.store.events_after(w.job_id, 0, 2)
    w.ack_through = event_id(w.job_id, events[1].at, 2)
    drain(w)


def _work_message(w: World) -> None:
    _admit(w)
    drain(w, work=False)  # the dispatcher sent the job; its callback is delivered
    (w.message,) = _receive(w.rt.settings.work_queue_url)
    w.dispatched.add(w.job_id)


def _delivery_message(w: World) -> None:
    _admit(w)
    dispatch_stream(w.rt)
    (w.message,) = _receive(w.rt.settings.callback_queue_url)
    while batch := _receive(w.rt.settings.work_queue_url):
        for message in batch:
            w.dispatched.add(json.loads(message["Body"])["job_id"])
            _delete(w.rt.settings.work_queue_url, message)


def _claimed(w: World) -> None:
    _admitted_and_drained(w)
    w.claimed = execution.claim(w.rt, w.job_id, "worker-h")
    drain(w)


def _backlog(w: World) -> None:
    """Two jobs whose hand-offs were all lost: one queued too long, one due for re-dispatch."""
    _admit(w, "sweep-old")
    w.clock.advance(w.rt.settings.queued_timeout_ms - keys.HANDOFF_GRACE_MS * 2)
    _admit(w, "sweep-new")
    for url in (w.rt.settings.work_queue_url, w.rt.settings.callback_queue_url):
        _sqs().purge_queue(QueueUrl=url or "")
    w.clock.advance(keys.HANDOFF_GRACE_MS * 2)


def _act_admission(w: World) -> None:
    task = canonical_task(idempotency_key=TASK_KEY, callback_url=CALLBACK_URL)
    w.job_ids.append(derive_job_id("acme", TASK_KEY))
    answered(w, w.api.post("/jobs", task), lambda: w.api.post("/jobs", task))


def _act_get(w: World) -> None:
    answered(w, w.api.get(f"/jobs/{w.job_id}"), lambda: w.api.get(f"/jobs/{w.job_id}"))


def _act_list(w: World) -> None:
    answered(w, w.api.get("/jobs?limit=5"), lambda: w.api.get("/jobs?limit=5"))


def _act_page(w: World) -> None:
    target = f"/jobs/{w.job_id}/events"
    answered(w, w.api.get(target), lambda: w.api.get(target))


def _act_ack(w: World) -> None:
    target, body = f"/jobs/{w.job_id}/events/ack", {"ack_through": w.ack_through}
    answered(w, w.api.post(target, body), lambda: w.api.post(target, body))


def _act_cancel(w: World) -> None:
    target = f"/jobs/{w.job_id}/cancel"
    answered(w, w.api.post(target), lambda: w.api.post(target))


def _act_worker(w: World) -> None:
    assert w.message is not None
    event = received_sqs_event(w.message)
    worker = queue_handler("WorkQueue")
    # The invocation never fails: a completion it could not write is a batch item failure.
    if worker(event, None)["batchItemFailures"]:
        # SQS delivers the same message again, at the latest once a lease the invocation held
        # has lapsed; it must then land, without a second failure.
        def redelivered() -> None:
            w.clock.advance(execution.redelivery_delay_ms(w.rt, released=False))
            _assert_no_failures(worker(event, None))

        w.again.append(redelivered)


def _assert_no_failures(result: dict[str, Any]) -> None:
    assert result == {"batchItemFailures": []}


def _act_heartbeat(w: World) -> None:
    assert w.claimed is not None
    # A heartbeat that fails is retried, and at worst skipped: never a lost lease.
    assert execution.Lease(w.rt, w.claimed, "worker-h").beat() is True


def _act_delivery(w: World) -> None:
    assert w.message is not None
    body, receipt = w.message["Body"], w.message["ReceiptHandle"]
    try:
        callbacks.handle_message(w.rt, body, receipt)
    except Exception:  # noqa: BLE001 - a failed record: SQS delivers the message again
        w.again.append(lambda: callbacks.handle_message(w.rt, body, receipt))


def _act_dispatch(w: World) -> None:
    # Lambda retries a failed batch from its failed record (ReportBatchItemFailures); what
    # still fails is the sweep's to re-send.
    dispatch_stream(w.rt)


def _act_sweep(w: World) -> None:
    try:
        sweep(w.rt)
    except Exception:  # noqa: BLE001 - the scheduled invocation failed: the next one runs
        w.again.append(lambda: sweep(w.rt))


@dataclass(frozen=True)
class Operation:
    name: str
    setup: Callable[[World], None]
    act: Callable[[World], None]


def _empty(w: World) -> None:
    return None


OPERATIONS = [
    Operation("admission", _empty, _act_admission),
    Operation("dispatch", _admitted_not_dispatched, _act_dispatch),
    Operation("get", _admitted_and_drained, _act_get),
    Operation("list", _admitted_and_drained, _act_list),
    Operation("page", _failed_and_paged, _act_page),
    Operation("ack", _failed_and_paged, _act_ack),
    Operation("cancel", _admitted_and_drained, _act_cancel),
    Operation("worker", _work_message, _act_worker),
    Operation("heartbeat", _claimed, _act_heartbeat),
    Operation("delivery", _delivery_message, _act_delivery),
    Operation("sweep", _backlog, _act_sweep),
]
# The transient faults and whether the failing call was applied: throttling and conflicts are
# refusals; a server error may come after the write.
VARIANTS = [(kind, "before") for kind in KINDS] + [("internal", "after")]


@contextmanager
def serving(w: World) -> Iterator[None]:
    """The handlers use this world's runtime; each run of a job's executor is counted."""
    from jobstream import runtime as runtime_module

    previous, run_job = runtime_module.runtime, execution.run_job
    runtime_module.runtime = lambda: w.rt  # type: ignore[assignment]

    def counted(targets: Any, record: JobRecord, context: Any) -> Any:
        w.runs.append(record.job_id)
        return run_job(targets, record, context)

    execution.run_job = counted
    try:
        yield
    finally:
        runtime_module.runtime = previous  # type: ignore[assignment]
        execution.run_job = run_job


def run_operation(base: Runtime, operation: Operation, faults: Faults | None) -> World:
    w = new_world(base, START_MS)
    w.refusals = faults is not None and REFUSAL in faults.kinds
    with serving(w):
        operation.setup(w)
        if faults is None:
            operation.act(w)
        else:
            with injected(faults):
                operation.act(w)
        settle(w)
    return w


_expected: dict[str, dict[str, Any]] = {}


def expected_state(base: Runtime, operation: Operation) -> dict[str, Any]:
    """The fault-free run's final state (deterministic: one clock, one key; computed once)."""
    if operation.name not in _expected:
        _expected[operation.name] = final_state(run_operation(base, operation, None))
    return _expected[operation.name]


@pytest.mark.parametrize(("kind", "mode"), VARIANTS)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_one_transient_failure_of_every_call_is_absorbed(
    rt: Runtime, operation: Operation, kind: str, mode: str
) -> None:
    """Every DynamoDB and SQS call of the operation fails once with `kind`: the retries absorb
    each one (no 503, no kept message) and the end state is the fault-free one."""
    faults = Faults(kinds=(kind,), mode=mode)
    w = run_operation(rt, operation, faults)
    assert faults.fired >= 1
    assert faults.fired == faults.calls - faults.fired  # each call failed once, then passed
    assert w.again == [], "a single transient failure reached the caller"
    assert final_state(w) == expected_state(rt, operation)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_a_transient_fault_outlasting_the_retries_converges(
    rt: Runtime, operation: Operation, mode: str
) -> None:
    """At each call in turn, the call and all its retries fail (`after`: the first try was
    applied, its answer lost): the operation answers a retryable 503, or keeps its message, or
    carries on when the call was a hand-off the sweep repeats; after the client's repeat and
    the sweeps, the end state is the fault-free one.

    The retries of the failing call cycle through the four kinds (each is seen retried at every
    call), the first kind moving with the call, so every kind is the last word at some calls;
    what follows the last failure does not depend on its kind (every route maps each kind to
    the same 503: tests/integration/test_retries.py).
    """
    expected = expected_state(rt, operation)
    attempts = default_policy().attempts

    def outlasting(at: int) -> Faults:
        kinds = KINDS[at % len(KINDS) :] + KINDS[: at % len(KINDS)]
        return Faults(kinds=kinds, mode=mode, at=at, times=attempts)

    at_each_call(rt, operation, outlasting, (expected,))


def at_each_call(
    base: Runtime,
    operation: Operation,
    faults_at: Callable[[int], Faults],
    converged: tuple[dict[str, Any], ...],
) -> None:
    """Run the operation with `faults_at(n)` for each of its calls n in turn; each run must end
    in one of the `converged` states."""
    at = 1
    while True:
        faults = faults_at(at)
        w = run_operation(base, operation, faults)
        if not faults.fired:
            break
        assert final_state(w) in converged, (at, faults.operations[at - 1], final_state(w))
        at += 1
    assert at > 1


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_a_refusal_at_any_call_converges(rt: Runtime, operation: Operation) -> None:
    """At each call in turn, AWS refuses the call for good (ValidationException, nothing
    applied, never retried): an HTTP route answers 500 `internal_error` (the client repeats
    it), a worker's message comes back, a hand-off is left to the sweep; a refused completion
    ends its job `failed` `internal_error` at once. Every job ends as in the fault-free run, or
    failed instead of succeeded with its stream and callbacks complete: terminal, nothing lost,
    nothing doubled."""
    expected = expected_state(rt, operation)

    def refused(at: int) -> Faults:
        return Faults(kinds=(REFUSAL,), at=at, times=1)

    at_each_call(rt, operation, refused, (expected, failed_instead(expected)))


def failed_instead(expected: dict[str, Any]) -> dict[str, Any]:
    """`expected` with each succeeded job failed `internal_error` instead (its result not
    shown, its terminal event and callback the failure's)."""
    renamed = {"job.outcome_succeeded": "job.outcome_failed", "job.succeeded": "job.failed"}
    state: dict[str, Any] = {"posted": sorted(renamed.get(t, t) for t in expected["posted"])}
    for job_id, job in expected.items():
        if job_id == "posted":
            continue
        if job["status"] != "succeeded":
            state[job_id] = job
            continue
        state[job_id] = {
            **job,
            "status": "failed",
            "reason": "internal_error",
            "result": None,
            "kinds": [renamed.get(kind, kind) for kind in job["kinds"]],
            "intents": [(renamed.get(kind, kind), st) for kind, st in job["intents"]],
        }
    return state
