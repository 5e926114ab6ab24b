"""asset_fetch end to end against moto: admitted over HTTP, run by the worker function, its
files stored in the template's bucket, its result and events valid under our schemas (and the
published protocol's, where it is checked out)."""

from __future__ import annotations

import hashlib
import io
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import requests
from botocore.exceptions import ClientError
from rich.console import Console

from jobstream.config.targets import DEFAULT_MAX_ATTEMPTS
from jobstream.jobtypes.asset_fetch import storage
from jobstream.jobtypes.asset_fetch.fetch import fetch
from jobstream.jobtypes.context import DeadlineReachedError, JobInterruptedError
from jobstream.outbound.origins import parse_origins
from jobstream.retries import RetryPolicy
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs
from jobstream.service.execution import Lease
from jobstream_cli.render import event_line, job_detail
from jobstream_local.resources import create_buckets
from jobstream_local.template import Template
from tests.integration.test_job_type_registry import run_worker
from tests.support.harness import Api, Clock, canonical_task
from tests.support.slow_peer import SlowPeer, slow_peer
from tests.support.validation import validate, validate_error

LAYER = Path(__file__).resolve().parents[2] / "layers" / "jobstream" / "jobstream"
CATALOG_FILES = LAYER / "jobtypes" / "sources" / "catalog-files"
WORK_ID = "118416466"


