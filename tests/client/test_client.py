"""The SDK against a fake producer over real HTTP: every route, pagination, follow, retries."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobstream_client import (
    ApiError,
    AuthError,
    BadRequestError,
    Client,
    IdempotencyConflictError,
    NotFoundError,
    ResponseError,
    RetryPolicy,
    ServerError,
    TransportError,
    new_task,
)
from jobstream_client.client import FollowTimeoutError
from tests.support.fake_producer import Canned, FakeProducer, fake_producer


@pytest.fixture
def producer() -> Iterator[FakeProducer]:
    with fake_producer() as fake:
        yield fake


class Sleeps(list[float]):
    """Records each wait; waits a little for real so the fake producer's clock moves."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(min(seconds, 0.01))


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


TOKEN_A = "token-a"


def client_for(url: str, sleeps: Sleeps, token: str = TOKEN_A, **options: Any) -> Client:
    return Client(url, token, sleep=sleeps, rng=random.Random(7), **options)  # noqa: S311


@pytest.fixture
def client(producer: FakeProducer, sleeps: Sleeps) -> Client:
    return client_for(producer.url, sleeps)


def task(key: str, **params: Any) -> dict[str, Any]:
    return dict(new_task("candidate_search", params, idempotency_key=key, correlation_id="c-1"))


# --- submit, get, find, list, cancel ---------------------------------------------------------


def test_submit_tells_a_new_job_from_a_replay(client: Client) -> None:
    first = client.submit(task("k-1"))
    again = client.submit(task("k-1"))
    assert (first.created, first.replayed, again.replayed) == (True, False, True)
    assert again.job.job_id == first.job.job_id
    assert first.job.status == "queued"
    assert first.job.correlation_id == "c-1"
    assert first.raw == {"job": first.job.raw}


def test_the_same_key_with_other_params_is_a_typed_conflict(client: Client) -> None:
    job = client.submit(task("k-2")).job
    with pytest.raises(IdempotencyConflictError) as raised:
        client.submit(task("k-2", target_id="demo"))
    error = raised.value
    assert (error.status, error.code, error.retryable) == (409, "idempotency_conflict", False)
    assert error.detail == {"job_id": job.job_id}


def test_get_find_and_unknown_jobs(client: Client) -> None:
    job = client.submit(task("k/with:odd%chars ü")).job
    assert client.get(job.job_id).job_id == job.job_id
    found = client.find("k/with:odd%chars ü")
    assert found is not None
    assert found.job_id == job.job_id
    assert client.find("k/with:odd") is None
    with pytest.raises(NotFoundError) as raised:
        client.get("no/such:job")
    assert (raised.value.code, raised.value.retryable) == ("invalid_params", False)


def test_path_segments_and_query_values_are_fully_encoded(
    client: Client, producer: FakeProducer
) -> None:
    with pytest.raises(NotFoundError):
        client.get("a/b:c%d e")
    client.find("x/y:z%")
    paths = [seen.path for seen in producer.requests]
    assert paths == ["/jobs/a%2Fb%3Ac%25d%20e", "/jobs?idempotency_key=x%2Fy%3Az%25"]


def test_requests_carry_the_token_and_json_but_no_idempotency_header(
    client: Client, producer: FakeProducer
) -> None:
    client.submit(task("k-3"))
    seen = producer.requests[-1]
    assert seen.headers["authorization"] == "Bearer token-a"
    assert seen.headers["content-type"] == "application/json"
    assert "idempotency-key" not in seen.headers
    assert json.loads(seen.body)["idempotency_key"] == "k-3"


def test_list_iterates_every_page(client: Client, producer: FakeProducer) -> None:
    ids = {client.submit(task(f"k-list-{n}")).job.job_id for n in range(5)}
    listed = [job.job_id for job in client.list(correlation_id="c-1", page_size=2)]
    assert sorted(listed) == sorted(ids)
    cursors = [seen.path for seen in producer.requests if seen.path.startswith("/jobs?")]
    assert len(cursors) == 3
    assert "cursor=c2" in cursors[1]
    assert "cursor=c4" in cursors[2]


