"""A minimal callback receiver: verify each POSTed event, store it once, then answer 2xx.

    JOBSTREAM_CALLBACK_SECRET=whsec_... JOBSTREAM_CALLBACK_TOKEN=... \\
        python examples/receiver.py --port 8080 --store events.jsonl

Give the Task `callback_url = http(s)://<this host>:8080/events`. Several secrets (rotation)
are separated by spaces in JOBSTREAM_CALLBACK_SECRET. Answers: 204 once the event is stored
(a duplicate `event_id` is not stored again and is answered 204 too: the producer delivers at
least once), 401 when the token or signature does not verify, 400 for a body that is not an
Event. Each stored event is printed as one line: `<event_id> <type> <job_id>`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from jobstream_client import CallbackVerificationError, verify_callback


class EventStore:
    """Events as JSON lines, deduplicated on `event_id`; written (and flushed) before the 2xx."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                self.seen.add(json.loads(line)["event_id"])

    def add(self, event_id: str, document: dict[str, object]) -> bool:
        """True when the event is new."""
        with self.lock:
            if event_id in self.seen:
                return False
            with self.path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(document, ensure_ascii=False) + "\n")
                file.flush()
                os.fsync(file.fileno())
            self.seen.add(event_id)
            return True


_OUTPUT = threading.Lock()


def announce(line: str) -> None:
    """One whole line on stdout: the server answers callbacks on several threads at once, and
    `print` writes its parts (and the newline) separately."""
    with _OUTPUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def make_handler(
    store: EventStore, secrets: list[str], token: str | None
) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                event = verify_callback(self.headers, body, secrets or None, token=token)
            except CallbackVerificationError as refused:
                self.answer(400 if refused.reason == "body" else 401)
                return
            if store.add(event.event_id, event.raw):
                announce(f"{event.event_id} {event.type} {event.job_id}")
            self.answer(204)

        def answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            return  # one line per stored event is the output

    return Receiver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--store", type=Path, default=Path("events.jsonl"))
    args = parser.parse_args(argv)
    secrets = os.environ.get("JOBSTREAM_CALLBACK_SECRET", "").split()
    token = os.environ.get("JOBSTREAM_CALLBACK_TOKEN") or None
    if not secrets and token is None:
        print("set JOBSTREAM_CALLBACK_SECRET and/or JOBSTREAM_CALLBACK_TOKEN", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer(
        (args.host, args.port), make_handler(EventStore(args.store), secrets, token)
    )
    host, port = server.server_address[:2]
    print(f"receiving at http://{host!s}:{port}/events", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
