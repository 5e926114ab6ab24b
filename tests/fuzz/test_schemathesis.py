"""Schemathesis against schemas/openapi.json on a local stack (`python -m jobstream_local`).

Every operation, a bounded number of generated requests each: no 5xx, every response conforms to
its documented schema, and every 4xx body is a protocol error envelope.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.support.validation import validate_error

REPOSITORY = Path(__file__).resolve().parents[2]
TOKEN = "local-dev-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
MAX_EXAMPLES = 50
# What the stack wrote to stderr: a failing case shows the stack's own account of its errors.
STACK_LOG: list[str] = []
pytestmark = pytest.mark.stack

# Every phase with its defaults, including the coverage phase's unexpected methods (TRACE, ...):
# an undocumented method must get a 4xx error envelope too, never a 5xx.
schema = schemathesis.openapi.from_path(REPOSITORY / "schemas" / "openapi.json")


@pytest.fixture(scope="session")
def stack_url() -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)])
    env["JOBSTREAM_PORT"] = "0"
    process = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "jobstream_local"],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    stderr = STACK_LOG
    threading.Thread(target=lambda: stderr.extend(process.stderr or []), daemon=True).start()
    url = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if "ready" in line:
            url = next(word for word in line.split() if word.startswith("http://"))
            break
    if not url:
        process.kill()
        process.communicate(timeout=10)
        pytest.fail(f"local stack did not become ready: {''.join(stderr)}")
    # Keep reading stdout so a full pipe never blocks the stack.
    # (the functions log to stdout, as on Lambda: kept for a failing case to show).
    threading.Thread(target=lambda: STACK_LOG.extend(process.stdout or []), daemon=True).start()
    try:
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation(case: schemathesis.Case[Any], stack_url: str) -> None:
    seen = len(STACK_LOG)
    try:
        response = case.call_and_validate(
            base_url=stack_url,
            headers=HEADERS,
            checks=[not_a_server_error, response_schema_conformance],
            timeout=30,
        )
    except Exception:
        time.sleep(0.5)  # let the reader threads catch up with the stack's output
        errors = [line for line in STACK_LOG[seen:] if '"level":"ERROR"' in line]
        print("stack errors during this case:", *errors[-3:], sep="\n", file=sys.stderr)
        raise
    if 400 <= response.status_code < 500:
        try:
            body = json.loads(response.content)
        except ValueError:
            pytest.fail(f"{response.status_code} without a JSON body: {response.content!r}")
        validate_error(body)
