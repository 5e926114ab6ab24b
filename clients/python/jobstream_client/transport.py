"""One HTTP exchange with the producer over the standard library, no retries and no judgement:
any status comes back as a `Response`; only a failure to get an answer raises.

Redirects are not followed: a protocol route never redirects, and following one would carry the
bearer token to wherever the `Location` points.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import IO, Any, Final
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import (
    HTTPRedirectHandler,
    HTTPSHandler,
    OpenerDirector,
    Request,
    build_opener,
)

from jobstream_client.errors import TransportError

DEFAULT_TIMEOUT_S: Final = 30.0
USER_AGENT: Final = "jobstream-client/0.1 (+Workflow Protocol v1)"

Query = Mapping[str, str | int | bool | None]


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased
    body: bytes = b""

    def json(self) -> Any:
        """The decoded body; None when it is empty or not JSON."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class _NoRedirects(HTTPRedirectHandler):
    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None  # the 3xx itself is the answer


def segment(value: str) -> str:
    """One path segment, whatever it contains (`/`, `:`, `%` are escaped too)."""
    return quote(value, safe="")


def query_string(query: Query | None) -> str:
    present = {
        name: ("1" if value is True else "0" if value is False else str(value))
        for name, value in (query or {}).items()
        if value is not None
    }
    return "?" + urlencode(present, quote_via=quote, safe="") if present else ""


class Transport:
    """Sends requests to `base_url` (which may carry a path prefix, e.g. an API stage)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ssl_context: ssl.SSLContext | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise ValueError("the base URL must not carry credentials (use the token)")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.user_agent = user_agent
        handlers: list[Any] = [_NoRedirects()]
        if ssl_context is not None:
            handlers.append(HTTPSHandler(context=ssl_context))
        self._opener: OpenerDirector = build_opener(*handlers)

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Response:
        """One request; `path` starts with `/` and is already encoded. `timeout_s` replaces
        the transport's own for this request (a long-poll waits at the producer)."""
        request = Request(  # noqa: S310 - the scheme was checked to be http(s) above
            self.base_url + path + query_string(query), data=body, method=method
        )
        request.add_header("User-Agent", self.user_agent)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            timeout = self.timeout_s if timeout_s is None else timeout_s
            with self._opener.open(request, timeout=timeout) as answer:
                return Response(answer.status, _headers(answer.headers), answer.read())
        except HTTPError as error:
            return Response(error.code, _headers(error.headers), _read(error))
        except URLError as error:
            raise TransportError(
                f"cannot reach {self.base_url}: {describe(error.reason)}", cause=error
            ) from None
        except (OSError, ValueError) as error:
            # Timeouts and resets mid-answer are not wrapped in URLError; a malformed status
            # line is a ValueError (http.client.BadStatusLine is one).
            raise TransportError(
                f"{method} {self.base_url}{path}: {describe(error)}", cause=error
            ) from None


def _headers(message: Message | None) -> dict[str, str]:
    return {name.lower(): value for name, value in (message or {}).items()}


def _read(error: HTTPError) -> bytes:
    stream: IO[bytes] | None = error.fp
    try:
        return stream.read() if stream is not None else b""
    except OSError:
        return b""


def describe(reason: object) -> str:
    """A short human reason for a network failure."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host ({reason.strerror})"
    if isinstance(reason, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason})"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
