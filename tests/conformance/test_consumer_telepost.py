"""consumer-telepost §3: what the real consumer (TelePost) sends and depends on, items 1-24.

Every request is made the way TelePost's client makes it (see `_support.Client`).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import pytest

from tests.conformance._support import (
    CALLBACK_TOKEN,
    ERROR_CODES,
    LEGACY_JOB_KEYS,
    NOVEL_TARGET,
    REFERENCE_TARGET,
    SLOW_TARGET,
    STATUSES,
    TERMINAL,
    Client,
    Stack,
    key,
    now_ms,
    same_event,
    seg,
    telepost_task,
    types,
    wait_until,
)
from tests.conformance.test_job_facade import misconfigured_answers_503
from tests.support.receiver import Received, receiver
from tests.support.validation import BUSINESS_TERMS, keys_of, validate

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("conformance")]


def negotiate(client: Client) -> None:
    """TelePost's capability check before every submit and read (§2.3)."""
    capabilities = client.capabilities()
    assert any(v == "1" or v.split(".")[0] == "1" for v in capabilities["protocol_versions"])
    assert any(t.get("name") == "candidate_search" for t in capabilities["job_types"])


def telepost_get(client: Client, idempotency_key: str) -> dict[str, Any]:
    """`get(request_id)` (§2.5): the listing by key, the job-id fallback only if nothing matched."""
    negotiate(client)
    page = client.jobs(idempotency_key=idempotency_key)
    matches = [job for job in page["jobs"] if job.get("idempotency_key") == idempotency_key]
    if matches:
        return max(matches, key=lambda job: (job["updated_at"], job["created_at"]))
    return client.job(idempotency_key)


def test_consumer_01_capabilities(main: Client) -> None:
    started = time.monotonic()
    for _ in range(5):  # called before every submit and read: cheap and stable
        capabilities = main.capabilities()
    assert time.monotonic() - started < 5
    assert "1" in capabilities["protocol_versions"]
    declaration = next(d for d in capabilities["job_types"] if d["name"] == "candidate_search")
    assert declaration["params_schema"]
    assert declaration["result_schema"]
    for budget in ("queued_timeout_ms", "stall_timeout_ms", "default_deadline_ms"):
        assert declaration[budget] > 0


def test_consumer_02_bearer_on_every_route(main: Client) -> None:
    job = main.admit(telepost_task(key("tp-02"), REFERENCE_TARGET))
    job_id = seg(job["job_id"])
    routes: list[tuple[str, str, Any, str]] = [
        ("GET", "/capabilities", None, "Capabilities"),
        ("POST", "/jobs", telepost_task(key("tp-02b"), REFERENCE_TARGET), "JobReceipt"),
        ("GET", "/jobs?idempotency_key=x", None, "JobPage"),
        ("GET", f"/jobs/{job_id}", None, "Job"),
        ("POST", f"/jobs/{job_id}/cancel", None, "Job"),
        ("GET", f"/jobs/{job_id}/events", None, "EventPage"),
        ("POST", f"/jobs/{job_id}/events/ack", {"ack_through": "evt-1-1"}, "AckResult"),
    ]
    for token in (None, "", "wrong-token"):
        for method, path, body, schema in routes:
            response = main.call(method, path, body, schema=schema, token=token)
            assert response.status in (401, 403), (token, method, path, response.body)
            assert response.body["error"]["code"] == "auth_error"
    assert main.job(job["job_id"])["status"] != "cancelled"


def test_consumer_03_no_idempotency_or_accept_header_needed(main: Client) -> None:
    # Exactly TelePost's headers: urllib's defaults, a bearer and a JSON content type.
    task = telepost_task(key("tp-03"), REFERENCE_TARGET)
    request = urllib.request.Request(
        main.base_url + "/jobs", data=json.dumps(task).encode(), method="POST"
    )
    request.add_header("Authorization", f"Bearer {main.token}")
    request.add_header("Content-Type", "application/json")
    assert not request.has_header("Accept")
    assert not request.has_header("Idempotency-key")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
        body = json.loads(response.read())
    validate(body, "JobReceipt")
    assert body["job"]["idempotency_key"] == task["idempotency_key"]


