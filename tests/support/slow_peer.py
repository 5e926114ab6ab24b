"""A peer that answers slowly on purpose, on 127.0.0.1 with real sockets: it reads a request's
head, sends `head` at once, then `trickle` one byte every `interval_s` (a slowloris receiver, a
trickling asset source), or nothing more at all (a hung endpoint), and closes after `hold_s`.

Each byte arrives well inside any per-read socket timeout: only a wall-clock deadline ends the
request before `hold_s`. The peer records when each client went away (`gone`, monotonic time)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# A receiver that never finishes its status line and headers.
SLOWLORIS = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000


@dataclass
class SlowPeer:
    base_url: str
    interval_s: float
    hold_s: float
    connections: int = 0
    gone: list[float] = field(default_factory=list)
    _change: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    def went_away(self, clients: int = 1, *, within_s: float = 5.0) -> list[float]:
        """When the first `clients` clients went away, once the peer has seen them go (it looks
        every `interval_s`; a loaded machine may take longer): fewer if they did not."""
        with self._change:
            self._change.wait_for(lambda: len(self.gone) >= clients, timeout=within_s)
            return list(self.gone)

    def client_left(self) -> None:
        with self._change:
            self.gone.append(time.monotonic())
            self._change.notify_all()


def _read_head(conn: socket.socket) -> bool:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            return False
        head += chunk
    return True


def _serve(peer: SlowPeer, conn: socket.socket, head: bytes, trickle: bytes) -> None:
    ends = time.monotonic() + peer.hold_s
    try:
        conn.settimeout(peer.hold_s)
        if not _read_head(conn):
            return
        conn.sendall(head)
        sent = 0
        while time.monotonic() < ends:
            if sent < len(trickle):
                conn.sendall(trickle[sent : sent + 1])
                sent += 1
            readable, _, _ = select.select([conn], [], [], peer.interval_s)
            # The request's body may still arrive; an empty read is the client going away.
            if readable and not conn.recv(65536):
                peer.client_left()
                return
    except OSError:
        peer.client_left()
    finally:
        conn.close()


@contextmanager
def slow_peer(
    *, head: bytes = b"", trickle: bytes = b"", interval_s: float = 0.05, hold_s: float = 15.0
) -> Iterator[SlowPeer]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    peer = SlowPeer(base_url=f"http://127.0.0.1:{port}", interval_s=interval_s, hold_s=hold_s)
    stopping = threading.Event()

    def accept() -> None:
        while not stopping.is_set():
            with contextlib.suppress(OSError):
                readable, _, _ = select.select([listener], [], [], 0.05)
                if readable:
                    conn, _ = listener.accept()
                    peer.connections += 1
                    threading.Thread(
                        target=_serve, args=(peer, conn, head, trickle), daemon=True
                    ).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        stopping.set()
        thread.join()
        listener.close()
