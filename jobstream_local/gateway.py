"""A local HTTP API: turns HTTP requests into API Gateway v2 events for the real handlers."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from jobstream.http.api import json_response
from jobstream.http.request import MAX_BODY_BYTES
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.pages import MAX_RESPONSE_BYTES
from jobstream_local.http_answer import send_body
from jobstream_local.request_body import BODY_TIMEOUT_S, OversizedBody, UnreadableBody, read_body
from jobstream_local.template import FunctionSpec, HttpRoute, Template

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class BoundRoute:
    route: HttpRoute
    pattern: re.Pattern[str] | None
    handler: Handler


def _pattern(path: str) -> re.Pattern[str]:
    # As API Gateway: a path variable matches one segment, a greedy one (`{proxy+}`, at the end)
    # one or more; a trailing slash reaches the route without it (`/console/` -> `/console`).
    parts = re.split(r"(\{[A-Za-z0-9_]+\+?\})", path)
    regex = "".join(_segment_pattern(part) for part in parts)
    return re.compile(f"^{regex}/?$")


def _segment_pattern(part: str) -> str:
    if not part.startswith("{"):
        return re.escape(part)
    name = part[1:-1]
    return f"(?P<{name[:-1]}>.+?)" if name.endswith("+") else f"(?P<{name}>[^/]+)"


def _is_greedy(route: HttpRoute) -> bool:
    return route.path.endswith("+}")


def load_handler(function: FunctionSpec) -> Handler:
    """The function's handler, imported from its code folder as Lambda would."""
    module_name, _, attribute = function.handler.rpartition(".")
    unique = f"jobstream_function_{function.name}"
    module: ModuleType | None = sys.modules.get(unique)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            unique, function.code_dir / f"{module_name}.py"
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {function.handler} from {function.code_dir}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        spec.loader.exec_module(module)
    handler: Handler = getattr(module, attribute)
    return handler


# moto answers far slower than DynamoDB (more so on a busy machine): no local invocation is
# given less, so a local request is not cut short where AWS would answer in time.
MIN_LOCAL_TIMEOUT_S: Final = 30


@cache
def _timeout_s(function_name: str) -> int:
    return max(MIN_LOCAL_TIMEOUT_S, Template.load().function_timeout_s(function_name))


