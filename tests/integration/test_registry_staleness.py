"""A registry secret that stays unreadable is trusted for a bounded time only (issue 22).

Secrets Manager may fail for a while; the functions keep the registry they read last, but only for
JOBSTREAM_TENANTS_MAX_STALE_S after that read. Past it the API answers a retryable 503 rather than
authenticating against a registry that may still hold a token revoked meanwhile.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from jobstream import runtime as runtime_module
from jobstream.config import registry as registry_module
from jobstream.config import stored
from jobstream.config.registry import RegistryUnavailableError, load_registry
from jobstream.config.settings import ConfigurationError, load_settings
from jobstream.config.tenants import token_digest
from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.retries import OutOfTimeError, RetryPolicy
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks
from jobstream.service.callback_batch import deliver_batch
from tests.integration.test_callback_batch import receive, submit_many
from tests.integration.test_callbacks import intent
from tests.support.harness import Api, Clock, canonical_task
from tests.support.receiver import receiver

MAX_STALE_S = 300


def document(**tokens: str) -> str:
    return json.dumps(
        {
            "tenants": {
                name: {"api_tokens": [{"sha256": token_digest(t)}]} for name, t in tokens.items()
            }
        }
    )


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    registry_module.forget_cached()
    yield
    registry_module.forget_cached()


@pytest.fixture
def secret(aws: None) -> str:
    name = f"tenants-{uuid.uuid4().hex[:8]}"
    boto3.client("secretsmanager").create_secret(
        Name=name, SecretString=document(acme="acme-token")
    )
    return name


@pytest.fixture
def srt(rt: Runtime, secret: str, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """The handlers read the registry from the secret, on every use (no cache age), with the
    suite's fake clock."""
    settings = rt.settings.model_copy(
        update={
            "tenants": None,
            "tenants_secret": secret,
            "tenants_max_age_s": 0,
            "tenants_max_stale_s": MAX_STALE_S,
        }
    )
    runtime = replace(rt, settings=settings)
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


def reading_the_secret(crt: Runtime, secret: str, **replaced: Any) -> Runtime:
    """`crt` reading its own registry from `secret` on every use (no cache age)."""
    boto3.client("secretsmanager").put_secret_value(
        SecretId=secret, SecretString=crt.tenants().to_json()
    )
    settings = crt.settings.model_copy(
        update={"tenants": None, "tenants_secret": secret, "tenants_max_age_s": 0}
    )
    return replace(crt, settings=settings, **replaced)


@contextmanager
def on_each_read(hook: Callable[..., None], *, first: bool = False) -> Iterator[None]:
    """`hook` runs before every GetSecretValue attempt made meanwhile (`first`: before the
    hooks registered without it, so it sees the attempts another hook refuses)."""
    events = stored.client("secretsmanager").meta.events
    event = "before-call.secrets-manager.GetSecretValue"
    (events.register_first if first else events.register)(event, hook)
    try:
        yield
    finally:
        events.unregister(event, hook)


def _refuse(**_kwargs: Any) -> None:
    raise ClientError(
        {
            "Error": {"Code": "ServiceUnavailable", "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": 503},
        },
        "GetSecretValue",
    )


def unreadable() -> AbstractContextManager[None]:
    """Secrets Manager answers every read with 503 (every attempt of the client's retries)."""
    return on_each_read(_refuse)


def counted(reads: list[int]) -> AbstractContextManager[None]:
    """Count every GetSecretValue attempt made meanwhile."""
    return on_each_read(lambda **_kwargs: reads.append(1), first=True)