def test_cancel_returns_the_job_afterwards(client: Client) -> None:
    job = client.submit(task("k-cancel", target_id="slow")).job
    cancelled = client.cancel(job.job_id)
    assert cancelled.status == "cancelled"
    assert cancelled.terminal
    assert cancelled.error is not None
    assert cancelled.error.code == "cancelled_by_consumer"
    assert client.cancel(job.job_id).raw == cancelled.raw


def test_capabilities(client: Client) -> None:
    capabilities = client.capabilities()
    assert capabilities.supports("1")
    assert capabilities.supports("1.1")
    assert not capabilities.supports("2")
    declared = capabilities.job_type("candidate_search")
    assert declared is not None
    assert "events" in declared.features
    assert declared.heartbeat_interval_ms == 30_000


def test_a_wrong_token_is_an_auth_error(producer: FakeProducer, sleeps: Sleeps) -> None:
    with pytest.raises(AuthError) as raised:
        client_for(producer.url, sleeps, token="nope").capabilities()
    assert (raised.value.status, raised.value.code) == (401, "auth_error")
    assert sleeps == []


def test_bad_requests_are_not_retried(client: Client, sleeps: Sleeps) -> None:
    with pytest.raises(BadRequestError) as raised:
        client.submit({**task("k-bad"), "protocol_version": "2"})
    assert raised.value.code == "unsupported_protocol_version"
    assert sleeps == []


# --- events, ack, follow ---------------------------------------------------------------------


def finished(client: Client, key: str, **params: Any) -> str:
    job_id = client.submit(task(key, **params)).job.job_id
    for _ in client.follow(job_id, ack=False, poll_interval_s=0.05, timeout_s=10):
        pass
    return job_id


def test_events_iterate_every_page_from_the_consumers_cursor(
    producer: FakeProducer, sleeps: Sleeps
) -> None:
    producer.page_size = 1
    client = client_for(producer.url, sleeps)
    job_id = finished(client, "k-pages")
    events = list(client.events(job_id))
    assert [event.type for event in events] == ["job.accepted", "job.started", "job.succeeded"]
    assert [event.type for event in client.events(job_id, after=events[0].event_id)] == [
        "job.started",
        "job.succeeded",
    ]
    client.ack(job_id, events[1])
    unacked = list(client.events(job_id, unacked=True))
    assert [event.event_id for event in unacked] == [events[2].event_id]
    assert events[-1].terminal
    assert events[-1].job is not None
    assert events[-1].job.status == "succeeded"
    assert events[-1].result == {"candidates": [], "scanned": 1}


def test_ack_moves_forward_only(client: Client) -> None:
    job_id = finished(client, "k-ack")
    events = list(client.events(job_id))
    assert (client.ack(job_id, events[1].event_id).acked, client.ack(job_id, events[0]).acked) == (
        2,
        2,
    )
    result = client.ack(job_id, "not-an-event-of-this-job")
    assert (result.acked, result.unacked) == (2, 1)


def test_follow_yields_until_terminal_and_acks_each_handled_event(
    client: Client, producer: FakeProducer
) -> None:
    job_id = client.submit(task("k-follow")).job.job_id
    seen = [event.type for event in client.follow(job_id, poll_interval_s=0.02, timeout_s=10)]
    assert seen == ["job.accepted", "job.started", "job.succeeded"]
    acks = [json.loads(s.body)["ack_through"] for s in producer.requests if "/ack" in s.path]
    assert len(acks) == 3
    assert client.events_page(job_id, unacked=True).unacked == 0


def test_follow_resumes_after_a_crash_from_the_servers_cursor(client: Client) -> None:
    job_id = finished(client, "k-resume")
    handled: list[str] = []

    def consumer_that_crashes_on_its_second_event() -> None:
        for event in client.follow(job_id, poll_interval_s=0.02, timeout_s=10):
            if len(handled) == 1:
                raise RuntimeError("crashed while handling")
            handled.append(event.type)

    with pytest.raises(RuntimeError):
        consumer_that_crashes_on_its_second_event()
    # A fresh consumer (a restart) sees the event it had not finished, and nothing before it.
    resumed = [event.type for event in client.follow(job_id, poll_interval_s=0.02, timeout_s=10)]
    assert handled == ["job.accepted"]
    assert resumed == ["job.started", "job.succeeded"]


