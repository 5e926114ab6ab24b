"""One callback request: a POST to an address the SSRF guard approved, with no redirects.

The connection goes to the checked IP address itself (TLS still verifies the host name), so a
DNS answer that changes between the check and the connect cannot redirect the request.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Final

from jobstream.delivery.ssrf import CallbackTarget

BODY_EXCERPT_BYTES: Final = 512


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    body_excerpt: str
    retry_after: str | None


@cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=_tls_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = _tls_context().wrap_socket(sock, server_hostname=self.host)


def pinned_connection(
    target: CallbackTarget, address: str, timeout_s: float
) -> http.client.HTTPConnection:
    """A connection to `address` (one of the target's checked addresses) for the target's host."""
    connection_class = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    return connection_class(target.host, address, target.port, timeout_s)


def post_callback(
    target: CallbackTarget, body: bytes, headers: Mapping[str, str], timeout_s: float
) -> HttpResult:
    """POST `body`; the first address that accepts a connection is used. Raises on I/O errors."""
    last_error: OSError | None = None
    for address in target.addresses:
        connection = pinned_connection(target, address, timeout_s)
        try:
            connection.request("POST", target.path_and_query, body=body, headers=dict(headers))
            response = connection.getresponse()
            excerpt = response.read(BODY_EXCERPT_BYTES).decode("utf-8", "replace")
            return HttpResult(response.status, excerpt, response.getheader("Retry-After"))
        except (ConnectionRefusedError, socket.gaierror) as error:
            # Try the next address of the host; any other failure is the attempt's outcome.
            last_error = error
        finally:
            connection.close()
    raise last_error or ConnectionError(f"no address to connect to for {target.host}")
