"""GET /capabilities is cacheable: an ETag and `private, max-age=60`, a 304 while the document is
the same, authentication first; every other JSON answer stays `no-store`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from jobstream import runtime as runtime_module
from jobstream.runtime import Runtime
from tests.conftest import REFERENCE_TARGETS
from tests.support.harness import Api, Clock, Response, canonical_task
from tests.support.validation import validate, validate_error

CACHE_CONTROL = "private, max-age=60"


def first(api: Api) -> tuple[Response, str]:
    response = api.get("/capabilities")
    assert response.status == 200
    return response, response.headers["etag"]


def test_200_carries_a_weak_etag_and_a_private_lifetime(api: Api) -> None:
    response, etag = first(api)
    validate(response.body, "Capabilities")
    # Weak: the tag covers the document, not its server_time (the clock's reading).
    assert re.fullmatch(r'W/"[0-9a-f]{32}"', etag)
    assert response.headers["cache-control"] == CACHE_CONTROL
    assert response.headers["vary"] == "Authorization"
    assert response.headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize(
    "if_none_match",
    ["{etag}", "{opaque}", '"other", {etag}', 'W/"other",{opaque}', "*"],
)
def test_304_when_if_none_match_names_the_document(api: Api, if_none_match: str) -> None:
    _, etag = first(api)
    field = if_none_match.format(etag=etag, opaque=etag.removeprefix("W/"))
    again = api.get("/capabilities", headers={"if-none-match": field})
    assert again.status == 304
    assert again.body is None
    assert again.headers == {"etag": etag, "cache-control": CACHE_CONTROL, "vary": "Authorization"}


@pytest.mark.parametrize("if_none_match", ['"other"', 'W/"other", "another"', "", "{bare}"])
def test_200_when_if_none_match_names_another(api: Api, if_none_match: str) -> None:
    _, etag = first(api)
    field = if_none_match.format(bare=etag.removeprefix('W/"').removesuffix('"'))
    again = api.get("/capabilities", headers={"if-none-match": field})
    assert again.status == 200
    validate(again.body, "Capabilities")
    assert again.headers["etag"] == etag


def test_the_clock_alone_changes_nothing(api: Api, clock: Clock) -> None:
    before, etag = first(api)
    clock.advance(5_000)
    after = api.get("/capabilities")
    assert after.body["server_time"] == before.body["server_time"] + 5_000
    assert after.headers["etag"] == etag
    assert api.get("/capabilities", headers={"if-none-match": etag}).status == 304


@pytest.mark.parametrize("authorization", [None, "Bearer wrong"])
@pytest.mark.parametrize("if_none_match", ["*", "{etag}"])
def test_authentication_comes_first(
    api: Api, authorization: str | None, if_none_match: str
) -> None:
    _, etag = first(api)
    headers = {"if-none-match": if_none_match.format(etag=etag)}
    if authorization is not None:
        headers["authorization"] = authorization
    response = Api(token=None).get("/capabilities", headers=headers)
    assert response.status == 401
    validate_error(response.body)
    assert response.body["error"]["code"] == "auth_error"
    assert response.headers["cache-control"] == "no-store"
    assert "etag" not in response.headers


def test_a_targets_change_changes_the_etag(api: Api, targets_path: Path) -> None:
    _, etag = first(api)
    changed = json.loads(json.dumps(REFERENCE_TARGETS))
    changed["targets"][0]["timeout_ms"] = 660_000
    targets_path.write_text(json.dumps(changed), encoding="utf-8")
    os.utime(targets_path, (1, 1))
    response = api.get("/capabilities", headers={"if-none-match": etag})
    assert response.status == 200
    assert response.body["job_types"][0]["default_deadline_ms"] == 660_000
    assert response.headers["etag"] != etag


def test_a_settings_change_changes_the_etag(
    api: Api, rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, etag = first(api)
    # The stall budget every job type declares, as a redeploy with another value would set it.
    settings = rt.settings.model_copy(update={"stall_timeout_ms": 600_000})
    changed = dataclasses.replace(rt, settings=settings)
    monkeypatch.setattr(runtime_module, "runtime", lambda: changed)
    response = api.get("/capabilities", headers={"if-none-match": etag})
    assert response.status == 200
    assert response.body["job_types"][0]["stall_timeout_ms"] == 600_000
    assert response.headers["etag"] != etag


def test_tenants_share_the_document_and_so_its_etag(api: Api, other_tenant: Api) -> None:
    # The document is built from deployment configuration only, never from the tenant: both
    # tenants see the same body, so the same tag says nothing one could not read itself.
    mine, etag = first(api)
    theirs, their_etag = first(other_tenant)
    assert their_etag == etag
    assert theirs.body == mine.body
    assert other_tenant.get("/capabilities", headers={"if-none-match": etag}).status == 304


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("GET", "/jobs", None),
        ("POST", "/jobs", canonical_task()),
        ("GET", "/jobs/6eb50329", None),
        ("POST", "/jobs/x/cancel", None),
        ("GET", "/jobs/x/events", None),
        ("POST", "/jobs/x/events/ack", {"up_to": "x"}),
        ("GET", "/nope", None),
        ("GET", "/openapi.json", None),
    ],
)
def test_every_other_json_answer_is_no_store(
    api: Api, method: str, target: str, body: object
) -> None:
    response = api.call(method, target, body, headers={"if-none-match": "*"})
    assert response.status != 304
    assert response.headers["cache-control"] == "no-store"
    assert "etag" not in response.headers
