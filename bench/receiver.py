"""A callback receiver on this machine for the benchmarks: each POST's body goes to `answer`,
whose return is the status sent back (with no body)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def serve_callbacks(answer: Callable[[bytes], int]) -> Iterator[str]:
    """Serve until the block ends; yields the callback URL to give the Tasks."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            status = answer(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="bench-receiver", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/callbacks"
    finally:
        server.shutdown()
        server.server_close()
