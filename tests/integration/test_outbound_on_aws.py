"""On AWS no origin reaches this host or its link, over the real handlers: a Task whose callback
names Lambda's runtime API is a 400 that writes nothing, and a callback whose name resolves there
by the time it is sent is dead-lettered, never POSTed. Off AWS the same origins still work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobstream.collector import LAMBDA_FUNCTION_VARIABLE
from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import callbacks
from tests.integration.test_callbacks import intent, submit
from tests.support.harness import Api, canonical_task
from tests.support.tenants import with_tenant
from tests.support.validation import validate_error

RUNTIME_API = "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next"


def test_on_aws_a_callback_to_the_runtime_api_is_a_400_that_writes_nothing(
    crt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # acme lists http://127.0.0.1:* (the suite's receivers): an exact origin, so private is fine.
    monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "jobstream-ApiFunction")
    refused = api.post("/jobs", canonical_task(idempotency_key="aws", callback_url=RUNTIME_API))
    assert refused.status == 400, refused.body
    validate_error(refused.body)
    error = refused.body["error"]
    assert (error["code"], error["detail"]["field"]) == ("invalid_params", "callback_url")
    assert "127.0.0.1 is an address of this host, never reached from AWS" in error["message"]
    assert api.get("/jobs").body["jobs"] == []
    monkeypatch.delenv(LAMBDA_FUNCTION_VARIABLE)
    admitted = api.post("/jobs", canonical_task(idempotency_key="aws", callback_url=RUNTIME_API))
    assert admitted.status == 202, admitted.body


def test_on_aws_a_callback_resolving_to_this_host_is_dead_lettered_unsent(
    crt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    internal = with_tenant(crt, "acme", callback_origins=["http://receiver.internal:*"])
    job_id = submit(internal, "http://receiver.internal:8080/hooks")

    posted: list[object] = []
    monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "jobstream-CallbackFunction")
    rebound = replace(
        internal,
        resolver=lambda host, port: ["127.0.0.1"],
        poster=lambda target, *_: posted.append(target),
    )
    result = callbacks.deliver(rebound, IntentRef(job_id, 1))
    assert result.outcome == "dead"
    assert "refused: host_not_allowed" in (intent(crt, job_id).last_error or "")
    assert "never reached from AWS" in (intent(crt, job_id).last_error or "")
    assert posted == []