class LambdaContext:
    """The parts of the Lambda context object that handlers and Powertools read; the remaining
    time counts down from the function's timeout in the template, at least 30 s (the handlers
    keep within it)."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        )
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + _timeout_s(function_name)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class LocalHttpApi:
    def __init__(self, routes: list[HttpRoute]) -> None:
        # As API Gateway: a route without a greedy variable wins over one with it.
        self.routes = [
            BoundRoute(
                route,
                None if route.path == "$default" else _pattern(route.path),
                load_handler(route.function),
            )
            for route in sorted(routes, key=_is_greedy)
        ]

    def match(self, method: str, path: str) -> tuple[BoundRoute, dict[str, str]] | None:
        fallback = None
        for bound in self.routes:
            if bound.pattern is None:
                fallback = bound
                continue
            found = bound.pattern.match(path)
            if found and bound.route.method in (method, "ANY"):
                return bound, found.groupdict()
        return (fallback, {}) if fallback else None

    def event(
        self,
        *,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        route: BoundRoute,
        parameters: dict[str, str],
    ) -> dict[str, Any]:
        split = urlsplit(target)
        is_text = _is_text(body)
        return {
            "version": "2.0",
            "routeKey": route.route.route_key,
            "rawPath": split.path,
            "rawQueryString": split.query,
            "headers": headers,
            "pathParameters": {name: unquote(value) for name, value in parameters.items()} or None,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "local",
                "domainName": headers.get("host", "127.0.0.1"),
                "http": {
                    "method": method,
                    "path": split.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": route.route.route_key,
                "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime()),
                "timeEpoch": int(time.time() * 1000),
            },
            "body": (body.decode("utf-8") if is_text else base64.b64encode(body).decode())
            if body
            else None,
            "isBase64Encoded": bool(body) and not is_text,
        }

    def invoke(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> dict[str, Any]:
        matched = self.match(method, urlsplit(target).path)
        if matched is None:
            return {"statusCode": 404, "body": json.dumps({"message": "Not Found"})}
        bound, parameters = matched
        event = self.event(
            method=method,
            target=target,
            headers=headers,
            body=body,
            route=bound,
            parameters=parameters,
        )
        response = bound.handler(event, LambdaContext(bound.route.function.name))
        # Lambda refuses a larger response (python3.11 writes it as ASCII-escaped JSON) and
        # API Gateway answers 500: the local stack does the same, so tests see it.
        if len(json.dumps(response)) > MAX_RESPONSE_BYTES:
            return {"statusCode": 500, "body": json.dumps({"message": "Internal Server Error"})}
        return response


def _is_text(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# Larger bodies are refused before they reach a handler; API Gateway's own payload cap is 10 MB.
MAX_REQUEST_BYTES = 10 * 1024 * 1024


def _bad_request(message: str, reason: str, status: int = 400) -> dict[str, Any]:
    """A request the gateway refuses before any function sees it (API Gateway's own 4xx)."""
    refusal = invalid_params(message, detail={"reason": reason})
    # The status is the gateway's own (what the HTTP parser saw), not one of the layer's kinds.
    return json_response(status if 400 <= status < 500 else 400, refusal.body())


# How many connections may wait to be accepted. The standard library listens with a backlog of 5:
# a burst of a few tens of clients overflowed it and the kernel dropped connections unanswered.
# (The kernel caps it at net.core.somaxconn, 4096 on current Linux.)
LISTEN_BACKLOG: Final = 1024


class LocalHttpServer(ThreadingHTTPServer):
    """One thread per connection, as before, behind a listen backlog that takes a busy consumer."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


def make_server(api: LocalHttpApi, host: str, port: int) -> ThreadingHTTPServer:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The body goes out right after the headers: under Nagle's algorithm it waited for the
        # client's delayed ACK of the headers (40 ms an answer).
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            headers.setdefault("x-forwarded-proto", "http")
            self.connection.settimeout(BODY_TIMEOUT_S)
            try:
                if len(set(self.headers.get_all("content-length") or ())) > 1:
                    raise UnreadableBody("Content-Length is given twice, differently")
                body = read_body(headers, self.rfile, MAX_REQUEST_BYTES)
            except OversizedBody:
                # Not read at all: the handler answers its 413 envelope for any oversized body.
                self.close_connection = True
                body = b" " * (MAX_BODY_BYTES + 1)
            except UnreadableBody as error:
                # What is left on the connection cannot be framed: answer and close it.
                self.close_connection = True
                self._answer(_bad_request(str(error), "unreadable_body"))
                return
            finally:
                self.connection.settimeout(None)
            self._answer(api.invoke(self.command, self.path, headers, body))

        def send_error(
            self,
            code: int,
            message: str | None = None,
            explain: str | None = None,  # noqa: ARG002 - the stdlib's signature
        ) -> None:
            # The stdlib's own refusals (a malformed request line, headers too long, ...) are
            # envelopes too, never its HTML page.
            self.close_connection = True
            # An unparsable request line leaves HTTP/0.9 behind, which has no status line.
            if getattr(self, "request_version", "") not in {"HTTP/1.0", "HTTP/1.1"}:
                self.request_version = self.protocol_version
            self._answer(_bad_request(message or HTTPStatus(code).phrase, "bad_http_request", code))

        def _answer(self, response: dict[str, Any]) -> None:
            payload = response.get("body") or ""
            data = (
                base64.b64decode(payload)
                if response.get("isBase64Encoded")
                else str(payload).encode("utf-8")
            )
            status = int(response.get("statusCode", 200))
            self.send_response(status)
            send_body(self, status, (response.get("headers") or {}).items(), data)

        def __getattr__(self, name: str) -> Any:
            # Every method reaches the API, as behind API Gateway: unknown routes and methods
            # get the protocol's 404 envelope, not the stdlib's HTML 501.
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002, ARG002 - stdlib signature
            # A request refused while its first line is read has no command or path yet.
            command, path = getattr(self, "command", None) or "", getattr(self, "path", "")
            sys.stderr.write(f"{command} {path} -> {args[1] if len(args) > 1 else ''}\n")

    return LocalHttpServer((host, port), RequestHandler)
