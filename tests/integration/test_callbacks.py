"""Callbacks end to end against moto's SQS and a real HTTP receiver (design I5, I7, I10)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Final

import boto3
import pytest
from botocore.exceptions import ClientError

from jobstream import observability
from jobstream import runtime as runtime_module
from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.http.statuses import http_status
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, endpoints, jobs
from jobstream.service import events as stream
from jobstream.service.dead_letters import list_dead, redrive
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.callbacks import MAX_CALLBACK_ATTEMPTS
from jobstream.store.codec import to_item
from jobstream.store.jobs import JobQuery
from jobstream_local.gateway import load_handler
from jobstream_local.template import Template
from jobstream_local.workers import QueuePoller
from tests.conftest import CALLBACK_SECRET as SECRET
from tests.conftest import CALLBACK_TOKEN as TOKEN
from tests.support.client_hooks import dynamodb_calls
from tests.support.dispatch import dispatch_stream
from tests.support.faults import Faults, injected
from tests.support.harness import Clock, canonical_task
from tests.support.receiver import receiver
from tests.support.signatures import signature_verifies
from tests.support.slow_peer import SLOWLORIS, slow_peer
from tests.support.state import mark_failed
from tests.support.tenants import with_tenant
from tests.support.validation import validate

# How far past its deadline an aborted request may end on a loaded machine: a bound, not a timing.
DEADLINE_MARGIN_S: Final = 4.5


def messages(rt: Runtime, url: str | None = None) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs")
    found: list[dict[str, Any]] = []
    while True:
        response = sqs.receive_message(
            QueueUrl=url or rt.settings.callback_queue_url or "",
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            WaitTimeSeconds=0,
        )
        batch = response.get("Messages", [])
        new = [m for m in batch if m["MessageId"] not in {f["MessageId"] for f in found}]
        if not new:
            return found
        found += new


def poller(rt: Runtime, queues: dict[str, dict[str, str]]) -> QueuePoller:
    import threading

    (source,) = [s for s in Template.load().queue_sources() if s.queue == "CallbackQueue"]
    return QueuePoller(
        sqs=boto3.client("sqs"),
        queue_url=queues["CallbackQueue"]["Ref"],
        queue_arn=queues["CallbackQueue"]["Arn"],
        function_name=source.function.name,
        handler=load_handler(source.function),
        batch_size=10,
        stopping=threading.Event(),
    )


def submit(rt: Runtime, url: str, key: str = "cb-key") -> str:
    status, body = admission.submit(
        rt, "acme", canonical_task(idempotency_key=key, callback_url=url), None
    )
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def drain(rt: Runtime, queues: dict[str, dict[str, str]], rounds: int = 5) -> None:
    """What the dispatcher hands off after the commits so far, then every callback message."""
    dispatch_stream(rt)
    feeder = poller(rt, queues)
    for _ in range(rounds):
        if not feeder.poll_once():
            return


def intent(rt: Runtime, job_id: str, sequence: int = 1) -> Any:
    record = rt.callbacks.get(IntentRef(job_id, sequence))
    assert record is not None
    return record


def stored_item(rt: Runtime, ref: IntentRef) -> dict[str, Any]:
    """The event item as the table holds it (every attribute a write could touch)."""
    item: dict[str, Any] = boto3.client("dynamodb").get_item(
        TableName=rt.settings.table_name,
        Key=to_item({keys.PK: keys.job_pk(ref.job_id), keys.SK: keys.event_sk(ref.sequence)}),
        ConsistentRead=True,
    )["Item"]
    return item


def test_the_dispatcher_hands_a_new_callback_to_the_queue(crt: Runtime) -> None:
    """Admission sends nothing itself: the table's stream brings the committed callback to the
    dispatcher, which hands it to the callback queue (and the job to the work queue)."""
    job_id = submit(crt, "https://consumer.example.test/hooks")
    assert messages(crt) == []
    assert dispatch_stream(crt) >= 1
    (message,) = messages(crt)
    # Its event (job.accepted) shows no result: the message says so (test_callback_reads.py).
    assert json.loads(message["Body"]) == {"job_id": job_id, "sequence": 1, "without_result": True}
    # Each commit once: the records read are not handed off again.
    dispatch_stream(crt)
    assert len(messages(crt)) == 1


def test_delivery_posts_the_signed_event_once(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        (request,) = hook.requests
    event = json.loads(request.body)
    validate(event, "Event")
    page = stream.events_page(crt, "acme", job_id, {}, None)
    assert event == page["events"][0]
    headers = request.headers
    assert headers["content-type"] == "application/json"
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["x-idempotency-key"] == f"job-event:{job_id}:{event['event_id']}"
    assert headers["webhook-id"] == headers["x-idempotency-key"]
    assert signature_verifies(SECRET, headers, request.body, now=int(headers["webhook-timestamp"]))
    assert not signature_verifies(
        SECRET,
        headers,
        request.body.replace("accepted", "started"),
        now=int(headers["webhook-timestamp"]),
    )
    record = intent(crt, job_id)
    assert (record.state, record.attempts, record.last_status) == ("delivered", 1, 204)
    # Push is not ack: the pull cursor has not moved.
    assert page["unacked"] == 1
    assert messages(crt) == []


def test_duplicate_messages_after_delivery_post_nothing(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    """Messages for a delivered callback are settled by one read: no POST, no write."""
    with receiver(200) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        assert len(hook.requests) == 1
        ref = IntentRef(job_id, 1)
        delivered = stored_item(crt, ref)
        crt.callback_queue.send([ref] * 3)
        drain(crt, queues)
        with dynamodb_calls(crt.store.client) as calls:
            assert callbacks.deliver(crt, ref).outcome == "settled"
        assert len(hook.requests) == 1
    assert stored_item(crt, ref) == delivered
    assert calls == ["BatchGetItem"]


def test_409_counts_as_delivered(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(409) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        assert len(hook.requests) == 1
    assert intent(crt, job_id).state == "delivered"


def test_permanent_4xx_dead_letters_at_once(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(404) as hook:
        job_id = submit(crt, hook.url)
        before = jobs.get_job(crt, "acme", job_id, None)
        drain(crt, queues)
        assert len(hook.requests) == 1
    record = intent(crt, job_id)
    assert record.state == "dead"
    assert record.attempts == 1
    assert "404" in (record.last_error or "")
    (dead,) = messages(crt, crt.settings.callback_dead_letter_url)
    assert json.loads(dead["Body"]) == {"job_id": job_id, "sequence": 1}
    # I7: a callback failure changes neither the job nor its stream.
    assert jobs.get_job(crt, "acme", job_id, None) == before
    assert [e["type"] for e in stream.events_page(crt, "acme", job_id, {}, None)["events"]] == [
        "job.accepted"
    ]


def test_eight_attempts_then_dead(crt: Runtime, clock: Clock) -> None:
    with receiver(503) as hook:
        job_id = submit(crt, hook.url)
        ref = IntentRef(job_id, 1)
        results = []
        for _ in range(8):
            results.append(callbacks.deliver(crt, ref))
            clock.advance(crt.settings.callback_retry_max_ms)
        assert len(hook.requests) == 8
        # The budget is spent: further messages are acknowledged without a POST.
        assert callbacks.deliver(crt, ref).disposition is callbacks.Disposition.DONE
        assert len(hook.requests) == 8
    assert [r.outcome for r in results] == ["retry"] * 7 + ["dead"]
    record = intent(crt, job_id)
    assert (record.state, record.attempts, record.last_status) == ("dead", 8, 503)
    assert "503" in (record.last_error or "")
    assert len(messages(crt, crt.settings.callback_dead_letter_url)) == 1


def test_retry_waits_follow_the_backoff_and_retry_after(crt: Runtime, clock: Clock) -> None:
    with receiver((429, {"Retry-After": "1"}), 500, 204) as hook:
        job_id = submit(crt, hook.url)
        ref = IntentRef(job_id, 1)
        first = callbacks.deliver(crt, ref)
        assert first.delay_ms == 1_000  # the receiver's Retry-After, within the maximum
        # Not due yet: an early duplicate message comes back later, with no POST.
        early = callbacks.deliver(crt, ref)
        assert early.disposition is callbacks.Disposition.RETRY
        assert len(hook.requests) == 1
        clock.advance(first.delay_ms)
        second = callbacks.deliver(crt, ref)
        assert 1_000 <= second.delay_ms < 2_000  # attempt 2: min(max, base*2) * [0.5, 1)
        clock.advance(second.delay_ms)
        assert callbacks.deliver(crt, ref).outcome == "delivered"
    assert intent(crt, job_id).attempts == 3


def test_retry_through_the_queue_redelivers_after_the_visibility_delay(
    crt: Runtime, queues: dict[str, Any], clock: Clock
) -> None:
    import time

    with receiver(503, 204) as hook:
        job_id = submit(crt, hook.url)
        dispatch_stream(crt)
        feeder = poller(crt, queues)
        assert feeder.poll_once() == 1
        assert intent(crt, job_id).state == "retry_wait"
        # The message is invisible for its delay (1 s at the least with these settings).
        assert feeder.poll_once() == 0
        clock.advance(2_000)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and intent(crt, job_id).state != "delivered":
            feeder.poll_once(wait_seconds=1)
        assert len(hook.requests) == 2
    assert intent(crt, job_id).state == "delivered"


def in_flight(rt: Runtime) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=rt.settings.callback_queue_url or "",
        AttributeNames=["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessages"],
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"  # every message was received
    return int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_a_long_outage_holds_no_message_in_flight(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver down for hours: every wait past IN_FLIGHT_WAIT_MAX_MS deletes its message
    (nothing stays in flight between attempts), the sweep re-sends each callback when due, and
    after the outage every callback arrives exactly once, none dead-lettered."""
    slow = replace(
        crt,
        settings=crt.settings.model_copy(
            update={"callback_retry_base_ms": 700_000, "callback_retry_max_ms": 21_600_000}
        ),
    )
    monkeypatch.setattr(runtime_module, "runtime", lambda: slow)
    # The queue's part alone: here the endpoint is never paused (test_endpoint_health.py pauses
    # it, and then its callbacks wait parked, out of the queue altogether).
    monkeypatch.setattr(endpoints, "PAUSE_AFTER_FAILURES", MAX_CALLBACK_ATTEMPTS * 20 + 1)
    with receiver(503) as hook:
        refs = []
        for n in range(10):
            # Cancelled jobs: two callbacks each, and no liveness verdict when the clock moves.
            job_id = submit(slow, hook.url, key=f"outage-{n}")
            jobs.cancel(slow, "acme", job_id, None)
            refs += [IntentRef(job_id, 1), IntentRef(job_id, 2)]
        dispatch_stream(slow)
        feeder = poller(slow, queues)
        for attempt in range(1, 4):
            while feeder.poll_once():
                pass
            assert in_flight(slow) == 0, f"messages held in flight after attempt {attempt}"
            records = [slow.callbacks.get(ref) for ref in refs]
            assert {(r.state, r.attempts) for r in records if r} == {("retry_wait", attempt)}
            # Nothing comes back before it is due: the sweep re-sends none yet.
            assert sweep(slow).callbacks_resent == 0
            due = max(r.next_attempt_at for r in records if r) + keys.HANDOFF_GRACE_MS
            clock.advance(due - clock())
            assert sweep(slow).callbacks_resent == len(refs)
        hook.script = [(204, {})]
        while feeder.poll_once():
            pass
        assert in_flight(slow) == 0
    assert len(hook.requests) == 4 * len(refs)
    delivered = [json.loads(r.body)["event_id"] for r in hook.requests[-len(refs) :]]
    assert len(set(delivered)) == len(refs)
    assert {record.state for ref in refs if (record := slow.callbacks.get(ref))} == {"delivered"}
    assert messages(slow, slow.settings.callback_dead_letter_url) == []