def test_consumer_04_target_only_params(main: Client) -> None:
    negotiate(main)
    task = telepost_task(key("tp-04"), REFERENCE_TARGET)
    assert task["params"] == {"target_id": REFERENCE_TARGET}
    job = main.admit(task)
    done = main.wait_terminal(job["job_id"])
    assert done["status"] == "succeeded", done


def test_consumer_05_target_id_accepted_and_declared(multi: Client) -> None:
    features = multi.capabilities()["job_types"][0]["features"]
    assert "target_selector" in features
    job = multi.admit(telepost_task(key("tp-05"), "bot2-illust-landscape"))
    done = multi.wait_terminal(job["job_id"])
    assert done["status"] == "succeeded", done
    assert {c["work_type"] for c in done["result"]["candidates"]} == {"illustration"}


def test_consumer_06_optional_fields(main: Client, sink: Any) -> None:
    with_all = telepost_task(key("tp-06a"), REFERENCE_TARGET, "chain-6", sink.url)
    job = main.admit(with_all)
    assert job["correlation_id"] == "chain-6"
    assert "labels" not in with_all
    assert "deadline_ms" not in with_all
    bare = telepost_task(key("tp-06b"), REFERENCE_TARGET, correlation_id=None)
    assert set(bare) == {"protocol_version", "job_type", "idempotency_key", "params"}
    main.admit(bare)


def test_consumer_07_first_admission_is_202_replay_is_200(main: Client) -> None:
    task = telepost_task(key("tp-07"), REFERENCE_TARGET)
    first = main.submit(task)
    assert first.status == 202
    assert first.headers["content-type"].startswith("application/json")
    replay = main.submit(task)
    assert replay.status == 200
    assert replay.body["job"]["job_id"] == first.body["job"]["job_id"]
    main.wait_terminal(first.body["job"]["job_id"])
    late = main.submit(task)  # the "wake" re-submit, after the job finished
    assert late.status == 200
    assert late.body["job"]["job_id"] == first.body["job"]["job_id"]


def test_consumer_08_same_key_other_params_is_409(main: Client, multi: Client) -> None:
    idempotency_key = key("tp-08")
    multi.admit(telepost_task(idempotency_key, NOVEL_TARGET))
    response = multi.submit(telepost_task(idempotency_key, "bot1-novel-fantasy"))
    assert response.status == 409
    assert response.body["error"]["code"] == "idempotency_conflict"
    assert response.body["error"]["retryable"] is False


def test_consumer_09_job_is_wrapped(main: Client) -> None:
    response = main.submit(telepost_task(key("tp-09"), REFERENCE_TARGET))
    assert list(response.body) == ["job"]
    assert isinstance(response.body["job"], dict)
    replay = main.submit(telepost_task(response.body["job"]["idempotency_key"], REFERENCE_TARGET))
    assert list(replay.body) == ["job"]


def _no_legacy_keys(job: dict[str, Any]) -> None:
    assert not [name for name in LEGACY_JOB_KEYS if name in job], job


def test_consumer_10_no_legacy_keys(main: Client, multi: Client) -> None:
    job = main.admit(telepost_task(key("tp-10"), REFERENCE_TARGET))
    _no_legacy_keys(job)
    slow = multi.admit(telepost_task(key("tp-10s"), SLOW_TARGET))
    try:
        _no_legacy_keys(multi.wait_running(slow["job_id"]))
    finally:
        _no_legacy_keys(multi.cancel(slow["job_id"]).body)
    _no_legacy_keys(main.wait_terminal(job["job_id"]))
    for event in main.settled_events(job["job_id"])["events"]:
        if "job" in event["payload"]:
            _no_legacy_keys(event["payload"]["job"])
    for item in main.jobs(idempotency_key=job["idempotency_key"])["jobs"]:
        _no_legacy_keys(item)


def test_consumer_11_listing_by_key_echoes_it(main: Client) -> None:
    idempotency_key = key("tp-11") + " Ünïcode/κλειδί:%20"
    job = main.admit(telepost_task(idempotency_key, REFERENCE_TARGET))
    main.submit(telepost_task(idempotency_key, REFERENCE_TARGET))
    page = main.jobs(idempotency_key=idempotency_key)
    assert [item["idempotency_key"] for item in page["jobs"]] == [idempotency_key]
    assert telepost_get(main, idempotency_key)["job_id"] == job["job_id"]
    unknown = main.jobs(idempotency_key=key("tp-11-unknown"))
    assert unknown["jobs"] == []