@pytest.fixture
def bucket(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The template's asset bucket, under a name of this test's own."""
    suffix = uuid.uuid4().hex[:10]
    created = create_buckets(
        Template.load(), boto3.client("s3"), name_for=lambda name: f"{name.lower()}-{suffix}"
    )
    name = created["AssetBucket"]["Ref"]
    monkeypatch.setenv("JOBSTREAM_ASSET_BUCKET", name)
    storage._s3_client.cache_clear()
    yield name
    storage._s3_client.cache_clear()


def task(params: dict[str, Any], key: str = "fetch-1") -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "asset_fetch",
        "idempotency_key": key,
        "params": params,
    }


def run(api: Api, params: dict[str, Any], key: str = "fetch-1") -> dict[str, Any]:
    submitted = api.post("/jobs", task(params, key))
    assert submitted.status == 202, submitted.body
    job_id = submitted.body["job"]["job_id"]
    assert run_worker(job_id) == {"batchItemFailures": []}
    job: dict[str, Any] = api.get(f"/jobs/{job_id}").body
    validate(job, "Job")
    for event in api.get(f"/jobs/{job_id}/events").body["events"]:
        validate(event, "Event")
    return job


def downloaded(url: str) -> bytes:
    """What a consumer gets from the presigned URL (moto answers it in-process)."""
    response = requests.get(url, timeout=5)
    assert response.status_code == 200, response.text
    return response.content


@pytest.mark.usefixtures("rt")
def test_a_works_assets_are_fetched_stored_and_described(api: Api, bucket: str) -> None:
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "succeeded", job.get("error")
    result = job["result"]
    validate(result, "Result_AssetFetch")
    assert result["work_id"] == WORK_ID
    files = {"118416466_p0": "118416466_p0.png", "118416466_p1": "118416466_p1.png"}
    assert [asset["asset_id"] for asset in result["assets"]] == list(files)
    for asset in result["assets"]:
        validate(asset, "Asset")
        expected = (CATALOG_FILES / files[asset["asset_id"]]).read_bytes()
        assert asset["bytes"] == len(expected)
        assert asset["hash"] == "sha256:" + hashlib.sha256(expected).hexdigest()
        assert asset["mime"] == "image/png"
        assert (asset["source"], asset["quality"]) == ("pixiv", "default")
        url = asset["locator"]["value"]
        query = parse_qs(urlsplit(url).query)
        # Presigned and expiring: SigV4, valid for the configured hour.
        assert query["X-Amz-Expires"] == ["3600"]
        assert "X-Amz-Signature" in query
        assert urlsplit(url).netloc.startswith(bucket)
        assert downloaded(url) == expected
    # Each URL expires a TTL after its own signature; the result advertises the earliest, and
    # no URL stops working before it.
    expiries = [signed_expiry_ms(asset["locator"]["value"]) for asset in result["assets"]]
    for asset, expiry in zip(result["assets"], expiries, strict=True):
        assert expiry - 1000 <= asset["metadata"]["expires_at"] <= expiry
    assert result["expires_at"] == min(
        asset["metadata"]["expires_at"] for asset in result["assets"]
    )
    assert result["expires_at"] <= min(expiries)
    assert result["expires_at"] >= job["updated_at"]


def signed_expiry_ms(url: str) -> int:
    """When S3 stops honouring a presigned URL: its X-Amz-Date plus its X-Amz-Expires."""
    query = parse_qs(urlsplit(url).query)
    signed = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return (int(signed.timestamp()) + int(query["X-Amz-Expires"][0])) * 1000


@pytest.mark.usefixtures("rt")
def test_the_assets_of_a_candidate_search_result_are_fetched(api: Api, bucket: str) -> None:
    search = api.post(
        "/jobs",
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": "search-1",
            "params": {"query": {"tags": ["landscape", "cat", "snow"]}},
        },
    ).body["job"]["job_id"]
    assert run_worker(search) == {"batchItemFailures": []}
    (candidate,) = api.get(f"/jobs/{search}").body["result"]["candidates"]
    assert candidate["work_id"] == WORK_ID
    # The candidate's Asset objects, as the consumer received them.
    job = run(api, {"assets": candidate["assets"]})
    assert job["status"] == "succeeded", job.get("error")
    fetched = job["result"]["assets"]
    assert [a["asset_id"] for a in fetched] == [a["asset_id"] for a in candidate["assets"]]
    assert [a["role"] for a in fetched] == [a["role"] for a in candidate["assets"]]
    assert [a["metadata"]["source_url"] for a in fetched] == [
        a["locator"]["value"] for a in candidate["assets"]
    ]


@pytest.mark.usefixtures("rt")
def test_an_asset_named_by_id_reports_the_catalog_url_it_was_read_from(
    api: Api, bucket: str
) -> None:
    # The consumer's URL is not the catalog's: the catalog's file for that asset id is stored.
    named = {
        "asset_id": "118416466_p0",
        "locator": {"kind": "url", "value": "https://i.pximg.net/c/250x250/118416466_p0.jpg"},
    }
    job = run(api, {"assets": [named]})
    assert job["status"] == "succeeded", job.get("error")
    (asset,) = job["result"]["assets"]
    assert (
        downloaded(asset["locator"]["value"]) == (CATALOG_FILES / "118416466_p0.png").read_bytes()
    )
    assert asset["metadata"]["source_url"] == (
        "https://i.pximg.net/img-original/img/2024/06/01/00/00/00/118416466_p0.png"
    )


class SlowDown:
    """S3's answer to too many requests, to the first `times` uploads (each one that outlasted
    botocore's own retries: the handler runs outside them)."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    def __call__(self, **_: Any) -> None:
        self.calls += 1
        if self.calls <= self.times:
            response: Any = {
                "Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."},
                "ResponseMetadata": {"HTTPStatusCode": 503},
            }
            raise ClientError(response, "PutObject")


@pytest.fixture
def slow_down() -> Iterator[Callable[[int], SlowDown]]:
    events = storage._s3_client().meta.events
    installed: list[SlowDown] = []

    def install(times: int) -> SlowDown:
        installed.append(SlowDown(times))
        events.register("before-call.s3.PutObject", installed[-1], "slow-down")
        return installed[-1]

    yield install
    events.unregister("before-call.s3.PutObject", unique_id="slow-down")


@pytest.mark.usefixtures("rt")
def test_a_transient_s3_slow_down_is_retried_and_the_job_succeeds(
    api: Api,
    bucket: str,
    slow_down: Callable[[int], SlowDown],
    retries_without_sleeping: list[float],
) -> None:
    fault = slow_down(2)
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "succeeded", job.get("error")
    assert fault.calls == 2 + 2  # two refused, then both assets stored
    assert len(retries_without_sleeping) == 2  # backed off before each retry
    for asset in job["result"]["assets"]:
        assert downloaded(asset["locator"]["value"])


