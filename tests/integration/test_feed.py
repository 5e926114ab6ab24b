"""The tenant's event feed (GET /events, POST /events/ack): an extension of v1, through the real
handlers against moto."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from jobstream import retries
from jobstream import runtime as runtime_module
from jobstream.protocol import feed as feed_documents
from jobstream.runtime import Runtime
from jobstream.store import keys
from tests.integration.test_cli import base_url, run  # noqa: F401 - base_url: a fixture
from tests.support.faults import Faults, injected
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import mark_failed, whole_table
from tests.support.validation import validate, validate_error


@pytest.fixture
def frt(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """The runtime with no settle time (the test's clock stands still) and quick polls."""
    settings = rt.settings.model_copy(update={"feed_settle_ms": 0, "feed_poll_ms": 20})
    runtime = replace(rt, settings=settings)
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


def submit(api: Api, key: str) -> str:
    response = api.post("/jobs", canonical_task(idempotency_key=key))
    assert response.status == 202, response.body
    job_id: str = response.body["job"]["job_id"]
    return job_id


def follow(
    api: Api, *, limit: int | None = None, after: str | None = None
) -> tuple[list[Any], str]:
    """Every event of the caller's feed from `after` (the start when None), page by page."""
    events: list[Any] = []
    cursor = after
    for _ in range(10_000):
        query = [f"limit={limit}"] if limit is not None else []
        if cursor is not None:
            query.append(f"after={cursor}")
        response = api.get("/events" + ("?" + "&".join(query) if query else ""))
        assert response.status == 200, response.body
        validate(response.body, "FeedPage")
        assert limit is None or len(response.body["events"]) <= limit
        events += response.body["events"]
        cursor = response.body["next_after"]
        if not response.body["has_more"]:
            return events, cursor
    raise AssertionError("the feed never ended")


def stream_of(api: Api, job_id: str) -> list[str]:
    """The job's own stream, as its events page shows it (event ids in order)."""
    ids: list[str] = []
    after = ""
    while True:
        response = api.get(f"/jobs/{job_id}/events" + (f"?after={after}" if after else ""))
        assert response.status == 200, response.body
        ids += [event["event_id"] for event in response.body["events"]]
        after = response.body.get("next_after", "")
        if not after:
            return ids


@pytest.fixture
def two_tenants(frt: Runtime, api: Api, other_tenant: Api, clock: Clock) -> dict[str, list[str]]:
    """50 jobs each, interleaved; some cancelled, some failed (their terminal events recorded
    late, by the read that finds them missing), so jobs have 1 to 2 events each."""
    jobs: dict[str, list[str]] = {"acme": [], "globex": []}
    for index in range(50):
        for name, client in (("acme", api), ("globex", other_tenant)):
            clock.advance(7)
            job_id = submit(client, f"{name}-{index}")
            jobs[name].append(job_id)
            if index % 3 == 0:
                clock.advance(3)
                assert client.post(f"/jobs/{job_id}/cancel", {}).status == 200
            elif index % 5 == 0:
                mark_failed(frt, job_id, at=clock.now, reason="network_error")
                clock.advance(1)
    return jobs


def test_each_tenant_follows_exactly_its_own_events_once_in_order(
    two_tenants: dict[str, list[str]], api: Api, other_tenant: Api
) -> None:
    for name, client in (("acme", api), ("globex", other_tenant)):
        # The job streams are read first: the implied terminal events get recorded then.
        streams = {job_id: stream_of(client, job_id) for job_id in two_tenants[name]}
        expected = sorted(event_id for ids in streams.values() for event_id in ids)
        for limit in (None, 1, 7, 200):
            events, _ = follow(client, limit=limit)
            ids = [event["event_id"] for event in events]
            assert sorted(ids) == expected, f"{name} limit={limit}"
            assert len(ids) == len(set(ids))
            # One job's events in their stream's order.
            for job_id, stream in streams.items():
                assert [e["event_id"] for e in events if e["job_id"] == job_id] == stream
            assert {event["job_id"] for event in events} == set(two_tenants[name])


def test_a_cursor_resumes_after_what_it_has_seen(frt: Runtime, api: Api, clock: Clock) -> None:
    first = submit(api, "one")
    seen, cursor = follow(api)
    assert [event["job_id"] for event in seen] == [first]
    # Nothing new: the same cursor back, an empty page.
    again = api.get(f"/events?after={cursor}")
    assert again.body["events"] == []
    assert again.body["has_more"] is False
    assert again.body["next_after"] == cursor
    clock.advance(10)
    second = submit(api, "two")
    assert api.post(f"/jobs/{first}/cancel", {}).status == 200
    later, _ = follow(api, after=cursor)
    assert [(e["job_id"], e["type"]) for e in later] == [
        (second, "job.accepted"),
        (first, "job.cancelled"),
    ]


def test_an_event_shows_only_once_it_has_settled(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    settling = replace(rt, settings=rt.settings.model_copy(update={"feed_settle_ms": 1_000}))
    monkeypatch.setattr(runtime_module, "runtime", lambda: settling)
    submit(api, "one")
    assert api.get("/events").body["events"] == []
    clock.advance(999)
    assert api.get("/events").body["events"] == []
    clock.advance(1)
    assert len(api.get("/events").body["events"]) == 1


@pytest.mark.parametrize("write", ["cancel", "admission"])
def test_an_event_whose_write_was_retried_past_the_settle_window_is_not_skipped(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """An event's write refused 3 times (a transaction conflict: a terminal commit's
    transaction, an admission's event put) lands well past the settle window; meanwhile another
    job is admitted and a reader pages past it. Each attempt carries a stamp of its own, so the
    event lands ahead of that reader's cursor, which shows it next."""
    settling = replace(rt, settings=rt.settings.model_copy(update={"feed_settle_ms": 250}))
    monkeypatch.setattr(runtime_module, "runtime", lambda: settling)
    first = submit(api, "first")
    clock.advance(1_000)
    _, cursor = follow(api)
    # Only the requests that name the feed's key fail: the writes that carry a stamp.
    faults = Faults(kinds=("conflict",), at=1, times=3, matching="feed_sk")
    meanwhile: dict[str, Any] = {}

    def wait(seconds: float) -> None:
        clock.advance(int(seconds * 1000) + 30)  # the wait, and the failed attempt's round trip
        if meanwhile:
            return
        faults.matching = "not a request"  # another job is admitted, and read, without a fault
        meanwhile["job"] = submit(api, "meanwhile")
        clock.advance(300)
        meanwhile["page"] = follow(api, after=cursor)
        faults.matching = "feed_sk"

    previous = retries.set_default_policy(replace(retries.default_policy(), sleep=wait))
    try:
        with injected(faults):
            if write == "cancel":
                assert api.post(f"/jobs/{first}/cancel", {}).status == 200
                expected = (first, "job.cancelled")
            else:
                expected = (submit(api, "retried"), "job.accepted")
    finally:
        retries.set_default_policy(previous)
    assert faults.fired == 3
    passed, reader = meanwhile["page"]
    assert [(e["job_id"], e["type"]) for e in passed] == [(meanwhile["job"], "job.accepted")]
    clock.advance(1_000)
    later, _ = follow(api, after=reader)
    assert [(e["job_id"], e["type"]) for e in later] == [expected]


def test_a_long_poll_answers_soon_after_an_event_commits(frt: Runtime, api: Api) -> None:
    start = api.get("/events")
    answers: list[Any] = []

    def poll() -> None:
        began = time.monotonic()
        response = api.get(f"/events?after={start.body['next_after']}&wait_ms=10000")
        answers.append((response, time.monotonic() - began))

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)
    submitted = time.monotonic()
    job_id = submit(api, "late")
    poller.join(timeout=15)
    ((response, waited),) = answers
    assert response.status == 200
    assert [(e["job_id"], e["type"]) for e in response.body["events"]] == [(job_id, "job.accepted")]
    assert waited >= 0.3
    assert time.monotonic() - submitted < 1.0


def test_an_empty_long_poll_waits_then_answers_its_cursor(frt: Runtime, api: Api) -> None:
    start = api.get("/events").body["next_after"]
    began = time.monotonic()
    response = api.get(f"/events?after={start}&wait_ms=300")
    assert response.status == 200
    assert response.body["events"] == []
    assert response.body["next_after"] == start
    assert time.monotonic() - began >= 0.3


def test_named_cursors_move_forward_only_and_resume(
    frt: Runtime, api: Api, other_tenant: Api, clock: Clock
) -> None:
    first = submit(api, "one")
    page = api.get("/events?consumer=bot-1")
    assert page.body["consumer"] == "bot-1"
    assert [event["job_id"] for event in page.body["events"]] == [first]
    through = page.body["next_after"]
    acked = api.post("/events/ack", {"consumer": "bot-1", "through": through})
    assert acked.status == 200, acked.body
    validate(acked.body, "FeedAck")
    assert acked.body["through"] == through
    clock.advance(5)
    second = submit(api, "two")
    # A new client (nothing kept but the name) resumes after the acked place.
    resumed = api.get("/events?consumer=bot-1")
    assert [event["job_id"] for event in resumed.body["events"]] == [second]
    later = resumed.body["next_after"]
    assert api.post("/events/ack", {"consumer": "bot-1", "through": later}).status == 200
    # An older cursor never moves it back: the answer says where it stands.
    back = api.post("/events/ack", {"consumer": "bot-1", "through": through})
    assert back.body["through"] == later
    assert api.get("/events?consumer=bot-1").body["events"] == []
    # Another name, and another tenant's same name, start from the beginning.
    assert len(api.get("/events?consumer=bot-2").body["events"]) == 2
    assert other_tenant.get("/events?consumer=bot-1").body["events"] == []


def _tampered(cursor: str) -> str:
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    position, _, check = raw.rpartition("|")
    edited = position.replace("0", "1", 1) + "|" + check
    return base64.urlsafe_b64encode(edited.encode()).decode().rstrip("=")


@pytest.mark.parametrize("query", ["wait_ms=0", "wait_ms=000", "limit=0200", "wait_ms=0&x=42"])
def test_zeros_are_read_as_numbers(frt: Runtime, api: Api, query: str) -> None:
    """`wait_ms=0` (no wait) was a 500: its digits were counted after its zeros were stripped."""
    response = api.get(f"/events?{query}")
    assert response.status == 200, (query, response.body)


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=201",
        "limit=x",
        "wait_ms=20001",
        "wait_ms=-1",
        "after=",
        "after=bm90IGEgY3Vyc29y",
        "after=%%%",
        "consumer=",
        "consumer=" + "x" * 65,
        "consumer=a%20b",
        "consumer=a&after=x",
    ],
)
def test_bad_queries_are_invalid_params(frt: Runtime, api: Api, query: str) -> None:
    response = api.get(f"/events?{query}")
    assert response.status == 400, (query, response.body)
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"


