"""Tenants are consumers (issue 11): each tenant's callbacks carry only its own credentials, go
only to its own origins, follow rotations at send time, and die when the tenant is removed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobstream import runtime as runtime_module
from jobstream.domain import IntentRef
from jobstream.http.statuses import http_status
from jobstream.protocol.errors import ProtocolError
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks
from jobstream.service.dead_letters import list_dead
from jobstream.store.jobs import JobQuery
from tests.conftest import CALLBACK_SECRET, CALLBACK_TOKEN, OTHER_CALLBACK_SECRET
from tests.conftest import OTHER_CALLBACK_TOKEN as GLOBEX_TOKEN
from tests.integration.test_callbacks import drain, intent, messages
from tests.support.harness import Api, Clock, canonical_task
from tests.support.receiver import Received, receiver
from tests.support.signatures import signature_verifies
from tests.support.tenants import LOOPBACK_ORIGIN, secrets, with_tenant, without_tenant

HOUR_MS = 3_600_000
NEW_SECRET = "whsec_bmV3LXNpZ25pbmcta2V5LWFmdGVyLXJvdGF0aW9u"


def install(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> Runtime:
    """The runtime the real handlers (and the queue poller) use from now on."""
    monkeypatch.setattr(runtime_module, "runtime", lambda: rt)
    return rt


def submit(rt: Runtime, tenant: str, url: str, key: str = "cb-key") -> str:
    status, body = admission.submit(
        rt, tenant, canonical_task(idempotency_key=key, callback_url=url), None
    )
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def signed_by(secret: str, request: Received) -> bool:
    timestamp = int(request.headers["webhook-timestamp"])
    return signature_verifies(secret, request.headers, request.body, now=timestamp)


def iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def test_each_receiver_gets_only_its_own_token_and_signatures(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both consumers' receivers listen on this machine; each tenant may use its own origin.
    rt = install(monkeypatch, with_tenant(crt, "globex", callback_origins=[LOOPBACK_ORIGIN]))
    with receiver(204) as acme_hook, receiver(204) as globex_hook:
        submit(rt, "acme", acme_hook.url)
        submit(rt, "globex", globex_hook.url)
        drain(rt, queues)
    assert acme_hook.requests
    assert globex_hook.requests
    for request in acme_hook.requests:
        assert request.headers["authorization"] == f"Bearer {CALLBACK_TOKEN}"
        assert signed_by(CALLBACK_SECRET, request)
        assert not signed_by(OTHER_CALLBACK_SECRET, request)
        assert " " not in request.headers["webhook-signature"]  # one secret, one signature
    for request in globex_hook.requests:
        assert request.headers["authorization"] == f"Bearer {GLOBEX_TOKEN}"
        assert signed_by(OTHER_CALLBACK_SECRET, request)
        assert not signed_by(CALLBACK_SECRET, request)
        assert CALLBACK_TOKEN not in json.dumps(request.headers)


def test_a_tenant_without_callback_credentials_sends_none(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = install(
        monkeypatch,
        with_tenant(
            crt,
            "globex",
            callback_token=None,
            signing_secrets=[],
            callback_origins=[LOOPBACK_ORIGIN],
        ),
    )
    with receiver(204) as hook:
        submit(rt, "globex", hook.url)
        drain(rt, queues)
    (request,) = hook.requests
    assert "authorization" not in request.headers
    assert "webhook-signature" not in request.headers
    assert request.headers["webhook-id"] == request.headers["x-idempotency-key"]


def test_api_tokens_overlap_during_a_rotation_then_the_old_one_is_refused(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobstream.config.tenants import token_digest

    install(
        monkeypatch,
        with_tenant(
            rt,
            "acme",
            api_tokens=[
                {"sha256": token_digest("acme-new")},
                {"sha256": token_digest("acme-token"), "expires_at": iso(clock.now + HOUR_MS)},
            ],
        ),
    )
    old, new = Api(token="acme-token"), Api(token="acme-new")
    job_id = old.post("/jobs", canonical_task()).body["job"]["job_id"]
    assert new.get(f"/jobs/{job_id}").status == 200  # both name the same tenant
    assert old.get(f"/jobs/{job_id}").status == 200
    clock.advance(HOUR_MS)
    refused = old.get(f"/jobs/{job_id}")
    assert (refused.status, refused.body["error"]["code"]) == (401, "auth_error")
    assert new.get(f"/jobs/{job_id}").status == 200


def test_signing_secrets_overlap_during_a_rotation_then_only_the_new_one_signs(
    crt: Runtime, clock: Clock, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rotating = with_tenant(
        crt,
        "acme",
        signing_secrets=[
            {"secret": NEW_SECRET},
            {"secret": CALLBACK_SECRET, "expires_at": iso(clock.now + HOUR_MS)},
        ],
    )
    rt = install(monkeypatch, rotating)
    with receiver(204) as hook:
        submit(rt, "acme", hook.url, key="during")
        drain(rt, queues)
        clock.advance(HOUR_MS)
        submit(rt, "acme", hook.url, key="after")
        drain(rt, queues)
    during, after = hook.requests
    # Space-separated signatures, the Standard Webhooks way: a verifier holding either accepts.
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert signed_by(NEW_SECRET, during)
    assert signed_by(CALLBACK_SECRET, during)
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert signed_by(NEW_SECRET, after)
    assert not signed_by(CALLBACK_SECRET, after)


def test_delivery_uses_the_credentials_in_force_at_send_time(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, "acme", hook.url)
        # Rotated between admission and delivery: the new token and secret go out.
        rotated = install(
            monkeypatch,
            with_tenant(
                crt, "acme", callback_token="rotated-token", signing_secrets=secrets(NEW_SECRET)
            ),
        )
        drain(rotated, queues)
    (request,) = hook.requests
    assert request.headers["authorization"] == "Bearer rotated-token"
    assert signed_by(NEW_SECRET, request)
    assert not signed_by(CALLBACK_SECRET, request)
    assert intent(crt, job_id).state == "delivered"


def test_a_private_origin_allowed_for_one_tenant_is_refused_for_another(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, crt)
    with receiver(204) as hook:
        # acme lists http://127.0.0.1:*, globex lists nothing: any public https origin only.
        submit(crt, "acme", hook.url)
        with pytest.raises(ProtocolError) as raised:
            admission.submit(crt, "globex", canonical_task(callback_url=hook.url), None)
        drain(crt, queues)
    assert http_status(raised.value) == 400
    assert raised.value.body()["error"]["detail"] == {
        "field": "callback_url",
        "reason": "callback_url_refused",
        "refusal": "scheme_not_allowed",
    }
    assert list(crt.store.iter_jobs(JobQuery(tenant="globex"))) == []
    assert len(hook.requests) == 1  # acme's job.accepted only
    # Over HTTP too: a 400 envelope, nothing written.
    response = Api(token="globex-token").post("/jobs", canonical_task(callback_url=hook.url))
    assert (response.status, response.body["error"]["code"]) == (400, "invalid_params")
    assert list(crt.store.iter_jobs(JobQuery(tenant="globex"))) == []


def test_an_origin_dropped_after_admission_is_refused_at_delivery(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, "acme", hook.url)
        narrowed = install(
            monkeypatch, with_tenant(crt, "acme", callback_origins=["https://*.example.test"])
        )
        drain(narrowed, queues)
        assert hook.requests == []
    record = intent(crt, job_id)
    assert record.state == "dead"
    assert (record.last_error or "").startswith("refused: origin_not_allowed")


def test_a_removed_tenant_dead_letters_its_callbacks_with_a_clear_reason(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, "acme", hook.url)
        removed = install(monkeypatch, without_tenant(crt, "acme"))
        drain(removed, queues)
        assert hook.requests == []  # nothing goes out without its credentials
    record = intent(crt, job_id)
    assert (record.state, record.attempts) == ("dead", 1)
    (dead,) = list_dead(removed)
    assert dead["job_id"] == job_id
    assert dead["last_error"].startswith("tenant_removed: tenant 'acme' is no longer")
    assert len(messages(crt, crt.settings.callback_dead_letter_url)) == 1
    # Its tokens are refused too.
    assert Api(token="acme-token").get("/jobs").status == 401


def test_an_unreadable_registry_leaves_the_callback_waiting(crt: Runtime, tmp_path: Path) -> None:
    job_id = submit(crt, "acme", "https://consumer.example.test/hooks")
    settings = crt.settings.model_copy(
        update={"tenants": None, "tenants_path": tmp_path / "missing.json"}
    )
    result = callbacks.deliver(replace(crt, settings=settings), IntentRef(job_id, 1))
    assert (result.disposition, result.outcome) == (
        callbacks.Disposition.RETRY,
        "tenants_unavailable",
    )
    # Our configuration's fault, not the receiver's: no attempt spent, nothing recorded.
    record = intent(crt, job_id)
    assert (record.state, record.attempts, record.last_error) == ("pending", 0, None)


def test_admission_does_no_dns_lookup(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resolver that fails (or would hang) does not affect admission: it is never called."""
    lookups: list[str] = []

    def failing_dns(host: str, port: int) -> list[str]:
        lookups.append(host)
        raise OSError("Temporary failure in name resolution")

    install(monkeypatch, replace(rt, resolver=failing_dns))
    api = Api(token="acme-token")
    task = canonical_task(callback_url="https://consumer.example.test/hooks")
    first = api.post("/jobs", task)
    replay = api.post("/jobs", task)
    assert (first.status, replay.status) == (202, 200)
    assert lookups == []


def test_a_tenant_removed_after_authentication_is_refused_as_unauthenticated(rt: Runtime) -> None:
    gone = without_tenant(rt, "acme")
    with pytest.raises(ProtocolError) as raised:
        admission.submit(
            gone, "acme", canonical_task(callback_url="https://consumer.example.test/h"), None
        )
    assert http_status(raised.value) == 401
    assert list(rt.store.iter_jobs(JobQuery(tenant="acme"))) == []


def test_tenants_cannot_reach_each_others_correlation_ranges(
    api: Api, other_tenant: Api, rt: Runtime
) -> None:
    """The `acme#C#x` attack needs such a name; with valid names each filter stays inside its
    tenant (the names themselves are refused: tests/unit/test_tenants.py)."""
    mine = api.post("/jobs", canonical_task(idempotency_key="k", correlation_id="x"))
    assert mine.status == 202
    for query in ("?correlation_id=x", "?correlation_id=C%23x", "?correlation_id=%23C%23x"):
        assert other_tenant.get(f"/jobs{query}").body["jobs"] == []
    assert [job["job_id"] for job in api.get("/jobs?correlation_id=x").body["jobs"]] == [
        mine.body["job"]["job_id"]
    ]
