"""Callback endpoint health per (tenant, origin): a 410 disables, sustained failure pauses, a
probe resumes and the backlog drains oldest first, exactly once, nothing dead-lettered."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from jobstream import observability
from jobstream import runtime as runtime_module
from jobstream.alerts_topic import AlertTopic
from jobstream.domain import Endpoint, EndpointState, IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks, endpoints
from jobstream.service import events as stream
from jobstream.service.sweep import sweep
from tests.conftest import CALLBACK_SECRET as SECRET
from tests.conftest import CALLBACK_TOKEN as TOKEN
from tests.integration.test_callbacks import intent, messages, poller, submit
from tests.support.harness import Clock
from tests.support.receiver import Receiver, receiver
from tests.support.signatures import signature_verifies
from tests.support.tenants import with_tenant


def endpoint(hook: Receiver) -> Endpoint:
    found = endpoints.endpoint_of("acme", hook.url)
    assert found is not None
    return found


def submit_all(
    rt: Runtime, hook: Receiver, count: int, prefix: str, clock: Clock
) -> list[IntentRef]:
    """`count` jobs calling back to `hook`, a second apart: their first callbacks, oldest first."""
    refs = []
    for n in range(count):
        refs.append(IntentRef(submit(rt, hook.url, key=f"{prefix}-{n}"), 1))
        clock.advance(1_000)
    return refs


def deliver_queue(rt: Runtime, queues: dict[str, Any]) -> None:
    feeder = poller(rt, queues)
    while feeder.poll_once():
        pass


def queued_refs(rt: Runtime) -> list[IntentRef]:
    return [IntentRef(**json.loads(m["Body"])) for m in messages(rt)]


def delivered_event_ids(hook: Receiver, since: int = 0) -> list[str]:
    return [json.loads(request.body)["event_id"] for request in hook.requests[since:]]


def transitions(caplog: pytest.LogCaptureFixture, which: str) -> int:
    return sum(record.getMessage() == f"callback endpoint {which}" for record in caplog.records)


class RecordedTopic:
    """An SNS client that keeps what is published."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        self.published.append(request)
        return {"MessageId": str(len(self.published))}


def metric_counts_in(documents: list[dict[str, Any]], name: str) -> dict[str, float]:
    """The counts of `name` by tenant in EMF documents."""
    return {
        document["tenant"]: document[name]
        for document in documents
        if name in document and "tenant" in document
    }