def test_the_last_registry_is_kept_for_the_stale_bound_then_refused(
    srt: Runtime, clock: Clock
) -> None:
    assert load_registry(srt.settings, clock()).authenticate("acme-token", 0) == "acme"
    with unreadable():
        clock.advance(MAX_STALE_S * 1000)
        # A short outage does not take the API down: the registry read 300 s ago still answers.
        assert load_registry(srt.settings, clock()).authenticate("acme-token", 0) == "acme"
        clock.advance(1)
        with pytest.raises(RegistryUnavailableError, match="JOBSTREAM_TENANTS_MAX_STALE_S = 300 s"):
            load_registry(srt.settings, clock())
    # Readable again: in force at once, and the bound counts from this read.
    assert load_registry(srt.settings, clock()).authenticate("acme-token", 0) == "acme"


def test_a_token_revoked_during_an_outage_is_never_accepted_past_the_bound(
    srt: Runtime, secret: str, clock: Clock
) -> None:
    api = Api(token="acme-token")
    assert api.get("/jobs").status == 200
    # The operator revokes the token; Secrets Manager then fails for the functions.
    boto3.client("secretsmanager").put_secret_value(SecretId=secret, SecretString=document())
    with unreadable():
        clock.advance(MAX_STALE_S * 1000 + 1)
        refused = api.get("/jobs")
        # Not 200 from an old registry, and not a permanent error either: retry later.
        assert refused.status == 503
        assert refused.body["error"]["code"] == "resource_busy"
        assert refused.body["error"]["retryable"] is True
        assert refused.headers["retry-after"] == "2"
        assert api.post("/jobs", canonical_task()).status == 503
    assert api.get("/jobs").status == 401  # the revocation, once the registry is read


def test_a_registry_never_read_is_a_retryable_503(srt: Runtime) -> None:
    with unreadable():
        response = Api(token="acme-token").get("/jobs")
    assert (response.status, response.body["error"]["retryable"]) == (503, True)


def test_callbacks_wait_for_a_registry_they_can_trust(
    crt: Runtime, secret: str, clock: Clock
) -> None:
    srt = reading_the_secret(crt, secret)
    with receiver(204) as hook:
        status, body = admission.submit(srt, "acme", canonical_task(callback_url=hook.url), None)
        assert status == 202
        with unreadable():
            clock.advance(srt.settings.tenants_max_stale_s * 1000 + 1)
            result = callbacks.deliver(srt, IntentRef(body["job"]["job_id"], 1))
        # Nothing is sent with credentials that may have been rotated or revoked since.
        assert hook.requests == []
    # Our outage, not the receiver's: nothing claimed, no attempt spent, no failure recorded
    # (nor against the endpoint), and the message comes back later.
    assert (result.disposition, result.outcome, result.delay_ms) == (
        callbacks.Disposition.RETRY,
        "tenants_unavailable",
        callbacks.REGISTRY_UNREADABLE_RETRY_MS,
    )
    record = intent(crt, body["job"]["job_id"])
    assert (record.state, record.attempts, record.last_error) == ("pending", 0, None)
    assert list(crt.endpoints.held(now=clock())) == []


def test_a_message_the_queue_would_dead_letter_is_left_to_the_sweep(
    crt: Runtime, secret: str, clock: Clock
) -> None:
    srt = reading_the_secret(crt, secret)
    submit_many(srt, 1)
    (message,) = receive(srt, 1)
    registry_module.forget_reads()  # a new environment: nothing read yet
    with unreadable():
        # Kept while the queue would hand it out again...
        with pytest.raises(callbacks.RetryLaterError):
            callbacks.handle_message(
                srt, message.body, message.receipt_handle, callbacks.QUEUE_MAX_RECEIVES - 2
            )
        # ...but not to the receive after which it would go to the dead-letter queue unsettled:
        # deleted, its callback still open for the sweep to re-send (invariant I5).
        left = callbacks.handle_message(
            srt, message.body, message.receipt_handle, callbacks.QUEUE_MAX_RECEIVES - 1
        )
    assert left == "left_to_sweep"
    record = intent(crt, json.loads(message.body)["job_id"])
    assert (record.state, record.attempts) == ("pending", 0)


