"""A fake Pixiv app API on 127.0.0.1 (dev-only: the tests and `make load`), rate-limited per
account as Pixiv is, to exercise what jobstream does against it (a target's `api_host`).

It serves what the `pixiv` source calls: the OAuth token endpoint (`POST /auth/token`, a
refresh_token grant), `GET /v1/search/illust` and `/v1/search/novel` (works for any word, with
next_url paging: fake_pixiv_works.py) and `GET /v1/illust/detail`, `/v2/novel/detail`.

An account is a refresh token; its access tokens (one per token refresh) count as it. Per
account at most `max_concurrent` requests are in flight and, when `per_minute` is set, at most
that many start in any 60 s; a request beyond either is answered 429 with `Retry-After` and
Pixiv's "Rate Limit" body. `outage()` answers every request 503 for a while. Each request
answered takes `latency_s` (so concurrency shows). `stats()` says what it saw.

    with FakePixiv(max_concurrent=2, per_minute=60, latency_s=0.2) as pixiv:
        target_settings = {"source": "pixiv", "api_host": pixiv.url, ...}
        ...
        assert pixiv.stats().peak_concurrency[refresh_token] <= 2
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from bench import fake_pixiv_works as works

MINUTE_S: Final = 60.0
# A client that opens a connection and sends nothing must not hold a thread past stop().
_SOCKET_TIMEOUT_S: Final = 5.0
# How soon stop() is noticed (the standard library's default waits half a second).
_POLL_S: Final = 0.05
_SEARCHES: Final[dict[str, works.Kind]] = {
    "/v1/search/illust": "illust",
    "/v1/search/novel": "novel",
}
_DETAILS: Final[dict[str, tuple[works.Kind, str]]] = {
    "/v1/illust/detail": ("illust", "illust_id"),
    "/v2/novel/detail": ("novel", "novel_id"),
}


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: dict[str, Any]
    retry_after_s: int | None = None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as the fake saw it: whose (the refresh token; None when it named no known
    account), what, the status answered, and when it arrived (seconds since start)."""

    account: str | None
    method: str
    path: str
    status: int
    at_s: float


@dataclass(frozen=True, slots=True)
class FakePixivStats:
    """What the fake saw, per account where it says so.

    - `requests`: every request, in order of arrival.
    - `in_flight`: the requests of an account being answered now.
    - `peak_concurrency`: the most requests of an account in flight at once.
    - `rate_limited`, `unavailable`: the 429s and 503s answered.
    - `per_minute`: requests of an account served (not refused) per minute since start, one
      count per 60 s window (window 0 is the first minute).
    """

    requests: tuple[RequestRecord, ...]
    in_flight: dict[str, int]
    peak_concurrency: dict[str, int]
    rate_limited: int
    unavailable: int
    per_minute: dict[str, list[int]]

    def paths(self) -> list[str]:
        return [record.path for record in self.requests]


@dataclass
class _Account:
    in_flight: int = 0
    peak: int = 0
    # When each of its served requests started, within the last minute (the rolling window).
    recent: deque[float] = field(default_factory=deque)
    windows: Counter[int] = field(default_factory=Counter)


