"""The receiver example: genuine callbacks are stored once and answered 204, the rest refused."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from jobstream.delivery.signing import webhook_headers

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "receiver.py"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TOKEN = "receiver-token"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("receiver_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    example = load_example()
    store = tmp_path / "events.jsonl"
    handler = example.make_handler(example.EventStore(store), [SECRET], TOKEN)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/events", store
    server.shutdown()
    server.server_close()


def post(url: str, body: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def event(event_id: str) -> str:
    document = {
        "protocol_version": "1",
        "event_id": event_id,
        "job_id": "j-1",
        "type": "job.accepted",
        "at": 1,
    }
    return json.dumps(document)


def signed(body: str, secret: str = SECRET, token: str = TOKEN) -> dict[str, str]:
    headers = webhook_headers(
        message_id="m-1", timestamp=int(time.time()), body=body, secrets=[secret]
    )
    return {**headers, "Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def test_genuine_callbacks_are_stored_once(hook: tuple[str, Path]) -> None:
    url, store = hook
    assert post(url, event("e-1"), signed(event("e-1"))) == 204
    assert post(url, event("e-1"), signed(event("e-1"))) == 204  # at least once: a duplicate
    assert post(url, event("e-2"), signed(event("e-2"))) == 204
    stored = [json.loads(line)["event_id"] for line in store.read_text().splitlines()]
    assert stored == ["e-1", "e-2"]


def test_forged_or_malformed_callbacks_are_refused(hook: tuple[str, Path]) -> None:
    url, store = hook
    other = "whsec_" + "b3RoZXIga2V5"
    assert post(url, event("e-3"), signed(event("e-3"), secret=other)) == 401
    assert post(url, event("e-3"), signed(event("e-3"), token="wrong")) == 401
    assert post(url, event("e-4"), signed(event("e-3"))) == 401  # body swapped after signing
    assert post(url, '{"not": "an event"}', signed('{"not": "an event"}')) == 400
    assert not store.exists()