def test_follow_of_a_finished_and_fully_acked_job_ends_at_once(
    client: Client, sleeps: Sleeps
) -> None:
    job_id = finished(client, "k-done")
    sleeps.clear()
    assert len(list(client.follow(job_id))) == 3
    assert list(client.follow(job_id)) == []
    assert sleeps == []


def test_follow_without_ack_reads_from_the_start_and_acks_nothing(
    client: Client, producer: FakeProducer
) -> None:
    job_id = finished(client, "k-noack")
    assert len(list(client.follow(job_id, ack=False))) == 3
    assert not [s for s in producer.requests if "/ack" in s.path]


def test_follow_pages_says_which_event_was_the_newest_and_acks_once_per_page(
    producer: FakeProducer, sleeps: Sleeps
) -> None:
    producer.page_size = 2
    client = client_for(producer.url, sleeps)
    job_id = finished(client, "k-pages-follow")
    pages = list(client.follow_pages(job_id, ack=False))
    assert [[event.type for event in page.events] for page in pages] == [
        ["job.accepted", "job.started"],
        ["job.succeeded"],
    ]
    # More followed the first page when it was read; the second reached the end of the stream.
    assert [page.next_after is None for page in pages] == [False, True]
    assert not [seen for seen in producer.requests if "/ack" in seen.path]
    acked = list(client.follow_pages(job_id))
    acks = [json.loads(s.body)["ack_through"] for s in producer.requests if "/ack" in s.path]
    assert acks == [page.events[-1].event_id for page in acked]
    assert client.events_page(job_id, unacked=True).unacked == 0


def test_follow_pages_of_a_live_job_never_yields_an_event_twice_nor_an_empty_page(
    client: Client, producer: FakeProducer
) -> None:
    job_id = client.submit(task("k-live-pages")).job.job_id
    pages = list(client.follow_pages(job_id, ack=False, poll_interval_s=0.02, timeout_s=10))
    ids = [event.event_id for page in pages for event in page.events]
    assert all(page.events for page in pages)
    assert len(ids) == len(set(ids)) == 3
    assert pages[-1].events[-1].type == "job.succeeded"
    assert pages[-1].next_after is None


def test_follow_pages_resumes_after_a_crash_from_the_last_acked_page(
    producer: FakeProducer, sleeps: Sleeps
) -> None:
    producer.page_size = 2
    client = client_for(producer.url, sleeps)
    job_id = finished(client, "k-pages-resume")
    handled: list[str] = []

    def consumer_that_crashes_on_its_second_page() -> None:
        for page in client.follow_pages(job_id):
            if handled:
                raise RuntimeError("crashed while handling")
            handled.extend(event.type for event in page.events)

    with pytest.raises(RuntimeError):
        consumer_that_crashes_on_its_second_page()
    resumed = [event.type for page in client.follow_pages(job_id) for event in page.events]
    assert (handled, resumed) == (["job.accepted", "job.started"], ["job.succeeded"])


def test_follow_times_out_on_a_job_that_does_not_finish(client: Client) -> None:
    job_id = client.submit(task("k-slow", target_id="slow")).job.job_id
    with pytest.raises(FollowTimeoutError):
        for _ in client.follow(job_id, poll_interval_s=0.01, timeout_s=0.2):
            pass


# --- retries ---------------------------------------------------------------------------------


def busy(retry_after: str | None = None) -> Canned:
    envelope = {"error": {"code": "resource_busy", "message": "busy", "retryable": True}}
    return Canned(503, envelope, {"Retry-After": retry_after} if retry_after else {})


def test_retryable_errors_are_retried_honouring_retry_after(
    client: Client, producer: FakeProducer, sleeps: Sleeps
) -> None:
    producer.script += [busy("2"), busy(), Canned(429, {"message": "Too Many Requests"})]
    submission = client.submit(task("k-retry"))
    assert submission.attempts == 4
    assert submission.created
    assert sleeps[0] == 2.0
    assert 0.5 <= sleeps[1] < 1.0  # 0.5 s · 2^1 with equal jitter
    assert 1.0 <= sleeps[2] < 2.0


