"""The pixiv source against recorded app-API responses, replayed at the HTTP layer.

`responses` intercepts every request pixivpy3's session sends; an unregistered URL fails the
request instead of reaching the network, and `assert_all_requests_are_fired` catches the
opposite mistake (a recording the code never asked for).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import responses
from responses import matchers

from jobstream.config import stored
from jobstream.jobtypes.sources import pixiv as pixiv_module
from jobstream.jobtypes.sources.base import (
    SearchRequest,
    SourceAsset,
    SourceError,
    Work,
    WorkType,
)
from jobstream.jobtypes.sources.pixiv import (
    PARAMETER_MAX_AGE_S,
    PixivSource,
    refresh_token_from_environment,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pixiv"
AUTH_URL = "https://oauth.secure.pixiv.net/auth/token"
ILLUST_URL = "https://app-api.pixiv.net/v1/search/illust"
NOVEL_URL = "https://app-api.pixiv.net/v1/search/novel"
REFRESH_TOKEN = "secret-refresh-token-do-not-leak"
ACCESS_TOKEN = "fixture-access-token-Qm9vdHN0cmFw"
ORIGINAL = "オリジナル"
SCENERY = "風景"
SKY = "空"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def illust_query(word: str, **extra: str) -> dict[str, str]:
    return {
        "word": word,
        "search_target": "exact_match_for_tags",
        "sort": "date_desc",
        "filter": "for_ios",
        **extra,
    }


def request_for(
    *tags: str, match_any: bool = False, work_type: WorkType = "illustration", scan_limit: int = 50
) -> SearchRequest:
    return SearchRequest(
        tags=tuple(tags), match_any=match_any, work_type=work_type, scan_limit=scan_limit
    )


def ids(works: list[Work]) -> list[str]:
    return [work.work_id for work in works]


@pytest.fixture
def http() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture
def authed(http: responses.RequestsMock) -> responses.RequestsMock:
    http.post(AUTH_URL, json=fixture("auth_token"))
    return http


def add_illust_page(
    http: responses.RequestsMock, word: str, name: str, status: int = 200, **extra: str
) -> None:
    http.get(
        ILLUST_URL,
        json=fixture(name),
        status=status,
        match=[matchers.query_param_matcher(illust_query(word, **extra))],
    )


def search_calls(http: responses.RequestsMock) -> list[Any]:
    return [call for call in http.calls if not call.request.url.startswith(AUTH_URL)]


def query_of(call: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(call.request.url).query)


def failure(source: PixivSource, request: SearchRequest) -> SourceError:
    with pytest.raises(SourceError) as caught:
        list(source.search(request))
    error = caught.value
    # The credential never surfaces, neither in the message nor in a chained exception.
    assert REFRESH_TOKEN not in str(error)
    assert REFRESH_TOKEN not in error.message
    assert error.__cause__ is None
    return error


# -- auth and request shape -------------------------------------------------------------------


def test_authenticates_once_with_the_refresh_token_and_sends_the_bearer(
    authed: responses.RequestsMock,
) -> None:
    word = f"{ORIGINAL} {SCENERY}"
    add_illust_page(authed, word, "search_illust_page1")
    add_illust_page(authed, word, "search_illust_page1")
    source = PixivSource(REFRESH_TOKEN)

    list(source.search(request_for(ORIGINAL, SCENERY, scan_limit=2)))
    list(source.search(request_for(ORIGINAL, SCENERY, scan_limit=1)))

    auth_calls = [c for c in authed.calls if c.request.url == AUTH_URL]
    assert len(auth_calls) == 1
    form = parse_qs(auth_calls[0].request.body)
    assert form["grant_type"] == ["refresh_token"]
    assert form["refresh_token"] == [REFRESH_TOKEN]
    assert form["client_id"] == ["MOBrBDS8blbauoSck0ZfDbtuzpyT"]
    assert "Authorization" not in auth_calls[0].request.headers
    for call in search_calls(authed):
        assert urlparse(call.request.url).path == "/v1/search/illust"
        assert call.request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"
        assert query_of(call)["word"] == [word]
        assert query_of(call)["search_target"] == ["exact_match_for_tags"]
        assert query_of(call)["sort"] == ["date_desc"]


def test_nothing_is_requested_for_a_zero_scan_limit_or_no_tags(
    http: responses.RequestsMock,
) -> None:
    source = PixivSource(REFRESH_TOKEN)
    assert list(source.search(request_for(ORIGINAL, scan_limit=0))) == []
    assert list(source.search(request_for(scan_limit=5))) == []
    assert len(http.calls) == 0


def test_the_default_client_sets_a_timeout() -> None:
    api = pixiv_module._default_api()
    assert api.requests_kwargs["timeout"] == pixiv_module.REQUEST_TIMEOUT_S


def test_the_refresh_token_is_not_in_the_repr() -> None:
    assert REFRESH_TOKEN not in repr(PixivSource(REFRESH_TOKEN))


# -- mapping ------------------------------------------------------------------------------------


def test_illustrations_map_to_works(authed: responses.RequestsMock) -> None:
    add_illust_page(authed, ORIGINAL, "search_illust_page1")

    works = list(PixivSource(REFRESH_TOKEN).search(request_for(ORIGINAL, scan_limit=1)))

    assert works == [
        Work(
            work_id="120000005",
            work_type="illustration",
            title="夕焼けの街",
            tags=(ORIGINAL, SCENERY, SKY),
            url="https://www.pixiv.net/artworks/120000005",
            author="みなと",
            bookmarks=12,
            assets=(
                SourceAsset(
                    asset_id="120000005-primary",
                    type="image",
                    role="primary",
                    url="https://i.pximg.net/c/600x1200_90/img-master/img/2024/06/01/21/30/00/120000005_p0_master1200.jpg",
                    width=1447,
                    height=2047,
                    mime="image/jpeg",
                ),
                SourceAsset(
                    asset_id="120000005-preview",
                    type="image",
                    role="preview",
                    url="https://i.pximg.net/c/540x540_70/img-master/img/2024/06/01/21/30/00/120000005_p0_master1200.jpg",
                    mime="image/jpeg",
                ),
            ),
            extra={"created_at": "2024-06-01T21:30:00+09:00", "x_restrict": 0},
        )
    ]


def test_novels_use_the_novel_endpoint_and_map_the_cover(authed: responses.RequestsMock) -> None:
    authed.get(
        NOVEL_URL,
        json=fixture("search_novel_page1"),
        match=[
            matchers.query_param_matcher(
                {
                    "word": ORIGINAL,
                    "search_target": "exact_match_for_tags",
                    "sort": "date_desc",
                    "merge_plain_keyword_results": "true",
                    "include_translated_tag_results": "true",
                }
            )
        ],
    )

    works = list(PixivSource(REFRESH_TOKEN).search(request_for(ORIGINAL, work_type="novel")))

    assert ids(works) == ["22000002", "22000001"]
    first = works[0]
    assert first.work_type == "novel"
    assert first.url == "https://www.pixiv.net/novel/show.php?id=22000002"
    assert first.title == "灯台守の夜"
    assert first.tags == (ORIGINAL, "ファンタジー")
    assert first.author == "ゆき"
    assert first.bookmarks == 21
    assert first.assets == (
        SourceAsset(
            asset_id="22000002-cover",
            type="cover",
            role="cover",
            url="https://i.pximg.net/c/240x480_80/novel-cover-master/img/2024/06/01/20/00/00/ci22000002_0123456789abcdef0123456789abcdef_master1200.jpg",
            mime="image/jpeg",
        ),
    )
    call = search_calls(authed)[0]
    assert urlparse(call.request.url).path == "/v1/search/novel"
    assert call.request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"


# -- pagination ---------------------------------------------------------------------------------


def test_scan_limit_within_the_first_page_fetches_no_second_page(
    authed: responses.RequestsMock,
) -> None:
    word = f"{ORIGINAL} {SCENERY}"
    add_illust_page(authed, word, "search_illust_page1")

    works = list(PixivSource(REFRESH_TOKEN).search(request_for(ORIGINAL, SCENERY, scan_limit=3)))

    assert ids(works) == ["120000005", "120000004", "120000003"]
    assert len(search_calls(authed)) == 1


def test_next_url_is_followed_until_the_last_page_without_repeats(
    authed: responses.RequestsMock,
) -> None:
    word = f"{ORIGINAL} {SCENERY}"
    add_illust_page(authed, word, "search_illust_page1")
    add_illust_page(authed, word, "search_illust_page2", offset="30")

    works = list(PixivSource(REFRESH_TOKEN).search(request_for(ORIGINAL, SCENERY)))

    # Page 2 repeats 120000003 (offsets shifted by a new upload); it is yielded once.
    assert ids(works) == ["120000005", "120000004", "120000003", "120000002", "120000001"]
    second = search_calls(authed)[1]
    assert query_of(second)["offset"] == ["30"]
    assert second.request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"


def test_scan_limit_stops_in_the_middle_of_the_second_page(
    authed: responses.RequestsMock,
) -> None:
    word = f"{ORIGINAL} {SCENERY}"
    add_illust_page(authed, word, "search_illust_page1")
    add_illust_page(authed, word, "search_illust_page2", offset="30")

    works = list(PixivSource(REFRESH_TOKEN).search(request_for(ORIGINAL, SCENERY, scan_limit=4)))

    assert ids(works) == ["120000005", "120000004", "120000003", "120000002"]


def test_page_delay_sleeps_between_pages_only(
    authed: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(pixiv_module.time, "sleep", sleeps.append)
    word = f"{ORIGINAL} {SCENERY}"
    add_illust_page(authed, word, "search_illust_page1")
    add_illust_page(authed, word, "search_illust_page2", offset="30")

    list(PixivSource(REFRESH_TOKEN, page_delay_s=1.5).search(request_for(ORIGINAL, SCENERY)))

    assert sleeps == [1.5]


# -- match_any ----------------------------------------------------------------------------------


def test_match_any_searches_each_tag_and_merges_newest_first_without_duplicates(
    authed: responses.RequestsMock,
) -> None:
    add_illust_page(authed, SCENERY, "search_illust_page1")
    # next_url is followed verbatim; the recording's carries the word it was captured with.
    add_illust_page(authed, f"{ORIGINAL} {SCENERY}", "search_illust_page2", offset="30")
    add_illust_page(authed, SKY, "search_illust_tag_sky")

    works = list(
        PixivSource(REFRESH_TOKEN).search(request_for(SCENERY, SKY, SCENERY, match_any=True))
    )

    assert ids(works) == [
        "120000006",  # sky, 06-02 01:00
        "120000005",
        "120000004",  # in both tags, once
        "120000003",
        "120000002",
        "120000001",
        "119999990",  # sky, 05-30
    ]
    # The repeated tag is searched once.
    words = [query_of(call)["word"][0] for call in search_calls(authed)]
    assert sorted(words) == sorted([SCENERY, SKY, f"{ORIGINAL} {SCENERY}"])


def test_match_any_fetches_later_pages_only_when_needed(authed: responses.RequestsMock) -> None:
    add_illust_page(authed, SCENERY, "search_illust_page1")
    add_illust_page(authed, SKY, "search_illust_tag_sky")

    works = list(
        PixivSource(REFRESH_TOKEN).search(request_for(SCENERY, SKY, match_any=True, scan_limit=3))
    )

    assert ids(works) == ["120000006", "120000005", "120000004"]
    assert len(search_calls(authed)) == 2


# -- error mapping -----------------------------------------------------------------------------


def test_invalid_grant_from_the_auth_endpoint_is_auth_failed(http: responses.RequestsMock) -> None:
    http.post(AUTH_URL, json=fixture("auth_invalid_grant"), status=400)

    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))

    assert error.reason == "auth_failed"
    assert "invalid_grant" in error.message


def test_an_empty_refresh_token_is_auth_failed_without_a_request(
    http: responses.RequestsMock,
) -> None:
    error = failure(PixivSource(""), request_for(ORIGINAL))
    assert error.reason == "auth_failed"
    assert len(http.calls) == 0


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (429, '{"error":"rate_limited"}', "rate_limited"),
        (503, "<html><body>Service Unavailable</body></html>", "remote_http_error"),
        (200, "<html>not json</html>", "metadata_failed"),
        (200, '{"has_error": false}', "metadata_failed"),
    ],
)
def test_auth_endpoint_failures(
    http: responses.RequestsMock, status: int, body: str, reason: str
) -> None:
    http.post(AUTH_URL, body=body, status=status)
    assert failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL)).reason == reason


def test_auth_connection_error_is_network_error(http: responses.RequestsMock) -> None:
    http.post(AUTH_URL, body=requests.exceptions.ConnectionError("connection refused"))
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "network_error"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (429, fixture("error_rate_limit"), "rate_limited"),
        (403, fixture("error_rate_limit"), "rate_limited"),  # how Pixiv usually says it
        (429, {}, "rate_limited"),
        (404, fixture("error_not_found"), "remote_http_error"),
        (500, {}, "remote_http_error"),
    ],
)
def test_search_error_responses(
    authed: responses.RequestsMock, status: int, body: Any, reason: str
) -> None:
    authed.get(ILLUST_URL, json=body, status=status)
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == reason
    assert str(status) in error.message


def test_search_html_error_page_is_remote_http_error(authed: responses.RequestsMock) -> None:
    authed.get(ILLUST_URL, body="<html>502 Bad Gateway</html>", status=502)
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "remote_http_error"


@pytest.mark.parametrize(
    "exception",
    [requests.exceptions.ConnectionError("reset"), requests.exceptions.ReadTimeout("slow")],
)
def test_search_connection_failures_are_network_error(
    authed: responses.RequestsMock, exception: Exception
) -> None:
    authed.get(ILLUST_URL, body=exception)
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "network_error"


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        json.dumps({"next_url": None}),
        json.dumps(["illusts"]),
        json.dumps({"illusts": [{"id": 1, "title": "no user", "tags": []}]}),
        json.dumps(
            {
                "illusts": [
                    {
                        "id": "abc",
                        "title": "t",
                        "tags": [],
                        "user": {"name": "u"},
                        "create_date": "2024-06-01T00:00:00+09:00",
                    }
                ]
            }
        ),
        json.dumps(
            {
                "illusts": [
                    {
                        "id": 1,
                        "title": "t",
                        "tags": [{"name": 5}],
                        "user": {"name": "u"},
                        "create_date": "2024-06-01T00:00:00+09:00",
                    }
                ]
            }
        ),
        json.dumps(
            {
                "illusts": [
                    {
                        "id": 1,
                        "title": "t",
                        "tags": [],
                        "user": {"name": "u"},
                        "create_date": "yesterday",
                    }
                ]
            }
        ),
    ],
)
def test_malformed_search_responses_are_metadata_failed(
    authed: responses.RequestsMock, body: str
) -> None:
    authed.get(ILLUST_URL, body=body, status=200)
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "metadata_failed"


def test_an_expired_access_token_is_refreshed_once(authed: responses.RequestsMock) -> None:
    source = PixivSource(REFRESH_TOKEN)
    add_illust_page(authed, ORIGINAL, "search_illust_page1")
    list(source.search(request_for(ORIGINAL, scan_limit=1)))
    # An hour later: the cached bearer is refused, the source logs in again and retries.
    authed.get(ILLUST_URL, json=fixture("error_oauth_expired"), status=400)
    authed.post(AUTH_URL, json=fixture("auth_token"))
    add_illust_page(authed, ORIGINAL, "search_illust_page1")

    works = list(source.search(request_for(ORIGINAL, scan_limit=1)))

    assert ids(works) == ["120000005"]
    assert len([c for c in authed.calls if c.request.url == AUTH_URL]) == 2


def test_a_fresh_access_token_refused_is_auth_failed(authed: responses.RequestsMock) -> None:
    authed.get(ILLUST_URL, json=fixture("error_oauth_expired"), status=400)
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "auth_failed"
    assert len([c for c in authed.calls if c.request.url == AUTH_URL]) == 1


def test_an_unregistered_url_never_reaches_the_network(authed: responses.RequestsMock) -> None:
    # No search recording: responses refuses the request, which surfaces as a network error.
    error = failure(PixivSource(REFRESH_TOKEN), request_for(ORIGINAL))
    assert error.reason == "network_error"
    assert len(search_calls(authed)) == 1


def test_an_injected_api_factory_is_used(authed: responses.RequestsMock) -> None:
    made: list[Any] = []

    def factory() -> Any:
        api = pixiv_module.AppPixivAPI()
        api.set_accept_language("en-us")
        made.append(api)
        return api

    add_illust_page(authed, ORIGINAL, "search_illust_page1")
    list(
        PixivSource(REFRESH_TOKEN, api_factory=factory).search(request_for(ORIGINAL, scan_limit=1))
    )

    assert len(made) == 1
    assert search_calls(authed)[0].request.headers["Accept-Language"] == "en-us"


# -- refresh_token_from_environment -------------------------------------------------------------


class StubStore:
    """config/stored.py's readers: what they answer, and what they were asked."""

    def __init__(
        self, value: str | None = "token-from-aws", error: Exception | None = None
    ) -> None:
        self.value = value
        self.error = error
        self.calls: list[tuple[str, str]] = []

    def parameter_text(self, name: str) -> str | None:
        return self._answer("ssm", name)

    def secret_text(self, name: str) -> str | None:
        return self._answer("secrets", name)

    def _answer(self, store: str, name: str) -> str | None:
        self.calls.append((store, name))
        if self.error is not None:
            raise self.error
        return self.value


