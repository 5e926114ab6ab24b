"""A consumer's view of its callbacks' delivery: GET /jobs/{job_id}/callbacks (an extension of
v1), through the real handler against moto and a real receiver."""

from __future__ import annotations

import json
from typing import Any

from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks
from tests.integration.test_cli import base_url, run  # noqa: F401 - base_url: a fixture
from tests.support.harness import Api, Clock, canonical_task
from tests.support.receiver import receiver
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


def test_a_dead_letter_is_shown_with_its_reason(crt: Runtime, api: Api) -> None:
    with receiver(404) as hook:
        job_id = submit(api, hook.url)
        callbacks.deliver(crt, IntentRef(job_id, 1))
        document = deliveries(api, job_id)
    assert document["callback_url"] == hook.url
    (view,) = document["callbacks"]
    assert (view["state"], view["attempts"], view["last_status"]) == ("dead", 1, 404)
    assert "dead_at" in view


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