def test_a_410_disables_the_endpoint_until_it_is_enabled_again(
    crt: Runtime,
    queues: dict[str, Any],
    clock: Clock,
    *,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobstream_cli.__main__ import main

    caplog.set_level(logging.INFO, logger="jobstream.service.endpoint_alerts")
    observability.emf_documents()  # what earlier tests left pending
    topic = RecordedTopic()
    with receiver(204) as tenant_alerts, receiver(410, 204) as hook:
        crt = replace(
            with_tenant(crt, "acme", alert_url=f"{tenant_alerts.url}/alerts"),
            alerts=AlertTopic("arn:aws:sns:eu-west-1:123456789012:alerts", lambda: topic),
        )
        monkeypatch.setattr(runtime_module, "runtime", lambda: crt)
        gone, *later = submit_all(crt, hook, 4, "gone", clock)
        assert callbacks.deliver(crt, gone).outcome == "parked"
        assert len(hook.requests) == 1
        assert crt.endpoints.get(endpoint(hook)).state is EndpointState.DISABLED
        # Later callbacks of the tenant to that origin are not attempted, however long it takes
        # and however often their messages come.
        for ref in later:
            assert callbacks.deliver(crt, ref).outcome == "parked"
            assert callbacks.deliver(crt, ref).outcome == "parked"  # a duplicate message
        # The pull stream is unaffected.
        page = stream.events_page(crt, "acme", later[0].job_id, {}, None)
        assert [event["type"] for event in page["events"]] == ["job.accepted"]
        clock.advance(20 * 60_000)  # past every retry wait, not past the jobs' queued timeout
        report = sweep(crt)
        assert (report.callbacks_resent, report.callbacks_unparked) == (0, 0)
        assert len(hook.requests) == 1
        assert {intent(crt, ref.job_id).state for ref in [gone, *later]} == {"parked"}
        # Parked, not spent: no attempt is counted against them.
        assert {intent(crt, ref.job_id).attempts for ref in [gone, *later]} == {0}
        assert messages(crt, crt.settings.callback_dead_letter_url) == []

        capsys.readouterr()
        assert main(["--output", "json", "tenants", "endpoints", "acme"]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert (listed["origin"], listed["state"]) == (endpoint(hook).origin, "disabled")
        assert "410" in listed["last_error"]

        assert main(["--output", "json", "tenants", "enable-endpoint", "acme", hook.url]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "healthy"
        counts = observability.emf_documents()
        assert metric_counts_in(counts, "endpoints_disabled") == {"acme": 1}
        assert metric_counts_in(counts, "endpoints_resumed") == {"acme": 1}
        # Enabled: the held callbacks go at once, oldest first, and each arrives exactly once.
        assert queued_refs(crt) == [gone, *later]
        deliver_queue(crt, queues)
        assert main(["--output", "json", "tenants", "enable-endpoint", "acme", hook.url]) == 1
    delivered = delivered_event_ids(hook, since=1)
    assert len(delivered) == len(set(delivered)) == 4
    assert {intent(crt, ref.job_id).state for ref in [gone, *later]} == {"delivered"}
    assert messages(crt, crt.settings.callback_dead_letter_url) == []
    assert (transitions(caplog, "disabled"), transitions(caplog, "resumed")) == (1, 1)
    # The tenant was told, signed like its callbacks; so was the operator's topic.
    notices = [json.loads(request.body) for request in tenant_alerts.requests]
    assert [notice["type"] for notice in notices] == ["endpoint.disabled", "endpoint.resumed"]
    assert {(notice["tenant"], notice["origin"]) for notice in notices} == {
        ("acme", endpoint(hook).origin)
    }
    for request in tenant_alerts.requests:
        assert request.path.endswith("/alerts")
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        now = int(request.headers["webhook-timestamp"])
        assert signature_verifies(SECRET, request.headers, request.body, now=now)
    published = [json.loads(request["Message"]) for request in topic.published]
    assert published == notices
    assert topic.published[0]["Subject"] == "jobstream: acme callback endpoint disabled"


def test_an_endpoint_disabled_for_one_tenant_is_not_disabled_for_another(crt: Runtime) -> None:
    with receiver(410) as hook:
        acme = endpoints.endpoint_of("acme", hook.url)
        globex = endpoints.endpoint_of("globex", hook.url)
        assert acme is not None
        assert globex is not None
        assert crt.endpoints.disable(acme, now=0, error="HTTP 410")
        assert not crt.endpoints.disable(acme, now=1, error="HTTP 410")  # once
        assert crt.endpoints.get(globex).state is EndpointState.HEALTHY


def fail_until_paused(crt: Runtime, hook: Receiver, clock: Clock) -> list[IntentRef]:
    """Callbacks failing 10 s apart: the fifth failure, 40 s into the run, pauses."""
    refs = submit_all(crt, hook, endpoints.PAUSE_AFTER_FAILURES, "down", clock)
    outcomes = []
    for ref in refs:
        outcomes.append(callbacks.deliver(crt, ref).outcome)
        clock.advance(10_000)
    assert outcomes == ["retry"] * (endpoints.PAUSE_AFTER_FAILURES - 1) + ["parked"]
    assert crt.endpoints.get(endpoint(hook)).state is EndpointState.PAUSED
    return refs


def test_pause_probe_resume_drains_the_backlog_oldest_first_exactly_once(
    crt: Runtime, queues: dict[str, Any], clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobstream.service.endpoint_alerts")
    interval = crt.settings.endpoint_probe_interval_ms
    with receiver(503) as hook:
        early = fail_until_paused(crt, hook, clock)
        posts_at_pause = len(hook.requests)
        # Paused: new callbacks and the earlier ones' retries are parked, not attempted.
        late = submit_all(crt, hook, 5, "late", clock)  # 10 messages: what `messages` reads
        for ref in [*early, *late]:
            assert callbacks.deliver(crt, ref).outcome == "parked", ref
        assert len(hook.requests) == posts_at_pause
        assert sweep(crt).callbacks_unparked == 0  # no probe before its interval
        # A probe an interval: the sweep releases the oldest parked callback, which goes.
        clock.advance(interval)
        assert sweep(crt).callbacks_unparked == 1
        (probe,) = queued_refs(crt)
        assert probe == early[0]
        deliver_queue(crt, queues)
        assert len(hook.requests) == posts_at_pause + 1
        assert intent(crt, probe.job_id).state == "parked"  # a failed probe parks it again
        assert sweep(crt).callbacks_unparked == 0  # the next probe is an interval away
        # The receiver is back: the next probe resumes the endpoint and the backlog drains at
        # once, oldest first, without waiting for any callback's own backoff.
        hook.script = [(204, {})]
        clock.advance(interval)
        assert sweep(crt).callbacks_unparked == 1
        # The oldest parked callback again (a failed probe keeps its place).
        assert queued_refs(crt) == [early[0]]
        assert callbacks.deliver(crt, early[0]).outcome == "delivered"
        assert crt.endpoints.get(endpoint(hook)).state is EndpointState.HEALTHY
        # The probe's message (now a duplicate), then the whole backlog, oldest first.
        assert queued_refs(crt) == [early[0], *early[1:], *late]
        deliver_queue(crt, queues)
    everything = [*early, *late]
    posts_after = len(hook.requests) - posts_at_pause - 1
    delivered = delivered_event_ids(hook, since=posts_at_pause + 1)
    assert posts_after == len(everything) == len(set(delivered))
    records = [intent(crt, ref.job_id) for ref in everything]
    assert {record.state for record in records} == {"delivered"}
    # No attempt spent while paused: the early ones keep their one failed attempt, the
    # probe's two and the delivery are one more.
    assert max(record.attempts for record in records) <= 2
    assert messages(crt, crt.settings.callback_dead_letter_url) == []
    assert (transitions(caplog, "paused"), transitions(caplog, "resumed")) == (1, 1)
    # Drained: the endpoint leaves the sweep's list once the index has settled.
    clock.advance(120_000)
    assert sweep(crt).callbacks_unparked == 0
    assert list(crt.endpoints.held(now=clock())) == []


def test_two_workers_crossing_the_threshold_pause_once(
    crt: Runtime, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobstream.service.endpoint_alerts")
    with receiver(503) as hook:
        for _ in range(endpoints.PAUSE_AFTER_FAILURES - 1):
            crt.endpoints.record_failure(endpoint(hook), now=clock(), error="HTTP 503")
        clock.advance(endpoints.PAUSE_AFTER_MS)
        refs = submit_all(crt, hook, 6, "race", clock)
        with ThreadPoolExecutor(max_workers=6) as pool:
            outcomes = list(pool.map(lambda ref: callbacks.deliver(crt, ref).outcome, refs))
    assert transitions(caplog, "paused") == 1
    assert set(outcomes) <= {"retry", "parked"}
    assert "dead" not in outcomes
    assert crt.endpoints.get(endpoint(hook)).state is EndpointState.PAUSED


class BrokenTopic:
    def publish(self, **_request: Any) -> dict[str, str]:
        raise RuntimeError("SNS is down")


def test_a_notice_that_cannot_be_sent_never_fails_the_transition(
    crt: Runtime, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobstream.service.endpoint_alerts")
    observability.emf_documents()  # what earlier tests left pending
    with receiver(500) as tenant_alerts, receiver(410) as hook:
        crt = replace(
            with_tenant(crt, "acme", alert_url=f"{tenant_alerts.url}/alerts"),
            alerts=AlertTopic("arn:aws:sns:eu-west-1:123456789012:alerts", BrokenTopic),
        )
        (gone,) = submit_all(crt, hook, 1, "broken", clock)
        assert callbacks.deliver(crt, gone).outcome == "parked"
        assert len(tenant_alerts.requests) == 1
    assert crt.endpoints.get(endpoint(hook)).state is EndpointState.DISABLED
    assert transitions(caplog, "disabled") == 1
    failed = [d for d in observability.emf_documents() if "endpoint_alerts_failed" in d]
    assert [d["endpoint_alerts_failed"] for d in failed] == [2]


def held_endpoint(rt: Runtime, tenant: str, origin: str, *, paused_at: int) -> Endpoint:
    """An endpoint paused at `paused_at` (its probe due an interval later), as its failures
    leave it."""
    held = Endpoint(tenant, origin)
    for _ in range(endpoints.PAUSE_AFTER_FAILURES):
        rt.endpoints.record_failure(held, now=paused_at, error="HTTP 503")
    probe_at = paused_at + rt.settings.endpoint_probe_interval_ms
    assert rt.endpoints.pause(
        held,
        now=paused_at,
        failures=endpoints.PAUSE_AFTER_FAILURES,
        failing_before=paused_at,
        probe_at=probe_at,
    )
    return held


def test_one_endpoints_backlog_holds_back_no_other_endpoint_nor_the_open_jobs(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme's endpoint resumed with a backlog of many pages (each page 3 s of conditional
    unparks), globex's paused one's probe due after it: every sweep looks at globex's and the
    open jobs too, and the next sweep takes globex's before acme's, drained last."""
    interval = rt.settings.endpoint_probe_interval_ms
    backlog = held_endpoint(rt, "acme", "https://a.example.test:443", paused_at=clock())
    clock.advance(interval)
    assert rt.endpoints.resume(backlog, now=clock(), was=EndpointState.PAUSED)
    probe = held_endpoint(rt, "globex", "https://b.example.test:443", paused_at=clock())
    open_job = submit(rt, "https://consumer.example.test/hooks")
    elapsed = [0.0]
    looked: list[str] = []

    def look_after(_rt: Runtime, held: Endpoint, *, now: int) -> int:
        looked.append(held.tenant)
        if held == backlog:
            elapsed[0] += 3.0
            return endpoints.DRAIN_PAGE  # a backlog that outlasts any sweep
        return 1

    monkeypatch.setattr(endpoints, "look_after", look_after)
    reports = []
    for _ in range(2):
        clock.advance(interval)  # a minute apart: globex's probe is due at each
        looked.clear()
        reports.append(sweep(rt, budget_ms=20_000, monotonic=lambda: elapsed[0]))
        assert "globex" in looked, looked
    first, second = reports
    assert first.budget_exhausted
    assert first.jobs_checked == second.jobs_checked == 1, open_job
    # acme's resume was before globex's probe was due; drained last, it went to the back.
    assert looked[0] == "globex"
    # acme's pages took the endpoints' share, not the sweep's: at most 10 s of 20.
    assert 2 <= looked.count("acme") <= 4
    # acme is due again just after the sweep's time: the next sweep takes it after globex.
    assert list(rt.endpoints.held(now=clock() + 1)) == [probe, backlog]


def test_only_a_resumed_endpoint_still_held_goes_to_the_back(rt: Runtime, clock: Clock) -> None:
    paused = held_endpoint(rt, "acme", "https://a.example.test:443", paused_at=clock())
    resumed = held_endpoint(rt, "acme", "https://b.example.test:443", paused_at=clock())
    settled = held_endpoint(rt, "acme", "https://c.example.test:443", paused_at=clock())
    for held in (resumed, settled):
        assert rt.endpoints.resume(held, now=clock(), was=EndpointState.PAUSED)
    assert rt.endpoints.settle(settled, settled_before=clock())
    later = clock() + 10 * rt.settings.endpoint_probe_interval_ms
    # A paused endpoint's place is its next probe; a settled one stays off the list.
    assert not rt.endpoints.requeue(paused, due=later)
    assert not rt.endpoints.requeue(settled, due=later)
    assert rt.endpoints.requeue(resumed, due=later)
    assert list(rt.endpoints.held(now=later - 1)) == [paused]
    assert list(rt.endpoints.held(now=later)) == [paused, resumed]