def test_retry_after_as_an_http_date(producer: FakeProducer, sleeps: Sleeps) -> None:
    client = client_for(producer.url, sleeps, clock=lambda: 1_700_000_000.0)
    producer.script.append(busy("Tue, 14 Nov 2023 22:13:30 GMT"))  # 10 s after the clock
    client.capabilities()
    assert sleeps == [10.0]


def test_retry_after_is_capped(producer: FakeProducer, sleeps: Sleeps) -> None:
    client = client_for(producer.url, sleeps, retry=RetryPolicy(max_delay_s=5))
    producer.script.append(busy("3600"))
    client.capabilities()
    assert sleeps == [5.0]


def test_the_envelopes_retryable_flag_is_believed(
    client: Client, producer: FakeProducer, sleeps: Sleeps
) -> None:
    internal = {"error": {"code": "internal_error", "message": "boom", "retryable": False}}
    producer.script.append(Canned(500, internal))
    with pytest.raises(ServerError) as raised:
        client.capabilities()
    assert not raised.value.retryable
    assert sleeps == []


def test_retries_stop_after_the_policys_attempts(producer: FakeProducer, sleeps: Sleeps) -> None:
    client = client_for(producer.url, sleeps, retry=RetryPolicy(attempts=3))
    producer.script += [busy(), busy(), busy(), busy()]
    with pytest.raises(ServerError) as raised:
        client.capabilities()
    assert raised.value.code == "resource_busy"
    assert len(sleeps) == 2
    assert len(producer.script) == 1


def test_a_dropped_connection_is_retried_and_a_submit_stays_one_job(
    client: Client, producer: FakeProducer, sleeps: Sleeps
) -> None:
    producer.script.append(Canned(drop=True))
    submission = client.submit(task("k-drop"))
    assert submission.attempts == 2
    assert len(producer.jobs) == 1
    assert len(sleeps) == 1


def test_an_unreachable_producer_is_a_transport_error(sleeps: Sleeps) -> None:
    client = client_for("http://127.0.0.1:9", sleeps, retry=RetryPolicy(attempts=2))
    with pytest.raises(TransportError, match="connection refused") as raised:
        client.capabilities()
    assert len(sleeps) == 1
    assert raised.value.refused  # nothing listens there (a stopped server)


def test_a_dropped_connection_is_not_a_refused_one(producer: FakeProducer, sleeps: Sleeps) -> None:
    producer.script.append(Canned(drop=True))
    client = client_for(producer.url, sleeps, retry=RetryPolicy(attempts=1))
    with pytest.raises(TransportError) as raised:
        client.capabilities()
    assert not raised.value.refused


def test_redirects_are_not_followed(client: Client, producer: FakeProducer) -> None:
    producer.script.append(Canned(302, None, {"Location": "http://127.0.0.1:9/elsewhere"}))
    with pytest.raises(ApiError) as raised:
        client.capabilities()
    assert (raised.value.status, raised.value.code) == (302, "http_302")
    assert len(producer.requests) == 1


@pytest.mark.parametrize(
    ("canned", "message"),
    [
        (Canned(201, {"job": {}}), "unexpected HTTP 201"),
        (Canned(200, None), "not a JSON object"),
        (Canned(200, {"job": {"job_id": 7}}), "not a protocol document"),
    ],
)
def test_answers_that_are_not_protocol_documents(
    client: Client, producer: FakeProducer, canned: Canned, message: str
) -> None:
    producer.script.append(canned)
    with pytest.raises(ResponseError, match=message):
        client.submit(task("k-odd"))


def test_the_base_url_may_carry_a_stage_prefix(producer: FakeProducer, sleeps: Sleeps) -> None:
    client = client_for(producer.url + "/prod/", sleeps)
    with pytest.raises(NotFoundError):
        client.capabilities()
    assert producer.requests[-1].path == "/prod/capabilities"


@pytest.mark.parametrize("url", ["ftp://example.com", "example.com", "https://u:p@example.com"])
def test_base_urls_that_are_not_http_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        Client(url, "t")
