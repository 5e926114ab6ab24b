"""A real HTTP callback receiver on 127.0.0.1 that answers from a script and records requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class Receiver:
    url: str
    # Statuses to answer with, in order; the last one repeats. Optional extra headers per answer.
    script: list[tuple[int, dict[str, str]]] = field(default_factory=lambda: [(204, {})])
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: Received) -> tuple[int, dict[str, str]]:
        with self.lock:
            self.requests.append(request)
            index = min(len(self.requests) - 1, len(self.script) - 1)
            return self.script[index]


@contextmanager
def receiver(*answers: int | tuple[int, dict[str, str]]) -> Iterator[Receiver]:
    script = [answer if isinstance(answer, tuple) else (answer, {}) for answer in answers]
    state = Receiver(url="", script=script or [(204, {})])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode("utf-8")
            status, headers = state.answer(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if status == 302:
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/jobstream"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
