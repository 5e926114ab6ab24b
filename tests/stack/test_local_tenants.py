"""Black-box: the local stack reading a consumer registry file that the CLI edits while it runs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobstream_cli.app import app
from jobstream_local.child import start_child
from tests.stack.test_local_stack import Client, _environment, _task
from tests.support.receiver import receiver

pytestmark = pytest.mark.stack


def tenants(registry: Path, *args: str, stdin: str | None = None) -> Any:
    result = CliRunner().invoke(
        app, ["--output", "json", "tenants", "--file", str(registry), *args], input=stdin
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_stack_serves_the_registry_file_and_follows_its_edits(tmp_path: Path) -> None:
    registry = tmp_path / "tenants.json"
    acme = tenants(registry, "add", "acme", "--origin", "http://127.0.0.1:*")
    tenants(registry, "set-callback-token", "acme", stdin="acme-issued\n")
    globex = tenants(registry, "add", "globex")
    child = start_child(_environment(JOBSTREAM_TENANTS=str(registry)))
    url = child.url
    try:
        with receiver(204) as hook:
            mine = Client(url, acme["api_token"])
            theirs = Client(url, globex["api_token"])
            task = {**_task("stack-tenant"), "callback_url": hook.url}
            assert mine.call("POST", "/jobs", task)[0] == 202
            # The same loopback origin is not globex's: a 400 envelope, nothing admitted.
            status, refused = theirs.call("POST", "/jobs", {**task, "idempotency_key": "g"})
            assert (status, refused["error"]["detail"]["refusal"]) == (400, "scheme_not_allowed")
            assert theirs.call("GET", "/jobs")[1]["jobs"] == []
            deadline = time.monotonic() + 30
            while not hook.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert hook.requests, "no callback arrived"
            assert {r.headers["authorization"] for r in hook.requests} == {"Bearer acme-issued"}
            # A rotation without overlap: the running stack refuses the old token at once.
            new = tenants(registry, "rotate-token", "acme", "--overlap", "0")["api_token"]
            assert mine.call("GET", "/jobs")[0] == 401
            assert Client(url, new).call("GET", "/jobs")[0] == 200
    finally:
        child.stop()
