"""The fake Pixiv (bench/fake_pixiv.py) itself: it answers as Pixiv's app API does, enforces its
per-account limits, goes out on demand, counts what it saw, and stops cleanly."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from bench.fake_pixiv import FakePixiv

TOKEN = "fake-refresh-token-1"
OTHER = "fake-refresh-token-2"


class Clock:
    """A clock the test moves (the fake's rolling minute and outage end read it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def access_token(pixiv: FakePixiv, refresh_token: str = TOKEN) -> str:
    answer = requests.post(
        f"{pixiv.url}/auth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["response"]["access_token"]
    return token


def search(pixiv: FakePixiv, token: str, **query: Any) -> requests.Response:
    return requests.get(
        f"{pixiv.url}/v1/search/illust",
        params={"word": "sky", "search_target": "exact_match_for_tags", **query},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )


@pytest.fixture
def pixiv() -> Iterator[FakePixiv]:
    with FakePixiv() as fake:
        yield fake


def test_a_refresh_token_buys_an_access_token_that_pages_through_a_words_works(
    pixiv: FakePixiv,
) -> None:
    token = access_token(pixiv)
    first = search(pixiv, token).json()
    assert len(first["illusts"]) == 30
    ids = [item["id"] for item in first["illusts"]]
    assert ids == sorted(ids, reverse=True)
    assert {"name": "sky", "translated_name": None} in first["illusts"][0]["tags"]
    assert first["next_url"].startswith(f"{pixiv.url}/v1/search/illust?")
    assert "offset=30" in first["next_url"]
    last = search(pixiv, token, offset=60).json()
    assert len(last["illusts"]) == 30
    assert last["next_url"] is None
    # The same word, the same works.
    assert search(pixiv, token).json() == first


def test_details_answer_for_any_id_and_unknown_tokens_or_paths_are_refused(
    pixiv: FakePixiv,
) -> None:
    token = access_token(pixiv)
    bearer = {"Authorization": f"Bearer {token}"}
    illust = requests.get(
        f"{pixiv.url}/v1/illust/detail", params={"illust_id": 42}, headers=bearer, timeout=5
    )
    assert illust.json()["illust"]["id"] == 42
    novel = requests.get(
        f"{pixiv.url}/v2/novel/detail", params={"novel_id": 7}, headers=bearer, timeout=5
    )
    assert novel.json()["novel"]["id"] == 7
    stranger = search(pixiv, "never-issued")
    assert stranger.status_code == 400
    assert "invalid_grant" in stranger.json()["error"]["message"]
    assert requests.get(f"{pixiv.url}/v1/other", headers=bearer, timeout=5).status_code == 404
    pixiv.revoke_access_tokens()
    assert search(pixiv, token).status_code == 400


def test_only_the_known_refresh_tokens_are_accounts() -> None:
    with FakePixiv(refresh_tokens=[TOKEN]) as pixiv:
        access_token(pixiv, TOKEN)
        answer = requests.post(
            f"{pixiv.url}/auth/token",
            data={"grant_type": "refresh_token", "refresh_token": OTHER},
            timeout=5,
        )
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"


def test_more_than_max_concurrent_requests_of_an_account_are_answered_429() -> None:
    with FakePixiv(max_concurrent=2, retry_after_s=3) as pixiv:
        token, other = access_token(pixiv), access_token(pixiv, OTHER)
        # Long enough that a loaded machine still sees both held at once (and bounded).
        pixiv.latency_s = 2.0
        with ThreadPoolExecutor(max_workers=2) as pool:
            held = [pool.submit(search, pixiv, token) for _ in range(2)]
            pixiv.wait_in_flight(TOKEN, 2)
            refused = search(pixiv, token)
            # Another account has slots of its own.
            assert search(pixiv, other).status_code == 200
            assert [future.result().status_code for future in held] == [200, 200]
        stats = pixiv.stats()
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "3"
    assert refused.json()["error"]["message"] == "Rate Limit"
    assert stats.peak_concurrency == {TOKEN: 2, OTHER: 1}
    assert stats.rate_limited == 1
    assert [r.status for r in stats.requests if r.account == TOKEN].count(429) == 1


def test_at_most_per_minute_requests_start_in_any_rolling_minute() -> None:
    clock = Clock()
    with FakePixiv(per_minute=3, clock=clock) as pixiv:
        token = access_token(pixiv)  # the token refresh counts: one of the three
        assert [search(pixiv, token).status_code for _ in range(3)] == [200, 200, 429]
        clock.now += 59.0
        assert search(pixiv, token).status_code == 429
        clock.now += 1.0  # the first minute's requests are out of the window
        assert [search(pixiv, token).status_code for _ in range(3)] == [200, 200, 200]
        assert search(pixiv, token).status_code == 429
        stats = pixiv.stats()
    assert stats.per_minute == {TOKEN: [3, 3]}
    assert stats.rate_limited == 3


def test_an_outage_answers_503_until_it_ends() -> None:
    clock = Clock()
    with FakePixiv(clock=clock) as pixiv:
        token = access_token(pixiv)
        pixiv.outage(10, retry_after_s=7)
        out = search(pixiv, token)
        assert (out.status_code, out.headers["Retry-After"]) == (503, "7")
        clock.now += 10
        assert search(pixiv, token).status_code == 200
        pixiv.outage()
        plain = search(pixiv, token)
        assert plain.status_code == 503
        assert "Retry-After" not in plain.headers
        pixiv.end_outage()
        assert search(pixiv, token).status_code == 200
        stats = pixiv.stats()
    assert stats.unavailable == 2
    assert stats.paths().count("/v1/search/illust") == 4


def test_stop_leaves_no_thread_behind_even_with_requests_in_flight() -> None:
    before = set(threading.enumerate())
    pixiv = FakePixiv(latency_s=2.0, max_concurrent=5).start()
    token = access_token(pixiv)
    with ThreadPoolExecutor(max_workers=3) as pool:
        pending = [pool.submit(search, pixiv, token) for _ in range(3)]
        pixiv.wait_in_flight(TOKEN, 3)
        pixiv.stop()
        assert all(future.result().status_code == 200 for future in pending)
    assert set(threading.enumerate()) <= before
    pixiv.stop()  # a second stop is harmless
    with pytest.raises(RuntimeError):
        _ = pixiv.url


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FakePixiv(max_concurrent=0)
    with pytest.raises(ValueError, match="page_size"):
        FakePixiv(page_size=100, works_per_tag=10)
