"""The `pixiv` source: tag searches against Pixiv's app API through `pixivpy3`.

pixivpy3 turns every transport failure into a bare `PixivError` and never looks at HTTP
statuses on API calls, so this module watches the statuses itself (a `requests` response hook
on the client's session, which also keeps a 429's or 503's Retry-After) and classifies failures
into SourceError reasons. The refresh token is a credential: it never goes into a message, a log
line or a chained exception.

Every HTTP request (the token refresh, each search page, each detail) first waits for
`before_request` (the job's resource gate). A target's `api_host` sends both the token refresh
and the API calls to a proxy or mirror (pixivpy3's `set_api_proxy`, which also points `auth()`
there, with Pixiv's own names in the Host header as pixivpy3 sends them).
"""

from __future__ import annotations

import heapq
import inspect
import mimetypes
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from urllib.parse import urlparse

from pixivpy3 import AppPixivAPI, PixivError

from jobstream.config import stored
from jobstream.config.environment import variable
from jobstream.errors import JobstreamError
from jobstream.jobtypes.sources.settings import WorkType
from jobstream.protocol.errors import Reason

from .base import SearchRequest, SourceAsset, SourceError, Work, ungated
from .retry_after import retry_after_ms

# Where the refresh token (or the SSM/Secrets Manager name holding it) is configured.
ENV_PLAIN = "JOBSTREAM_PIXIV_REFRESH_TOKEN"
ENV_STORED_NAME = "JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER"
PARAMETER_MAX_AGE_S = 300

# pixivpy3 sets no timeout of its own; a Lambda must not hang on a stalled socket.
REQUEST_TIMEOUT_S = (5.0, 30.0)
# Pixiv's own time zone; its create_date values carry +09:00, this only covers naive ones.
_PIXIV_TZ = timezone(timedelta(hours=9))
_ERROR_TEXT_LIMIT = 200

_SEARCH_TARGET = "exact_match_for_tags"
_SORT = "date_desc"


def refresh_token_from_environment(now_s: Callable[[], float] = time.time) -> str:
    """The refresh token: from SSM/Secrets Manager when a parameter name is configured (so the
    secret stays out of the function's environment; read again after PARAMETER_MAX_AGE_S), else
    straight from the environment."""
    parameter = variable(ENV_STORED_NAME).strip()
    if parameter:
        return _stored_token(parameter, now_s())
    token = variable(ENV_PLAIN).strip()
    if not token:
        raise SourceError(Reason.AUTH_FAILED, "no Pixiv refresh token is configured")
    return token


# The stored token by its parameter's name, with when it was read (wall-clock seconds: a frozen
# Lambda environment's monotonic clock may not count the time it spent frozen).
_stored_tokens: dict[str, tuple[float, str]] = {}


def _stored_token(parameter: str, now_s: float) -> str:
    kept = _stored_tokens.get(parameter)
    if kept is not None and 0 <= now_s - kept[0] < PARAMETER_MAX_AGE_S:
        return kept[1]
    try:
        value = (
            stored.parameter_text(parameter)
            if parameter.startswith("/")
            else stored.secret_text(parameter)
        )
    except stored.StoreUnreadableError as error:
        # Throttled, down or out of time, another run may read it (the job is retried); a
        # refusal or a missing parameter stays what it is.
        raise SourceError(
            Reason.AUTH_FAILED,
            f"could not read the Pixiv refresh token from {parameter}: {error}",
            passing=error.passing,
        ) from None
    except stored.StoreClientError:
        raise SourceError(
            Reason.AUTH_FAILED, f"could not read the Pixiv refresh token from {parameter}"
        ) from None
    token = (value or "").strip()
    if not token:
        raise SourceError(Reason.AUTH_FAILED, f"the Pixiv refresh token in {parameter} is empty")
    _stored_tokens[parameter] = (now_s, token)
    return token


def _default_api() -> Any:
    return AppPixivAPI(timeout=REQUEST_TIMEOUT_S)


class _AccessTokenRejectedError(JobstreamError):
    """The API refused the bearer token (it expires after an hour); re-authenticating may fix it."""


