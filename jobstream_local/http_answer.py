"""Writing an answer's headers and body, for the local HTTP fronts (the API, moto's front)."""

from __future__ import annotations

from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_body(
    handler: BaseHTTPRequestHandler, headers: Iterable[tuple[str, Any]], data: bytes
) -> None:
    """After the status line: the headers, the body's length and the body (none to a HEAD)."""
    for name, value in headers:
        handler.send_header(name, str(value))
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