def test_a_short_wait_keeps_its_message_in_flight(
    crt: Runtime, queues: dict[str, Any], clock: Clock
) -> None:
    with receiver(503) as hook:
        submit(crt, hook.url)
        dispatch_stream(crt)
        assert poller(crt, queues).poll_once() == 1
        assert in_flight(crt) == 1  # back after its 1-2 s wait, not through the sweep


def test_terminal_events_get_their_own_callbacks(
    crt: Runtime, queues: dict[str, Any], clock: Clock
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        jobs.cancel(crt, "acme", job_id, None)
        drain(crt, queues)
        types = sorted(json.loads(r.body)["type"] for r in hook.requests)
        assert types == ["job.accepted", "job.cancelled"]
        cancelled = next(json.loads(r.body) for r in hook.requests if "cancelled" in r.body)
        validate(cancelled, "Event")
        assert cancelled["payload"]["job"]["status"] == "cancelled"


def test_crash_between_commit_and_send_is_repaired_by_the_sweep(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection at the boto3 boundary: SQS refuses every send of the dispatcher, through
    # all of Lambda's retries of its stream batch.
    from botocore.exceptions import EndpointConnectionError

    def broken_send(*args: Any, **kwargs: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://sqs.invalid")

    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        with monkeypatch.context() as patch:
            patch.setattr(crt.callback_queue.client, "send_message_batch", broken_send)
            dispatch_stream(crt)
        assert messages(crt) == []
        assert sweep(crt).callbacks_resent == 0  # not due yet: a delivery may still be coming
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        report = sweep(crt)
        assert report.callbacks_resent == 1
        drain(crt, queues)
        assert len(hook.requests) == 1
        # Re-sent once; the next sweep finds nothing due.
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        assert sweep(crt).callbacks_resent == 0
    assert intent(crt, job_id).state == "delivered"


def test_sweep_repairs_missing_terminal_events_with_their_callbacks(
    crt: Runtime, queues: dict[str, Any], clock: Clock
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        mark_failed(crt, job_id, at=clock.advance(1_000), reason="no_candidate")
        report = sweep(crt)
        assert (report.jobs_checked, report.events_repaired) == (1, 1)
        drain(crt, queues)
        assert [json.loads(r.body)["type"] for r in hook.requests] == ["job.accepted", "job.failed"]
        # The job has its terminal event: it left the sweep's set.
        assert sweep(crt).jobs_checked == 0


def test_sweep_is_bounded_by_its_budget(crt: Runtime) -> None:
    for index in range(3):
        submit(crt, "https://consumer.example.test/hooks", key=f"k{index}")
    ticks = iter(range(100))
    report = sweep(crt, budget_ms=1_500, monotonic=lambda: float(next(ticks)))
    assert report.budget_exhausted is True


def test_refused_callback_url_is_400_and_writes_nothing(rt: Runtime) -> None:
    from jobstream.protocol.errors import ProtocolError

    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError("admission must not resolve callback hosts")

    offline = replace(rt, resolver=no_dns)
    for url in (
        "http://consumer.example.test/hooks",  # http needs a listed origin
        "https://169.254.169.254/latest",  # a literal private address needs one too
        "https://[::1]:8443/hooks",
        "https://user:pw@consumer.example.test/hooks",
    ):
        with pytest.raises(ProtocolError) as raised:
            admission.submit(offline, "acme", canonical_task(callback_url=url), None)
        assert http_status(raised.value) == 400
        assert raised.value.body()["error"]["detail"]["field"] == "callback_url"
    assert list(rt.store.iter_jobs(JobQuery(tenant="acme"))) == []


def test_dns_that_changes_after_admission_dead_letters(crt: Runtime, clock: Clock) -> None:
    # acme with the default policy (no origin list): any public https origin.
    public = replace(
        with_tenant(crt, "acme", callback_origins=None),
        resolver=lambda host, port: ["93.184.215.14"],
    )
    job_id = submit(public, "https://consumer.example.test/hooks")
    rebound = replace(public, resolver=lambda host, port: ["127.0.0.1"])
    result = callbacks.deliver(rebound, IntentRef(job_id, 1))
    assert result.outcome == "dead"
    assert "refused: host_not_allowed" in (intent(crt, job_id).last_error or "")


def test_a_temporary_dns_failure_retries_and_counts_against_the_endpoint(
    crt: Runtime, clock: Clock
) -> None:
    """A resolver blip (EAI_AGAIN: the VPC resolver's per-interface limit under load) is a
    failed attempt like a network error, never a dead letter."""
    url = "https://consumer.example.test/hooks"
    public = replace(
        with_tenant(crt, "acme", callback_origins=None),
        resolver=lambda host, port: ["93.184.215.14"],
    )
    ref = IntentRef(submit(public, url), 1)

    def blip(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    posted: list[str] = []

    def poster(target: Any, *_: Any) -> HttpResult:
        posted.append(target.host)
        return HttpResult(204, "", None)

    first = callbacks.deliver(replace(public, resolver=blip, poster=poster), ref)
    assert first.disposition is callbacks.Disposition.RETRY
    base = crt.settings.callback_retry_base_ms
    assert base // 2 <= first.delay_ms < base  # attempt 1's backoff
    record = intent(crt, ref.job_id)
    assert (record.state, record.attempts, record.last_status) == ("retry_wait", 1, None)
    assert "Temporary failure in name resolution" in record.last_error
    assert not record.last_error.startswith("refused")
    health = crt.endpoints.get(endpoints.endpoint_of("acme", url))
    assert (health.failures, health.last_error) == (1, record.last_error)
    assert posted == []
    # The resolver answers again: the next attempt delivers.
    clock.advance(first.delay_ms)
    assert callbacks.deliver(replace(public, poster=poster), ref).outcome == "delivered"
    assert posted == ["consumer.example.test"]
    assert crt.endpoints.get(endpoints.endpoint_of("acme", url)).failures == 0


@pytest.mark.parametrize(
    "url",
    [
        "https://2852039166/",  # 169.254.169.254 as one decimal number
        "https://0xa9fea9fe/",
        "https://0251.0376.0251.0376/",
        "https://169.254.43518/",
        "https://127.1/",
        "https://0/",
        "https://169.254.169.254./",
    ],
)
def test_an_address_in_any_spelling_the_resolver_reads_is_refused_at_admission(
    rt: Runtime, url: str
) -> None:
    """What delivery would refuse (the resolver reads these as addresses) is a 400 at once,
    never an admitted Task whose every callback dies."""
    from jobstream.protocol.errors import ProtocolError

    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError("admission must not resolve callback hosts")

    public = replace(with_tenant(rt, "acme", callback_origins=None), resolver=no_dns)
    with pytest.raises(ProtocolError) as raised:
        admission.submit(public, "acme", canonical_task(callback_url=url), None)
    assert http_status(raised.value) == 400
    detail = raised.value.body()["error"]["detail"]
    assert (detail["field"], detail["refusal"]) == ("callback_url", "host_not_allowed")
    assert list(rt.store.iter_jobs(JobQuery(tenant="acme"))) == []


def test_redirects_are_not_followed(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(302) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        assert len(hook.requests) == 1
    assert intent(crt, job_id).state == "dead"


def test_dead_letters_are_listed_and_redriven(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(400, 204) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        (dead,) = list_dead(crt)
        assert dead["job_id"] == job_id
        assert dead["attempts"] == 1
        assert dead["last_status"] == 400
        assert dead["callback_url"] == hook.url
        report = redrive(crt)
        assert (report.revived, report.messages_moved) == (1, 1)
        assert messages(crt, crt.settings.callback_dead_letter_url) == []
        drain(crt, queues)
        assert len(hook.requests) == 2
    record = intent(crt, job_id)
    assert (record.state, record.attempts) == ("delivered", 1)
    assert list_dead(crt) == []


def test_a_job_without_callback_has_no_messages(crt: Runtime) -> None:
    status, _ = admission.submit(crt, "acme", canonical_task(callback_url=None), None)
    assert status == 202
    dispatch_stream(crt)
    assert messages(crt) == []


def test_the_operator_cli_lists_and_redrives(
    crt: Runtime, queues: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from jobstream_cli.__main__ import main

    with receiver(404, 204) as hook:
        job_id = submit(crt, hook.url)
        drain(crt, queues)
        capsys.readouterr()  # the handlers' own output (metrics) is not the CLI's
        assert main(["dead-letters", "list"]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert (listed["job_id"], listed["last_status"]) == (job_id, 404)
        assert main(["dead-letters", "redrive", "--job", job_id]) == 0
        assert json.loads(capsys.readouterr().out)["revived"] == 1
        drain(crt, queues)
        assert len(hook.requests) == 2
        capsys.readouterr()
        assert main(["sweep"]) == 0
        assert json.loads(capsys.readouterr().out)["budget_exhausted"] is False
    assert intent(crt, job_id).state == "delivered"


# -------------------------------------------- deadlines, spent budgets, missing dead letters


def test_a_slowloris_receiver_is_cut_at_the_callback_timeout(crt: Runtime) -> None:
    """A receiver sending a header byte every 50 ms never trips a per-read timeout; the attempt
    still ends at its wall-clock deadline (a bound with a generous margin, not a timing), the
    connection is aborted, and the callback waits for its retry."""
    fast = replace(crt, settings=crt.settings.model_copy(update={"callback_timeout_ms": 500}))
    with slow_peer(trickle=SLOWLORIS) as peer:
        job_id = submit(fast, peer.url("/hooks"))
        started = time.monotonic()
        result = callbacks.deliver(fast, IntentRef(job_id, 1))
        elapsed = time.monotonic() - started
        assert peer.went_away(), "the connection is aborted, not left to the receiver"
    assert elapsed < 0.5 + DEADLINE_MARGIN_S
    assert result.disposition is callbacks.Disposition.RETRY
    record = intent(crt, job_id)
    assert (record.state, record.attempts) == ("retry_wait", 1)
    assert "RequestDeadlineError" in (record.last_error or "")


def test_a_callback_due_a_few_ms_ahead_is_delayed_not_dropped(crt: Runtime, clock: Clock) -> None:
    """The deliverer's clock is a few ms behind the one that made the callback due: its message
    comes back when the callback is due (not deleted as settled, to wait for the sweep)."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        ref = IntentRef(job_id, 1)
        behind = replace(crt, clock=lambda: clock.now - 5)
        early = callbacks.deliver(behind, ref)
        assert (early.disposition, early.delay_ms) == (callbacks.Disposition.RETRY, 5)
        assert hook.requests == []
        assert (intent(crt, job_id).state, intent(crt, job_id).attempts) == ("pending", 0)
        assert callbacks.deliver(crt, ref).outcome == "delivered"
        assert len(hook.requests) == 1


def test_an_attempt_that_never_returns_spends_the_budget(crt: Runtime, clock: Clock) -> None:
    """Attempts whose invocation died before recording an outcome count: after the 8th, the
    callback is claimed no more and the next message dead-letters it, with no POST."""
    lease_ms = crt.settings.callback_timeout_ms + callbacks.LEASE_MARGIN_MS
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        ref = IntentRef(job_id, 1)
        for _ in range(MAX_CALLBACK_ATTEMPTS):
            assert crt.callbacks.claim(ref, now=clock.now, lease_ms=lease_ms) is not None
            clock.advance(lease_ms + 1)  # the attempt's invocation died: its lease lapses
        assert crt.callbacks.claim(ref, now=clock.now, lease_ms=lease_ms) is None
        result = callbacks.deliver(crt, ref)
        assert hook.requests == []
    assert result.outcome == "dead"
    record = intent(crt, job_id)
    assert (record.state, record.attempts) == ("dead", MAX_CALLBACK_ATTEMPTS)
    assert (record.last_error or "").startswith("attempt_abandoned")
    (dead,) = messages(crt, crt.settings.callback_dead_letter_url)
    assert json.loads(dead["Body"]) == {"job_id": job_id, "sequence": 1}


def test_a_dead_letter_whose_send_failed_is_sent_when_the_message_returns(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    """The callback is marked dead, then the DLQ refuses the dead letter: the message raises
    (it comes back, SQS keeps it), and its return sends the dead letter, without a second POST.
    The CallbackDeadLetterAlarm sees every dead callback."""
    dead_letter_queue = crt.settings.callback_dead_letter_url or ""
    refused = Faults(kinds=("internal",), at=1, times=1_000, matching=dead_letter_queue)
    with receiver(404) as hook:
        job_id = submit(crt, hook.url)
        ref = IntentRef(job_id, 1)
        with injected(refused), pytest.raises(ClientError):
            callbacks.deliver(crt, ref)
        assert refused.fired >= 1
        assert intent(crt, job_id).state == "dead"
        assert messages(crt, dead_letter_queue) == []
        assert callbacks.deliver(crt, ref).outcome == "dead"  # the message, redelivered
        assert len(hook.requests) == 1
    (dead,) = messages(crt, dead_letter_queue)
    assert json.loads(dead["Body"]) == {"job_id": job_id, "sequence": 1}


def put_dead_callbacks(
    rt: Runtime, job_id: str, sequences: range, *, at: int, tenant: str | None = None
) -> None:
    """Dead callbacks on events `sequences` of a job, as `mark_dead` leaves them (a thousand
    real deaths would take a thousand attempts); on `tenant`'s dead list when given."""
    items = [
        to_item(
            {
                keys.PK: keys.job_pk(job_id),
                keys.SK: keys.event_sk(sequence),
                "kind": "job.progressed",
                "at": at,
                "state": "dead",
                "attempts": MAX_CALLBACK_ATTEMPTS,
                "next_attempt_at": at,
                "dead_at": at,
                "last_error": "HTTP 503",
                "sweep_pk": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_DEAD, job_id),
                "sweep_sk": keys.sweep_sk(at, keys.intent_item_id(job_id, sequence)),
                keys.TTL_ATTRIBUTE: at // 1000 + 86_400,
                **(
                    {
                        "gsi2pk": keys.tenant_callbacks_pk(tenant, keys.TenantCallbacks.DEAD),
                        "gsi2sk": keys.sweep_sk(at, keys.intent_item_id(job_id, sequence)),
                    }
                    if tenant is not None
                    else {}
                ),
            }
        )
        for sequence in sequences
    ]
    for start in range(0, len(items), 25):
        rt.store.client.batch_write_item(
            RequestItems={
                rt.settings.table_name: [
                    {"PutRequest": {"Item": item}} for item in items[start : start + 25]
                ]
            }
        )


def test_a_full_redrive_looks_at_every_dead_callback_past_a_thousand(
    crt: Runtime, clock: Clock
) -> None:
    """A redrive reads the dead callbacks a page at a time and revives every one that was dead
    when it started, however many (it looked at the oldest 1,000 only, while the DLQ move sent
    every message back), reporting its progress as it goes. Here a thousand of them belong to a
    job already gone (they stay dead), between two of a live job's."""
    job_id = submit(crt, "https://consumer.example.test/hooks")
    gone_job = "job_" + "G" * 32
    put_dead_callbacks(crt, job_id, range(2, 3), at=clock.advance(1_000))
    put_dead_callbacks(crt, gone_job, range(1, 1_001), at=clock.advance(1_000))
    put_dead_callbacks(crt, job_id, range(3, 4), at=clock.advance(1_000))
    progress: list[int] = []
    report = redrive(crt, on_progress=progress.append)
    assert report.revived == 2
    assert progress == list(range(1, 1_003))
    for sequence in (2, 3):
        revived = intent(crt, job_id, sequence)
        assert (revived.state, revived.attempts) == ("pending", 0)
    assert intent(crt, gone_job, 1_000).state == "dead"


# ----------------------------------------------------------- a first attempt without a claim


def claimless_window_ms(rt: Runtime) -> int:
    """How long after its event a callback's first attempt goes without a claim."""
    return keys.HANDOFF_GRACE_MS - rt.settings.callback_timeout_ms - callbacks.LEASE_MARGIN_MS


def test_a_first_attempt_is_one_read_and_one_write(crt: Runtime) -> None:
    """Seconds after its event, the callback is read with its job, POSTed, and its outcome is
    one conditional write that counts the attempt: no claim before the POST."""
    seen: list[dict[str, Any]] = []

    def post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Any:
        seen.append(stored_item(crt, ref))  # what a duplicate would read during the POST
        return crt.poster(target, body, headers, timeout_s)

    with receiver(204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        with dynamodb_calls(crt.store.client) as calls:
            result = callbacks.deliver(replace(crt, poster=post), ref)
        assert len(hook.requests) == 1
    assert result.outcome == "delivered"
    # The callback with its job and result, the endpoint's health, the outcome.
    assert calls == ["BatchGetItem", "GetItem", "UpdateItem"]
    assert (seen[0]["state"]["S"], seen[0]["attempts"]["N"]) == ("pending", "0")
    record = intent(crt, ref.job_id)
    assert (record.state, record.attempts, record.last_status) == ("delivered", 1, 204)
    assert record.lease_until is None


def test_two_concurrent_first_attempts_post_at_most_twice(
    crt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two copies of the message at once, both reading the callback before either POST ends
    (the receiver slow): two POSTs at most, one outcome recorded, the other attempt settled
    and counted as a duplicate, no error."""
    counted: list[str] = []
    real_count = observability.count

    def count(name: str, value: int = 1, *, dimension: str | None = None) -> None:
        counted.extend([name] * value)
        real_count(name, value, dimension=dimension)

    monkeypatch.setattr(observability, "count", count)
    both_posting = threading.Barrier(2, timeout=10)

    def slow_post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Any:
        both_posting.wait()  # neither answer comes before both attempts are posting
        return crt.poster(target, body, headers, timeout_s)

    with receiver(204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        slow = replace(crt, poster=slow_post)
        crt.store.connect()
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(callbacks.deliver, slow, ref) for _ in range(2)]
            outcomes = sorted(future.result(timeout=30).outcome for future in futures)
        assert len(hook.requests) == 2
    assert outcomes == ["delivered", "settled"]
    assert counted.count("callbacks_delivered") == 1
    assert counted.count("callbacks_duplicate_attempts") == 1
    record = intent(crt, ref.job_id)
    assert (record.state, record.attempts) == ("delivered", 1)


def test_a_message_past_the_window_claims_first(crt: Runtime, clock: Clock) -> None:
    """A first attempt that could still run when the sweep looks at the callback (a message
    late after a backlog) claims it, as any retry does: in flight under a lease while it
    POSTs."""
    seen: list[dict[str, Any]] = []

    def post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Any:
        seen.append(stored_item(crt, ref))
        return crt.poster(target, body, headers, timeout_s)

    with receiver(204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        clock.advance(claimless_window_ms(crt))
        with dynamodb_calls(crt.store.client) as calls:
            assert callbacks.deliver(replace(crt, poster=post), ref).outcome == "delivered"
        assert len(hook.requests) == 1
    assert calls == ["BatchGetItem", "UpdateItem", "GetItem", "UpdateItem"]
    assert (seen[0]["state"]["S"], seen[0]["attempts"]["N"]) == ("in_flight", "1")
    assert "lease_until" in seen[0]
    record = intent(crt, ref.job_id)
    assert (record.state, record.attempts) == ("delivered", 1)


def test_a_resent_callback_claims_first(crt: Runtime, clock: Clock) -> None:
    """A callback the sweep sent again (`resent_at`) is claimed, however young."""
    with receiver(204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        # Its open job covers it (no entry of its own): the sweep notes its re-send so.
        assert crt.callbacks.mark_resent(ref, now=clock.now)
        with dynamodb_calls(crt.store.client) as calls:
            assert callbacks.deliver(crt, ref).outcome == "delivered"
    assert calls.count("UpdateItem") == 2


def test_a_failed_first_attempt_counts_and_retries(crt: Runtime, clock: Clock) -> None:
    """The first attempt's failure is its one write: attempt 1 counted, the backoff of a
    first attempt; the retry then claims (attempt 2)."""
    with receiver(503, 204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        first = callbacks.deliver(crt, ref)
        assert first.disposition is callbacks.Disposition.RETRY
        base = crt.settings.callback_retry_base_ms
        assert base // 2 <= first.delay_ms < base  # attempt 1: base * [0.5, 1)
        record = intent(crt, ref.job_id)
        assert (record.state, record.attempts, record.last_status) == ("retry_wait", 1, 503)
        clock.advance(first.delay_ms)
        with dynamodb_calls(crt.store.client) as calls:
            assert callbacks.deliver(crt, ref).outcome == "delivered"
        # The retry's claim first (its outcome follows, and the endpoint's run of failures ends).
        assert calls[:3] == ["BatchGetItem", "UpdateItem", "GetItem"]
        assert len(hook.requests) == 2
    assert intent(crt, ref.job_id).attempts == 2


def test_a_first_attempt_parks_with_its_attempt_given_back(crt: Runtime, clock: Clock) -> None:
    """Parked at a first attempt, before its POST (the endpoint is disabled) or after it (a 410
    disables it): the one write parks it with no attempt spent."""
    with receiver(410) as hook:
        gone = IntentRef(submit(crt, hook.url, key="gone"), 1)
        assert callbacks.deliver(crt, gone).outcome == "parked"
        assert len(hook.requests) == 1
        held = IntentRef(submit(crt, hook.url, key="held"), 1)
        with dynamodb_calls(crt.store.client) as calls:
            assert callbacks.deliver(crt, held).outcome == "parked"
        assert len(hook.requests) == 1
    assert calls == ["BatchGetItem", "GetItem", "UpdateItem"]
    for ref in (gone, held):
        record = intent(crt, ref.job_id)
        assert (record.state, record.attempts) == ("parked", 0)
    assert "410" in (intent(crt, gone.job_id).last_error or "")


def test_a_crash_between_the_post_and_its_outcome_delivers_on_the_next_message(
    crt: Runtime,
) -> None:
    """The invocation dies after the POST, before the outcome's write (fault injection at the
    boto3 boundary): nothing was written, the message comes back, and the callback is delivered
    (a second POST: at least once)."""
    from tests.integration.test_faults import CrashError, Fault, crashing

    with receiver(204) as hook:
        ref = IntentRef(submit(crt, hook.url), 1)
        # The 3rd call is the outcome's UpdateItem (after the read and the endpoint's health).
        with crashing(crt, Fault(at=3, mode="before")) as fault, pytest.raises(CrashError):
            callbacks.deliver(crt, ref)
        assert fault.fired
        assert len(hook.requests) == 1
        record = intent(crt, ref.job_id)
        assert (record.state, record.attempts) == ("pending", 0)
        assert callbacks.deliver(crt, ref).outcome == "delivered"
        assert len(hook.requests) == 2
    record = intent(crt, ref.job_id)
    assert (record.state, record.attempts) == ("delivered", 1)