class PixivSource:
    """Newest-first works carrying the requested tags, from Pixiv's app API."""

    def __init__(
        self,
        refresh_token: str,
        *,
        api_factory: Callable[[], Any] | None = None,
        page_delay_s: float = 0.0,
        api_host: str | None = None,
        before_request: Callable[[], None] | None = None,
    ) -> None:
        self._refresh_token = refresh_token
        self._api_factory = api_factory or _default_api
        self._page_delay_s = page_delay_s
        # An origin SourceSettings checked (api_host.py): a proxy or mirror; None: Pixiv's hosts.
        self._api_host = api_host
        self._before_request = before_request or ungated
        self._api: Any = None
        self._last_status: int | None = None
        self._last_retry_after_ms: int | None = None

    def __repr__(self) -> str:
        # The default repr would be harmless today; this keeps it so if fields are added.
        return "PixivSource(refresh_token=<redacted>)"

    def search(self, request: SearchRequest) -> Iterator[Work]:
        if request.scan_limit <= 0 or not request.tags:
            return
        words = list(dict.fromkeys(request.tags)) if request.match_any else [" ".join(request.tags)]
        streams = [self._stream(word, request.work_type) for word in words]
        # One stream per tag for OR; each is newest-first, so a lazy merge keeps the order and
        # fetches a tag's next page only when its works are about to be used.
        merged = heapq.merge(*streams, key=lambda pair: pair[0], reverse=True)
        # Offset pagination repeats works when new ones arrive mid-scan, and OR overlaps tags.
        seen: set[str] = set()
        for _, work in merged:
            if work.work_id in seen:
                continue
            seen.add(work.work_id)
            yield work
            if len(seen) >= request.scan_limit:
                return

    # -- paging ------------------------------------------------------------------------------

    def _stream(self, word: str, work_type: WorkType) -> Iterator[tuple[datetime, Work]]:
        items_key = "illusts" if work_type == "illustration" else "novels"
        params: dict[str, Any] = {"word": word, "search_target": _SEARCH_TARGET, "sort": _SORT}
        first = True
        while True:
            if not first and self._page_delay_s > 0:
                time.sleep(self._page_delay_s)
            first = False
            body = self._page(work_type, params)
            items = body.get(items_key)
            if not isinstance(items, list):
                raise SourceError(
                    Reason.METADATA_FAILED, f"Pixiv's search response has no {items_key}"
                )
            for item in items:
                yield _to_work(item, work_type)
            next_url = body.get("next_url")
            if not items or not next_url:
                return
            if not isinstance(next_url, str):
                raise SourceError(Reason.METADATA_FAILED, "Pixiv's next_url is not a string")
            next_params = AppPixivAPI.parse_qs(next_url)
            if not next_params:
                raise SourceError(Reason.METADATA_FAILED, "Pixiv's next_url has no query")
            params = next_params

    def work(self, work_id: str, work_type: WorkType) -> Work:
        """One work by id, with its assets (for downloading them)."""
        key = "illust" if work_type == "illustration" else "novel"

        def detail(api: Any) -> Any:
            method = api.illust_detail if work_type == "illustration" else api.novel_detail
            return method(work_id)

        item = self._authenticated(detail).get(key)
        if not isinstance(item, dict):
            raise SourceError(Reason.METADATA_FAILED, f"Pixiv's {key} response has no {key}")
        return _to_work(item, work_type)[1]

    def _page(self, work_type: WorkType, params: dict[str, Any]) -> dict[str, Any]:
        def page(api: Any) -> Any:
            method = api.search_illust if work_type == "illustration" else api.search_novel
            return method(**_accepted(method, params))

        return self._authenticated(page)

    def _authenticated(self, request: Callable[[Any], Any]) -> dict[str, Any]:
        """`request(api)`'s checked JSON body; an access token that outlived its hour is
        refreshed once and the request repeated."""
        fresh = self._api is None
        try:
            return self._once(request)
        except _AccessTokenRejectedError:
            if fresh:
                raise SourceError(
                    Reason.AUTH_FAILED, "Pixiv rejected a just-issued access token"
                ) from None
        self._api = None
        try:
            return self._once(request)
        except _AccessTokenRejectedError:
            raise SourceError(
                Reason.AUTH_FAILED, "Pixiv rejected the refreshed access token"
            ) from None

    def _once(self, request: Callable[[Any], Any]) -> dict[str, Any]:
        api = self._client()
        body = self._call(lambda: request(api), during_auth=False)
        return self._checked(body)

    def _checked(self, body: Any) -> dict[str, Any]:
        status = self._last_status
        if not isinstance(body, dict):
            raise SourceError(
                Reason.METADATA_FAILED, "Pixiv's search response is not a JSON object"
            )
        error = body.get("error")
        if error:
            text = _error_text(error)
            if status == 429 or "rate limit" in text.lower():
                raise self._failure(Reason.RATE_LIMITED, f"Pixiv rate limit (HTTP {status})")
            if "invalid_grant" in text or "OAuth" in text:
                raise _AccessTokenRejectedError
            raise self._failure(
                Reason.REMOTE_HTTP_ERROR,
                f"Pixiv search failed (HTTP {status}): {text[:_ERROR_TEXT_LIMIT]}",
            )
        if status is not None and status >= 400:
            reason = Reason.RATE_LIMITED if status == 429 else Reason.REMOTE_HTTP_ERROR
            raise self._failure(reason, f"Pixiv search failed (HTTP {status})")
        return body

    def _failure(self, reason: Reason, message: str) -> SourceError:
        """A failure of the last response, with the wait it asked for (a 429's or 503's
        Retry-After)."""
        return SourceError(
            reason, message, retry_after_ms=self._last_retry_after_ms, status=self._last_status
        )

    # -- client and failure classification ----------------------------------------------------

    def _client(self) -> Any:
        if self._api is not None:
            return self._api
        if not self._refresh_token:
            raise SourceError(Reason.AUTH_FAILED, "no Pixiv refresh token is configured")
        api = self._api_factory()
        if self._api_host is not None:
            api.set_api_proxy(self._api_host)
        hooks = getattr(getattr(api, "requests", None), "hooks", None)
        if isinstance(hooks, dict):
            hooks.setdefault("response", []).append(self._record_status)
        self._call(lambda: api.auth(refresh_token=self._refresh_token), during_auth=True)
        access_token = getattr(api, "access_token", None)
        if not isinstance(access_token, str) or not access_token:
            raise SourceError(Reason.METADATA_FAILED, "Pixiv's token response has no access token")
        self._api = api
        return api

    def _record_status(self, response: Any, *_args: Any, **_kwargs: Any) -> None:
        status = getattr(response, "status_code", None)
        self._last_status = status if isinstance(status, int) else None
        headers = getattr(response, "headers", None)
        header = headers.get("Retry-After") if headers is not None else None
        self._last_retry_after_ms = retry_after_ms(
            self._last_status, header if isinstance(header, str) else None
        )

    def _call(self, call: Callable[[], Any], *, during_auth: bool) -> Any:
        # Each call is one HTTP request: it waits for the job's resource first (or stops).
        self._before_request()
        self._last_status = None
        self._last_retry_after_ms = None
        try:
            return call()
        except PixivError as exc:
            error = self._classify(exc, during_auth=during_auth)
        except (AttributeError, KeyError, TypeError, ValueError):
            # pixivpy3 reads the token response by attribute; a wrong shape surfaces as these.
            error = SourceError(Reason.METADATA_FAILED, "Pixiv returned a malformed response")
        # Never chain: pixivpy3's auth errors embed the response body and request details.
        raise error from None

    def _classify(self, exc: PixivError, *, during_auth: bool) -> SourceError:
        status = self._last_status
        what = "Pixiv authentication" if during_auth else "Pixiv search"
        cause = exc.__cause__ or exc.__context__
        if status is None and isinstance(cause, OSError):
            # requests' ConnectionError/Timeout are OSErrors; pixivpy3 wraps them as context.
            return SourceError(Reason.NETWORK_ERROR, f"{what}: {type(cause).__name__}")
        if status == 429:
            return self._failure(Reason.RATE_LIMITED, f"{what}: HTTP 429")
        if during_auth and status in {400, 401, 403}:
            return SourceError(
                Reason.AUTH_FAILED, f"Pixiv rejected the refresh token (HTTP {status}{_grant(exc)})"
            )
        if status is not None and status >= 400:
            return self._failure(Reason.REMOTE_HTTP_ERROR, f"{what} failed: HTTP {status}")
        if status is None:
            return SourceError(Reason.NETWORK_ERROR, f"{what}: no response")
        return SourceError(Reason.METADATA_FAILED, f"{what}: the response is not valid JSON")