def test_consumer_12_percent_decoding_and_url_safe_ids(main: Client) -> None:
    idempotency_key = f"chain:135/attempt%2F{key('tp-12')}"
    job = main.admit(telepost_task(idempotency_key, REFERENCE_TARGET, "review/chain:135 %"))
    assert job["idempotency_key"] == idempotency_key
    assert job["correlation_id"] == "review/chain:135 %"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", job["job_id"])
    assert telepost_get(main, idempotency_key)["job_id"] == job["job_id"]
    main.wait_terminal(job["job_id"])
    page = main.settled_events(job["job_id"])
    for event in page["events"]:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", event["event_id"])
    # (With `unacked=1` the ack cursor wins and `after` is ignored, like the reference.)
    after = main.events(job["job_id"], after=page["events"][0]["event_id"])
    assert after["events"] == page["events"][1:]


def test_consumer_13_get_job_and_unknown_is_404(main: Client) -> None:
    job = main.admit(telepost_task(key("tp-13"), REFERENCE_TARGET))
    fetched = main.job(job["job_id"])
    assert "job" not in fetched
    assert fetched["job_id"] == job["job_id"]
    unknown_key = key("tp-13-unknown")
    response = main.call("GET", f"/jobs/{seg(unknown_key)}", schema="Job")
    assert response.status == 404
    assert response.body["error"]["code"] in ERROR_CODES
    with pytest.raises(AssertionError):  # TelePost's fallback ends in a definitive not_found
        telepost_get(main, unknown_key)


def test_consumer_14_status_enum_and_no_candidate(main: Client) -> None:
    task = telepost_task(key("tp-14"), REFERENCE_TARGET)
    task["params"]["query"] = {"tags": ["nothing-matches-this"]}
    job = main.admit(task)
    seen = set()

    def check(current: dict[str, Any]) -> bool:
        seen.add(current["status"])
        return current["status"] in TERMINAL

    done = main.wait_for(job["job_id"], check)
    assert seen <= STATUSES
    assert done["status"] == "failed"
    assert done["error"]["code"] == "no_candidate"


def test_consumer_15_timestamps_are_epoch_ms(main: Client, multi: Client) -> None:
    slow = multi.admit(telepost_task(key("tp-15"), SLOW_TARGET))
    try:
        running = multi.wait_running(slow["job_id"])
        interval = multi.capabilities()["job_types"][0]["heartbeat_interval_ms"]
        assert interval <= 30_000
        now = now_ms()
        for name in ("created_at", "updated_at", "started_at", "heartbeat_at"):
            value = running[name]
            assert isinstance(value, int), name
            assert value > 10**11, name  # milliseconds, not seconds
            assert abs(now - value) < 90_000, name  # the consumer's freshness window
        # The heartbeat is refreshed while running (every heartbeat_interval_ms).
        first = running["heartbeat_at"]
        multi.wait_for(
            slow["job_id"], lambda job: job["heartbeat_at"] > first, timeout=interval / 1000 + 5
        )
    finally:
        multi.cancel(slow["job_id"])
    job = main.admit(telepost_task(key("tp-15b"), REFERENCE_TARGET))
    done = main.wait_terminal(job["job_id"])
    for name in ("created_at", "updated_at"):
        assert isinstance(done[name], int)
        assert done[name] > 10**11


def test_consumer_16_terminal_jobs_carry_error_or_result(main: Client, multi: Client) -> None:
    ok = main.admit(telepost_task(key("tp-16ok"), REFERENCE_TARGET))
    nothing = telepost_task(key("tp-16no"), REFERENCE_TARGET)
    nothing["params"]["query"] = {"tags": ["nothing-matches-this"]}
    failed = main.admit(nothing)
    cancelled = multi.admit(telepost_task(key("tp-16ca"), SLOW_TARGET))
    multi.cancel(cancelled["job_id"])
    expiring = telepost_task(key("tp-16ex"), SLOW_TARGET)
    expiring["deadline_ms"] = 1_000
    expired = multi.admit(expiring)
    finals = [
        main.wait_terminal(ok["job_id"]),
        main.wait_terminal(failed["job_id"]),
        multi.wait_terminal(cancelled["job_id"]),
        multi.wait_terminal(expired["job_id"]),
    ]
    assert [job["status"] for job in finals] == ["succeeded", "failed", "cancelled", "expired"]
    assert "result" in finals[0]
    assert "error" not in finals[0]
    validate(finals[0]["result"], "Result_CandidateSearch")
    for job in finals[1:]:
        assert job["error"]["code"] in ERROR_CODES
        assert isinstance(job["error"]["retryable"], bool)