@pytest.mark.usefixtures("rt")
def test_a_slow_down_that_outlasts_the_retries_fails_the_job_retryably(
    api: Api, bucket: str, slow_down: Callable[[int], SlowDown]
) -> None:
    fault = slow_down(1_000)
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "failed"
    error = job["error"]
    assert (error["code"], error["retryable"]) == ("source_error", True)
    assert error["detail"]["internal_code"] == "network_error"
    assert error["message"] == "asset 118416466_p0 could not be stored; S3 may accept it on a retry"
    assert job["attempt"] == DEFAULT_MAX_ATTEMPTS  # a transient failure: the job ran again
    # Each run: the retry policy's attempts, then no more.
    assert fault.calls == RetryPolicy().attempts * DEFAULT_MAX_ATTEMPTS


def test_a_bucket_that_does_not_exist_fails_the_job_as_misconfigured(
    api: Api, rt: Runtime, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBSTREAM_ASSET_BUCKET", f"missing-{uuid.uuid4().hex[:10]}")
    storage._s3_client.cache_clear()
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "failed"
    error = job["error"]
    assert (error["code"], error["retryable"]) == ("internal_error", False)
    assert error["detail"]["internal_code"] == "configuration_error"
    assert (
        error["message"] == "asset 118416466_p0 could not be stored: S3 refused it (NoSuchBucket)"
    )


@pytest.mark.usefixtures("rt")
def test_an_asset_id_whose_key_fits_s3_exactly_is_stored_one_byte_more_is_a_400(
    api: Api, bucket: str
) -> None:
    # "日" is 9 bytes percent-encoded: this id makes a key of exactly S3's 1,024 bytes.
    at_limit = "日" * 108 + "a" * 7
    catalog_url = "https://i.pximg.net/img-original/img/2024/06/01/00/00/00/118416466_p0.png"

    def named(asset_id: str) -> dict[str, Any]:
        return {"asset_id": asset_id, "locator": {"kind": "url", "value": catalog_url}}

    for too_long in (at_limit + "a", "日" * 200):
        refused = api.post("/jobs", task({"assets": [named(too_long)]}, key="too-long"))
        assert refused.status == 400, refused.body
        validate_error(refused.body)
        error = refused.body["error"]
        assert error["code"] == "invalid_params"
        assert error["detail"]["reason"] == "asset_id_too_long"
    assert api.get("/jobs").body["jobs"] == []
    job = run(api, {"assets": [named(at_limit)]}, key="at-limit")
    assert job["status"] == "succeeded", job.get("error")
    (asset,) = job["result"]["assets"]
    assert asset["asset_id"] == at_limit
    (stored,) = boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]
    assert len(stored["Key"].encode()) == 1024
    expected = (CATALOG_FILES / "118416466_p0.png").read_bytes()
    assert downloaded(asset["locator"]["value"]) == expected


@pytest.mark.usefixtures("rt")
def test_too_many_assets_is_a_400_and_writes_nothing(api: Api, bucket: str) -> None:
    assets = [
        {
            "asset_id": f"a{index}",
            "locator": {"kind": "url", "value": f"https://i.pximg.net/{index}"},
        }
        for index in range(21)
    ]
    refused = api.post("/jobs", task({"assets": assets}))
    assert refused.status == 400
    validate_error(refused.body)
    assert refused.body["error"]["detail"]["reason"] == "too_many_assets"
    assert api.get("/jobs").body["jobs"] == []