def test_a_batch_in_a_new_environment_reads_a_failing_registry_once(
    crt: Runtime, secret: str
) -> None:
    srt = reading_the_secret(crt, secret, poster=lambda *_: HttpResult(204, "", None))
    ids = submit_many(srt, 5)
    messages = receive(srt, 5)
    registry_module.forget_reads()  # a new environment: nothing read yet
    reads: list[int] = []
    with unreadable(), counted(reads):
        kept = deliver_batch(srt, messages, lambda: 30_000)
    # Nothing was ever read here: one read's attempts, then each thread is refused at once.
    assert len(reads) == RetryPolicy().attempts
    assert sorted(kept) == sorted(message.message_id for message in messages)
    assert {(intent(crt, job_id).state, intent(crt, job_id).attempts) for job_id in ids} == {
        ("pending", 0)
    }


def test_a_failed_first_read_pauses_the_reads_too(srt: Runtime, clock: Clock) -> None:
    reads: list[int] = []
    with unreadable(), counted(reads):
        with pytest.raises(RegistryUnavailableError, match="cannot read"):
            load_registry(srt.settings, clock())
        tried = len(reads)
        clock.advance(registry_module.RETRY_AFTER_FAILURE_MS - 1_000)
        with pytest.raises(RegistryUnavailableError, match="moments ago"):
            load_registry(srt.settings, clock())
        assert len(reads) == tried
        # The pause counts from the end of the failed read: well past it, a read again.
        clock.advance(registry_module.RETRY_AFTER_FAILURE_MS)
        with pytest.raises(RegistryUnavailableError, match="cannot read"):
            load_registry(srt.settings, clock())
        assert len(reads) == 2 * tried


def test_an_invalid_rotation_is_not_undone_by_an_outage(
    srt: Runtime, secret: str, clock: Clock
) -> None:
    assert load_registry(srt.settings, clock()).get("acme") is not None
    clock.advance(3_600_000)
    # The operator removes acme, with a document that does not parse.
    boto3.client("secretsmanager").put_secret_value(SecretId=secret, SecretString='{"tenants": 5}')
    with pytest.raises(ConfigurationError, match="is invalid"):
        load_registry(srt.settings, clock())
    clock.advance(1_000)
    with unreadable():
        # The registry in force is the invalid one just read, never the one it replaced an
        # hour ago (whose tenant the operator removed).
        with pytest.raises(ConfigurationError, match="is invalid"):
            load_registry(srt.settings, clock())
        clock.advance(registry_module.RETRY_AFTER_FAILURE_MS - 1)
        with pytest.raises(ConfigurationError, match="is invalid"):
            load_registry(srt.settings, clock())


def test_the_bound_is_a_setting_with_a_default() -> None:
    base = {"JOBSTREAM_TABLE": "t", "JOBSTREAM_TENANTS_SECRET": "s"}
    assert load_settings(base).tenants_max_stale_s == 300
    assert load_settings({**base, "JOBSTREAM_TENANTS_MAX_STALE_S": "0"}).tenants_max_stale_s == 0
    with pytest.raises(Exception, match="JOBSTREAM_TENANTS_MAX_STALE_S"):
        load_settings({**base, "JOBSTREAM_TENANTS_MAX_STALE_S": "-1"})


def test_with_a_cache_age_the_bound_counts_from_the_last_read_that_succeeded(
    srt: Runtime, clock: Clock
) -> None:
    settings = srt.settings.model_copy(update={"tenants_max_age_s": 60})
    read_at = clock()
    assert load_registry(settings, read_at).authenticate("acme-token", 0) == "acme"
    with unreadable():
        # Uses within the cache age are the read itself, not reads: they never move the bound.
        assert load_registry(settings, read_at + 59_999).authenticate("acme-token", 0) == "acme"
        assert load_registry(settings, read_at + 61_000).authenticate("acme-token", 0) == "acme"
        assert load_registry(settings, read_at + MAX_STALE_S * 1000).authenticate(
            "acme-token", 0
        ) == ("acme")
        with pytest.raises(RegistryUnavailableError, match="older than"):
            load_registry(settings, read_at + MAX_STALE_S * 1000 + 1)


