"""asset_fetch without AWS: params and their limits, the SSRF-checked download (recorded HTTP on
loopback, never the network), the Pixiv and catalog sources, and the executor's rules."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import responses
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from jobstream.config.targets import Target
from jobstream.http.statuses import http_status
from jobstream.jobtypes import registry
from jobstream.jobtypes.asset_fetch import executor
from jobstream.jobtypes.asset_fetch.config import AssetFetchConfig, load_config
from jobstream.jobtypes.asset_fetch.fetch import fetch
from jobstream.jobtypes.asset_fetch.keys import (
    JOB_ID_LENGTH,
    MAX_KEY_BYTES,
    longest_key_bytes,
    object_key,
)
from jobstream.jobtypes.asset_fetch.params import MAX_ASSETS, parse_params
from jobstream.jobtypes.asset_fetch.sources import CatalogAssets, PixivAssets, Read
from jobstream.jobtypes.asset_fetch.storage import S3AssetStore, SignedUrl
from jobstream.jobtypes.base import JobRun
from jobstream.jobtypes.context import JobInterruptedError
from jobstream.jobtypes.sources.base import SourceAsset, SourceError
from jobstream.jobtypes.sources.catalog import CatalogSource
from jobstream.jobtypes.sources.settings import SourceSettings
from jobstream.lifecycle.identity import derive_job_id
from jobstream.outbound.origins import parse_origins
from jobstream.protocol.errors import ErrorCode, ProtocolError
from tests.support.job_runs import RecordingContext, job_run
from tests.support.recorded_http import Canned, recorded_server
from tests.support.slow_peer import SlowPeer, slow_peer
from tests.support.validation import validate_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pixiv"
IMAGE = (FIXTURES / "image_master1200.png").read_bytes()
PIXIV_URL = "https://i.pximg.net/c/600x1200_90/img-master/img/2024/06/01/21/30/00/120000005_p0_master1200.jpg"
TARGET = Target.model_validate(
    {"id": "t", "work_type": "illustration", "source": "pixiv", "query": {"tags": ["a"]}}
)
SETTINGS = SourceSettings.model_validate(TARGET.settings)


def asset(asset_id: str = "a1", url: str = PIXIV_URL, **extra: Any) -> dict[str, Any]:
    return {"asset_id": asset_id, "locator": {"kind": "url", "value": url}, **extra}


def refused(params: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        registry.parse_task(
            {
                "protocol_version": "1",
                "job_type": "asset_fetch",
                "idempotency_key": "k",
                "params": params,
            }
        )
    error = caught.value
    assert error.code is ErrorCode.INVALID_PARAMS
    assert http_status(error) == 400
    validate_error(error.body())
    return error


# -- params ------------------------------------------------------------------------------------


def test_params_name_assets_or_a_work() -> None:
    parsed = parse_params({"work_id": " 118416466 ", "target_id": "t"})
    assert (parsed.params, parsed.target_id) == ({"work_id": "118416466"}, "t")
    parsed = parse_params(
        {"assets": [asset(type="image", role="preview", width=3, source="pixiv")]}
    )
    # Only what the fetch uses is kept (and compared on replay).
    assert parsed.params == {
        "assets": [{"asset_id": "a1", "url": PIXIV_URL, "type": "image", "role": "preview"}]
    }
    for both_or_neither in ({}, {"work_id": "1", "assets": [asset()]}):
        assert refused(both_or_neither).detail == {"reason": "assets_or_work_id"}


def test_at_most_twenty_assets_are_admitted() -> None:
    at_limit = [asset(f"a{index}") for index in range(MAX_ASSETS)]
    assert len(parse_params({"assets": at_limit}).params["assets"]) == MAX_ASSETS
    error = refused({"assets": [*at_limit, asset("one-more")]})
    assert error.detail == {
        "reason": "too_many_assets",
        "field": "params.assets",
        "count": MAX_ASSETS + 1,
        "max": MAX_ASSETS,
    }
    assert "at most 20" in error.message


def test_an_asset_id_whose_key_fits_s3_exactly_is_admitted_one_byte_more_is_not() -> None:
    # "日" is 9 bytes once percent-encoded: 108 of them and 7 letters make a key of exactly
    # 1,024 bytes under any job id (S3's limit); one letter more does not fit.
    at_limit = "日" * 108 + "a" * 7
    assert longest_key_bytes(at_limit) == MAX_KEY_BYTES
    parsed = parse_params({"assets": [asset(at_limit)]})
    assert parsed.params["assets"][0]["asset_id"] == at_limit
    key = object_key(derive_job_id("acme", "k"), MAX_ASSETS - 1, at_limit)
    assert len(key.encode()) <= MAX_KEY_BYTES
    error = refused({"assets": [asset(at_limit + "a")]})
    assert error.detail == {
        "reason": "asset_id_too_long",
        "field": "params.assets[0].asset_id",
        "key_bytes": MAX_KEY_BYTES + 1,
        "max": MAX_KEY_BYTES,
    }
    # What the review found: 200 characters, admitted by the length rule, a 1,845-byte key.
    assert refused({"assets": [asset("日" * 200)]}).detail["key_bytes"] == 1845


@pytest.mark.parametrize("key", ["k", "a-much-longer-idempotency-key" * 7, "日本"])
def test_every_job_id_has_the_length_the_key_limit_assumes(key: str) -> None:
    assert len(derive_job_id("acme", key)) == JOB_ID_LENGTH


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"assets": []}, "non-empty array"),
        ({"assets": "x"}, "non-empty array"),
        ({"assets": [asset("a"), asset("a")]}, "twice"),
        ({"assets": [{"asset_id": "a"}]}, "locator of kind 'url'"),
        ({"assets": [asset(url="http://i.pximg.net/x.png")]}, "scheme must be https"),
        ({"assets": [asset(url="https://user:pw@i.pximg.net/x.png")]}, "user:password"),
        ({"assets": [asset(url="https://i.pximg.net/" + "x" * 2000)]}, "at most 2000"),
        ({"assets": [asset(asset_id=" ")]}, "asset_id"),
        ({"assets": [asset(role="hero")]}, "role must be one of"),
        ({"work_id": "12a"}, "digits"),
        ({"work_id": 12}, "digits"),
        ({"work_id": "1" * 33}, "at most 32 digits"),
    ],
)
def test_bad_params_are_a_clear_400(params: dict[str, Any], words: str) -> None:
    assert words in refused(params).message


# -- the download: SSRF rules, bounds, statuses -------------------------------------------------


def never_stop() -> None:
    pass


def download(url: str, origins: tuple[str, ...], *, max_bytes: int = 1000, **kwargs: Any) -> bytes:
    return fetch(
        url,
        asset_id="a1",
        origins=parse_origins(origins),
        headers={"Referer": "https://app-api.pixiv.net/"},
        max_bytes=max_bytes,
        timeout_s=5,
        checkpoint=kwargs.pop("checkpoint", never_stop),
        **kwargs,
    ).body


def fetch_failure(url: str, origins: tuple[str, ...], **kwargs: Any) -> SourceError:
    with pytest.raises(SourceError) as caught:
        download(url, origins, **kwargs)
    return caught.value


def test_a_configured_origin_is_fetched_with_the_source_headers() -> None:
    with recorded_server(
        {"/img.png": Canned(body=IMAGE, headers={"Content-Type": "image/png"})}
    ) as server:
        assert download(server.url("/img.png"), (server.base_url,)) == IMAGE
    ((path, headers),) = server.requests
    assert path == "/img.png"
    assert headers["Referer"] == "https://app-api.pixiv.net/"


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "fd00::1"])
def test_a_wildcard_origin_never_reaches_a_private_address(address: str) -> None:
    # i.pximg.net made to resolve inside: refused before any connection is made.
    error = fetch_failure(
        PIXIV_URL, ("https://*.pximg.net",), resolver=lambda _host, _port: [address]
    )
    assert error.reason == "download_failed"
    assert "i.pximg.net resolves to an address that is not public" in error.message
    # The job's error is the consumer's to read: no address DNS gave.
    assert str(ipaddress.ip_address(address)) not in error.message
    assert address not in error.message


def test_a_url_outside_the_origins_is_not_fetched() -> None:
    error = fetch_failure("https://metadata.example.test/latest", ("https://*.pximg.net",))
    assert error.reason == "download_failed"
    assert "origin_not_allowed" in error.message


@pytest.mark.parametrize(
    "failure",
    [
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
        socket.gaierror(socket.EAI_FAIL, "Non-recoverable failure in name resolution"),
        OSError("network is unreachable"),
    ],
    ids=repr,
)
def test_a_resolver_that_cannot_answer_now_is_a_transient_network_error(
    failure: OSError,
) -> None:
    def no_dns(_host: str, _port: int) -> list[str]:
        raise failure

    error = fetch_failure(PIXIV_URL, ("https://*.pximg.net",), resolver=no_dns)
    assert error.reason == "network_error"
    assert "i.pximg.net cannot be resolved now" in error.message


def test_a_name_that_does_not_exist_is_refused_as_for_a_callback() -> None:
    # The guard's one classification: a name DNS says does not exist is no network error.
    def no_such_name(_host: str, _port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    error = fetch_failure(PIXIV_URL, ("https://*.pximg.net",), resolver=no_such_name)
    assert error.reason == "download_failed"
    assert "unresolvable" in error.message


def test_a_stalled_lookup_ends_with_the_download_deadline() -> None:
    release = threading.Event()

    def stalled(_host: str, _port: int) -> list[str]:
        release.wait(30)
        return ["93.184.215.14"]

    started = time.monotonic()
    try:
        with pytest.raises(SourceError) as caught:
            fetch(
                PIXIV_URL,
                asset_id="a1",
                origins=parse_origins(["https://*.pximg.net"]),
                headers={},
                max_bytes=1000,
                timeout_s=0.3,
                checkpoint=never_stop,
                resolver=stalled,
            )
    finally:
        release.set()
    assert caught.value.reason == "network_error"
    assert "timed out" in caught.value.message
    assert time.monotonic() - started < 5  # a bound, not a timing: the lookup would take 30 s


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_body_over_the_limit_fails_the_download(declare_length: bool) -> None:
    answers = {"/big": Canned(body=b"x" * 5000, declare_length=declare_length)}
    with recorded_server(answers) as server:
        error = fetch_failure(server.url("/big"), (server.base_url,), max_bytes=4999)
        assert download(server.url("/big"), (server.base_url,), max_bytes=5000) == b"x" * 5000
    assert error.reason == "download_failed"
    assert "larger than the 4999-byte limit" in error.message


@pytest.mark.parametrize(
    ("status", "reason"),
    [(302, "remote_http_error"), (403, "remote_http_error"), (404, "remote_http_error"),
     (429, "rate_limited"), (503, "remote_http_error")],
)  # fmt: skip
def test_statuses_other_than_200_fail_and_redirects_are_not_followed(
    status: int, reason: str
) -> None:
    answers = {"/x": Canned(status=status, headers={"Location": "http://169.254.169.254/"})}
    with recorded_server(answers) as server:
        error = fetch_failure(server.url("/x"), (server.base_url,))
    assert error.reason == reason
    assert len(server.requests) == 1  # the Location was never requested


@pytest.mark.parametrize(
    ("status", "retry_after", "reason", "wait_ms"),
    [(429, "7", "rate_limited", 7000), (503, "30", "remote_http_error", 30_000),
     (429, "tomorrow", "rate_limited", None), (503, "99999", "remote_http_error", 3_600_000),
     (500, "5", "remote_http_error", None)],
)  # fmt: skip
def test_a_refusal_keeps_the_wait_its_retry_after_asked_for(
    status: int, retry_after: str, reason: str, wait_ms: int | None
) -> None:
    answers = {"/x": Canned(status=status, headers={"Retry-After": retry_after})}
    with recorded_server(answers) as server:
        error = fetch_failure(server.url("/x"), (server.base_url,))
    assert (error.reason, error.retry_after_ms) == (reason, wait_ms)
    assert error.outcome().retry_after_ms == wait_ms


def test_a_long_download_stops_at_a_checkpoint() -> None:
    def interrupted() -> None:
        raise JobInterruptedError("cancelled")

    with (
        recorded_server({"/big": Canned(body=b"x" * 200_000)}) as server,
        pytest.raises(JobInterruptedError),
    ):
        download(server.url("/big"), (server.base_url,), max_bytes=300_000, checkpoint=interrupted)


# A source sending its headers at once, then one byte of a 100 KB body every 50 ms: no read
# ever waits long enough to time out, only a wall-clock deadline ends the download.
TRICKLE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n"
# How far past its deadline an aborted download may end on a loaded machine: a bound.
DEADLINE_MARGIN_S = 4.5


def trickled(peer: SlowPeer, *, timeout_s: float, checkpoint: Callable[[], None]) -> Any:
    return fetch(
        peer.url("/img.png"),
        asset_id="a1",
        origins=parse_origins((peer.base_url,)),
        headers={},
        max_bytes=200_000,
        timeout_s=timeout_s,
        checkpoint=checkpoint,
    )


def test_a_trickling_source_is_cut_at_the_download_deadline() -> None:
    with slow_peer(head=TRICKLE_HEAD, trickle=b"x" * 100_000) as peer:
        started = time.monotonic()
        with pytest.raises(SourceError) as caught:
            trickled(peer, timeout_s=0.5, checkpoint=never_stop)
        elapsed = time.monotonic() - started
        assert peer.went_away()  # the connection was aborted, not left to the source
    assert caught.value.reason == "download_timeout"
    assert elapsed < 0.5 + DEADLINE_MARGIN_S


def test_a_trickling_download_stops_at_once_when_its_checkpoint_says_stop() -> None:
    """A cancel (the lease's lost signal) while a read is blocked: the download stops within
    a poll of it, not at the next 64 KiB."""
    cancelled = threading.Event()

    def checkpoint() -> None:
        if cancelled.is_set():
            raise JobInterruptedError("cancelled")

    with slow_peer(head=TRICKLE_HEAD, trickle=b"x" * 100_000) as peer:
        timer = threading.Timer(0.3, cancelled.set)
        started = time.monotonic()
        timer.start()
        with pytest.raises(JobInterruptedError):
            trickled(peer, timeout_s=30, checkpoint=checkpoint)
        elapsed = time.monotonic() - started
        timer.join()
        assert peer.went_away()
    assert elapsed < 0.3 + DEADLINE_MARGIN_S


# -- sources -----------------------------------------------------------------------------------


def config(
    origins: tuple[str, ...] = ("https://*.pximg.net",), max_bytes: int = 10_000
) -> AssetFetchConfig:
    return AssetFetchConfig(
        bucket="b", url_ttl_s=600, max_bytes=max_bytes, origins=parse_origins(origins)
    )


def test_pixiv_reads_a_work_and_downloads_with_referer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN", "token")
    with responses.RequestsMock() as mock:
        mock.post(
            "https://oauth.secure.pixiv.net/auth/token",
            json=json.loads((FIXTURES / "auth_token.json").read_text(encoding="utf-8")),
        )
        mock.get(
            "https://app-api.pixiv.net/v1/illust/detail",
            json=json.loads((FIXTURES / "illust_detail.json").read_text(encoding="utf-8")),
        )
        assets = PixivAssets(SETTINGS, config()).assets_of("120000005")
    assert [(a.asset_id, a.role) for a in assets] == [
        ("120000005-primary", "primary"),
        ("120000005-preview", "preview"),
    ]
    assert assets[0].url == PIXIV_URL
    with recorded_server(
        {"/p0.jpg": Canned(body=IMAGE, headers={"Content-Type": "image/jpeg"})}
    ) as server:
        local = SourceAsset(asset_id="p0", type="image", role="primary", url=server.url("/p0.jpg"))
        read = PixivAssets(SETTINGS, config((server.base_url,))).read(local, 10_000, never_stop)
    assert read == Read(IMAGE, "image/jpeg", source_url=local.url)
    assert server.requests[0][1]["Referer"] == "https://app-api.pixiv.net/"
    assert server.requests[0][1]["User-Agent"].startswith("PixivIOSApp/")


def write_catalog(folder: Path, file: str) -> CatalogSource:
    (folder / "img.png").write_bytes(IMAGE)
    document = {
        "works": [
            {
                "work_id": "7",
                "work_type": "illustration",
                "title": "t",
                "tags": ["a"],
                "url": "https://www.pixiv.net/artworks/7",
                "author": "x",
                "assets": [
                    {"asset_id": "7_p0", "type": "image", "role": "primary",
                     "url": "https://i.pximg.net/7_p0.png", "file": file},
                    {"asset_id": "7_p1", "type": "image", "role": "preview",
                     "url": "https://i.pximg.net/7_p1.png"},
                ],
            }
        ]
    }  # fmt: skip
    path = folder / "catalog.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return CatalogSource(path)


def test_the_catalog_passes_the_gate_for_a_works_assets_only(tmp_path: Path) -> None:
    context = RecordingContext()
    write_catalog(tmp_path, "img.png")
    catalog = CatalogSource(tmp_path / "catalog.json", before_request=context.before_source_request)
    source = CatalogAssets(catalog)
    first, _ = source.assets_of("7")
    assert context.source_requests == 1
    source.read(first, 10_000, never_stop)  # a local file: no request to a source
    assert context.source_requests == 1


def test_the_catalog_reads_only_files_it_lists(tmp_path: Path) -> None:
    source = CatalogAssets(write_catalog(tmp_path, "img.png"))
    (first, second) = source.assets_of("7")
    assert source.read(first, 10_000, never_stop) == Read(IMAGE, "image/png", first.url)
    # Named by a Task: found by URL (or id), and only the catalog's own file is read.
    named = SourceAsset(asset_id="renamed", type="image", role="primary", url=first.url)
    assert source.read(named, 10_000, never_stop).body == IMAGE
    with pytest.raises(SourceError, match="no file in the catalog"):
        source.read(second, 10_000, never_stop)
    stranger = SourceAsset(asset_id="x", type="image", role="primary", url="https://i.pximg.net/x")
    with pytest.raises(SourceError, match="not in the catalog"):
        source.read(stranger, 10_000, never_stop)
    with pytest.raises(SourceError, match="work 8 is not in the catalog"):
        source.assets_of("8")


def test_a_catalog_file_outside_its_folder_is_never_read(tmp_path: Path) -> None:
    inner = tmp_path / "catalog"
    inner.mkdir()
    (tmp_path / "secret.txt").write_text("do not publish", encoding="utf-8")
    source = CatalogAssets(write_catalog(inner, "../secret.txt"))
    with pytest.raises(SourceError) as caught:
        source.read(source.assets_of("7")[0], 10_000, never_stop)
    assert caught.value.reason == "configuration_error"


# -- configuration -----------------------------------------------------------------------------


def test_configuration_is_checked() -> None:
    loaded = load_config({"JOBSTREAM_ASSET_BUCKET": "b"})
    assert (loaded.url_ttl_s, loaded.max_bytes) == (3600, 20 * 1024 * 1024)
    assert [str(origin) for origin in loaded.origins] == ["https://*.pximg.net:443"]
    for env, words in (
        ({}, "JOBSTREAM_ASSET_BUCKET is not configured"),
        ({"JOBSTREAM_ASSET_BUCKET": "b", "JOBSTREAM_ASSET_URL_TTL_S": "604801"}, "1 to 604800"),
        (
            {"JOBSTREAM_ASSET_BUCKET": "b", "JOBSTREAM_ASSET_MAX_BYTES": "0"},
            "JOBSTREAM_ASSET_MAX_BYTES",
        ),
        (
            {"JOBSTREAM_ASSET_BUCKET": "b", "JOBSTREAM_ASSET_ORIGINS": "ftp://x"},
            "ORIGINS is invalid",
        ),
    ):
        with pytest.raises(SourceError, match=words) as caught:
            load_config(env)
        assert caught.value.reason == "configuration_error"


# -- the executor ------------------------------------------------------------------------------


@dataclass
class Source:
    bodies: dict[str, bytes]
    platform: str = "pixiv"

    def assets_of(self, work_id: str) -> tuple[SourceAsset, ...]:
        return tuple(
            SourceAsset(
                asset_id=name, type="image", role="primary", url=f"https://i.pximg.net/{name}"
            )
            for name in self.bodies
        )

    def read(self, asset: SourceAsset, max_bytes: int, checkpoint: Callable[[], None]) -> Read:
        return Read(self.bodies[asset.asset_id][: max_bytes + 1], "image/png", asset.url)


@dataclass
class Store:
    objects: dict[str, bytes] = field(default_factory=dict)
    failure: Exception | None = None
    # The wall clock of each signature (epoch s): each asset is signed after its download.
    signed_at_s: list[int] = field(default_factory=lambda: [1_000])
    seconds_per_asset: int = 40

    def put(self, key: str, body: bytes, mime: str, sha256_hex: str) -> None:
        if self.failure is not None:
            raise self.failure
        assert hashlib.sha256(body).hexdigest() == sha256_hex
        self.objects[key] = body

    def url(self, key: str, ttl_s: int) -> SignedUrl:
        signed_at = self.signed_at_s[-1]
        self.signed_at_s.append(signed_at + self.seconds_per_asset)
        return SignedUrl(
            f"https://bucket.example.test/{key}?X-Amz-Expires={ttl_s}", (signed_at + ttl_s) * 1000
        )


def cancelled_at(checkpoint: int) -> RecordingContext:
    context = RecordingContext()
    context.cancel(at_checkpoint=checkpoint)
    return context


def job(params: dict[str, Any], context: RecordingContext) -> JobRun:
    return job_run(params, target=TARGET, context=context)


def test_each_asset_is_stored_and_described_with_progress() -> None:
    context, store = RecordingContext(), Store()
    bodies = {"p0": IMAGE, "p1": b"second"}
    outcome = executor.run(job({"work_id": "5"}, context), Source(bodies), store, config())
    assert outcome.result is not None, outcome
    first, second = outcome.result["assets"]
    assert first["bytes"] == len(IMAGE)
    assert first["hash"] == "sha256:" + hashlib.sha256(IMAGE).hexdigest()
    assert first["locator"] == {
        "kind": "url",
        "value": "https://bucket.example.test/jobs/job-1/00-p0?X-Amz-Expires=600",
    }
    assert second["metadata"]["source_url"] == "https://i.pximg.net/p1"
    # Each URL expires a TTL after its own signature; the result advertises the earliest.
    assert first["metadata"]["expires_at"] == (1_000 + 600) * 1000
    assert second["metadata"]["expires_at"] == (1_040 + 600) * 1000
    assert outcome.result["expires_at"] == first["metadata"]["expires_at"]
    assert outcome.result["work_id"] == "5"
    assert store.objects == {"jobs/job-1/00-p0": IMAGE, "jobs/job-1/01-p1": b"second"}
    assert context.stages == ["fetching", "fetching", "stored"]
    assert context.progress_log[1][1] == "asset 2 of 2: p1"
    registry.get("asset_fetch").result_model().model_validate(outcome.result)  # type: ignore[union-attr]


def test_a_signed_url_expires_no_earlier_than_advertised() -> None:
    client = boto3.client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(signature_version="s3v4"),
    )
    before_ms = int(time.time() * 1000)
    signed = S3AssetStore("assets", client).url("jobs/job-1/00-p0", 600)
    query = parse_qs(urlsplit(signed.url).query)
    signed_at = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    real_expiry_ms = (int(signed_at.timestamp()) + int(query["X-Amz-Expires"][0])) * 1000
    # Never later than S3's own expiry, and not earlier than the second it was signed in.
    assert real_expiry_ms - 1000 <= signed.expires_at <= real_expiry_ms
    assert signed.expires_at >= before_ms - 1000 + 600_000


def test_a_too_large_asset_fails_the_job_clearly() -> None:
    outcome = executor.run(
        job({"work_id": "5"}, RecordingContext()),
        Source({"p0": b"x" * 11}),
        Store(),
        config(max_bytes=10),
    )
    assert outcome.reason == "download_failed"
    assert outcome.message == "asset p0 is larger than the 10-byte limit of an asset"


def test_a_work_with_too_many_assets_fails_and_none_is_fetched() -> None:
    store = Store()
    bodies = {f"p{index}": b"x" for index in range(MAX_ASSETS + 1)}
    outcome = executor.run(
        job({"work_id": "5"}, RecordingContext()), Source(bodies), store, config()
    )
    assert outcome.reason == "download_failed"
    assert "21 assets, more than the 20" in (outcome.message or "")
    assert store.objects == {}


def test_a_cancel_between_assets_stops_the_job() -> None:
    context, store = cancelled_at(2), Store()
    with pytest.raises(JobInterruptedError):
        executor.run(
            job({"work_id": "5"}, context), Source({"p0": b"a", "p1": b"b"}), store, config()
        )
    assert list(store.objects) == ["jobs/job-1/00-p0"]


def s3_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


@pytest.mark.parametrize(
    "failure",
    [
        s3_error("SlowDown", 503),
        s3_error("InternalError", 500),
        EndpointConnectionError(endpoint_url="https://s3.example.test"),
        OSError("connection reset"),
    ],
    ids=["SlowDown", "InternalError", "connection", "OSError"],
)
def test_a_transient_storage_failure_that_outlasts_the_retries_is_retryable(
    failure: Exception,
) -> None:
    outcome = executor.run(
        job({"work_id": "5"}, RecordingContext()),
        Source({"p0": b"a"}),
        Store(failure=failure),
        config(),
    )
    assert outcome.reason == "network_error"  # source_error, retryable
    assert outcome.message == "asset p0 could not be stored; S3 may accept it on a retry"


@pytest.mark.parametrize(
    ("code", "status"),
    [("NoSuchBucket", 404), ("AccessDenied", 403), ("KMS.DisabledException", 400)],
)
def test_a_storage_refusal_no_retry_cures_is_a_configuration_error(code: str, status: int) -> None:
    store = Store(failure=s3_error(code, status))
    outcome = executor.run(
        job({"work_id": "5"}, RecordingContext()), Source({"p0": b"a"}), store, config()
    )
    assert outcome.reason == "configuration_error"  # internal_error, not retryable
    assert outcome.message == f"asset p0 could not be stored: S3 refused it ({code})"


def test_a_catalog_asset_named_by_id_reports_the_catalog_url_it_read(tmp_path: Path) -> None:
    # The Task names the catalog's asset 7_p0 with a URL of its own: the catalog's file is read,
    # so the catalog's URL for it is where the bytes came from.
    source = CatalogAssets(write_catalog(tmp_path, "img.png"))
    named = {"asset_id": "7_p0", "url": "https://i.pximg.net/somewhere-else.png"}
    outcome = executor.run(job({"assets": [named]}, RecordingContext()), source, Store(), config())
    assert outcome.result is not None, outcome
    (document,) = outcome.result["assets"]
    assert document["hash"] == "sha256:" + hashlib.sha256(IMAGE).hexdigest()
    assert document["metadata"]["source_url"] == "https://i.pximg.net/7_p0.png"