def test_tampered_and_foreign_cursors_are_refused(
    frt: Runtime, api: Api, other_tenant: Api
) -> None:
    submit(api, "one")
    cursor = api.get("/events").body["next_after"]
    for bad in (_tampered(cursor), other_tenant.get("/events").body["next_after"]):
        assert api.get(f"/events?after={bad}").status == 400
    # Another tenant's cursor of a real place in acme's feed is refused by globex.
    assert other_tenant.get(f"/events?after={cursor}").status == 400
    # A well-checked cursor of a place the feed never writes.
    forged = feed_documents.encode_cursor("acme", "not-a-position")
    assert api.get(f"/events?after={forged}").status == 400


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {},
        {"consumer": "bot"},
        {"through": "x"},
        {"consumer": "", "through": "x"},
        {"consumer": "bot", "through": ""},
        {"consumer": "bot", "through": "bm90IGEgY3Vyc29y"},
        {"consumer": 5, "through": "x"},
    ],
)
def test_bad_acks_are_invalid_params_and_write_nothing(frt: Runtime, api: Api, body: Any) -> None:
    submit(api, "one")
    before = whole_table(frt)
    response = api.post("/events/ack", body)
    assert response.status == 400, (body, response.body)
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert whole_table(frt) == before


def test_an_ack_of_another_tenants_cursor_is_refused(
    frt: Runtime, api: Api, other_tenant: Api
) -> None:
    submit(api, "one")
    cursor = api.get("/events").body["next_after"]
    before = whole_table(frt)
    response = other_tenant.post("/events/ack", {"consumer": "bot", "through": cursor})
    assert response.status == 400
    assert whole_table(frt) == before


