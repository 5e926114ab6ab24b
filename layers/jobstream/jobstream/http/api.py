"""The HTTP handler shell: parse, authenticate, dispatch by route, answer; errors as envelopes."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobstream import deadline, observability
from jobstream import runtime as runtime_module
from jobstream.config.registry import RegistryUnavailableError
from jobstream.config.settings import ConfigurationError
from jobstream.http import caching
from jobstream.http.auth import authenticate
from jobstream.http.request import Request, parse_event
from jobstream.http.statuses import http_status
from jobstream.protocol.documents import without_clock
from jobstream.protocol.errors import (
    ErrorCode,
    ErrorKind,
    ProtocolError,
    invalid_params,
    resource_busy,
)
from jobstream.retries import transient
from jobstream.runtime import Runtime

logger = logging.getLogger(__name__)

Response = dict[str, Any]
RouteResult = tuple[int, Any]
Route = Callable[[Runtime, str, Request], RouteResult]
PublicRoute = Callable[[Request], RouteResult]
# A public route that answers a whole response itself (the console's files: not JSON).
FileRoute = Callable[[Request], Response]

JSON_HEADERS = {"content-type": "application/json; charset=utf-8", "cache-control": "no-store"}


@dataclass(frozen=True, slots=True)
class Cacheable:
    """A route whose 200 answer one client may reuse for `max_age_s`, then revalidate by its
    ETag: a 304 while the document is the same."""

    route: Route
    max_age_s: int


def json_response(status: int, body: Any) -> Response:
    return {
        "statusCode": status,
        "headers": dict(JSON_HEADERS),
        "body": _json_text(body),
        "isBase64Encoded": False,
    }


def cacheable_response(request: Request, status: int, body: Any, max_age_s: int) -> Response:
    """A JSON answer with a validator and a freshness lifetime; a 304 (no body) when the
    request's If-None-Match names the current document. Only a 200 is cacheable."""
    response = json_response(status, body)
    if status != 200:
        return response
    # Weak: the tag covers the document without its server_time, which differs on every read.
    etag = caching.weak_etag(_json_text(without_clock(body)).encode("utf-8"))
    headers = {
        "etag": etag,
        "cache-control": caching.private_max_age(max_age_s),
        # A browser's cache keys by URL alone: another token must reach the server (and its 401).
        "vary": "Authorization",
    }
    if caching.if_none_match_matches(request.headers.get("if-none-match"), etag):
        return {"statusCode": 304, "headers": headers, "body": "", "isBase64Encoded": False}
    response["headers"].update(headers)
    return response


def _json_text(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def error_response(error: ProtocolError) -> Response:
    response = json_response(http_status(error), error.body())
    if error.retry_after_s is not None:
        response["headers"]["retry-after"] = str(error.retry_after_s)
    return response


def http_handler(
    routes: Mapping[str, Route],
    public: Mapping[str, PublicRoute] | None = None,
    files: Mapping[str, FileRoute] | None = None,
    cacheable: Mapping[str, Cacheable] | None = None,
) -> Callable[[Mapping[str, Any], Any], Response]:
    """A Lambda handler serving `routes` (keyed by API Gateway route key, e.g. 'GET /jobs');
    `public` routes (JSON) and `files` routes (whole responses) answer without authentication
    and need no configuration; `cacheable` routes are authenticated like `routes` and answered
    with an ETag (every other JSON answer is `no-store`)."""

    def handler(event: Mapping[str, Any], _context: Any) -> Response:
        try:
            request = parse_event(event)
            answer = _public_answer(request, public or {}, files or {})
            if answer is not None:
                return answer
            return _authenticated_answer(request, routes, cacheable or {})
        except ProtocolError as error:
            return _rejected(error)
        except ConfigurationError as error:
            return _rejected(_unconfigured(error))
        except Exception as error:
            failure = transient(error)
            if failure is not None:
                # Throttling, a lost race or a dependency's 5xx outlasted the retries: the
                # request was fine and may succeed later, and the consumer is told so.
                logger.warning(
                    "transient failure answered 503 resource_busy",
                    extra={"route": event.get("routeKey"), "aws_code": failure.code},
                )
                return _rejected(resource_busy())
            # Never leak internals: log them, answer the catalogue's internal error.
            logger.exception("unhandled error", extra={"route": event.get("routeKey")})
            return _rejected(ProtocolError(ErrorCode.INTERNAL_ERROR, "internal error"))

    # Log keys reset and metrics flushed per invocation; every HTTP function goes through here.
    # Each AWS call of a request starts only with the time to end before the function's timeout
    # (retries.py): a hung dependency is answered 503, never cut off by Lambda.
    return observability.instrument(deadline.within_invocation(handler))


def _public_answer(
    request: Request, public: Mapping[str, PublicRoute], files: Mapping[str, FileRoute]
) -> Response | None:
    """The answer of a route that needs no token, or None when the route needs one."""
    file_route = files.get(request.route_key)
    if file_route is not None:
        return file_route(request)
    public_route = public.get(request.route_key)
    if public_route is None:
        return None
    status, body = public_route(request)
    return json_response(status, body)


def _authenticated_answer(
    request: Request, routes: Mapping[str, Route], cacheable: Mapping[str, Cacheable]
) -> Response:
    """The answer of a route that needs a token: the token is checked before anything else."""
    rt = runtime_module.runtime()
    tenant = authenticate(request.headers, rt.tenants(), rt.clock())
    observability.bind(tenant=tenant, route=request.route_key)
    cached = cacheable.get(request.route_key)
    if cached is not None:
        status, body = cached.route(rt, tenant, request)
        return cacheable_response(request, status, body, cached.max_age_s)
    route = routes.get(request.route_key)
    if route is None:
        raise unknown_route(request)
    status, body = route(rt, tenant, request)
    return json_response(status, body)


def _rejected(error: ProtocolError) -> Response:
    observability.count("rejected", dimension=error.code.value)
    return error_response(error)


def _unconfigured(error: ConfigurationError) -> ProtocolError:
    if isinstance(error, RegistryUnavailableError):
        # The consumer registry cannot be read now and none recent enough is known: transient,
        # and never answered from an older registry.
        logger.warning("consumer registry unavailable: %s", error)
        return resource_busy()
    # Misconfigured deployment: every job route says so rather than pretending.
    logger.error("job API disabled: %s", error)
    return _api_disabled()


def _api_disabled() -> ProtocolError:
    return ProtocolError(
        ErrorCode.INTERNAL_ERROR,
        "job API is unavailable",
        kind=ErrorKind.UNAVAILABLE,
        detail={"reason": "job_api_disabled"},
    )


def unknown_route(request: Request) -> ProtocolError:
    return invalid_params(
        "no such route",
        kind=ErrorKind.NOT_FOUND,
        detail={"reason": "unknown_route", "method": request.method},
    )
