"""Black-box: start `python -m jobstream_local` and speak HTTP to it, as a consumer would."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jobstream_local.child import start_child
from tests.support.stack import REPOSITORY, TARGETS
from tests.support.stack import environment as _environment
from tests.support.validation import validate, validate_error

TOKEN = "local-dev-token"
pytestmark = pytest.mark.stack


@dataclass
class Client:
    base_url: str
    token: str | None = TOKEN

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if self.token is not None:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    targets = tmp_path_factory.mktemp("stack") / "targets.json"
    targets.write_text(json.dumps(TARGETS), encoding="utf-8")
    child = start_child(_environment(JOBSTREAM_TARGETS=str(targets)))
    try:
        yield Client(child.url)
    finally:
        child.stop()


def _task(key: str, target_id: str = "demo-illustration") -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "correlation_id": "stack-test",
        "params": {"target_id": target_id},
    }


def test_the_whole_pull_protocol_over_http(stack: Client) -> None:
    status, capabilities = stack.call("GET", "/capabilities")
    assert status == 200
    validate(capabilities, "Capabilities")

    status, submitted = stack.call("POST", "/jobs", _task("stack-key-1", "slow-illustration"))
    assert status == 202
    validate(submitted, "JobReceipt")
    job = submitted["job"]
    assert job["events_url"].startswith(stack.base_url)

    status, replay = stack.call("POST", "/jobs", _task("stack-key-1", "slow-illustration"))
    assert status == 200
    assert replay["job"]["job_id"] == job["job_id"]

    status, page = stack.call("GET", "/jobs?idempotency_key=stack-key-1")
    assert status == 200
    validate(page, "JobPage")
    assert [item["job_id"] for item in page["jobs"]] == [job["job_id"]]

    status, fetched = stack.call("GET", f"/jobs/{job['job_id']}")
    assert status == 200
    validate(fetched, "Job")
    assert (fetched["job_id"], fetched["created_at"]) == (job["job_id"], job["created_at"])

    status, events = stack.call("GET", f"/jobs/{job['job_id']}/events?unacked=1")
    assert status == 200
    validate(events, "EventPage")
    assert events["events"][0]["type"] == "job.accepted"

    status, cancelled = stack.call("POST", f"/jobs/{job['job_id']}/cancel")
    assert status == 200
    assert cancelled["status"] == "cancelled"

    status, events = stack.call("GET", f"/jobs/{job['job_id']}/events")
    kinds = [event["type"] for event in events["events"]]
    assert kinds[0] == "job.accepted"
    assert kinds[-1] == "job.cancelled"
    assert "job.succeeded" not in kinds
    last = events["events"][-1]["event_id"]
    status, acked = stack.call("POST", f"/jobs/{job['job_id']}/events/ack", {"ack_through": last})
    assert status == 200
    validate(acked, "AckResult")
    assert (acked["acked"], acked["unacked"]) == (len(kinds), 0)


def test_errors_over_http_are_envelopes(stack: Client) -> None:
    for client, method, path, body, expected in (
        (Client(stack.base_url, token=None), "GET", "/capabilities", None, 401),
        (stack, "GET", "/jobs/unknown", None, 404),
        (stack, "GET", "/no/such/route", None, 404),
        (stack, "POST", "/jobs", {"protocol_version": "2"}, 400),
    ):
        status, response = client.call(method, path, body)
        assert status == expected
        validate_error(response)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "soon"),
        # The local stack's own: these gave a traceback, said ready and ran nothing, or swept
        # hundreds of times a second.
        ("JOBSTREAM_LOCAL_CONCURRENCY", "many"),
        ("JOBSTREAM_LOCAL_CONCURRENCY", "0"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "-1"),
        ("JOBSTREAM_PORT", "web"),
        ("JOBSTREAM_MOTO_PORT", "65536"),
        ("JOBSTREAM_MOTO_HOST", "no-such-host.invalid"),
    ],
)
def test_invalid_configuration_stops_start_up(variable: str, value: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobstream_local"],
        cwd=REPOSITORY,
        env=_environment(**{variable: value}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("jobstream: ")
    assert variable in line
    assert "ready" not in result.stdout


def test_a_port_in_use_stops_start_up() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "jobstream_local"],
            cwd=REPOSITORY,
            env=_environment(JOBSTREAM_PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"jobstream: JOBSTREAM_PORT: cannot listen on 127.0.0.1:{port} (Address already in use)"
    )


def test_a_stack_that_never_serves_is_reported_with_what_it_wrote() -> None:
    """How the suites and the benchmarks learn why a stack did not start."""
    with pytest.raises(RuntimeError) as raised:
        start_child(_environment(JOBSTREAM_MOTO_PORT="65536"))
    assert "did not become ready" in str(raised.value)
    assert "JOBSTREAM_MOTO_PORT" in str(raised.value)


def test_ctrl_c_stops_cleanly() -> None:
    child = start_child(_environment())
    assert child.stop() == 0, "".join(child.stderr)
    assert "stopping" in "".join(child.stdout)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(child.url + "/capabilities", timeout=2)


def test_callbacks_reach_a_receiver_that_fails_then_succeeds() -> None:
    from tests.support.receiver import receiver

    env = _environment(
        JOBSTREAM_CALLBACK_RETRY_BASE_MS="1000",
        JOBSTREAM_CALLBACK_RETRY_MAX_MS="2000",
        JOBSTREAM_SWEEP_INTERVAL_S="1",
    )
    child = start_child(env)
    try:
        # The first request fails; every later one succeeds.
        with receiver(503, 204) as hook:
            client = Client(child.url)
            task = {**_task("stack-callback"), "callback_url": hook.url}
            status, submitted = client.call("POST", "/jobs", task)
            assert status == 202
            job_id = submitted["job"]["job_id"]
            deadline = time.monotonic() + 30
            events: list[dict[str, Any]] = []
            while time.monotonic() < deadline:
                events = client.call("GET", f"/jobs/{job_id}/events")[1]["events"]
                if events[-1]["type"] == "job.succeeded" and len(hook.requests) > len(events):
                    break
                time.sleep(0.2)
            posted = [json.loads(request.body) for request in hook.requests]
            # Every event arrived; one of them twice (its first attempt got the 503).
            assert sorted(e["event_id"] for e in posted[1:]) == sorted(
                e["event_id"] for e in events
            )
            assert posted[0] in posted[1:]
            for event in posted:
                validate(event, "Event")
                assert event["job_id"] == job_id
            time.sleep(1.5)
            assert len(hook.requests) == len(events) + 1  # delivered: no further POST
    finally:
        child.stop()


def _finished(stack: Client, task: dict[str, Any]) -> dict[str, Any]:
    """Submit `task` and poll its job until it is no longer queued or running (30 s at most)."""
    status, submitted = stack.call("POST", "/jobs", task)
    assert status == 202, submitted
    job: dict[str, Any] = submitted["job"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and job["status"] in {"queued", "running"}:
        time.sleep(0.2)
        job = stack.call("GET", f"/jobs/{job['job_id']}")[1]
    return job


def test_a_submitted_job_runs_to_succeeded(stack: Client) -> None:
    job = _finished(stack, _task("stack-run"))
    job_id = job["job_id"]
    assert job["status"] == "succeeded", job
    validate(job, "Job")
    validate(job["result"], "Result_CandidateSearch")
    assert job["result"]["candidates"]
    _, page = stack.call("GET", f"/jobs/{job_id}/events")
    kinds = [event["type"] for event in page["events"]]
    assert kinds[:2] == ["job.accepted", "job.started"]
    assert kinds[-1] == "job.succeeded"
    assert set(kinds[2:-1]) <= {"job.progress"}


def test_asset_fetch_stores_files_behind_presigned_urls(stack: Client) -> None:
    task = {
        "protocol_version": "1",
        "job_type": "asset_fetch",
        "idempotency_key": "stack-fetch",
        "params": {"target_id": "demo-illustration", "work_id": "118416466"},
    }
    job = _finished(stack, task)
    job_id = job["job_id"]
    assert job["status"] == "succeeded", job
    validate(job, "Job")
    validate(job["result"], "Result_AssetFetch")
    for asset in job["result"]["assets"]:
        validate(asset, "Asset")
        # The consumer's download: plain HTTP to the presigned URL (the local stack's moto).
        with urllib.request.urlopen(asset["locator"]["value"], timeout=30) as response:
            body = response.read()
        assert len(body) == asset["bytes"]
        assert asset["hash"] == "sha256:" + hashlib.sha256(body).hexdigest()
    kinds = [event["type"] for event in stack.call("GET", f"/jobs/{job_id}/events")[1]["events"]]
    # A fetch this quick reports no progress event (none within 5 s of `job.started`).
    assert kinds[:2] == ["job.accepted", "job.started"]
    assert set(kinds[2:-1]) <= {"job.progress"}
    assert kinds[-1] == "job.succeeded"


def _exchange(stack: Client, request: bytes, *, half_close: bool = False) -> tuple[int, Any]:
    """Send raw bytes; the status and JSON body of the answer (the gateway closes after it)."""
    address = urllib.parse.urlsplit(stack.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(request)
        if half_close:
            connection.shutdown(socket.SHUT_WR)  # "I have sent everything I will send"
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _raw_request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", f"Authorization: Bearer {TOKEN}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Content-Length": ":"}, "Content-Length must be a number of bytes"),
        ({"Content-Length": "-1"}, "Content-Length must be a number of bytes"),
        ({"Transfer-Encoding": "gzip"}, "Transfer-Encoding must be chunked"),
    ],
)
def test_a_body_that_cannot_be_framed_is_a_400_envelope(
    stack: Client, headers: dict[str, str], message: str
) -> None:
    # API Gateway refuses these itself; locally they used to drop the connection.
    status, body = _exchange(stack, _raw_request("GET", "/capabilities", headers))
    assert status == 400
    validate_error(body)
    assert body["error"]["message"] == message
    assert body["error"]["detail"] == {"reason": "unreadable_body"}


def test_a_body_shorter_than_its_length_is_a_400_envelope(stack: Client) -> None:
    # The client announces a byte it never sends: answered, not waited for until a timeout.
    request = _raw_request("GET", "/capabilities", {"Content-Length": "1"})
    status, body = _exchange(stack, request, half_close=True)
    assert status == 400
    validate_error(body)
    assert body["error"]["message"] == "request body is shorter than its Content-Length"


def test_a_chunked_body_is_read(stack: Client) -> None:
    task = json.dumps(_task("stack-chunked")).encode()
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (task[:10], task[10:]) if part
    )
    request = _raw_request(
        "POST",
        "/jobs",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked", "Connection": "close"},
        chunked + b"0\r\n\r\n",
    )
    status, body = _exchange(stack, request)
    assert status == 202, body
    assert body["job"]["idempotency_key"] == "stack-chunked"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NOT A REQUEST LINE AT ALL\r\n\r\n", 400),
        (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /capabilities HTTP/9.9\r\n\r\n", 400),
    ],
)
def test_what_the_http_server_refuses_is_an_envelope_too(
    stack: Client, request_bytes: bytes, status: int
) -> None:
    answered, body = _exchange(stack, request_bytes)
    assert answered == status
    validate_error(body)
    assert body["error"]["detail"] == {"reason": "bad_http_request"}


CONCURRENT_CLIENTS = 150


def test_a_burst_of_concurrent_clients_is_answered_in_full(stack: Client) -> None:
    # 150 consumers connect at the same instant (half submit, half read): every connection gets
    # its answer. The standard library's listen backlog of 5 used to drop a share of them.
    start = threading.Barrier(CONCURRENT_CLIENTS)
    answers: list[int | str] = [0] * CONCURRENT_CLIENTS

    def consumer(index: int) -> None:
        submit = index % 2 == 0
        start.wait()
        try:
            if submit:
                status, _ = stack.call("POST", "/jobs", _task(f"burst-{index}"))
            else:
                status, _ = stack.call("GET", "/capabilities")
        except OSError as error:  # a reset, a refused or timed-out connection
            answers[index] = repr(error)
        else:
            answers[index] = status

    threads = [threading.Thread(target=consumer, args=(n,)) for n in range(CONCURRENT_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [202 if n % 2 == 0 else 200 for n in range(CONCURRENT_CLIENTS)]


def test_a_stack_stops_when_what_started_it_is_killed() -> None:
    """A killed test run leaves no stack serving on: its standard input, a pipe from what
    started it, ends, and the stack stops (its moto server with it)."""
    starter = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _STARTER],
        env=_environment(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    url = starter.stdout.readline().strip()
    assert url.startswith("http://"), url
    assert Client(url).call("GET", "/capabilities")[0] == 200
    starter.kill()
    starter.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _serving(url):
        time.sleep(0.2)
    assert not _serving(url), "the stack still serves after its starter was killed"


_STARTER = """
import os, time
from jobstream_local.child import start_child
child = start_child(os.environ)
print(child.url, flush=True)
time.sleep(600)
"""


def _serving(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((str(parts.hostname), int(parts.port or 80)), timeout=1):
            return True
    except OSError:
        return False


def test_capabilities_revalidate_over_http(stack: Client) -> None:
    # The gateway passes the validator and lifetime through, and a 304 has neither body nor
    # Content-Length (which would have to be the 200's).
    def get(headers: dict[str, str]) -> tuple[int, Any, bytes]:
        request = urllib.request.Request(stack.base_url + "/capabilities", headers=headers)
        request.add_header("Authorization", f"Bearer {TOKEN}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    status, headers, _ = get({})
    assert status == 200
    assert headers["Cache-Control"] == "private, max-age=60"
    assert headers["Vary"] == "Authorization"
    etag = headers["ETag"]
    status, headers, body = get({"If-None-Match": f'"other", {etag}'})
    assert (status, body) == (304, b"")
    assert headers["ETag"] == etag
    assert headers["Cache-Control"] == "private, max-age=60"
    assert headers["Content-Length"] is None
    assert get({"If-None-Match": '"other"'})[0] == 200