def test_consumer_17_error_statuses(main_stack: Stack, main: Client) -> None:
    base = telepost_task(key("tp-17"), REFERENCE_TARGET)
    unknown_type = main.submit({**base, "job_type": "refetch_video"})
    assert unknown_type.status == 400
    assert unknown_type.body["error"]["code"] == "invalid_params"
    assert unknown_type.body["error"]["detail"]["reason"] == "unsupported_job_type"
    version = main.submit({**base, "protocol_version": "2"})
    assert version.status == 400
    assert version.body["error"]["code"] == "unsupported_protocol_version"
    main.admit(base)
    conflict = main.submit(
        {**base, "params": {"target_id": REFERENCE_TARGET, "query": {"tags": ["x"]}}}
    )
    assert conflict.status == 409
    assert conflict.body["error"]["code"] == "idempotency_conflict"
    for response in (unknown_type, version, conflict):
        assert response.body["error"]["retryable"] is False  # never 408/429/5xx for these
    misconfigured_answers_503(main_stack)


def test_consumer_18_events_with_after_and_unacked(main: Client, multi: Client) -> None:
    job = main.admit(telepost_task(key("tp-18"), REFERENCE_TARGET))
    main.wait_terminal(job["job_id"])
    first = main.events(job["job_id"], unacked=True)  # the first reconcile tick
    assert first["events"]
    assert first.get("next_after") in (None, first["events"][-1]["event_id"])
    cursor = first["events"][0]["event_id"]  # the consumer's own last acked id
    main.ack(job["job_id"], cursor)
    page = main.events(job["job_id"], after=cursor, unacked=True)
    assert page["events"] == first["events"][1:]
    stamps = [event["at"] for event in page["events"]]
    assert stamps == sorted(stamps)
    main.ack(job["job_id"], page["events"][-1]["event_id"])
    empty = main.events(job["job_id"], after=page["events"][-1]["event_id"], unacked=True)
    assert empty["events"] == []  # no 404 for "nothing new"


def test_consumer_19_terminal_event_in_the_stream(main: Client) -> None:
    job = main.admit(telepost_task(key("tp-19"), REFERENCE_TARGET))
    done = main.wait_terminal(job["job_id"])
    page = main.settled_events(job["job_id"])
    terminal = page["events"][-1]
    assert terminal["type"] == f"job.{done['status']}"
    assert terminal["payload"]["job"]["status"] == done["status"]
    assert ("result" in terminal["payload"]) or ("error" in terminal["payload"])


def test_consumer_20_event_ids_unique_and_stable(main: Client) -> None:
    with receiver(204) as hook:
        job = main.admit(telepost_task(key("tp-20"), REFERENCE_TARGET, callback_url=hook.url))
        main.wait_terminal(job["job_id"])
        page = main.settled_events(job["job_id"])
        ids = [event["event_id"] for event in page["events"]]
        assert len(ids) == len(set(ids))
        assert [e["event_id"] for e in main.events(job["job_id"])["events"]] == ids
        wait_until(lambda: len(hook.requests) >= len(ids))
        pushed = {json.loads(r.body)["event_id"]: json.loads(r.body) for r in hook.requests}
    assert set(pushed) == set(ids)  # the same ids on the pull and the callback channel
    for event in page["events"]:
        same_event(pushed[event["event_id"]], event)


def test_consumer_21_ack_semantics(main: Client) -> None:
    job = main.admit(telepost_task(key("tp-21"), REFERENCE_TARGET))
    done = main.wait_terminal(job["job_id"])
    page = main.settled_events(job["job_id"])
    last = page["events"][-1]["event_id"]
    for cursor in ("evt-99999999999-999999", "evt-1-1", "not-an-event-id"):
        noop = main.ack(job["job_id"], cursor)
        assert (noop["acked"], noop["unacked"]) == (0, len(page["events"]))
    assert main.ack(job["job_id"], last)["unacked"] == 0
    older = main.ack(job["job_id"], page["events"][0]["event_id"])
    assert older["unacked"] == 0
    assert main.ack(job["job_id"], last)["unacked"] == 0
    assert main.job(job["job_id"]) == done


