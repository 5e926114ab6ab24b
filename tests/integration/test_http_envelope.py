"""Design §1 improvements 1-3 and 11: every failure is a protocol Error; tenants are isolated."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobstream.http.request import MAX_JSON_DEPTH
from jobstream.runtime import Runtime
from tests.support.harness import Api, canonical_task
from tests.support.state import whole_table
from tests.support.validation import validate, validate_error


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/capabilities"),
        ("GET", "/jobs"),
        ("POST", "/jobs"),
        ("GET", "/jobs/x"),
        ("POST", "/jobs/x/cancel"),
        ("GET", "/jobs/x/events"),
        ("POST", "/jobs/x/events/ack"),
    ],
)
@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", "bearer acme-token", "Basic acme-token", "Bearer "]
)
def test_401_is_an_auth_error_envelope(
    api: Api, method: str, target: str, authorization: str | None
) -> None:
    headers = {"authorization": authorization} if authorization is not None else {}
    response = Api(token=None).call(method, target, {"x": 1}, headers=headers)
    assert response.status == 401
    validate_error(response.body)
    assert response.body["error"]["code"] == "auth_error"
    assert response.body["error"]["retryable"] is False


def test_bearer_token_is_trimmed(api: Api) -> None:
    response = Api(token=None).get(
        "/capabilities", headers={"authorization": "Bearer  acme-token "}
    )
    assert response.status == 200


def test_unknown_route_is_an_envelope(api: Api) -> None:
    for method, target in (("GET", "/nope"), ("DELETE", "/jobs"), ("PUT", "/jobs/x/events")):
        response = api.call(method, target)
        assert response.status == 404
        validate_error(response.body)
        assert response.body["error"]["detail"]["reason"] == "unknown_route"


def test_malformed_json_is_400(api: Api) -> None:
    response = api.post(
        "/jobs", raw=b'{"protocol_version": ', headers={"content-type": "application/json"}
    )
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["message"] == "request body must be valid JSON"
    assert api.get("/jobs").body["jobs"] == []


@pytest.mark.parametrize("field", ["protocol_version", "job_type", "params"])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 300, 946, 947, 948, 5_000])
def test_a_body_nested_deeper_than_any_task_is_400(
    api: Api, rt: Runtime, field: str, depth: int
) -> None:
    """However deep (even where echoing the value in an error would overflow the stack), a
    too-deep body is a 400 envelope that writes nothing, never a crash."""
    before = whole_table(rt)
    task = json.dumps(canonical_task())
    raw = task[:-1] + f', "{field}": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    response = api.post("/jobs", raw=raw.encode(), headers={"content-type": "application/json"})
    assert response.status == 400, response.body
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert whole_table(rt) == before


def test_a_body_as_deep_as_allowed_is_read(api: Api) -> None:
    def with_version_nested(levels: int) -> bytes:
        task = json.dumps(canonical_task())
        return (task[:-1] + ', "protocol_version": ' + "[" * levels + "]" * levels + "}").encode()

    # The Task is one level: its value nested one level less than the bound is read, and refused
    # for what it is (its error echoes it, deeper still); one more level is refused as too deep.
    read = api.post("/jobs", raw=with_version_nested(MAX_JSON_DEPTH - 1))
    too_deep = api.post("/jobs", raw=with_version_nested(MAX_JSON_DEPTH))
    assert (read.status, too_deep.status) == (400, 400)
    validate_error(read.body)
    assert "nest" not in read.body["error"]["message"]
    assert "nest at most" in too_deep.body["error"]["message"]


# A JSON text may escape half of a surrogate pair; no Unicode string holds one. Where it sits:
UNPAIRED_SURROGATES = {
    "idempotency_key": '"idempotency_key": "key-\\ud800"',
    "correlation_id": '"correlation_id": "\\udfff"',
    "label_name": '"labels": {"\\ud83d": "x"}',
    "label_value": '"labels": {"origin": "a\\udc00b"}',
    "nested_tag": '"params": {"query": {"tags": ["ok", "\\ud800"]}}',
}


@pytest.mark.parametrize("where", sorted(UNPAIRED_SURROGATES))
def test_unpaired_surrogates_are_not_json_and_write_nothing(
    api: Api, rt: Runtime, where: str
) -> None:
    before = whole_table(rt)
    task = json.dumps(canonical_task())
    member = UNPAIRED_SURROGATES[where]
    raw = task[:-1] + ", " + member + "}"
    response = api.post("/jobs", raw=raw.encode(), headers={"content-type": "application/json"})
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert response.body["error"]["message"] == "request body must be valid JSON"
    assert response.body["error"]["detail"] == {"reason": "unpaired_surrogate"}
    assert whole_table(rt) == before


def test_an_escaped_surrogate_pair_is_one_character(api: Api) -> None:
    # "\ud83d\ude00" is U+1F600: valid text, stored and echoed as that character.
    raw = json.dumps(canonical_task(labels={"mood": "x"})).replace('"x"', '"\\ud83d\\ude00"')
    response = api.post("/jobs", raw=raw.encode(), headers={"content-type": "application/json"})
    assert response.status == 202
    assert response.body["job"]["labels"] == {"mood": "\U0001f600"}


def test_an_ack_body_with_an_unpaired_surrogate_is_400(api: Api) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    response = api.post(
        f"/jobs/{job_id}/events/ack",
        raw=b'{"event_id": "evt-\\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert response.status == 400
    assert response.body["error"]["detail"] == {"reason": "unpaired_surrogate"}


def test_nan_is_not_json(api: Api) -> None:
    response = api.post(
        "/jobs", raw=b'{"deadline_ms": NaN}', headers={"content-type": "application/json"}
    )
    assert response.status == 400
    validate_error(response.body)


def test_wrong_content_type_is_415(api: Api) -> None:
    import json

    response = api.post(
        "/jobs", raw=json.dumps(canonical_task()).encode(), headers={"content-type": "text/plain"}
    )
    assert response.status == 415
    validate_error(response.body)
    assert api.get("/jobs").body["jobs"] == []


def test_missing_content_type_with_json_is_accepted(api: Api) -> None:
    import json

    response = api.post("/jobs", raw=json.dumps(canonical_task()).encode())
    assert response.status == 202


def test_oversized_body_is_413(api: Api) -> None:
    task = canonical_task(labels={"big": "x" * (256 * 1024)})
    response = api.post("/jobs", task)
    assert response.status == 413
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert api.get("/jobs").body["jobs"] == []


def test_empty_body_is_an_empty_object(api: Api) -> None:
    response = api.post("/jobs", raw=b"")
    assert response.status == 400
    assert response.body["error"]["message"] == "protocol_version is required"


def test_error_responses_are_json(api: Api) -> None:
    response = api.get("/jobs/nope")
    assert response.headers["content-type"].startswith("application/json")


def test_tenants_are_isolated(api: Api, other_tenant: Api) -> None:
    job = api.post("/jobs", canonical_task()).body["job"]
    job_id = job["job_id"]
    for response in (
        other_tenant.get(f"/jobs/{job_id}"),
        other_tenant.get(f"/jobs/{job_id}/events"),
        other_tenant.post(f"/jobs/{job_id}/events/ack", {"ack_through": "evt-1-1"}),
        other_tenant.post(f"/jobs/{job_id}/cancel"),
    ):
        assert response.status == 404
        validate_error(response.body)
    assert other_tenant.get("/jobs").body["jobs"] == []
    assert other_tenant.get(f"/jobs?idempotency_key={job['idempotency_key']}").body["jobs"] == []
    assert api.get(f"/jobs/{job_id}").body["status"] == "queued"
    # The same key in another tenant is another job.
    theirs = other_tenant.post("/jobs", canonical_task())
    assert theirs.status == 202
    assert theirs.body["job"]["job_id"] != job_id
    validate(theirs.body["job"], "Job")


def test_openapi_is_served_without_authentication(api: Api) -> None:
    response = Api(token=None).get("/openapi.json")
    assert response.status == 200
    assert response.body["openapi"] == "3.1.0"
    assert "/jobs/{job_id}/events" in response.body["paths"]


ACK_BODY = {"ack_through": "evt_1"}


@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/jobs/{}"),
        ("POST", "/jobs/{}/cancel"),
        ("GET", "/jobs/{}/callbacks"),
        ("GET", "/jobs/{}/events"),
        ("POST", "/jobs/{}/events/ack"),
    ],
)
@pytest.mark.parametrize("job_id", ["j" * 2_100, "job_short", "job_" + "A" * 31 + "!", "x"])
def test_a_job_id_not_shaped_like_ours_is_404_without_a_read(
    api: Api, rt: Runtime, method: str, template: str, job_id: str
) -> None:
    """DynamoDB refuses a key over 2 KB (a 500 it would be); no such id names a job anyway."""
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    events = rt.store.client.meta.events
    events.register("before-call.dynamodb", record)
    try:
        response = api.call(
            method, template.format(job_id), ACK_BODY if "ack" in template else None
        )
    finally:
        events.unregister("before-call.dynamodb", record)
    assert response.status == 404, response.body
    validate_error(response.body)
    assert calls == []
