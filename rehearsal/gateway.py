"""The emulated HTTP API on a port of its own, as a custom domain would serve it.

Shim: ministack serves an HTTP API under a host name (`{api}.execute-api.localhost`, which does
not resolve) or a path prefix (`/_aws/execute-api/{api}`), and sends no `X-Forwarded-Proto`. The
functions build absolute URLs (`events_url`) from the request's host and that header, as they
must on AWS, so either form would hand clients URLs they cannot follow. This proxy forwards
every request to the path-prefixed form, keeping the client's `Host` and adding
`X-Forwarded-Proto: http` and `X-Forwarded-For` as API Gateway does: clients (the journey,
`jobstream smoke`, `jobstream conformance`) get one base URL, and every URL the API answers
with points back at it.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

TIMEOUT_S = 60
# Hop-by-hop headers a proxy must not forward (RFC 9110 7.6.1), plus those it sets itself.
NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "content-length"}
)  # fmt: skip


@contextmanager
def serve_api(endpoint: str, api_id: str) -> Iterator[str]:
    """Serve the API at http://127.0.0.1:<free port>; yields that base URL."""
    upstream = urlsplit(endpoint)
    # The stage named, as the template's HTTP API has only `$default`: left out, ministack takes a
    # path's first segment for a stage and drops its trailing slash (`/console/` -> `/console`).
    prefix = f"/_aws/execute-api/{api_id}/$default"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in NOT_FORWARDED}
            headers["X-Forwarded-Proto"] = "http"
            headers["X-Forwarded-For"] = self.client_address[0]
            connection = http.client.HTTPConnection(
                upstream.hostname or "127.0.0.1", upstream.port, timeout=TIMEOUT_S
            )
            try:
                connection.request(self.command, prefix + self.path, body=body, headers=headers)
                response = connection.getresponse()
                payload = response.read()
            finally:
                connection.close()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in NOT_FORWARDED:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _forward  # noqa: N815

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