def _wait_for_posts(requests: list[Received], count: int) -> list[Received]:
    wait_until(lambda: len(requests) >= count, message=f"expected {count} callbacks")
    return list(requests)


def test_consumer_22_callbacks(main_stack: Stack, main: Client) -> None:
    port = None
    with receiver(503, 200) as hook:
        port = hook.url.split("/")[2]
        callback_url = f"http://{port}/api/bot1/v1/jobs/events"
        job = main.admit(telepost_task(key("tp-22"), REFERENCE_TARGET, callback_url=callback_url))
        main.wait_terminal(job["job_id"])
        page = main.settled_events(job["job_id"])
        count = len(page["events"])
        requests = _wait_for_posts(hook.requests, count + 1)  # one retried after the 503
        # Undelivered or not, every event stays discoverable on the pull side.
        assert main.events(job["job_id"], unacked=True)["unacked"] == count
    for request in requests:
        assert request.path == "/api/bot1/v1/jobs/events"  # exactly the Task's callback_url
        assert request.headers["authorization"] == f"Bearer {CALLBACK_TOKEN}"
        assert request.headers["content-type"].split(";")[0] == "application/json"
        event = json.loads(request.body)
        validate(event, "Event")  # the bare Event
        assert event["job_id"] == job["job_id"]
    delivered = {json.loads(r.body)["event_id"] for r in requests[1:]}
    assert delivered == {event["event_id"] for event in page["events"]}
    assert json.loads(requests[0].body)["event_id"] in delivered  # retried after the 503


def test_consumer_23_callback_failures_never_touch_the_job(main: Client) -> None:
    with receiver(500) as broken:
        job = main.admit(telepost_task(key("tp-23"), REFERENCE_TARGET, callback_url=broken.url))
        done = main.wait_terminal(job["job_id"])
        page = main.settled_events(job["job_id"])
        wait_until(lambda: len(broken.requests) > len(page["events"]), timeout=8)
    assert done["status"] == "succeeded"
    assert main.job(job["job_id"]) == done
    assert main.events(job["job_id"])["events"] == page["events"]
    # And the pull path works with no callback_url at all.
    plain = main.admit(telepost_task(key("tp-23b"), REFERENCE_TARGET))
    assert "callback_url" not in plain or plain["callback_url"] is None
    main.wait_terminal(plain["job_id"])
    pulled = main.settled_events(plain["job_id"])
    assert types(pulled)[0] == "job.accepted"
    last = pulled["events"][-1]["event_id"]
    assert main.ack(plain["job_id"], last)["unacked"] == 0


def test_consumer_24_no_business_words(main: Client) -> None:
    job = main.admit(telepost_task(key("tp-24"), REFERENCE_TARGET))
    done = main.wait_terminal(job["job_id"])
    for document in (done, main.jobs(idempotency_key=job["idempotency_key"])):
        assert not [k for k in keys_of(document) if k.lower().startswith("refetch")]
    # Schema-level names of the published API (no auth needed for the document).
    with urllib.request.urlopen(main.base_url + "/openapi.json", timeout=30) as response:
        document = json.loads(response.read())
    schemas = document.get("components", {}).get("schemas", {})
    names = set(schemas) | keys_of(schemas) | _enum_values(schemas)
    # Token-wise, like the reference's contract check (item 7): split camelCase and separators.
    offending = sorted(
        n for n in names if set(_tokens(n)) & set(BUSINESS_TERMS) or "message_id" in n.lower()
    )
    assert offending == []


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [t.lower() for t in re.split(r"[^A-Za-z0-9]+", spaced) if t]


def _enum_values(document: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(document, dict):
        for name, value in document.items():
            if name in ("enum", "const"):
                values = value if isinstance(value, list) else [value]
                found |= {v for v in values if isinstance(v, str)}
            else:
                found |= _enum_values(value)
    elif isinstance(document, list):
        for item in document:
            found |= _enum_values(item)
    return found
