"""Black-box: the consumer SDK, its receiver example and the conformance kit against the local
stack, with two tenants and signed callbacks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobstream_cli.app import app
from jobstream_client import Client, IdempotencyConflictError, NotFoundError, new_task
from jobstream_client.caching import CapabilitiesCache
from jobstream_local.child import start_child
from tests.support.stack import REPOSITORY, TARGETS, environment

pytestmark = pytest.mark.stack

TOKEN_A, TOKEN_B = "token-a", "token-b"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CALLBACK_TOKEN = "callback-token"
DEMO, SLOW = {"target_id": "demo-illustration"}, {"target_id": "slow-illustration"}
FEED_EXAMPLE = REPOSITORY / "clients" / "python" / "examples" / "feed_consumer.py"


def digest(token: str) -> str:
    return sha256(token.encode()).hexdigest()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    targets = tmp_path_factory.mktemp("sdk") / "targets.json"
    targets.write_text(json.dumps(TARGETS), encoding="utf-8")
    # Two consumers, each with its own callback credentials (a registry file, as operators
    # keep it locally); both may call back to receivers on this machine.
    registry = targets.with_name("tenants.json")
    consumer = {
        "callback_token": CALLBACK_TOKEN,
        "signing_secrets": [{"secret": SECRET}],
        "callback_origins": ["http://127.0.0.1:*"],
    }
    registry.write_text(
        json.dumps(
            {
                "tenants": {
                    name: {
                        "api_tokens": [{"sha256": sha256(token.encode()).hexdigest()}],
                        **consumer,
                    }
                    for name, token in (("a", TOKEN_A), ("b", TOKEN_B))
                }
            }
        ),
        encoding="utf-8",
    )
    env = environment(
        JOBSTREAM_TARGETS=str(targets),
        JOBSTREAM_TENANTS=str(registry),
        # A cancelled job's worker stops at its next heartbeat: free the slow jobs' workers soon.
        JOBSTREAM_HEARTBEAT_INTERVAL_MS="1000",
    )
    child = start_child(env)
    try:
        yield child.url
    finally:
        child.stop()


@pytest.fixture
def client(url: str) -> Client:
    return Client(url, TOKEN_A)


def test_the_conformance_kit_passes_every_applicable_item(url: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            *("--url", url, "--token", TOKEN_A, "-o", "json", "conformance"),
            *("--token-b", TOKEN_B, "--params", json.dumps(DEMO)),
            *("--cancel-params", json.dumps(SLOW), "--timeout", "60"),
            *("--callback-receiver", "127.0.0.1:0", "--callback-token", CALLBACK_TOKEN),
            *("--callback-secret", SECRET),
        ],
    )
    report = json.loads(result.stdout[result.stdout.index("{\n") :])
    broken = [item for item in report["items"] if item["outcome"] in {"fail", "skip"}]
    assert broken == [], json.dumps(broken, indent=1)
    assert result.exit_code == 0
    assert report["conformant"] is True
    not_applicable = {item["id"] for item in report["items"] if item["outcome"] == "n/a"}
    assert not_applicable == {
        f"R{n}" for n in (1, 2, 3, 4, 5, 6, 7, 20, 21, 23, 24, 26, 28, 39, 45, 46, 51)
    }
    assert report["totals"]["pass"] == len(report["items"]) - len(not_applicable)


def test_submit_replay_conflict_and_lookups(client: Client) -> None:
    task = new_task("candidate_search", DEMO, correlation_id="sdk-stack")
    first = client.submit(task)
    again = client.submit(task)
    assert (first.created, again.replayed, again.job.job_id) == (True, True, first.job.job_id)
    with pytest.raises(IdempotencyConflictError):
        client.submit({**task, "params": {**DEMO, "constraints": {"limit": 2}}})
    found = client.find(task["idempotency_key"])
    assert found is not None
    assert found.job_id == first.job.job_id
    assert client.capabilities().supports("1")
    with pytest.raises(NotFoundError):
        Client(client.base_url, TOKEN_B).get(first.job.job_id)


def test_list_iterates_every_page(client: Client) -> None:
    ids = {
        client.submit(new_task("candidate_search", DEMO, correlation_id="sdk-pages")).job.job_id
        for _ in range(5)
    }
    assert {job.job_id for job in client.list(correlation_id="sdk-pages", page_size=2)} == ids


def test_follow_acks_as_it_goes_and_a_restart_resumes_from_the_servers_cursor(
    client: Client,
) -> None:
    job_id = client.submit(new_task("candidate_search", DEMO)).job.job_id
    handled: list[str] = []

    def consumer_that_crashes_on_its_second_event() -> None:
        for event in client.follow(job_id, poll_interval_s=0.1, timeout_s=30):
            if len(handled) == 1:
                raise RuntimeError("crashed while handling")
            handled.append(event.event_id)

    with pytest.raises(RuntimeError):
        consumer_that_crashes_on_its_second_event()
    # A fresh process: the SDK asks the server where this consumer left off.
    restarted = Client(client.base_url, TOKEN_A)
    resumed = list(restarted.follow(job_id, poll_interval_s=0.1, timeout_s=30))
    everything = [event.event_id for event in client.events(job_id)]
    assert handled + [event.event_id for event in resumed] == everything
    assert resumed[-1].type == "job.succeeded"
    assert client.events_page(job_id, unacked=True).unacked == 0


def test_cancel_a_running_job(client: Client) -> None:
    job_id = client.submit(new_task("candidate_search", SLOW)).job.job_id
    deadline = time.monotonic() + 20
    while client.get(job_id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.1)
    cancelled = client.cancel(job_id)
    assert cancelled.status == "cancelled"
    assert [event.type for event in client.follow(job_id, ack=False)][-1] == "job.cancelled"


def test_the_receiver_example_verifies_and_stores_every_callback(
    client: Client, tmp_path: Path
) -> None:
    store = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPOSITORY / "clients" / "python"),
        "JOBSTREAM_CALLBACK_SECRET": f"whsec_b2xkIGtleQ== {SECRET}",  # rotating: old and new
        "JOBSTREAM_CALLBACK_TOKEN": CALLBACK_TOKEN,
    }
    example = REPOSITORY / "clients" / "python" / "examples" / "receiver.py"
    receiver = subprocess.Popen(  # noqa: S603 - this repository's example, with fixed arguments
        [sys.executable, str(example), "--port", "0", "--store", str(store)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        hook = receiver.stdout.readline().split()[-1]
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(receiver.stdout or []), daemon=True).start()
        task = new_task("candidate_search", DEMO, callback_url=hook)
        job_id = client.submit(task).job.job_id
        pulled = [e.event_id for e in client.follow(job_id, poll_interval_s=0.1, timeout_s=30)]
        deadline = time.monotonic() + 20
        while len(lines) < len(pulled) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(line.split()[0] for line in lines) == sorted(pulled)
        stored: list[dict[str, Any]] = [json.loads(line) for line in store.read_text().splitlines()]
        assert sorted(event["event_id"] for event in stored) == sorted(pulled)
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)


def test_capabilities_are_revalidated_with_a_304(client: Client) -> None:
    now = [0.0]
    cache = CapabilitiesCache()
    sdk = Client(client.base_url, client.token, capabilities_cache=cache, clock=lambda: now[0])
    first = sdk.capabilities()
    stored = cache.get(client.base_url, client.token)
    assert stored is not None
    assert stored.fresh_until_s == 60.0
    now[0] = 61.0
    assert sdk.capabilities() == first
    again = cache.get(client.base_url, client.token)
    assert again is not None
    # A 304 kept the very document stored before, fresh for another max-age.
    assert again.document is stored.document
    assert again.fresh_until_s == 121.0


def test_the_feed_long_polls_and_a_named_cursor_survives_a_restart(url: str) -> None:
    client = Client(url, TOKEN_B)
    assert client.capabilities().extension("event_feed") is not None
    # The deliveries extension's endpoint calls answer too (nothing failed: nothing listed).
    assert client.endpoints() == ()
    assert client.enable_endpoint("http://127.0.0.1:9") is False
    # Catch up with whatever earlier tests left in b's feed.
    start = client.feed_page()
    while start.has_more:
        start = client.feed_page(after=start.next_after)
    assert client.feed_ack("sdk-feed", start.next_after).through == start.next_after
    answers: list[Any] = []

    def long_poll() -> None:
        page = client.feed_page(after=start.next_after, wait_ms=15_000)
        answers.append((page, time.monotonic()))

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)
    job_id = client.submit(new_task("candidate_search", DEMO)).job.job_id
    submitted = time.monotonic()
    poller.join(timeout=20)
    ((page, answered),) = answers
    assert [(event.job_id, event.type) for event in page.events][:1] == [(job_id, "job.accepted")]
    # Issued before the submission, answered within a second of it.
    assert answered - submitted < 1.0

    handled: list[str] = []

    def consumer_that_crashes_on_its_second_event() -> None:
        for event in client.feed("sdk-feed", wait_ms=1_000, idle_timeout_s=30):
            if event.job_id != job_id:
                continue
            if len(handled) == 1:
                raise RuntimeError("crashed while handling")
            handled.append(event.event_id)

    with pytest.raises(RuntimeError):
        consumer_that_crashes_on_its_second_event()
    # A fresh client with nothing but the name: on from the last page acked, at least once.
    resumed: list[str] = []
    for event in Client(url, TOKEN_B).feed("sdk-feed", wait_ms=1_000, idle_timeout_s=30):
        if event.job_id == job_id:
            resumed.append(event.event_id)
            if event.terminal:
                break
    everything = [event.event_id for event in client.events(job_id)]
    assert set(handled + resumed) == set(everything)
    assert resumed[-1] == everything[-1]
    assert resumed == everything[len(everything) - len(resumed) :]


def test_the_feed_consumer_example_settles_its_jobs_on_the_feed_alone(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("feed_consumer_example", FEED_EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setenv("JOBSTREAM_URL", url)
    monkeypatch.setenv("JOBSTREAM_TOKEN", TOKEN_B)
    arguments = ["--name", "example", "--target-id", "demo-illustration", "--jobs", "3"]
    assert example.main([*arguments, "--idle-timeout", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert all(line.split()[1] == "succeeded" for line in lines)
