"""What an attempt reads: the callback and its job, and the job's result only for an event
whose body shows it (a terminal one). The dispatcher's message says which (queue.py
`without_result`, from the event's kind in the stream record)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks, execution
from jobstream.service import events as stream
from jobstream.store import keys
from tests.integration.test_callbacks import drain, messages, submit
from tests.support.client_hooks import hooked
from tests.support.dispatch import dispatch_stream
from tests.support.receiver import receiver


@contextmanager
def items_read(rt: Runtime) -> Iterator[list[list[str]]]:
    """The sort keys each BatchGetItem of the service's client asks for, call by call."""
    calls: list[list[str]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        (wanted,) = params["RequestItems"].values()
        calls.append(sorted(key[keys.SK]["S"] for key in wanted["Keys"]))

    with hooked(rt.store.client, "provide-client-params.dynamodb.BatchGetItem", record, "reads"):
        yield calls


def test_the_dispatcher_flags_the_callbacks_whose_body_shows_no_result(crt: Runtime) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
    dispatch_stream(crt)
    bodies = sorted(
        (json.loads(message["Body"]) for message in messages(crt)), key=lambda b: b["sequence"]
    )
    # Accepted and started show no result; the terminal event's message is not flagged.
    assert [body.get("without_result", False) for body in bodies] == [True, True, False]


def test_an_attempt_reads_the_result_only_for_a_terminal_event(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    with receiver(204) as hook, items_read(crt) as calls:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        drain(crt, queues)
        posted = [json.loads(request.body) for request in hook.requests]
    event, job_item, result = keys.event_sk, keys.JOB_SK, keys.RESULT_SK
    attempts = [call for call in calls if any(sk.startswith(keys.EVENT_PREFIX) for sk in call)]
    assert attempts == [
        sorted([event(1), job_item]),
        sorted([event(2), job_item]),
        sorted([event(3), job_item, result]),
    ]
    # The bodies are the events as the job's page shows them, the terminal one with its result.
    page = stream.events_page(crt, "acme", job_id, {}, None)
    assert {e["event_id"]: e for e in posted} == {e["event_id"]: e for e in page["events"]}
    assert page["events"][-1]["payload"]["result"]["candidates"]


def test_a_flag_that_does_not_fit_the_event_read_reads_the_result_after_all(
    crt: Runtime,
) -> None:
    """A message flagged for an event whose body shows the result (the slot reused by a later
    job under the same key): the attempt reads again, with the result, and sends it."""
    with receiver(204) as hook, items_read(crt) as calls:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        terminal = IntentRef(job_id, 3)
        calls.clear()
        outcome = callbacks.deliver(crt, terminal, without_result=True)
        (request,) = hook.requests
    assert outcome.outcome == "delivered"
    assert calls == [
        sorted([keys.event_sk(3), keys.JOB_SK]),
        sorted([keys.event_sk(3), keys.JOB_SK, keys.RESULT_SK]),
    ]
    page = stream.events_page(crt, "acme", job_id, {}, None)
    assert json.loads(request.body) == page["events"][-1]
    assert page["events"][-1]["payload"]["result"]["candidates"]