@pytest.fixture
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("JOBSTREAM_PIXIV_REFRESH_TOKEN", raising=False)
    monkeypatch.delenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", raising=False)
    monkeypatch.setattr(pixiv_module, "_stored_tokens", {})
    return monkeypatch


def stub_store(monkeypatch: pytest.MonkeyPatch, stub: StubStore) -> None:
    monkeypatch.setattr(stored, "parameter_text", stub.parameter_text)
    monkeypatch.setattr(stored, "secret_text", stub.secret_text)


def test_token_from_the_environment(no_token_env: pytest.MonkeyPatch) -> None:
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN", " plain-token \n")
    assert refresh_token_from_environment() == "plain-token"


def test_no_token_configured_is_auth_failed(no_token_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(SourceError) as caught:
        refresh_token_from_environment()
    assert caught.value.reason == "auth_failed"
    assert caught.value.message == "no Pixiv refresh token is configured"


def test_token_from_ssm_parameter_store_wins_over_the_plain_variable(
    no_token_env: pytest.MonkeyPatch,
) -> None:
    stub = StubStore()
    stub_store(no_token_env, stub)
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN", "plain-token")
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "/jobstream/pixiv/refresh-token")

    assert refresh_token_from_environment() == "token-from-aws"
    assert stub.calls == [("ssm", "/jobstream/pixiv/refresh-token")]