def test_the_feed_needs_a_token(frt: Runtime) -> None:
    assert Api(token=None).get("/events").status == 401
    assert Api(token="wrong").post("/events/ack", {"consumer": "a", "through": "b"}).status == 401


def test_only_protocol_events_enter_the_index(frt: Runtime, api: Api) -> None:
    job_id = submit(api, "one")
    table = whole_table(frt)
    entries = [item for (_pk, sk), item in table.items() if "feed_pk" in item]
    assert [sk for (_pk, sk), item in table.items() if "feed_pk" in item] == [keys.event_sk(1)]
    assert entries[0]["feed_pk"]["S"].endswith("#acme")
    assert job_id in entries[0]["feed_sk"]["S"]


def test_capabilities_advertise_the_feed(frt: Runtime, api: Api) -> None:
    document = api.get("/capabilities").body
    feed = document["extensions"]["event_feed"]
    assert (feed["feed"], feed["ack"]) == ("/events", "/events/ack")
    assert (feed["max_limit"], feed["max_wait_ms"]) == (200, 20_000)


def test_the_cli_prints_the_feed_and_moves_a_named_cursor(
    frt: Runtime,
    api: Api,
    clock: Clock,
    base_url: str,  # noqa: F811 - test_cli's fixture, imported above
) -> None:
    first = submit(api, "one")
    printed = run("feed", "--consumer", "cli", url=base_url, output="json")
    assert printed.exit_code == 0, printed.output
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [(line["job_id"], line["type"]) for line in lines] == [(first, "job.accepted")]
    clock.advance(5)
    second = submit(api, "two")
    # The name kept the place: only what came after it.
    again = run("feed", "--consumer", "cli", url=base_url)
    assert again.exit_code == 0, again.output
    (second_accepted,) = stream_of(api, second)
    assert second_accepted in again.stdout
    assert stream_of(api, first)[0] not in again.stdout
    assert "resume with --after" in again.stdout
    both = run("feed", "--consumer", "x", "--after", "y", url=base_url)
    assert both.exit_code != 0
