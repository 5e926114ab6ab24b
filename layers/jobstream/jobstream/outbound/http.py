"""Pinned HTTP: one request to an address the guard approved (guard.py), with no redirects,
over by one wall-clock deadline.

- The connection goes to the checked IP address itself (TLS still verifies the host name), so a
  DNS answer that changes between the check and the connect cannot redirect the request.
- A request is over at its deadline however slowly its peer answers. A socket timeout bounds
  one read, not a request (a receiver sending one header byte a second holds a 3 s timeout for
  ever), so a watchdog thread aborts the connection at the deadline (`shutdown`: a blocked read
  or connect returns at once) and the request raises RequestDeadlineError. The same watchdog
  polls the caller's `interrupt` (a job's checkpoint: cancel, a lost lease, the job's deadline)
  and aborts when it raises, raising that instead. The watchdog ends with its request.
- A request aborted at any point fails, even if its read seemed to end: a body that ends with
  its connection would otherwise be taken whole when it was cut.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from functools import cache
from typing import Final, TypeVar

from jobstream.deadline import Deadline
from jobstream.errors import JobstreamError
from jobstream.outbound.guard import PinnedTarget

# How soon an interrupt (a cancel) stops a request.
INTERRUPT_POLL_S: Final = 0.1

T = TypeVar("T")


class RequestDeadlineError(JobstreamError, TimeoutError):
    """The request was not over by its deadline: its connection was aborted."""


@cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Watchdog:
    """Aborts a request's sockets at its deadline, or when `interrupt()` raises."""

    def __init__(self, deadline: Deadline, interrupt: Callable[[], None] | None) -> None:
        self.deadline = deadline
        self._interrupt = interrupt
        self._lock = threading.Lock()
        self._handles: list[socket.socket] = []
        self._over = threading.Event()
        self._reason: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name="http-deadline", daemon=True)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._over.set()
        self._thread.join()
        for handle in self._handles:
            handle.close()

    def guard(self, sock: socket.socket) -> None:
        """Abort `sock` with the request. A duplicate of it is kept: TLS takes over the socket
        object (its descriptor moves), the connection underneath stays the same."""
        with self._lock:
            self._handles.append(sock.dup())
        self.check()

    def check(self) -> None:
        """Raise why the request was aborted, if it was."""
        if self._reason is not None:
            raise self._reason

    def _watch(self) -> None:
        while True:
            wait = self.deadline.remaining_s()
            if self._interrupt is not None:
                wait = min(wait, INTERRUPT_POLL_S)
            if self._over.wait(wait):
                return
            reason = self._why_stop()
            if reason is not None:
                self._abort(reason)
                return

    def _why_stop(self) -> BaseException | None:
        if self.deadline.expired():
            return RequestDeadlineError("the request was not over by its deadline")
        try:
            if self._interrupt is not None:
                self._interrupt()
        except Exception as stop:  # noqa: BLE001 - whatever the caller raises stops it, raised there
            return stop
        return None

    def _abort(self, reason: BaseException) -> None:
        with self._lock:
            self._reason = reason
            for handle in self._handles:
                # Not connected yet (or gone): nothing to wake; `guard` and `check` catch it.
                with contextlib.suppress(OSError):
                    handle.shutdown(socket.SHUT_RDWR)


def _open(address: str, port: int, watchdog: _Watchdog) -> socket.socket:
    """A TCP connection to `address`, aborted with its request."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        watchdog.guard(sock)
        # Each operation is bounded by the deadline too; the watchdog bounds them all together.
        sock.settimeout(max(watchdog.deadline.remaining_s(), 0.001))
        sock.connect((address, port))
        watchdog.check()  # aborted between the guard and the connect: shutdown woke nothing
    except BaseException:
        sock.close()
        raise
    return sock


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, watchdog: _Watchdog) -> None:
        super().__init__(host, port, timeout=watchdog.deadline.remaining_s())
        self._address = address
        self._watchdog = watchdog

    def connect(self) -> None:
        self.sock = _open(self._address, self.port, self._watchdog)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, address: str, port: int, watchdog: _Watchdog) -> None:
        super().__init__(
            host, port, timeout=watchdog.deadline.remaining_s(), context=_tls_context()
        )
        self._address = address
        self._watchdog = watchdog

    def connect(self) -> None:
        sock = _open(self._address, self.port, self._watchdog)
        self.sock = _tls_context().wrap_socket(sock, server_hostname=self.host)


def _connection(
    target: PinnedTarget, address: str, watchdog: _Watchdog
) -> http.client.HTTPConnection:
    """A connection to `address` (one of the target's checked addresses) for the target's host."""
    connection_class = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    return connection_class(target.host, address, target.port, watchdog)


def exchange(
    target: PinnedTarget,
    method: str,
    headers: Mapping[str, str],
    *,
    deadline: Deadline,
    read: Callable[[http.client.HTTPResponse], T],
    body: bytes | None = None,
    interrupt: Callable[[], None] | None = None,
) -> T:
    """One request to the first of the target's addresses that accepts a connection; `read`
    turns its response into the result. Raises OSError on I/O failures (RequestDeadlineError
    at the deadline), and what `interrupt` raised once it stopped the request."""
    last_error: OSError | None = None
    with _Watchdog(deadline, interrupt) as watchdog:
        for address in target.addresses:
            connection = _connection(target, address, watchdog)
            try:
                connection.request(method, target.path_and_query, body=body, headers=dict(headers))
                result = read(connection.getresponse())
            except (ConnectionRefusedError, socket.gaierror) as error:
                watchdog.check()
                # Try the next address of the host; any other failure is the request's outcome.
                last_error = error
                continue
            except Exception:
                watchdog.check()  # an aborted request fails for why it was aborted
                raise
            finally:
                connection.close()
            watchdog.check()  # a read that ended because its connection was aborted is cut
            return result
    raise last_error or ConnectionError(f"no address to connect to for {target.host}")
