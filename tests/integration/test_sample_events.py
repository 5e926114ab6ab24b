"""The sample events in events/ drive their handlers (as `sam local invoke -e` would)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobstream import runtime as runtime_module
from jobstream.config.settings import DEFAULT_TARGETS_FILE
from jobstream.config.tenants import shorthand_registry
from jobstream.delivery.http import HttpResult
from jobstream.runtime import Runtime
from tests.support.validation import validate, validate_error

REPOSITORY = Path(__file__).resolve().parents[2]
EVENTS = REPOSITORY / "events"

# In the order a consumer would send them; each with the status and document it must produce.
SEQUENCE = [
    ("admission-submit.json", 202, "JobReceipt"),
    # The table's stream hands the new job and its callback to their queues.
    ("dispatcher-stream.json", None, None),
    # The worker runs the job before anything else reads it (the SQS integration would).
    ("worker-sqs-batch.json", None, None),
    ("jobs-capabilities.json", 200, "Capabilities"),
    ("jobs-list.json", 200, "JobPage"),
    ("jobs-get.json", 200, "Job"),
    ("events-page.json", 200, "EventPage"),
    ("ack-events.json", 200, "AckResult"),
    ("jobs-cancel.json", 200, "Job"),
    ("jobs-unknown-route.json", 404, None),
    ("callbacks-sqs-batch.json", None, None),
    ("reconcile-schedule.json", None, None),
]


def handler_for(sample: str) -> Any:
    function = sample.split("-", 1)[0]
    path = REPOSITORY / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"sample_{function}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def test_every_function_has_sample_events() -> None:
    functions = {path.parent.name for path in (REPOSITORY / "functions").glob("*/app.py")}
    sampled = {name.split("-", 1)[0] for name in (path.name for path in EVENTS.glob("*.json"))}
    assert functions == sampled
    assert {name for name, _, _ in SEQUENCE} == {path.name for path in EVENTS.glob("*.json")}


def test_sample_events_drive_the_handlers(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    posts: list[tuple[str, bytes]] = []

    def poster(target: Any, body: bytes, headers: Any, timeout_s: float) -> HttpResult:
        posts.append((target.url, body))
        return HttpResult(204, "", None)

    local = replace(
        rt,
        poster=poster,
        settings=rt.settings.model_copy(
            update={
                "tenants": shorthand_registry([("local", "local-dev-token")]),
                "targets_path": DEFAULT_TARGETS_FILE,
            }
        ),
    )
    monkeypatch.setattr(runtime_module, "runtime", lambda: local)
    for sample, status, definition in SEQUENCE:
        event = json.loads((EVENTS / sample).read_text(encoding="utf-8"))
        response = handler_for(sample)(event, None)
        if status is None:
            continue
        body = json.loads(response["body"])
        assert response["statusCode"] == status, (sample, body)
        if definition is None:
            validate_error(body)
        else:
            validate(body, definition)
    listed = json.loads(
        handler_for("jobs-list.json")(
            json.loads((EVENTS / "jobs-list.json").read_text(encoding="utf-8")), None
        )["body"]
    )
    # The worker sample ran the job to the end, so cancel found it finished.
    assert listed["jobs"][0]["status"] == "succeeded"
    # The SQS sample names the job's first callback: exactly one POST of its accepted event.
    assert [json.loads(body)["type"] for _, body in posts] == ["job.accepted"]
    assert posts[0][0] == "https://consumer.example.com/hooks/jobstream"


def test_non_http_samples_answer_as_their_triggers_expect(rt: Runtime) -> None:
    batch = json.loads((EVENTS / "callbacks-sqs-batch.json").read_text(encoding="utf-8"))
    assert handler_for("callbacks-sqs-batch.json")(batch, None) == {"batchItemFailures": []}
    stream = json.loads((EVENTS / "dispatcher-stream.json").read_text(encoding="utf-8"))
    assert handler_for("dispatcher-stream.json")(stream, None) == {"batchItemFailures": []}
    schedule = json.loads((EVENTS / "reconcile-schedule.json").read_text(encoding="utf-8"))
    counts = handler_for("reconcile-schedule.json")(schedule, None)
    assert counts["budget_exhausted"] is False
