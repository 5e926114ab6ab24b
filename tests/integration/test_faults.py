"""Crashes at the boto3 boundary (design I10): for each operation, a failure at each DynamoDB call
— before the call, or after it succeeded with its response lost — followed by the client's retry
and a sweep converges to the state a run without the failure reaches."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from jobstream.protocol.events import event_id
from jobstream.service.runtime import Runtime
from jobstream.store.jobs import JobStore
from jobstream_local.resources import create_tables
from jobstream_local.template import Template
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import mark_failed

MODES = ("before", "after")


@dataclass
class Fault:
    """Fails the `at`-th DynamoDB call (1-based): before it is sent, or after it succeeded."""

    at: int
    mode: str
    calls: int = 0
    fired: bool = False

    def before(self, **_: Any) -> None:
        self.calls += 1
        if self.mode == "before" and self.calls == self.at:
            self.fired = True
            raise EndpointConnectionError(endpoint_url="https://dynamodb.invalid")

    def after(self, **_: Any) -> None:
        if self.mode == "after" and self.calls == self.at and not self.fired:
            self.fired = True
            # The write (if any) happened; the caller never learns it.
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "response lost"}}, "Call"
            )


@contextmanager
def injected(rt: Runtime, fault: Fault) -> Iterator[Fault]:
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
    import uuid

    table = f"ref-{uuid.uuid4().hex[:10]}"
    create_tables(Template.load(), boto3.client("dynamodb"), name_for=lambda _: table)
    settings = rt.settings.model_copy(update={"table_name": table})
    return replace(rt, settings=settings, store=JobStore(table))


def state(rt: Runtime, job_id: str) -> dict[str, Any]:
    """What must converge: the job's protocol state and its stream, times left out."""
    record = rt.store.get_job(job_id)
    assert record is not None
    events, _ = rt.store.events_after(job_id, 0, 200)
    intents = rt.store.callback_intents(job_id)
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
    uninstrumented = JobStore(
        rt.settings.table_name, client_factory=lambda: boto3.client("dynamodb")
    )
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
    from jobstream.service import runtime as runtime_module
    from jobstream.service.sweep import sweep

    api = Api(token="acme-token")
    previous = runtime_module.runtime
    runtime_module.runtime = lambda: rt  # type: ignore[assignment]
    try:
        job_id = case.setup(rt, api, clock)
        if fault is not None:
            with injected(rt, fault):
                job_id = case.action(rt, api, clock, job_id)
        # The client retries (or, without a fault, makes) the call; then the sweep runs.
        job_id = case.action(rt, api, clock, job_id)
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


WORKER_CALLS = 5


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", range(1, WORKER_CALLS + 1))
def test_a_worker_crash_at_any_call_converges_on_redelivery(
    rt: Runtime, clock: Clock, mode: str, at: int
) -> None:
    """The worker fails at one DynamoDB call; SQS redelivers the same message; the job ends
    exactly as without the crash (same status, one of each lifecycle event)."""
    from jobstream.service import execution

    def run(runtime: Runtime, fault: Fault | None) -> dict[str, Any]:
        api = Api(token="acme-token")
        from jobstream.service import runtime as runtime_module

        previous = runtime_module.runtime
        runtime_module.runtime = lambda: runtime  # type: ignore[assignment]
        try:
            task = canonical_task(callback_url=None)
            task["params"] = {"query": {"tags": ["botefuku"]}}
            job_id = str(api.post("/jobs", task).body["job"]["job_id"])
            body = json.dumps({"job_id": job_id})
            if fault is not None:
                with injected(runtime, fault), contextlib.suppress(Exception):
                    # The invocation may fail (the message is redelivered) or absorb the fault.
                    execution.handle_work_message(runtime, body, "message-1")
            execution.handle_work_message(runtime, body, "message-1")
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
    from jobstream.service import admission, callbacks
    from jobstream.service.sweep import sweep
    from jobstream.store import keys
    from jobstream.store.callbacks import IntentRef
    from tests.integration.test_callbacks import drain
    from tests.support.receiver import receiver

    with receiver(204) as hook:
        task = canonical_task(callback_url=hook.url)
        job_id = admission.submit(crt, "acme", task, None)[1]["job"]["job_id"]
        ref = IntentRef(job_id, 1)
        fault = Fault(at=at, mode=mode)
        with injected(crt, fault), contextlib.suppress(Exception):
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
        assert ids == {record.idempotency_key}
    if not fault.fired:
        pytest.skip(f"a delivery makes fewer than {at} DynamoDB calls")