def test_after_a_failed_read_the_known_registry_stands_in_for_a_while_without_a_call(
    srt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "elapsed_clock", lambda: 0.0)  # reads take no time
    settings = srt.settings
    assert load_registry(settings, clock()).authenticate("acme-token", 0) == "acme"
    reads: list[int] = []
    with unreadable(), counted(reads):
        failed_at = clock()
        assert load_registry(settings, failed_at).authenticate("acme-token", 0) == "acme"
        attempts = len(reads)
        assert attempts > 1  # the client's retries, once
        for later in (1, registry_module.RETRY_AFTER_FAILURE_MS - 1):
            assert load_registry(settings, failed_at + later).authenticate("acme-token", 0)
        assert len(reads) == attempts  # no call meanwhile
        # Then it is tried again.
        load_registry(settings, failed_at + registry_module.RETRY_AFTER_FAILURE_MS)
        assert len(reads) == 2 * attempts


def test_the_pause_counts_from_the_end_of_the_failed_read(
    srt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung store's timeouts may outlast the pause itself: it starts when the read gave up."""
    assert load_registry(srt.settings, clock()).authenticate("acme-token", 0) == "acme"
    elapsed = iter([100.0, 106.0])  # the failing read takes 6 s
    monkeypatch.setattr(registry_module, "elapsed_clock", lambda: next(elapsed))
    reads: list[int] = []
    with unreadable(), counted(reads):
        started = clock()
        load_registry(srt.settings, started)
        attempts = len(reads)
        ended = started + 6_000
        load_registry(srt.settings, ended + registry_module.RETRY_AFTER_FAILURE_MS - 1)
        assert len(reads) == attempts


def test_a_read_that_succeeds_ends_the_pause(srt: Runtime, clock: Clock) -> None:
    settings = srt.settings
    first = clock()
    assert load_registry(settings, first).authenticate("acme-token", 0) == "acme"
    past_bound = first + MAX_STALE_S * 1000 + 1
    with unreadable(), pytest.raises(RegistryUnavailableError):
        load_registry(settings, past_bound)  # a failure recorded, the registry too old to use
    assert load_registry(settings, past_bound + 1).authenticate("acme-token", 0) == "acme"
    reads: list[int] = []
    with counted(reads):
        # Moments after a failure, but it was followed by a read that succeeded: no pause.
        load_registry(settings, past_bound + 2)
    assert reads == [1]


def test_a_callback_batch_reads_a_failing_registry_once_not_once_per_thread(
    crt: Runtime, secret: str, clock: Clock
) -> None:
    srt = reading_the_secret(crt, secret, poster=lambda *_: HttpResult(204, "", None))
    submit_many(srt, 5)
    messages = receive(srt, 5)
    assert load_registry(srt.settings, clock()).get("acme") is not None
    reads: list[int] = []
    with unreadable(), counted(reads):
        kept = deliver_batch(srt, messages, lambda: 30_000)
    # Sent with the registry read moments ago; its store was tried by one read's attempts.
    assert kept == []
    assert len(reads) == RetryPolicy().attempts


@pytest.mark.parametrize(
    "failure",
    [
        OutOfTimeError("no time left for an attempt"),
        EndpointConnectionError(endpoint_url="https://secretsmanager.example"),
        ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "Get"),
    ],
)
def test_every_failure_of_the_read_is_a_retryable_unavailability(
    srt: Runtime, failure: Exception
) -> None:
    def fail(**_kwargs: Any) -> None:
        raise failure

    with on_each_read(fail):
        with pytest.raises(RegistryUnavailableError, match="cannot read the tenants secret"):
            load_registry(srt.settings, 0)
        response = Api(token="acme-token").get("/jobs")
    assert (response.status, response.body["error"]["retryable"]) == (503, True)