def test_token_from_secrets_manager(no_token_env: pytest.MonkeyPatch) -> None:
    stub = StubStore(value=" secret-token\n")
    stub_store(no_token_env, stub)
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "jobstream/pixiv")

    assert refresh_token_from_environment() == "secret-token"
    assert stub.calls == [("secrets", "jobstream/pixiv")]


def test_a_stored_token_is_read_again_after_its_cache_age(
    no_token_env: pytest.MonkeyPatch,
) -> None:
    stub = StubStore()
    stub_store(no_token_env, stub)
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "jobstream/pixiv")
    now_s = [1000.0]
    for moment in (1000.0, 1000.0 + PARAMETER_MAX_AGE_S - 0.001):
        now_s[0] = moment
        assert refresh_token_from_environment(lambda: now_s[0]) == "token-from-aws"
    assert len(stub.calls) == 1
    stub.value = "rotated"
    now_s[0] = 1000.0 + PARAMETER_MAX_AGE_S
    assert refresh_token_from_environment(lambda: now_s[0]) == "rotated"
    assert len(stub.calls) == 2


@pytest.mark.parametrize("value", ["", "   ", None])
def test_an_empty_stored_token_is_auth_failed(
    no_token_env: pytest.MonkeyPatch, value: str | None
) -> None:
    stub_store(no_token_env, StubStore(value=value))
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "jobstream/pixiv")
    with pytest.raises(SourceError) as caught:
        refresh_token_from_environment()
    assert caught.value.reason == "auth_failed"


@pytest.mark.parametrize(
    "error",
    [stored.StoreUnreadableError("cannot read it: AccessDenied"), stored.StoreClientError("x")],
)
def test_an_unreadable_parameter_is_auth_failed(
    no_token_env: pytest.MonkeyPatch, error: Exception
) -> None:
    stub_store(no_token_env, StubStore(error=error))
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "/jobstream/pixiv")
    with pytest.raises(SourceError) as caught:
        refresh_token_from_environment()
    assert caught.value.reason == "auth_failed"
    assert "/jobstream/pixiv" in caught.value.message
    # A refusal, a missing parameter or no client: no retry of the job cures it.
    assert not caught.value.outcome().retryable


def test_a_store_that_cannot_answer_now_is_a_failure_the_job_retries(
    no_token_env: pytest.MonkeyPatch,
) -> None:
    throttled = stored.StoreUnreadableError("cannot read it: ThrottlingException", passing=True)
    stub_store(no_token_env, StubStore(error=throttled))
    no_token_env.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER", "/jobstream/pixiv")
    with pytest.raises(SourceError) as caught:
        refresh_token_from_environment()
    assert caught.value.reason == "auth_failed"
    assert caught.value.outcome().retryable
