"""Shared fixtures: one moto session for the whole run, a fresh table per test, real handlers."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest

# Set before any client exists; botocore 1.44 needs the last one for moto in-process.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }
)
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)

from hypothesis import settings as hypothesis_settings
from moto import mock_aws

from jobstream import runtime as runtime_module
from jobstream.config.settings import Settings, parse_api_tokens
from jobstream.retries import RetryPolicy, set_default_policy
from jobstream.runtime import Runtime
from jobstream.store.client import dynamodb_client
from jobstream.store.jobs import JobStore
from jobstream_local.moto_patches import patch_moto
from jobstream_local.resources import create_queues, create_tables
from jobstream_local.template import Template
from tests.support.harness import Api, Clock
from tests.support.tenants import LOOPBACK_ORIGIN, secrets, with_tenant

# No time limit per example: what the properties check is not timing (benchmarks measure it),
# and a loaded CI machine or the coverage tracer makes any fixed limit flaky.
hypothesis_settings.register_profile("jobstream", deadline=None)
hypothesis_settings.load_profile("jobstream")

TOKENS = "acme=acme-token,globex=globex-token"
CALLBACK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CALLBACK_TOKEN = "consumer-issued-token"
# The other tenant's own callback credentials: nothing of acme's may ever reach its receiver.
OTHER_CALLBACK_SECRET = "whsec_b3RoZXItdGVuYW50LW93bi1zaWduaW5nLWtleQ=="
OTHER_CALLBACK_TOKEN = "globex-issued-token"
# acme's callback origins in `crt`: the local receivers, and public https test hosts.
CALLBACK_ORIGINS = (LOOPBACK_ORIGIN, "https://*.example.test")

# The reference test harness: one illustration target (its 20-minute execution ceiling cut to
# the worker's 15-minute Lambda timeout, the longest a deployment accepts).
REFERENCE_TARGETS: dict[str, Any] = {
    "account": "default",
    "targets": [
        {
            "id": "bot1-illust-botefuku",
            "enabled": True,
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["botefuku"]},
            "timeout_ms": 900_000,
        }
    ],
}


def public_resolver(host: str, port: int) -> list[str]:
    """Every test host resolves to one public address (no DNS in tests)."""
    return ["93.184.215.14"]


@pytest.fixture(scope="session")
def aws() -> Iterator[None]:
    patch_moto()
    with mock_aws():
        yield


@pytest.fixture(autouse=True)
def retries_without_sleeping() -> Iterator[list[float]]:
    """The clients' retries wait on no clock: the waits are recorded, never slept."""
    waits: list[float] = []
    previous = set_default_policy(
        RetryPolicy(sleep=waits.append, monotonic=lambda: 0.0, rand=lambda: 0.5)
    )
    yield waits
    set_default_policy(previous)


@pytest.fixture
def table_name(aws: None, request: pytest.FixtureRequest) -> str:
    name = f"jobs-{uuid.uuid4().hex[:12]}"
    client = boto3.client("dynamodb")
    # `bare_table`: a table an upgrade from the release with 32 sweep shards finds.
    upgraded = request.node.get_closest_marker("bare_table") is not None
    create_tables(Template.load(), client, name_for=lambda _logical_id: name, upgraded=upgraded)
    return name


@pytest.fixture
def targets_path(tmp_path: Path) -> Path:
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(REFERENCE_TARGETS), encoding="utf-8")
    return path


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rt(
    table_name: str, targets_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Runtime:
    dynamodb_client.cache_clear()
    settings = Settings(
        table_name=table_name,
        api_tokens=parse_api_tokens(TOKENS),
        targets_path=targets_path,
    )
    runtime = Runtime(
        settings=settings,
        store=JobStore(table_name),
        clock=clock,
        resolver=public_resolver,
        # A run's waits (a retry's backoff, a resource's turn) move the test's clock instead.
        sleep=lambda seconds: clock.advance(round(seconds * 1000)),
    )
    # The real handlers build their runtime from the environment; hand them this one.
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


@pytest.fixture
def api(rt: Runtime) -> Api:
    return Api(token="acme-token")


@pytest.fixture
def other_tenant(rt: Runtime) -> Api:
    return Api(token="globex-token")


@pytest.fixture
def queues(aws: None) -> dict[str, dict[str, str]]:
    """The template's queues, under names of this test's own."""
    suffix = uuid.uuid4().hex[:10]
    return create_queues(
        Template.load(), boto3.client("sqs"), name_for=lambda name: f"{name}-{suffix}"
    )


@pytest.fixture
def crt(rt: Runtime, queues: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """A runtime with the callback queues and fast retries; tenant acme has a callback token, a
    signing secret and local receivers among its origins, globex credentials of its own."""
    settings = rt.settings.model_copy(
        update={
            "callback_queue_url": queues["CallbackQueue"]["Ref"],
            "callback_dead_letter_url": queues["CallbackDeadLetterQueue"]["Ref"],
            "callback_timeout_ms": 2_000,
            "callback_retry_base_ms": 1_000,
            "callback_retry_max_ms": 2_000,
        }
    )
    runtime = with_tenant(
        replace(rt, settings=settings),
        "acme",
        callback_token=CALLBACK_TOKEN,
        signing_secrets=secrets(CALLBACK_SECRET),
        callback_origins=CALLBACK_ORIGINS,
    )
    runtime = with_tenant(
        runtime,
        "globex",
        callback_token=OTHER_CALLBACK_TOKEN,
        signing_secrets=secrets(OTHER_CALLBACK_SECRET),
    )
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


@pytest.fixture
def wrt(
    crt: Runtime, queues: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> Runtime:
    """The callbacks runtime with a work queue too."""
    settings = crt.settings.model_copy(update={"work_queue_url": queues["WorkQueue"]["Ref"]})
    runtime = replace(crt, settings=settings)
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime
