"""Recorded HTTP for downloads: a loopback server that answers each path with a canned response
(status, headers, body) and records every request it receives. No network is involved."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Canned:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # False: no Content-Length, the body ends when the connection closes.
    declare_length: bool = True


@dataclass
class Recorded:
    base_url: str
    answers: dict[str, Canned]
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base_url + path


@contextmanager
def recorded_server(answers: dict[str, Canned]) -> Iterator[Recorded]:
    recorded = Recorded(base_url="", answers=answers)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            recorded.requests.append((self.path, dict(self.headers.items())))
            canned = recorded.answers.get(self.path, Canned(status=404))
            self.send_response(canned.status)
            for name, value in canned.headers.items():
                self.send_header(name, value)
            if canned.declare_length:
                self.send_header("Content-Length", str(len(canned.body)))
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(canned.body)
            if not canned.declare_length:
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host, port = server.server_address[:2]
    recorded.base_url = f"http://{host!s}:{port}"
    # A short poll: shutdown() waits for it, once per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()