def _grant(exc: PixivError) -> str:
    """The OAuth error code (e.g. invalid_grant), which is safe to show, when the body has one."""
    body = exc.body or ""
    for code in ("invalid_grant", "invalid_client", "invalid_request"):
        if code in body:
            return f" {code}"
    return ""


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        parts = [error.get("message"), error.get("user_message"), error.get("reason")]
        return " ".join(str(part) for part in parts if part)
    return str(error)


def _accepted(method: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """next_url may carry parameters this pixivpy3 version does not know; passing them would be a
    TypeError, and the ones it knows are the ones that select the page."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return params
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return params
    return {key: value for key, value in params.items() if key in signature.parameters}


# -- mapping ----------------------------------------------------------------------------------


def _to_work(item: Any, work_type: WorkType) -> tuple[datetime, Work]:
    kind = "illustration" if work_type == "illustration" else "novel"
    try:
        return _map(item, work_type)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SourceError(
            Reason.METADATA_FAILED, f"Pixiv returned a malformed {kind} item"
        ) from None


def _map(item: Any, work_type: WorkType) -> tuple[datetime, Work]:
    raw_id = item["id"]
    if isinstance(raw_id, bool) or not isinstance(raw_id, int | str) or not str(raw_id).isdigit():
        raise ValueError("id")
    work_id = str(raw_id)
    title = _text(item["title"])
    tags = tuple(_text(tag["name"]) for tag in item["tags"])
    author = _text(item["user"]["name"])
    bookmarks = item.get("total_bookmarks") or 0
    if isinstance(bookmarks, bool) or not isinstance(bookmarks, int):
        raise TypeError("total_bookmarks")
    created = datetime.fromisoformat(_text(item["create_date"]))
    if created.tzinfo is None:
        created = created.replace(tzinfo=_PIXIV_TZ)
    image_urls = item.get("image_urls") or {}
    if not isinstance(image_urls, dict):
        raise TypeError("image_urls")
    extra: dict[str, Any] = {"created_at": created.isoformat()}
    if isinstance(item.get("x_restrict"), int):
        extra["x_restrict"] = item["x_restrict"]
    if work_type == "illustration":
        url = f"https://www.pixiv.net/artworks/{work_id}"
        assets = _illust_assets(work_id, image_urls, item.get("width"), item.get("height"))
    else:
        url = f"https://www.pixiv.net/novel/show.php?id={work_id}"
        assets = _novel_assets(work_id, image_urls)
    work = Work(
        work_id=work_id,
        work_type=work_type,
        title=title,
        tags=tags,
        url=url,
        author=author,
        bookmarks=bookmarks,
        assets=assets,
        extra=extra,
    )
    return created, work


def _illust_assets(
    work_id: str, image_urls: dict[str, Any], width: Any, height: Any
) -> tuple[SourceAsset, ...]:
    assets: list[SourceAsset] = []
    large, medium = image_urls.get("large"), image_urls.get("medium")
    if large is not None:
        # Pixiv reports the original's dimensions; `large` is a rendition of at most 600x1200.
        assets.append(
            _image(work_id, "primary", _text(large), _dimension(width), _dimension(height))
        )
    if medium is not None:
        assets.append(_image(work_id, "preview", _text(medium)))
    return tuple(assets)


def _image(
    work_id: str,
    role: Literal["primary", "preview"],
    url: str,
    width: int | None = None,
    height: int | None = None,
) -> SourceAsset:
    return SourceAsset(
        asset_id=f"{work_id}-{role}",
        type="image",
        role=role,
        url=url,
        width=width,
        height=height,
        mime=_mime(url),
    )


def _novel_assets(work_id: str, image_urls: dict[str, Any]) -> tuple[SourceAsset, ...]:
    cover = image_urls.get("large") or image_urls.get("medium")
    if cover is None:
        return ()
    return (
        SourceAsset(
            asset_id=f"{work_id}-cover",
            type="cover",
            role="cover",
            url=_text(cover),
            mime=_mime(_text(cover)),
        ),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _dimension(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _mime(url: str) -> str | None:
    if not url.startswith("https://"):
        raise ValueError("asset url")
    mime, _ = mimetypes.guess_type(urlparse(url).path)
    return mime
