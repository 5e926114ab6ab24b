"""Writing an answer's headers and body, for the local HTTP fronts (the API, moto's front)."""

from __future__ import annotations

from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

# Answers that never carry content (RFC 9110 §15.3.5, §15.4.5): no Content-Length either, since
# a 304's would have to be the length of the 200 it stands for.
BODILESS_STATUSES = frozenset({204, 304})


def send_body(
    handler: BaseHTTPRequestHandler,
    status: int,
    headers: Iterable[tuple[str, Any]],
    data: bytes,
) -> None:
    """After the status line: the headers, the body's length and the body (none to a HEAD,
    neither to a 204 or 304)."""
    for name, value in headers:
        handler.send_header(name, str(value))
    if status in BODILESS_STATUSES:
        handler.end_headers()
        return
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
