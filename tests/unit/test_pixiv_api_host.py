"""The pixiv source against the fake Pixiv (bench/fake_pixiv.py) on loopback, through a target's
`api_host`: the token refresh and the API calls reach it, its refusals come back classified with
the wait they asked for, and the job's request gate runs before every request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
import responses

from bench.fake_pixiv import FakePixiv
from jobstream.config.targets import Target
from jobstream.jobtypes import registry
from jobstream.jobtypes.asset_fetch.config import AssetFetchConfig
from jobstream.jobtypes.asset_fetch.sources import PixivAssets, open_asset_source
from jobstream.jobtypes.context import JobInterruptedError
from jobstream.jobtypes.sources.base import SearchRequest, SourceError
from jobstream.jobtypes.sources.pixiv import ENV_PLAIN, ENV_STORED_NAME, PixivSource
from jobstream.jobtypes.sources.settings import SourceSettings
from jobstream.outbound.origins import parse_origins
from jobstream.protocol.errors import Reason
from tests.support.job_runs import RecordingContext, job_run

TOKEN = "fake-refresh-token-api-host"
RATE_LIMIT = {"error": {"message": "Rate Limit", "user_message": "", "reason": ""}}


def request_for(*tags: str, scan_limit: int = 50, work_type: Any = "illustration") -> SearchRequest:
    return SearchRequest(tags=tags, match_any=False, work_type=work_type, scan_limit=scan_limit)


def failure(source: PixivSource, request: SearchRequest) -> SourceError:
    with pytest.raises(SourceError) as caught:
        list(source.search(request))
    assert TOKEN not in caught.value.message
    return caught.value


@pytest.fixture
def pixiv() -> Iterator[FakePixiv]:
    # Pixiv's own hosts are unreachable here: only the fake is let through.
    with (
        FakePixiv(page_size=10, works_per_tag=25) as fake,
        responses.RequestsMock(assert_all_requests_are_fired=False, passthru_prefixes=(fake.url,)),
    ):
        yield fake


class Gate:
    """A request gate that notes how many requests the fake had seen each time it was called."""

    def __init__(self, pixiv: FakePixiv) -> None:
        self.pixiv = pixiv
        self.seen: list[int] = []

    def __call__(self) -> None:
        self.seen.append(len(self.pixiv.stats().requests))


# -- api_host: where the requests go ----------------------------------------------------------


def test_token_refresh_and_searches_go_to_the_api_host(pixiv: FakePixiv) -> None:
    source = PixivSource(TOKEN, api_host=pixiv.url)
    works = list(source.search(request_for("sky", "sea")))
    assert len(works) == 25
    assert {"sky", "sea"} <= set(works[0].tags)
    stats = pixiv.stats()
    assert stats.paths() == ["/auth/token", *["/v1/search/illust"] * 3]
    assert {record.account for record in stats.requests} == {TOKEN}
    assert all(record.status == 200 for record in stats.requests)


def test_details_go_to_the_api_host_too(pixiv: FakePixiv) -> None:
    work = PixivSource(TOKEN, api_host=pixiv.url).work("123", "novel")
    assert (work.work_id, work.assets[0].role) == ("123", "cover")
    assert pixiv.stats().paths() == ["/auth/token", "/v2/novel/detail"]


def test_without_api_host_pixivs_own_hosts_are_called() -> None:
    with responses.RequestsMock() as mock:
        mock.post("https://oauth.secure.pixiv.net/auth/token", status=400, json={})
        with pytest.raises(SourceError):
            list(PixivSource(TOKEN).search(request_for("sky")))
        assert len(mock.calls) == 1


# -- the request gate -------------------------------------------------------------------------


def test_the_gate_runs_before_every_request_the_token_refresh_included(pixiv: FakePixiv) -> None:
    gate = Gate(pixiv)
    source = PixivSource(TOKEN, api_host=pixiv.url, before_request=gate)
    list(source.search(request_for("sky")))
    # Before the token refresh (nothing seen yet), then before each of the three pages.
    assert gate.seen == [0, 1, 2, 3]
    source.work("5", "illustration")
    assert gate.seen == [0, 1, 2, 3, 4]
    assert len(pixiv.stats().requests) == 5


def test_the_gate_runs_before_a_refresh_of_an_expired_access_token(pixiv: FakePixiv) -> None:
    gate = Gate(pixiv)
    source = PixivSource(TOKEN, api_host=pixiv.url, before_request=gate)
    source.work("5", "illustration")
    pixiv.revoke_access_tokens()
    source.work("6", "illustration")
    assert pixiv.stats().paths()[2:] == ["/v1/illust/detail", "/auth/token", "/v1/illust/detail"]
    assert gate.seen == [0, 1, 2, 3, 4]


def test_a_gate_that_stops_the_job_stops_it_before_the_request(pixiv: FakePixiv) -> None:
    def stopped() -> None:
        raise JobInterruptedError("the job was cancelled")

    with pytest.raises(JobInterruptedError):
        list(
            PixivSource(TOKEN, api_host=pixiv.url, before_request=stopped).search(request_for("a"))
        )
    assert pixiv.stats().requests == ()


# -- refusals and their Retry-After -----------------------------------------------------------


def test_a_429_is_rate_limited_with_the_wait_it_asked_for() -> None:
    with FakePixiv(per_minute=2, retry_after_s=2, page_size=10) as pixiv:
        error = failure(PixivSource(TOKEN, api_host=pixiv.url), request_for("sky"))
        # The token refresh and the first page passed; the second page was refused.
        assert [r.status for r in pixiv.stats().requests] == [200, 200, 429]
    assert error.reason == Reason.RATE_LIMITED
    assert error.retry_after_ms == 2000
    outcome = error.outcome()
    assert (outcome.reason, outcome.retry_after_ms) == (Reason.RATE_LIMITED, 2000)


def test_a_429_on_the_token_refresh_is_rate_limited_too() -> None:
    with FakePixiv(per_minute=2, retry_after_s=9) as pixiv:
        # A token refresh and a detail: the minute's two requests.
        PixivSource(TOKEN, api_host=pixiv.url).work("1", "illustration")
        error = failure(PixivSource(TOKEN, api_host=pixiv.url), request_for("sky"))
        assert pixiv.stats().paths()[-1] == "/auth/token"
    assert (error.reason, error.retry_after_ms) == (Reason.RATE_LIMITED, 9000)


def test_more_requests_in_flight_than_the_account_may_have_are_rate_limited() -> None:
    # Long answers: a loaded machine still asks while the other source holds the slot.
    with FakePixiv(max_concurrent=1, latency_s=2.0) as pixiv:
        busy = PixivSource(TOKEN, api_host=pixiv.url)
        worker = threading.Thread(target=busy.work, args=("1", "illustration"))
        worker.start()
        pixiv.wait_in_flight(TOKEN, 1)
        # The account's one slot is taken (by the other source's token refresh or detail).
        error = failure(PixivSource(TOKEN, api_host=pixiv.url), request_for("sky"))
        worker.join()
        assert pixiv.stats().peak_concurrency == {TOKEN: 1}
    assert (error.reason, error.retry_after_ms) == (Reason.RATE_LIMITED, 2000)


def test_a_503_is_a_remote_http_error_with_its_retry_after_when_it_has_one() -> None:
    with FakePixiv() as pixiv:
        source = PixivSource(TOKEN, api_host=pixiv.url)
        source.work("1", "illustration")
        pixiv.outage(retry_after_s=30)
        error = failure(source, request_for("sky"))
        assert (error.reason, error.retry_after_ms) == (Reason.REMOTE_HTTP_ERROR, 30_000)
        assert "HTTP 503" in error.message
        pixiv.outage()
        error = failure(source, request_for("sky"))
        assert (error.reason, error.retry_after_ms) == (Reason.REMOTE_HTTP_ERROR, None)
        # An outage on the token refresh: the same.
        error = failure(PixivSource(TOKEN, api_host=pixiv.url), request_for("sky"))
        assert (error.reason, error.retry_after_ms) == (Reason.REMOTE_HTTP_ERROR, None)
        assert pixiv.stats().paths()[-1] == "/auth/token"


@pytest.mark.parametrize(
    ("header", "expected_ms"),
    [("2", 2000), ("0", 0), ("86400", 3_600_000), ("soon", None), ("-1", None), ("", None)],
)
def test_retry_after_seconds_are_clamped_and_garbage_is_ignored(
    header: str, expected_ms: int | None
) -> None:
    with responses.RequestsMock() as mock:
        mock.post("https://oauth.secure.pixiv.net/auth/token", status=429, json=RATE_LIMIT,
                  headers={"Retry-After": header})  # fmt: skip
        error = failure(PixivSource(TOKEN), request_for("sky"))
    assert (error.reason, error.retry_after_ms) == (Reason.RATE_LIMITED, expected_ms)


def test_an_http_date_retry_after_is_the_time_until_that_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=120)
    with responses.RequestsMock() as mock:
        mock.post("https://oauth.secure.pixiv.net/auth/token", status=429, json=RATE_LIMIT,
                  headers={"Retry-After": format_datetime(when, usegmt=True)})  # fmt: skip
        error = failure(PixivSource(TOKEN), request_for("sky"))
    assert error.retry_after_ms is not None
    # The date has whole seconds; the test takes a moment.
    assert 110_000 <= error.retry_after_ms <= 120_000
    with responses.RequestsMock() as mock:
        past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
        mock.post("https://oauth.secure.pixiv.net/auth/token", status=429, json=RATE_LIMIT,
                  headers={"Retry-After": past})  # fmt: skip
        assert failure(PixivSource(TOKEN), request_for("sky")).retry_after_ms == 0


def test_a_retry_after_on_another_status_is_not_a_wait() -> None:
    with responses.RequestsMock() as mock:
        mock.post("https://oauth.secure.pixiv.net/auth/token", status=500, json={},
                  headers={"Retry-After": "5"})  # fmt: skip
        error = failure(PixivSource(TOKEN), request_for("sky"))
    assert (error.reason, error.retry_after_ms) == (Reason.REMOTE_HTTP_ERROR, None)


# -- the job types pass the target's api_host and the job's gate ------------------------------


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PLAIN, TOKEN)
    monkeypatch.delenv(ENV_STORED_NAME, raising=False)


def pixiv_target(api_host: str, **extra: Any) -> Target:
    entry = {"id": "mirror", "work_type": "illustration", "source": "pixiv", "api_host": api_host}
    return Target.model_validate({**entry, "query": {"tags": ["sky"]}, **extra})


@pytest.mark.usefixtures("token_env")
def test_candidate_search_reads_the_api_host_and_gates_each_request(pixiv: FakePixiv) -> None:
    context = RecordingContext()
    target = pixiv_target(pixiv.url, limit=3, scan_limit=15)
    job_type = registry.get("candidate_search")
    assert job_type is not None
    outcome = job_type.run(job_run({}, target=target, context=context))
    assert outcome.result is not None, outcome
    assert len(outcome.result["candidates"]) == 3
    # Three candidates are on the first page: the search asks for no second one.
    assert pixiv.stats().paths() == ["/auth/token", "/v1/search/illust"]
    assert context.source_requests == 2


@pytest.mark.usefixtures("token_env")
def test_a_candidate_search_outcome_carries_the_wait_a_503_asked_for(pixiv: FakePixiv) -> None:
    job_type = registry.get("candidate_search")
    assert job_type is not None
    pixiv.outage(retry_after_s=4)
    outcome = job_type.run(job_run({}, target=pixiv_target(pixiv.url), context=RecordingContext()))
    assert (outcome.reason, outcome.retry_after_ms) == (Reason.REMOTE_HTTP_ERROR, 4000)


@pytest.mark.usefixtures("token_env")
def test_a_job_stopped_at_the_gate_stops_before_asking(pixiv: FakePixiv) -> None:
    context = RecordingContext()
    context.stop_source_requests(at_request=2)
    job_type = registry.get("candidate_search")
    assert job_type is not None
    with pytest.raises(JobInterruptedError):
        job_type.run(job_run({}, target=pixiv_target(pixiv.url), context=context))
    assert pixiv.stats().paths() == ["/auth/token"]


@pytest.mark.usefixtures("token_env")
def test_asset_fetch_reads_a_works_assets_through_the_api_host(pixiv: FakePixiv) -> None:
    settings = SourceSettings.model_validate(pixiv_target(pixiv.url).settings)
    context = RecordingContext()
    config = AssetFetchConfig("bucket", 60, 1000, parse_origins(("https://*.pximg.net",)))
    source = open_asset_source(settings, config, context.before_source_request)
    assert isinstance(source, PixivAssets)
    assets = source.assets_of("77")
    assert [asset.asset_id for asset in assets] == ["77-primary", "77-preview"]
    assert pixiv.stats().paths() == ["/auth/token", "/v1/illust/detail"]
    assert context.source_requests == 2
