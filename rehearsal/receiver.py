"""A callback receiver on 127.0.0.1 that records every POST the callbacks function makes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: str


@dataclass
class Receiver:
    url: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)

    def received(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)


@contextmanager
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode("utf-8", errors="replace")
            headers = {name.lower(): value for name, value in self.headers.items()}
            state.record(Delivery(self.path, headers, body))
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/rehearsal/callbacks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
