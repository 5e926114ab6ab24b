"""A consumer's view of its callbacks' delivery: GET /jobs/{job_id}/callbacks (an extension of
v1), through the real handler against moto and a real receiver."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest

from jobstream import runtime as runtime_module
from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.stream_images import new_items
from tests.conftest import CALLBACK_ORIGINS
from tests.integration.test_callbacks import put_dead_callbacks
from tests.integration.test_cli import base_url, run  # noqa: F401 - base_url: a fixture
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Api, Clock, canonical_task
from tests.support.receiver import receiver
from tests.support.state import whole_table
from tests.support.tenants import with_tenant
from tests.support.validation import validate


def submit(api: Api, url: str | None, key: str = "deliveries") -> str:
    task = canonical_task(idempotency_key=key)
    if url is None:
        task.pop("callback_url", None)
    else:
        task["callback_url"] = url
    response = api.post("/jobs", task)
    assert response.status == 202, response.body
    job_id: str = response.body["job"]["job_id"]
    return job_id


def deliveries(api: Api, job_id: str) -> dict[str, Any]:
    response = api.get(f"/jobs/{job_id}/callbacks")
    assert response.status == 200, response.body
    validate(response.body, "JobDeliveries")
    document: dict[str, Any] = response.body
    return document


def test_a_failed_attempt_then_a_delivery_are_shown(crt: Runtime, api: Api, clock: Clock) -> None:
    with receiver(503, 204) as hook:
        job_id = submit(api, hook.url)
        assert deliveries(api, job_id)["callbacks"][0]["state"] == "pending"
        callbacks.deliver(crt, IntentRef(job_id, 1))
        (view,) = deliveries(api, job_id)["callbacks"]
        assert (view["type"], view["state"], view["attempts"]) == ("job.accepted", "retrying", 1)
        assert (view["last_status"], view["max_attempts"]) == (503, 8)
        assert "503" in view["last_error"]
        assert view["next_attempt_at"] > clock.now
        page = api.get(f"/jobs/{job_id}/events").body
        assert view["event_id"] == page["events"][0]["event_id"]
        clock.advance(crt.settings.callback_retry_max_ms)
        callbacks.deliver(crt, IntentRef(job_id, 1))
    (view,) = deliveries(api, job_id)["callbacks"]
    assert (view["state"], view["attempts"], view["last_status"]) == ("delivered", 2, 204)
    assert view["delivered_at"] == clock.now
    assert "next_attempt_at" not in view
    endpoint = deliveries(api, job_id)["endpoint"]
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(hook.url))
    assert (endpoint["health"], endpoint["origin"]) == ("healthy", origin)


def test_a_dead_letter_is_shown_with_its_reason(crt: Runtime, api: Api) -> None:
    with receiver(404) as hook:
        job_id = submit(api, hook.url)
        callbacks.deliver(crt, IntentRef(job_id, 1))
        document = deliveries(api, job_id)
    assert document["callback_url"] == hook.url
    (view,) = document["callbacks"]
    assert (view["state"], view["attempts"], view["last_status"]) == ("dead", 1, 404)
    assert "dead_at" in view


def test_a_refusal_shown_to_the_consumer_names_no_address_dns_gave(crt: Runtime, api: Api) -> None:
    """A tenant must not map the producer's internal names through its callbacks' errors."""
    public = with_tenant(crt, "acme", callback_origins=None)
    job_id = submit(api, "https://db.corp.example.test/hooks")
    internal = replace(public, resolver=lambda host, port: ["10.0.3.7"])
    assert callbacks.deliver(internal, IntentRef(job_id, 1)).outcome == "dead"
    (view,) = deliveries(api, job_id)["callbacks"]
    assert view["last_error"] == (
        "refused: host_not_allowed: db.corp.example.test resolves to an address that is not public"
    )
    (dead,) = api.get("/callbacks?state=dead").body["callbacks"]
    assert "10.0.3.7" not in json.dumps(dead)


def test_every_event_of_the_job_is_listed_in_order(crt: Runtime, api: Api) -> None:
    with receiver(204) as hook:
        job_id = submit(api, hook.url)
        assert api.post(f"/jobs/{job_id}/cancel", {}).status == 200
        listed = deliveries(api, job_id)["callbacks"]
    stream = api.get(f"/jobs/{job_id}/events").body["events"]
    assert [view["event_id"] for view in listed] == [event["event_id"] for event in stream]
    assert [view["type"] for view in listed] == ["job.accepted", "job.cancelled"]


def test_a_job_without_a_callback_url_has_none(crt: Runtime, api: Api) -> None:
    job_id = submit(api, None)
    document = deliveries(api, job_id)
    assert document["callbacks"] == []
    assert "callback_url" not in document


def test_another_tenants_job_is_unknown(crt: Runtime, api: Api, other_tenant: Api) -> None:
    with receiver(204) as hook:
        job_id = submit(api, hook.url)
    response = other_tenant.get(f"/jobs/{job_id}/callbacks")
    assert response.status == 404
    assert response.body["error"]["code"] == "invalid_params"
    assert Api(token=None).get(f"/jobs/{job_id}/callbacks").status == 401
    assert api.get("/jobs/job_unknown/callbacks").status == 404


def test_the_cli_shows_a_jobs_callbacks(
    crt: Runtime,
    api: Api,
    base_url: str,  # noqa: F811 - test_cli's fixture, imported above
) -> None:
    with receiver(503) as hook:
        job_id = submit(api, hook.url)
        callbacks.deliver(crt, IntentRef(job_id, 1))
    shown = run("callbacks", job_id, url=base_url)
    assert shown.exit_code == 0, shown.output
    assert "job.accepted" in shown.stdout
    assert "retrying" in shown.stdout
    assert "1/8 attempts" in shown.stdout
    assert "last 503" in shown.stdout
    lines = run("callbacks", job_id, url=base_url, output="json").stdout.splitlines()
    assert [json.loads(line)["state"] for line in lines] == ["retrying"]
    unknown = run("callbacks", "job_unknown", url=base_url)
    assert unknown.exit_code != 0


@pytest.fixture
def both(crt: Runtime, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """The callbacks runtime where globex may call back to this machine too."""
    runtime = with_tenant(crt, "globex", callback_origins=CALLBACK_ORIGINS)
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


def dead_job(crt: Runtime, api: Api, url: str, key: str) -> str:
    job_id = submit(api, url, key)
    callbacks.deliver(crt, IntentRef(job_id, 1))
    return job_id


def test_dead_letters_are_listed_for_their_tenant_only_and_paged(
    both: Runtime, api: Api, other_tenant: Api, clock: Clock
) -> None:
    crt = both
    with receiver(404) as hook:
        mine = []
        for index in range(5):
            clock.advance(10)
            mine.append(dead_job(crt, api, hook.url, f"dead-{index}"))
        clock.advance(10)
        theirs = dead_job(crt, other_tenant, hook.url, "theirs")
    listed: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10):
        response = api.get(
            "/callbacks?state=dead&limit=2" + (f"&cursor={cursor}" if cursor else "")
        )
        assert response.status == 200, response.body
        validate(response.body, "CallbackPage")
        listed += response.body["callbacks"]
        cursor = response.body.get("next_cursor")
        if cursor is None:
            break
    assert [view["job_id"] for view in listed] == mine  # oldest death first
    assert all(view["state"] == "dead" and view["last_status"] == 404 for view in listed)
    (other,) = other_tenant.get("/callbacks").body["callbacks"]
    assert other["job_id"] == theirs
    # A cursor is bound to its tenant; an edited one is refused.
    first = api.get("/callbacks?limit=1").body["next_cursor"]
    assert other_tenant.get(f"/callbacks?cursor={first}").status == 400
    assert api.get(f"/callbacks?cursor={first[:-2]}xx").status == 400
    assert api.get("/callbacks?state=delivered").status == 400
    assert api.get("/callbacks?limit=501").status == 400


def test_a_redrive_revives_the_tenants_dead_letters_for_the_dispatcher(
    both: Runtime, api: Api, other_tenant: Api, clock: Clock
) -> None:
    crt = both
    with receiver(404) as hook:
        first = dead_job(crt, api, hook.url, "first")
        clock.advance(1_000)
        second = dead_job(crt, api, hook.url, "second")
        theirs = dead_job(crt, other_tenant, hook.url, "theirs")
    before = whole_table(crt)
    refused = api.post("/callbacks/redrive", {"jobid": first})
    assert refused.status == 400
    assert whole_table(crt) == before
    assert other_tenant.post("/callbacks/redrive", {"job_id": first}).status == 404
    assert whole_table(crt) == before
    # Those dead since a time: the second only.
    answer = api.post("/callbacks/redrive", {"since": clock.now - 500})
    assert answer.status == 200, answer.body
    validate(answer.body, "RedriveResult")
    assert (answer.body["revived"], answer.body["more"]) == (1, False)
    assert [view["job_id"] for view in api.get("/callbacks").body["callbacks"]] == [first]
    revived = crt.callbacks.get(IntentRef(second, 1))
    assert revived is not None
    assert (revived.state, revived.attempts) == ("pending", 0)
    # The dispatcher sends it from the table's stream, as a new callback (no request path
    # sends): open, untried, and not marked as sent by anyone.
    item = whole_table(crt)[(keys.job_pk(second), keys.event_sk(1))]
    assert (item["state"]["S"], item["attempts"]["N"]) == ("pending", "0")
    assert "resent_at" not in item
    assert new_items([{"eventName": "MODIFY", "dynamodb": {"NewImage": item}}]).callbacks
    # Then all of them; the other tenant's stays dead.
    assert api.post("/callbacks/redrive", {}).body["revived"] == 1
    assert api.get("/callbacks").body["callbacks"] == []
    assert [view["job_id"] for view in other_tenant.get("/callbacks").body["callbacks"]] == [theirs]


def test_a_redrive_since_a_time_reads_only_those_dead_since(
    crt: Runtime, api: Api, clock: Clock
) -> None:
    """1,100 older dead callbacks (more than a request revives) before 3 recent ones: the
    redrive since a time reads the recent ones only, one query, and revives all three."""
    put_dead_callbacks(crt, "job_" + "O" * 32, range(1, 1_101), at=clock.now, tenant="acme")
    since = clock.advance(60_000)
    recent = "job_" + "R" * 32
    put_dead_callbacks(crt, recent, range(1, 4), at=clock.advance(1_000), tenant="acme")
    queries: list[str] = []

    def note(model: Any, **_: Any) -> None:
        if model.name == "Query":
            queries.append(model.name)

    events = crt.store.client.meta.events
    events.register("before-call.dynamodb", note)
    try:
        answer = api.post("/callbacks/redrive", {"since": since})
    finally:
        events.unregister("before-call.dynamodb", note)
    assert answer.status == 200, answer.body
    assert (answer.body["revived"], answer.body["more"]) == (3, False)
    assert len(queries) == 1
    assert {crt.callbacks.get(IntentRef(recent, sequence)).state for sequence in (1, 2, 3)} == {
        "pending"
    }


def test_a_redrive_of_one_job(crt: Runtime, api: Api) -> None:
    with receiver(404) as hook:
        job_id = dead_job(crt, api, hook.url, "one")
        other = dead_job(crt, api, hook.url, "other")
    answer = api.post("/callbacks/redrive", {"job_id": job_id})
    assert answer.body["revived"] == 1
    assert [view["job_id"] for view in api.get("/callbacks").body["callbacks"]] == [other]
    assert api.post("/callbacks/redrive", {"job_id": job_id}).body["revived"] == 0


def test_the_cli_lists_and_redrives_the_callers_dead_letters(
    both: Runtime,
    api: Api,
    other_tenant: Api,
    base_url: str,  # noqa: F811 - test_cli's fixture, imported above
) -> None:
    with receiver(404) as hook:
        mine = dead_job(both, api, hook.url, "cli-mine")
        dead_job(both, other_tenant, hook.url, "cli-theirs")
    listed = run("dead-callbacks", url=base_url)
    assert listed.exit_code == 0, listed.output
    assert mine in listed.stdout
    assert "404" in listed.stdout
    lines = run("dead-callbacks", url=base_url, output="json").stdout.splitlines()
    assert [json.loads(line)["job_id"] for line in lines] == [mine]
    both_given = run("redrive", "--job", mine, "--since", "1", url=base_url)
    assert both_given.exit_code != 0
    redriven = run("redrive", url=base_url)
    assert redriven.exit_code == 0, redriven.output
    assert "1 dead callbacks sent again" in redriven.stdout
    assert run("dead-callbacks", url=base_url).stdout.strip() == "no dead callbacks"
    # The other tenant's dead letter was not touched.
    assert len(other_tenant.get("/callbacks").body["callbacks"]) == 1


def test_pending_callbacks_are_those_waiting_after_a_failure(
    both: Runtime, api: Api, other_tenant: Api, clock: Clock
) -> None:
    crt = both
    with receiver(503, 204) as hook:
        untried = submit(api, hook.url, "untried")
        failing = submit(api, hook.url, "failing")
        callbacks.deliver(crt, IntentRef(failing, 1))
        (view,) = api.get("/callbacks?state=pending").body["callbacks"]
        assert (view["job_id"], view["state"], view["last_status"]) == (failing, "retrying", 503)
        assert untried not in [
            c["job_id"] for c in api.get("/callbacks?state=pending").body["callbacks"]
        ]
        assert other_tenant.get("/callbacks?state=pending").body["callbacks"] == []
        page = api.get("/callbacks?state=pending&limit=1").body
        validate(page, "CallbackPage")
        # A cursor of one list is no cursor of the other.
        if "next_cursor" in page:
            assert api.get(f"/callbacks?state=dead&cursor={page['next_cursor']}").status == 400
        clock.advance(crt.settings.callback_retry_max_ms)
        callbacks.deliver(crt, IntentRef(failing, 1))
    # Delivered: off the list.
    assert api.get("/callbacks?state=pending").body["callbacks"] == []


def test_a_disabled_endpoint_shows_in_the_jobs_deliveries(
    crt: Runtime, api: Api, clock: Clock
) -> None:
    with receiver(410) as hook:
        job_id = submit(api, hook.url)
        callbacks.deliver(crt, IntentRef(job_id, 1))
    document = deliveries(api, job_id)
    assert document["endpoint"]["health"] == "disabled"
    assert "410" in document["endpoint"]["last_error"]
    (view,) = document["callbacks"]
    assert view["state"] == "paused"  # held, its attempt given back: nothing dead-lettered
    assert view["attempts"] == 0
    (listed,) = api.get("/callbacks?state=pending").body["callbacks"]
    assert (listed["job_id"], listed["state"]) == (job_id, "paused")


def test_the_tenant_re_enables_its_disabled_endpoint_and_the_sweep_sends_the_backlog(
    both: Runtime, api: Api, other_tenant: Api, clock: Clock
) -> None:
    crt = both
    with receiver(410, 204) as hook:
        job_id = submit(api, hook.url)
        callbacks.deliver(crt, IntentRef(job_id, 1))
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(hook.url))
        (listed,) = api.get("/callbacks/endpoints").body["endpoints"]
        assert (listed["origin"], listed["health"]) == (origin, "disabled")
        validate(api.get("/callbacks/endpoints").body, "EndpointList")
        assert other_tenant.get("/callbacks/endpoints").body["endpoints"] == []
        # Another tenant naming the same origin enables its own endpoint, never this one.
        theirs = other_tenant.post("/callbacks/endpoints/enable", {"origin": origin})
        assert theirs.status == 200
        assert theirs.body["enabled"] is False
        assert api.get("/callbacks/endpoints").body["endpoints"][0]["health"] == "disabled"
        before = whole_table(crt)
        for bad in (None, {}, {"origin": ""}, {"origin": "ftp://x"}, {"origin": 5}):
            assert api.post("/callbacks/endpoints/enable", bad).status == 400, bad
        assert whole_table(crt) == before
        answer = api.post("/callbacks/endpoints/enable", {"origin": hook.url})
        assert api.post("/callbacks/endpoints/enable", {"origin": origin}).body["enabled"] is False
        assert answer.status == 200, answer.body
        validate(answer.body, "EnableEndpointResult")
        assert (answer.body["enabled"], answer.body["endpoint"]["health"]) == (True, "healthy")
        # The next sweep sends the held callback; it is delivered once.
        clock.advance(1)
        sweep(crt)
        dispatch_stream(crt)
        for message in _messages(crt):
            callbacks.handle_message(crt, message["Body"], message["ReceiptHandle"])
        assert len(hook.requests) == 2
    (view,) = deliveries(api, job_id)["callbacks"]
    assert (view["state"], view["last_status"]) == ("delivered", 204)


def _messages(rt: Runtime) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs")
    found: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=rt.settings.callback_queue_url or "", MaxNumberOfMessages=10
    ).get("Messages", []):
        found += batch
    return found