class FakePixiv:
    """The fake; `start()`/`stop()` or a `with` block. Settings may be changed while it runs."""

    def __init__(
        self,
        *,
        max_concurrent: int = 2,
        per_minute: int | None = None,
        retry_after_s: int = 2,
        latency_s: float = 0.0,
        page_size: int = 30,
        works_per_tag: int = 90,
        refresh_tokens: Iterable[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_concurrent < 1 or (per_minute is not None and per_minute < 1):
            raise ValueError("max_concurrent and per_minute must be at least 1")
        if not 1 <= page_size <= works_per_tag < 1_000_000:
            raise ValueError("page_size must be from 1 to works_per_tag, which is under 1,000,000")
        self.max_concurrent = max_concurrent
        self.per_minute = per_minute
        self.retry_after_s = retry_after_s
        self.latency_s = latency_s
        self.page_size = page_size
        self.works_per_tag = works_per_tag
        # None: any refresh token is an account; else only these (others get invalid_grant).
        self._known = None if refresh_tokens is None else frozenset(refresh_tokens)
        self._clock = clock
        self._lock = threading.Lock()
        self._accounts: dict[str, _Account] = {}
        self._access: dict[str, str] = {}  # access token -> its account's refresh token
        self._issued = itertools.count(1)
        self._records: list[RequestRecord] = []
        self._rate_limited = 0
        self._unavailable = 0
        self._outage_until: float | None = None
        self._outage_retry_after_s: int | None = None
        self._started_at = clock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakePixiv:
        if self._server is not None:
            raise RuntimeError("the fake Pixiv is already running")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # Joined by server_close(): stop() leaves no request thread behind.
        server.daemon_threads = False
        server.block_on_close = True
        self._server = server
        self._started_at = self._clock()
        self._thread = threading.Thread(
            target=server.serve_forever, args=(_POLL_S,), name="fake-pixiv"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakePixiv:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The origin to configure as a pixiv target's `api_host`."""
        if self._server is None:
            raise RuntimeError("the fake Pixiv is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- switches -----------------------------------------------------------------------------

    def outage(self, seconds: float | None = None, *, retry_after_s: int | None = None) -> None:
        """Answer every request 503 (with `Retry-After: retry_after_s` when given) for
        `seconds`, or until `end_outage()`."""
        with self._lock:
            self._outage_until = float("inf") if seconds is None else self._clock() + seconds
            self._outage_retry_after_s = retry_after_s

    def end_outage(self) -> None:
        with self._lock:
            self._outage_until = None

    def revoke_access_tokens(self) -> None:
        """Every access token issued so far expires (the API answers them invalid_grant)."""
        with self._lock:
            self._access.clear()

    def wait_in_flight(self, account: str, count: int, timeout_s: float = 10.0) -> None:
        """Return once `count` requests of `account` are in flight at once; TimeoutError when
        that is not seen within `timeout_s` (a latency too short for a loaded machine)."""
        deadline = time.monotonic() + timeout_s
        while self.stats().in_flight.get(account) != count:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{count} requests of the account were never in flight at once")
            time.sleep(0.01)

    def stats(self) -> FakePixivStats:
        with self._lock:
            return FakePixivStats(
                requests=tuple(self._records),
                in_flight={name: acc.in_flight for name, acc in self._accounts.items()},
                peak_concurrency={name: acc.peak for name, acc in self._accounts.items()},
                rate_limited=self._rate_limited,
                unavailable=self._unavailable,
                per_minute={
                    name: [acc.windows[i] for i in range(max(acc.windows, default=-1) + 1)]
                    for name, acc in self._accounts.items()
                },
            )

    # -- answering ----------------------------------------------------------------------------

    def answer(self, method: str, target: str, headers: Any, form: dict[str, str]) -> Reply:
        """The reply to one request (called on the request's own thread)."""
        path = urlsplit(target).path
        account = self._account_of(path, headers, form)
        refused = self._admit(account)
        if refused is not None:
            self._record(account, method, path, refused.status)
            return refused
        try:
            if self.latency_s > 0:
                time.sleep(self.latency_s)
            reply = self._serve(method, target, account, form)
        finally:
            self._release(account)
        self._record(account, method, path, reply.status)
        return reply

    def _account_of(self, path: str, headers: Any, form: dict[str, str]) -> str | None:
        if path == "/auth/token":
            token = form.get("refresh_token")
            known = token is not None and (self._known is None or token in self._known)
            return token if known else None
        bearer = str(headers.get("Authorization") or "").removeprefix("Bearer ")
        with self._lock:
            return self._access.get(bearer)

    def _admit(self, account: str | None) -> Reply | None:
        """A 503 in an outage, a 429 beyond the account's limits, else None (a slot taken)."""
        now = self._clock()
        with self._lock:
            if self._outage_until is not None and now < self._outage_until:
                self._unavailable += 1
                return Reply(503, works.UNAVAILABLE_BODY, self._outage_retry_after_s)
            if account is None:
                return None  # refused by _serve: no account's limits apply
            state = self._accounts.setdefault(account, _Account())
            while state.recent and state.recent[0] <= now - MINUTE_S:
                state.recent.popleft()
            paced = self.per_minute is not None and len(state.recent) >= self.per_minute
            if paced or state.in_flight >= self.max_concurrent:
                self._rate_limited += 1
                return Reply(429, works.RATE_LIMIT_BODY, self.retry_after_s)
            state.in_flight += 1
            state.peak = max(state.peak, state.in_flight)
            state.recent.append(now)
            state.windows[int((now - self._started_at) // MINUTE_S)] += 1
            return None

    def _release(self, account: str | None) -> None:
        if account is None:
            return
        with self._lock:
            self._accounts[account].in_flight -= 1

    def _record(self, account: str | None, method: str, path: str, status: int) -> None:
        with self._lock:
            at_s = self._clock() - self._started_at
            self._records.append(RequestRecord(account, method, path, status, at_s))

    def _serve(self, method: str, target: str, account: str | None, form: dict[str, str]) -> Reply:
        parts = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        if method == "POST" and parts.path == "/auth/token":
            return self._token(account, form)
        if method != "GET" or (parts.path not in _SEARCHES and parts.path not in _DETAILS):
            return Reply(404, works.NOT_FOUND_BODY)
        if account is None:
            return Reply(400, works.EXPIRED_ACCESS_TOKEN_BODY)
        if parts.path in _SEARCHES:
            return self._search(_SEARCHES[parts.path], parts.path, query)
        kind, key = _DETAILS[parts.path]
        work_id = query.get(key, "")
        if not work_id.isdigit():
            return Reply(404, works.NOT_FOUND_BODY)
        return Reply(200, works.detail_body(kind, int(work_id)))

    def _token(self, account: str | None, form: dict[str, str]) -> Reply:
        if account is None or form.get("grant_type") != "refresh_token":
            return Reply(400, works.INVALID_GRANT_BODY)
        with self._lock:
            access_token = f"fake-access-{next(self._issued)}"
            self._access[access_token] = account
            user_id = 17_000_000 + sorted(self._accounts).index(account)
        return Reply(200, works.token_body(access_token, account, user_id))

    def _search(self, kind: works.Kind, path: str, query: dict[str, str]) -> Reply:
        word = query.get("word", "")
        offset_text = query.get("offset", "0")
        if not word or not offset_text.isdigit():
            return Reply(400, works.NOT_FOUND_BODY)
        body = works.search_body(
            kind,
            word,
            int(offset_text),
            page_size=self.page_size,
            works_per_tag=self.works_per_tag,
            next_base=f"{self.url}{path}",
        )
        return Reply(200, body)


def _handler(fake: FakePixiv) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no idle keep-alive thread outlives stop().
        protocol_version = "HTTP/1.0"
        timeout = _SOCKET_TIMEOUT_S

        def do_GET(self) -> None:
            self._reply(fake.answer("GET", self.path, self.headers, {}))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode("utf-8", errors="replace")
            form = {key: values[-1] for key, values in parse_qs(text).items()}
            self._reply(fake.answer("POST", self.path, self.headers, form))

        def _reply(self, reply: Reply) -> None:
            payload = json.dumps(reply.body).encode("utf-8")
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            if reply.retry_after_s is not None:
                self.send_header("Retry-After", str(reply.retry_after_s))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_args: Any) -> None:
            return

    return Handler
