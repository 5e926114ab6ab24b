"""Black-box: the local stack reading a consumer registry file that the CLI edits while it runs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobstream.config.tenants import parse_registry
from jobstream_cli.app import app
from jobstream_local.child import start_child
from tests.stack.test_local_stack import Client, _environment, _task
from tests.support.local_env import local_env_dir
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


def local(*args: str) -> Any:
    """`jobstream --local -o json …` in this process."""
    return CliRunner().invoke(app, ["--local", "--output", "json", *args])


def ready_token(child: Any) -> str:
    (line,) = [line for line in child.stdout if "try: curl" in line]
    return line.split("Bearer ", 1)[1].split("'", 1)[0]


def test_local_works_after_the_readme_tenants_block(tmp_path: Path) -> None:
    """The README's tenants block, then `make run` in that shell: the stack serves a registry
    file that stores digests only, so it issues itself a token and --local uses it (it used to
    send local-dev-token, which that registry does not know: 401)."""
    registry = tmp_path / "tenants.json"
    tenants(registry, "add", "acme", "--origin", "http://127.0.0.1:*")
    with local_env_dir(tmp_path) as folder:
        child = start_child(
            _environment(JOBSTREAM_TENANTS=str(registry)) | {"JOBSTREAM_LOCAL_ENV_DIR": str(folder)}
        )
        try:
            submitted = local("submit", "--target-id", "demo-illustration", "--no-follow")
            assert submitted.exit_code == 0, submitted.output
            listed = local("jobs", "list")
            assert listed.exit_code == 0, listed.output
            assert len(json.loads(listed.stdout)["jobs"]) == 1
            # The stack's token is tenant `local`'s, in the registry the operator sees.
            rows = {row["tenant"]: row for row in json.loads(local("tenants", "list").stdout)}
            assert sorted(rows) == ["acme", "local"]
            assert Client(child.url, ready_token(child)).call("GET", "/jobs")[0] == 200
        finally:
            child.stop()
        # Withdrawn when it stops: no token of a stopped stack stays in force.
        stopped = parse_registry(registry.read_bytes())
        assert stopped.authenticate(ready_token(child), 0) is None
        local_tenant = stopped.get("local")
        assert local_tenant is not None
        assert local_tenant.api_tokens == ()


def test_a_removed_local_tenant_is_not_brought_back(tmp_path: Path) -> None:
    registry = tmp_path / "tenants.json"
    tenants(registry, "add", "local")
    tenants(registry, "remove", "local", "--yes")
    with local_env_dir(tmp_path) as folder:
        child = start_child(
            _environment(JOBSTREAM_TENANTS=str(registry)) | {"JOBSTREAM_LOCAL_ENV_DIR": str(folder)}
        )
        try:
            refused = local("jobs", "list")
            assert refused.exit_code == 1
            assert "the local stack has no token for the CLI" in refused.stderr
            assert len(refused.stderr.splitlines()) == 1
            # Operator commands need no token.
            assert local("tenants", "list").exit_code == 0
        finally:
            child.stop()
    # Said just after the ready line, so read once the stack has stopped and every line is in.
    assert any("tenant 'local' was removed on" in line for line in child.stdout)
    assert parse_registry(registry.read_bytes()).get("local") is None


def test_local_works_with_a_registry_secret(tmp_path: Path) -> None:
    """The stack's own moto holds the template's (empty) TenantsSecret: chosen as the registry,
    the stack adds its token to it by the secret's own edit (a version made current)."""
    with local_env_dir(tmp_path) as folder:
        child = start_child(
            _environment(JOBSTREAM_TENANTS_SECRET="jobstream-local-TenantsSecret")
            | {"JOBSTREAM_LOCAL_ENV_DIR": str(folder)}
        )
        try:
            listed = local("jobs", "list")
            assert listed.exit_code == 0, listed.output
            rows = json.loads(
                local("tenants", "--secret", "jobstream-local-TenantsSecret", "list").stdout
            )
            assert [row["tenant"] for row in rows] == ["local"]
        finally:
            child.stop()
