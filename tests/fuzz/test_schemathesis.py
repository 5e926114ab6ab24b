"""Schemathesis against schemas/openapi.json on a local stack (`python -m jobstream_local`).

Every operation, a bounded number of generated requests each: no 5xx, every response conforms to
its documented schema, and every 4xx body is a protocol error envelope.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from jobstream_local.child import REPOSITORY, ChildStack, start_child
from tests.support.stack import environment
from tests.support.validation import validate_error

TOKEN = "local-dev-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
MAX_EXAMPLES = 50
pytestmark = pytest.mark.stack

# Every phase with its defaults, including the coverage phase's unexpected methods (TRACE, ...):
# an undocumented method must get a 4xx error envelope too, never a 5xx.
schema = schemathesis.openapi.from_path(REPOSITORY / "schemas" / "openapi.json")


@pytest.fixture(scope="module")
def stack() -> Iterator[ChildStack]:
    child = start_child(environment())
    try:
        yield child
    finally:
        child.stop()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation(case: schemathesis.Case[Any], stack: ChildStack) -> None:
    # The functions log to stdout (as on Lambda), the stack to stderr.
    seen = len(stack.stdout), len(stack.stderr)
    try:
        response = case.call_and_validate(
            base_url=stack.url,
            headers=HEADERS,
            checks=[not_a_server_error, response_schema_conformance],
            timeout=30,
        )
    except Exception:
        time.sleep(0.5)  # let the reader threads catch up with the stack's output
        written = stack.stdout[seen[0] :] + stack.stderr[seen[1] :]
        errors = [line for line in written if '"level":"ERROR"' in line]
        print("stack errors during this case:", *errors[-3:], sep="\n", file=sys.stderr)
        raise
    if 400 <= response.status_code < 500:
        try:
            body = json.loads(response.content)
        except ValueError:
            pytest.fail(f"{response.status_code} without a JSON body: {response.content!r}")
        validate_error(body)
