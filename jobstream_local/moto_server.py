"""moto in a process of its own, behind a lean HTTP front.

The local stack runs moto here, not in its own interpreter: the functions (and botocore's side of
every call) and moto then each have a core, instead of sharing one interpreter lock. Every patch of
`patch_moto()` is applied in this process, where the state lives.

The front serves the services the functions call on every job (DynamoDB, DynamoDB Streams, SQS)
straight into moto's own request handlers, exactly as moto's in-process mock does (the same
normalised request, the same handler, the same answer) without moto's Flask application, its
host-by-host dispatcher and werkzeug's WSGI server around each call. Anything else (Secrets
Manager, moto's own API, a request it cannot place) goes to moto's full server application,
unchanged.

`python -m jobstream_local.moto_server HOST PORT` prints `moto ready at http://HOST:PORT` once it
listens, and stops when its standard input closes (the stack that started it stopped or died).
"""

from __future__ import annotations

import io
import re
import sys
import threading
from collections.abc import Callable, Iterable
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import unquote

from jobstream_local.http_answer import send_body
from jobstream_local.moto_patches import patch_moto

# Served by the lean path: the services of the job path (the rest goes to moto's application).
FAST_SERVICES: Final = frozenset({"dynamodb", "dynamodbstreams", "sqs"})
LISTEN_BACKLOG: Final = 1024
READY: Final = "moto ready at"
# Headers of moto's answers that this front writes itself (or that HTTP/1.1 framing forbids).
_FRAMING: Final = frozenset({"content-length", "status", "transfer-encoding", "connection"})

MotoCallback = Callable[[Any, str, dict[str, str]], tuple[int, dict[str, Any], Any]]


@cache
def _application() -> Any:
    """moto's own server application: every service, every quirk of its dispatching."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    return DomainDispatcherApplication(create_backend_app)


@cache
def _backend(host: str) -> Any | None:
    """The moto backend serving `host` (as moto's dispatcher names it), or None."""
    from moto import backends
    from moto.core.base_backend import BackendDict
    from moto.core.models import DEFAULT_ACCOUNT_ID

    name = _application().get_backend_for_host(host)
    if name not in FAST_SERVICES:
        return None
    backend_dict: Any = backends.get_backend(name)
    if not isinstance(backend_dict, BackendDict):
        return None
    regions = backend_dict[DEFAULT_ACCOUNT_ID]
    return regions["us-east-1"] if "us-east-1" in regions else regions["aws"]


@cache
def _route(host: str, path: str) -> MotoCallback | None:
    """moto's handler for `path` on the backend serving `host`: the route its Flask application
    would take (a full match of one of the backend's url paths)."""
    backend = _backend(host)
    if backend is None:
        return None
    for pattern, callback in backend.url_paths.items():
        if re.fullmatch(pattern.removesuffix("$"), path):
            found: MotoCallback = callback
            return found
    return None


def _environ(handler: BaseHTTPRequestHandler, body: bytes) -> dict[str, Any]:
    """The WSGI environ of a request (what werkzeug's server would have built)."""
    path, _, query = handler.path.partition("?")
    host, port = _address(handler)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": handler.command,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(path, "latin-1"),
        "QUERY_STRING": query,
        "RAW_URI": handler.path,
        "REQUEST_URI": handler.path,
        "SERVER_NAME": str(host),
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": handler.request_version,
        "REMOTE_ADDR": handler.client_address[0],
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in handler.headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if key == "CONTENT_TYPE":
                environ[key] = value
            continue
        if "_" in name:  # as werkzeug: X_Foo must not pass for X-Foo
            continue
        key = f"HTTP_{key}"
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def _address(handler: BaseHTTPRequestHandler) -> tuple[str, int]:
    address: Any = handler.server.server_address
    return str(address[0]), int(address[1])


def _fast_callback(environ: dict[str, Any]) -> MotoCallback | None:
    """moto's handler for the request when its service is served by the lean path."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = auth.split(",")[0].split()
    # The credential scope: key / date / region / service / aws4_request.
    if len(scope) != 2 or scope[1].count("/") != 4:
        return None
    service = scope[1].split("/")[3].lower()
    if service not in ("dynamodb", "sqs"):
        return None
    host = _application().infer_service_region_host(environ, environ["PATH_INFO"])
    if host is None:
        return None
    return _route(host, environ["PATH_INFO"])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One send per answer (headers and body together, flushed after each request) and no Nagle:
    # a body written after its headers waited for the client's delayed ACK, 40 ms a call.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # the interim answer cannot wait in the buffer
        return answered

    def _serve(self) -> None:
        body = self._body()
        environ = _environ(self, body)
        callback = _fast_callback(environ)
        if callback is None:
            self._wsgi(environ)
            return
        from moto.core.request import Request
        from moto.moto_api import recorder
        from werkzeug.exceptions import HTTPException

        request = Request(environ)
        recorder._record_request(request)
        try:
            status, headers, content = callback(request, request.raw_url, dict(request.headers))
        except HTTPException as error:
            status, content = error.code or HTTPStatus.INTERNAL_SERVER_ERROR, error.get_body()
            headers = dict(error.get_headers())
        self._answer(int(status), headers.items(), content)

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _wsgi(self, environ: dict[str, Any]) -> None:
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], _info: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda _data: None

        chunks = _application()(environ, start_response)
        try:
            content = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        status, headers = started
        self._answer(int(status.split()[0]), headers, content)

    def _answer(self, status: int, headers: Iterable[tuple[str, Any]], content: Any) -> None:
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content or b"")
        self.send_response_only(status, _reason(status))
        send_body(
            self, status, [header for header in headers if header[0].lower() not in _FRAMING], data
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002, ARG002 - stdlib signature
        return  # moto's server is quiet too (the stack logs its own routes)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class MotoHttpServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, host: str, port: int) -> None:
        super().__init__((host, port), _Handler)


def _stop_when_orphaned(server: MotoHttpServer) -> None:
    """Stop once standard input closes: the stack closed it, or died."""
    sys.stdin.buffer.read()
    threading.Thread(target=server.shutdown, daemon=True).start()


def main(argv: list[str]) -> int:
    host, port = argv[0], int(argv[1])
    patch_moto()
    _application()  # moto's imports before the first request, not during it
    try:
        server = MotoHttpServer(host, port)
    except OSError as error:
        print(f"moto cannot listen on {host}:{port} ({error.strerror or error})", file=sys.stderr)
        return 2
    bound_host, bound_port = server.server_address[:2]
    print(f"{READY} http://{bound_host!s}:{bound_port}", flush=True)
    threading.Thread(target=_stop_when_orphaned, args=(server,), daemon=True).start()
    with server:
        server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
