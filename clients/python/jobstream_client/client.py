"""`Client`: every Workflow Protocol v1 route as a typed call, with retries."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import replace
from typing import Any, Final, TypeVar

from jobstream_client.caching import CapabilitiesCache, Stored, fresh_for_s
from jobstream_client.errors import ApiError, ResponseError, TransportError, api_error
from jobstream_client.models import (
    AckResult,
    Capabilities,
    Delivery,
    Event,
    EventPage,
    FeedAck,
    FeedPage,
    Job,
    JobPage,
    Submission,
)
from jobstream_client.retry import RetryPolicy, parse_retry_after
from jobstream_client.transport import DEFAULT_TIMEOUT_S, Query, Response, Transport, segment

T = TypeVar("T")
OK: Final = frozenset({200})
REVALIDATED: Final = frozenset({200, 304})
SUBMITTED: Final = frozenset({200, 202})  # 202: this request created the job; 200: replay
DEFAULT_POLL_INTERVAL_S: Final = 1.0
# The longest a feed read may wait for an event (the producer's `max_wait_ms`).
DEFAULT_FEED_WAIT_MS: Final = 20_000


class FollowTimeoutError(TimeoutError):
    """`follow` saw no terminal event within its timeout."""


class Client:
    """A consumer of one producer, authenticated by one bearer token (one tenant).

    Calls that fail with a retryable protocol error (the envelope's own `retryable` flag), a
    transient answer without an envelope (408, 429, 5xx from a gateway) or a network failure are
    tried again per `retry`, honouring `Retry-After`. Every protocol call is idempotent (a
    submit by its key), so retrying after a timeout is safe.

    `capabilities()` is reused for the answer's `max-age` and then revalidated by its ETag
    (`capabilities_cache`: give clients one to share, e.g. when building one per request).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        capabilities_cache: CapabilitiesCache | None = None,
    ) -> None:
        self.transport = transport or Transport(base_url, timeout_s=timeout_s)
        self.token = token
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self.capabilities_cache = capabilities_cache or CapabilitiesCache()

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    # --- the routes ---------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """`GET /capabilities`: the stored document while fresh (its `max-age`), then asked
        again with its ETag in `If-None-Match` (a 304 keeps the stored one)."""
        stored = self.capabilities_cache.get(self.base_url, self.token)
        if stored is not None and stored.fresh(self._clock()):
            return self._decode(Capabilities.from_dict, stored.document)
        headers = {"If-None-Match": stored.etag} if stored is not None else {}
        response, _ = self._exchange("GET", "/capabilities", headers=headers, expect=REVALIDATED)
        fresh_for = fresh_for_s(response.headers.get("cache-control"))
        if response.status == 304 and stored is not None:
            document: Mapping[str, Any] = stored.document
        else:
            document = self._success("GET", "/capabilities", response, OK)
        capabilities = self._decode(Capabilities.from_dict, document)
        etag = response.headers.get("etag")
        if etag is None or fresh_for is None:
            self.capabilities_cache.forget(self.base_url, self.token)
        else:
            stored = Stored(document, etag, self._clock() + fresh_for)
            self.capabilities_cache.put(self.base_url, self.token, stored)
        return capabilities

    def submit(self, task: Mapping[str, Any]) -> Submission:
        """`POST /jobs`. `replayed` tells a new job (202) from one the key already named (200).

        Raises IdempotencyConflictError when the key was first used with other params.
        """
        document, status, attempts = self._call("POST", "/jobs", body=task, expect=SUBMITTED)
        wrapped = document.get("job") if isinstance(document, Mapping) else None
        job = self._decode(Job.from_dict, wrapped)
        raw = dict(document) if isinstance(document, Mapping) else {}
        return Submission(job=job, replayed=status == 200, attempts=attempts, raw=raw)

    def get(self, job_id: str) -> Job:
        """`GET /jobs/{job_id}`; NotFoundError for an unknown (or another tenant's) job."""
        return self._decode(Job.from_dict, self._call("GET", f"/jobs/{segment(job_id)}")[0])

    def find(self, idempotency_key: str) -> Job | None:
        """The job the key names, or None (`GET /jobs?idempotency_key=`, matched exactly)."""
        page = self.list_page(idempotency_key=idempotency_key)
        matches = [job for job in page.jobs if job.idempotency_key == idempotency_key]
        return max(matches, key=lambda job: (job.updated_at, job.created_at), default=None)

    def list_page(
        self,
        *,
        idempotency_key: str | None = None,
        correlation_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of `GET /jobs` with the given filters."""
        query: Query = {
            "idempotency_key": idempotency_key,
            "correlation_id": correlation_id,
            "status": status,
            "limit": limit,
            "cursor": cursor,
        }
        return self._decode(JobPage.from_dict, self._call("GET", "/jobs", query=query)[0])

    def list(
        self,
        *,
        idempotency_key: str | None = None,
        correlation_id: str | None = None,
        status: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Job]:
        """Every job matching the filters, page after page (`next_cursor`)."""
        cursor: str | None = None
        while True:
            page = self.list_page(
                idempotency_key=idempotency_key,
                correlation_id=correlation_id,
                status=status,
                limit=page_size,
                cursor=cursor,
            )
            yield from page.jobs
            if page.next_cursor is None or page.next_cursor == cursor:
                return
            cursor = page.next_cursor

    def cancel(self, job_id: str) -> Job:
        """`POST /jobs/{job_id}/cancel`: the job afterwards (a finished job is unchanged)."""
        document = self._call("POST", f"/jobs/{segment(job_id)}/cancel")[0]
        return self._decode(Job.from_dict, document)

    def events_page(
        self, job_id: str, *, after: str | None = None, unacked: bool = False
    ) -> EventPage:
        """One page of `GET /jobs/{job_id}/events`: after the event `after` names, or after the
        consumer's ack cursor with `unacked` (the producer then ignores `after`)."""
        query: Query = {"after": after, "unacked": True if unacked else None}
        path = f"/jobs/{segment(job_id)}/events"
        return self._decode(EventPage.from_dict, self._call("GET", path, query=query)[0])

    def events(
        self, job_id: str, *, after: str | None = None, unacked: bool = False
    ) -> Iterator[Event]:
        """Every event from the cursor on, page after page (`next_after`): from the start, after
        `after` (the consumer's own cursor), or after the ack cursor with `unacked`."""
        for page in self._event_pages(job_id, after=after, unacked=unacked):
            yield from page.events

    def ack(self, job_id: str, through: str | Event) -> AckResult:
        """`POST /jobs/{job_id}/events/ack`: move the ack cursor up to `through` (forward only;
        an unknown or older id is a no-op, never an error)."""
        event_id = through.event_id if isinstance(through, Event) else through
        path = f"/jobs/{segment(job_id)}/events/ack"
        document = self._call("POST", path, body={"ack_through": event_id})[0]
        return self._decode(AckResult.from_dict, document)

    def follow(
        self,
        job_id: str,
        *,
        ack: bool = True,
        after: str | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        timeout_s: float | None = None,
    ) -> Iterator[Event]:
        """Yield the job's events as they come until its terminal event.

        With `ack` (the default) it reads from the producer's ack cursor (`unacked=1`) and acks
        each event once the caller has handled it (when the loop asks for the next one), so a
        consumer restarted after a crash resumes where it left off and sees at least once every
        event it had not finished. Without `ack` it reads from `after` (None: the start) and
        acknowledges nothing. Events are never yielded twice in one call.
        """
        pages = self._fresh_pages(
            job_id, unacked=ack, after=after, poll_interval_s=poll_interval_s, timeout_s=timeout_s
        )
        for page in pages:
            for event in page.events:
                yield event
                if ack:
                    self.ack(job_id, event.event_id)

    def follow_pages(
        self,
        job_id: str,
        *,
        ack: bool = True,
        after: str | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        timeout_s: float | None = None,
    ) -> Iterator[EventPage]:
        """`follow` a page at a time, for consumers that handle events in batches or need to
        know which event is the newest: each page holds only events not yielded before (never
        none), up to the terminal one; `next_after is None` says the page reached the end of
        the stream when it was read, so its last event was then the job's newest. With `ack`,
        the page is acked through its last event once the caller asks for the next page (one
        ack per page). `raw` is the page as the producer sent it.
        """
        pages = self._fresh_pages(
            job_id, unacked=ack, after=after, poll_interval_s=poll_interval_s, timeout_s=timeout_s
        )
        for page in pages:
            yield page
            if ack:
                self.ack(job_id, page.events[-1].event_id)

    def callbacks(self, job_id: str) -> tuple[Delivery, ...]:
        """`GET /jobs/{job_id}/callbacks` (the deliveries extension): each callback of the job,
        in event order, with where its delivery stands and how its attempts went."""
        document = self._call("GET", f"/jobs/{segment(job_id)}/callbacks")[0]
        callbacks = document.get("callbacks") if isinstance(document, dict) else None
        if not isinstance(callbacks, list):
            raise ResponseError("GET /jobs/{job_id}/callbacks answered no callbacks list")
        return tuple(self._decode(Delivery.from_dict, item) for item in callbacks)

    def dead_letters(self) -> Iterator[tuple[str, Delivery]]:
        """`GET /callbacks?state=dead` (the deliveries extension), every page: each dead
        callback of the tenant with its job id, oldest death first."""
        cursor: str | None = None
        while True:
            query: Query = {"state": "dead", "cursor": cursor}
            document = self._call("GET", "/callbacks", query=query)[0]
            items = document.get("callbacks") if isinstance(document, dict) else None
            if not isinstance(items, list):
                raise ResponseError("GET /callbacks answered no callbacks list")
            for item in items:
                delivery = self._decode(Delivery.from_dict, item)
                yield str(delivery.raw.get("job_id", "")), delivery
            cursor = document.get("next_cursor") or None
            if cursor is None:
                return

    def redrive(self, *, job_id: str | None = None, since: int | None = None) -> int:
        """`POST /callbacks/redrive`: give the tenant's dead callbacks (all, one job's, or those
        dead since `since`, epoch ms) a fresh budget; how many were revived (every one: the
        call is repeated while the producer says there are more)."""
        body: dict[str, Any] = {}
        if job_id is not None:
            body["job_id"] = job_id
        if since is not None:
            body["since"] = since
        revived = 0
        while True:
            document = self._call("POST", "/callbacks/redrive", body=body)[0]
            if not isinstance(document, dict) or not isinstance(document.get("revived"), int):
                raise ResponseError("POST /callbacks/redrive answered no revived count")
            revived += int(document["revived"])
            if not document.get("more"):
                return revived

    def endpoints(self) -> tuple[dict[str, Any], ...]:
        """`GET /callbacks/endpoints` (the deliveries extension): the health of the tenant's
        callback endpoints (`origin`, `health`: healthy, paused or disabled, ...)."""
        document = self._call("GET", "/callbacks/endpoints")[0]
        listed = document.get("endpoints") if isinstance(document, dict) else None
        if not isinstance(listed, list):
            raise ResponseError("GET /callbacks/endpoints answered no endpoints list")
        return tuple(dict(item) for item in listed if isinstance(item, dict))

    def enable_endpoint(self, origin: str) -> bool:
        """`POST /callbacks/endpoints/enable`: re-enable the tenant's endpoint for `origin` (or
        a URL under it), disabled by a 410 or paused; False when it was neither."""
        body = {"origin": origin}
        document = self._call("POST", "/callbacks/endpoints/enable", body=body)[0]
        return bool(isinstance(document, dict) and document.get("enabled"))

    def feed_page(
        self,
        *,
        after: str | None = None,
        consumer: str | None = None,
        limit: int | None = None,
        wait_ms: int = 0,
    ) -> FeedPage:
        """One page of `GET /events` (the `event_feed` extension): the tenant's events after
        `after`, or after the named cursor `consumer`, or from the start; with `wait_ms`, an
        empty page waits up to that long for an event."""
        query: Query = {
            "after": after,
            "consumer": consumer,
            "limit": limit,
            "wait_ms": wait_ms or None,
        }
        # The request may wait `wait_ms` at the producer before it answers.
        timeout_s = self.transport.timeout_s + wait_ms / 1000
        document = self._call("GET", "/events", query=query, timeout_s=timeout_s)[0]
        return self._decode(FeedPage.from_dict, document)

    def feed_ack(self, consumer: str, through: str) -> FeedAck:
        """`POST /events/ack`: move the named cursor `consumer` forward to `through` (a
        `next_after`); it never moves back."""
        document = self._call(
            "POST", "/events/ack", body={"consumer": consumer, "through": through}
        )
        return self._decode(FeedAck.from_dict, document[0])

    def feed(
        self,
        consumer: str | None = None,
        *,
        after: str | None = None,
        limit: int | None = None,
        wait_ms: int = DEFAULT_FEED_WAIT_MS,
        idle_timeout_s: float | None = None,
    ) -> Iterator[Event]:
        """Every event of the tenant's feed as it comes, long-polling while there is none.

        With `consumer`, it resumes after that named cursor and acks each page once the caller
        asks for the event after it: a consumer restarted with only the name carries on after
        what it had finished (a page it had not finished comes again: at least once). Without,
        it reads from `after` (None: the start). It stops after `idle_timeout_s` without an
        event (None: never).
        """
        cursor = after
        idle_since = time.monotonic()
        first = True
        while True:
            page = self.feed_page(
                after=cursor,
                consumer=consumer if first and cursor is None else None,
                limit=limit,
                wait_ms=0 if first else wait_ms,
            )
            first = False
            yield from page.events
            if consumer is not None and page.events:
                self.feed_ack(consumer, page.next_after)
            cursor = page.next_after
            if page.events:
                idle_since = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                return

    def _event_pages(self, job_id: str, *, after: str | None, unacked: bool) -> Iterator[EventPage]:
        """Page after page (`next_after`) from the cursor to the end of the stream."""
        page = self.events_page(job_id, after=after, unacked=unacked)
        while True:
            yield page
            if page.next_after is None or page.next_after == after:
                return
            after = page.next_after
            page = self.events_page(job_id, after=after)

    def _fresh_pages(
        self,
        job_id: str,
        *,
        unacked: bool,
        after: str | None,
        poll_interval_s: float,
        timeout_s: float | None,
    ) -> Iterator[EventPage]:
        """The polling behind `follow` and `follow_pages`: pages of events not yielded before,
        until the terminal event. Acking is the callers' (before they ask for more, so each poll
        from the ack cursor with `unacked` starts after what was handled)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        seen: set[str] = set()
        cursor = after
        job_checked_terminal = False
        while True:
            fresh = False
            for page in self._event_pages(
                job_id, after=None if unacked else cursor, unacked=unacked
            ):
                events: list[Event] = []
                for event in page.events:
                    if event.event_id in seen:
                        continue  # a producer replays from the start for an id it does not know
                    seen.add(event.event_id)
                    events.append(event)
                    if event.terminal:
                        break
                if not events:
                    continue
                fresh = True
                cursor = events[-1].event_id
                yield replace(page, events=tuple(events))
                if events[-1].terminal:
                    return
            if not fresh:
                # Everything to the end is handled. A job that finished before this call (its
                # terminal event acked earlier) has nothing more to give: check once, read once
                # more (producers may record the terminal event on that read), then stop.
                if job_checked_terminal:
                    return
                job_checked_terminal = self.get(job_id).terminal
                if job_checked_terminal:
                    continue
            if deadline is not None and time.monotonic() >= deadline:
                raise FollowTimeoutError(f"no terminal event for {job_id} within {timeout_s} s")
            self._sleep(poll_interval_s)

    # --- plumbing -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        expect: Collection[int] = OK,
        timeout_s: float | None = None,
    ) -> tuple[Any, int, int]:
        """Send with retries; the decoded JSON, the status and how many attempts it took."""
        response, attempts = self._exchange(
            method, path, query=query, body=body, expect=expect, timeout_s=timeout_s
        )
        return self._success(method, path, response, expect), response.status, attempts

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        expect: Collection[int] = OK,
        timeout_s: float | None = None,
    ) -> tuple[Response, int]:
        """Send with retries; the answer (a 2xx, or a status `expect` names) and how many
        attempts it took. Errors are raised as typed protocol errors."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            **(headers or {}),
        }
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        # Only a request that waits at the producer names its own timeout.
        timeout: dict[str, float] = {} if timeout_s is None else {"timeout_s": timeout_s}
        failures = 0
        while True:
            try:
                response = self.transport.send(
                    method, path, query=query, body=data, headers=headers, **timeout
                )
            except TransportError:
                failures += 1
                if failures >= self.retry.attempts:
                    raise
                self._sleep(self.retry.delay_s(failures, rng=self._rng))
                continue
            if 200 <= response.status < 300 or response.status in expect:
                return response, failures + 1
            error = self._error(response)
            failures += 1
            if not error.retryable or failures >= self.retry.attempts:
                raise error
            self._sleep(
                self.retry.delay_s(failures, retry_after_s=error.retry_after_s, rng=self._rng)
            )

    def _success(self, method: str, path: str, response: Response, expect: Collection[int]) -> Any:
        document = response.json()
        if response.status not in expect:
            raise ResponseError(
                f"{method} {path}: unexpected HTTP {response.status}",
                status=response.status,
                body=document,
            )
        if not isinstance(document, Mapping):
            raise ResponseError(
                f"{method} {path}: the answer is not a JSON object",
                status=response.status,
                body=response.body[:200],
            )
        return document

    def _error(self, response: Response) -> ApiError:
        retry_after = parse_retry_after(response.headers.get("retry-after"), now_s=self._clock())
        return api_error(response.status, response.json(), retry_after_s=retry_after)

    @staticmethod
    def _decode(decoder: Callable[[Any], T], document: Any) -> T:
        try:
            return decoder(document)
        except ValueError as error:
            raise ResponseError(f"not a protocol document: {error}", body=document) from None