@pytest.mark.usefixtures("rt")
def test_a_too_large_asset_fails_the_job_with_source_error(
    api: Api, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBSTREAM_ASSET_MAX_BYTES", "50")
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "failed"
    error = job["error"]
    assert error["code"] == "source_error"
    assert error["message"] == "asset 118416466_p0 is larger than the 50-byte limit of an asset"
    assert error["detail"]["internal_code"] == "download_failed"


@pytest.mark.usefixtures("rt")
def test_an_asset_the_source_cannot_provide_fails_the_job(api: Api, bucket: str) -> None:
    unknown = {"asset_id": "x", "locator": {"kind": "url", "value": "https://i.pximg.net/x.png"}}
    job = run(api, {"assets": [unknown]})
    assert job["status"] == "failed"
    assert job["error"]["code"] == "source_error"
    assert job["error"]["message"] == "asset x is not in the catalog"


def test_without_a_bucket_the_job_fails_as_misconfigured(
    api: Api, rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBSTREAM_ASSET_BUCKET", raising=False)
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "failed"
    assert job["error"]["code"] == "internal_error"
    assert job["error"]["detail"]["internal_code"] == "configuration_error"


# A source that sends its headers, then one byte of the body every 50 ms (tests/support/slow_peer).
TRICKLE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n"
# How far past the moment it must stop a download may end on a loaded machine: a bound.
STOP_MARGIN_S = 4.5


def running_job(rt: Runtime, key: str) -> Lease:
    """A job claimed by a worker, and the worker's lease (its heartbeat driven by the test)."""
    task = {**canonical_task(idempotency_key=key, callback_url=None), "deadline_ms": 60_000}
    job_id = admission.submit(rt, "acme", task, None)[1]["job"]["job_id"]
    record = execution.claim(rt, job_id, owner="worker-1")
    assert record is not None
    return Lease(rt, record, owner="worker-1")


def trickled_download(
    peer: SlowPeer, lease: Lease, stop: Callable[[], None]
) -> tuple[float, JobInterruptedError | None]:
    """How long a download with the lease's checkpoint ran on once `stop` happened 0.3 s into
    it, and how it was stopped."""
    timer = threading.Timer(0.3, stop)
    timer.start()
    started = time.monotonic()
    stopped: JobInterruptedError | None = None
    try:
        fetch(
            peer.url("/img.png"),
            asset_id="a1",
            origins=parse_origins((peer.base_url,)),
            headers={},
            max_bytes=200_000,
            timeout_s=30,
            checkpoint=lease.checkpoint,
        )
    except JobInterruptedError as error:
        stopped = error
    elapsed = time.monotonic() - started
    timer.join()
    return elapsed - 0.3, stopped


def test_a_trickling_download_stops_at_a_cancel_and_at_the_jobs_deadline(
    rt: Runtime, clock: Clock
) -> None:
    """The download of a running job, from a source that trickles its body: the cancel (the
    lease is lost at the next heartbeat) and the job's deadline each stop it promptly, not at
    the download's own 30 s timeout nor at the next 64 KiB."""
    with slow_peer(head=TRICKLE_HEAD, trickle=b"x" * 100_000) as peer:
        cancelled = running_job(rt, "cancelled")

        def cancel() -> None:
            jobs.cancel(rt, "acme", cancelled.record.job_id, None)
            cancelled.beat()  # the heartbeat finds the lease gone

        ran_on, stopped = trickled_download(peer, cancelled, cancel)
        assert type(stopped) is JobInterruptedError
        assert ran_on < STOP_MARGIN_S

        late = running_job(rt, "late")
        deadline_at = late.record.deadline_at
        assert deadline_at is not None

        def pass_deadline() -> None:
            clock.now = deadline_at

        ran_on, stopped = trickled_download(peer, late, pass_deadline)
        assert type(stopped) is DeadlineReachedError
        assert ran_on < STOP_MARGIN_S
        assert len(peer.went_away(2)) == 2  # both connections aborted


@pytest.mark.usefixtures("rt")
def test_the_cli_tells_the_result_in_its_job_types_words(api: Api, bucket: str) -> None:
    """`jobs show` and the terminal event's line show the fetched files, not "0 candidate(s)"."""
    job = run(api, {"work_id": WORK_ID})
    assert job["status"] == "succeeded", job.get("error")
    assets = job["result"]["assets"]
    terminal = api.get(f"/jobs/{job['job_id']}/events").body["events"][-1]
    for view in (job_detail(job, job["updated_at"]), event_line(terminal)):
        out = io.StringIO()
        Console(file=out, width=10_000, color_system=None).print(view)
        text = out.getvalue()
        assert "candidate" not in text
        assert f"result: 2 asset(s), {sum(a['bytes'] for a in assets)} bytes" in text
        for asset in assets:
            assert f"{asset['asset_id']}: image/png, {asset['bytes']} bytes, " in text
            assert asset["locator"]["value"] in text
