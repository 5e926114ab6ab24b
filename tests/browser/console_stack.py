"""What the browser tests and the screenshot script share: a local stack serving two tenants
with a few jobs of each kind, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from typer.testing import CliRunner

from jobstream_cli.app import app
from jobstream_local.child import start_child
from tests.support.stack import TARGETS, environment

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Debian's package (`make test` installs it when missing, as it installs the SAM CLI);
# Playwright's own browser downloads cannot work here, and are not needed.
CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FINAL: Final = frozenset({"succeeded", "failed", "cancelled", "expired"})
# Text that must reach the page as text: as HTML it would add an element and run code.
MARKUP_LABEL: Final = '<img src="x" id="injected" onerror="window.injected = 1">'
MARKUP_CORRELATION: Final = "<b id='bold'>chain</b>"


@dataclass
class ConsoleStack:
    """A running stack: its URL, a token per tenant, and the ids of the jobs seeded in it."""

    url: str
    tokens: dict[str, str]
    jobs: dict[str, str] = field(default_factory=dict)

    @property
    def console(self) -> str:
        return f"{self.url}/console/"

    def call(self, tenant: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.tokens[tenant]}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def submit(self, tenant: str, key: str, **task: Any) -> str:
        params = {"target_id": "demo-illustration", **task.pop("params", {})}
        document = {"protocol_version": "1", "job_type": "candidate_search", "params": params}
        status, receipt = self.call(
            tenant, "POST", "/jobs", {**document, "idempotency_key": key, **task}
        )
        assert status in {200, 202}, receipt
        job_id: str = receipt["job"]["job_id"]
        return job_id

    def wait(self, tenant: str, job_id: str, until: frozenset[str] = FINAL) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            status, job = self.call(tenant, "GET", f"/jobs/{job_id}")
            assert status == 200, job
            if job["status"] in until or time.monotonic() > deadline:
                assert job["status"] in until, job
                return dict(job)
            time.sleep(0.2)


def _tenant(registry: Path, name: str) -> str:
    # acme may call back to this machine: its undeliverable callbacks are the deliveries views'.
    origins = ["--origin", "http://127.0.0.1:*"] if name == "acme" else []
    result = CliRunner().invoke(
        app, ["--output", "json", "tenants", "--file", str(registry), "add", name, *origins]
    )
    assert result.exit_code == 0, result.output
    token: str = json.loads(result.stdout)["api_token"]
    return token


def seed(stack: ConsoleStack) -> None:
    """acme: a succeeded job, a failed one, one whose values look like markup, three more (for
    paging); globex: one job of its own. Waits until each is final."""
    jobs = stack.jobs
    jobs["succeeded"] = stack.submit(
        "acme", "console-ok", correlation_id="console:chain-1", labels={"origin": "console"}
    )
    jobs["failed"] = stack.submit(
        "acme",
        "console-fail",
        correlation_id="console:chain-1",
        params={"query": {"tags": ["no-such-tag"]}},
    )
    jobs["markup"] = stack.submit(
        "acme", "console-markup", correlation_id=MARKUP_CORRELATION, labels={"note": MARKUP_LABEL}
    )
    for index in range(3):
        jobs[f"page-{index}"] = stack.submit("acme", f"console-page-{index}")
    jobs["globex"] = stack.submit("globex", "globex-only", correlation_id="console:chain-1")
    for name, job_id in jobs.items():
        stack.wait("globex" if name == "globex" else "acme", job_id)


@contextmanager
def console_stack(folder: Path) -> Iterator[ConsoleStack]:
    """A local stack serving tenants acme and globex (a registry file of their own) and the
    stack tests' targets, seeded; stopped on exit."""
    registry = folder / "tenants.json"
    tokens = {name: _tenant(registry, name) for name in ("acme", "globex")}
    targets = folder / "targets.json"
    targets.write_text(json.dumps(TARGETS), encoding="utf-8")
    child = start_child(
        environment(JOBSTREAM_TENANTS=str(registry), JOBSTREAM_TARGETS=str(targets))
    )
    try:
        stack = ConsoleStack(child.url, tokens)
        seed(stack)
        yield stack
    finally:
        child.stop()


def chromium_problem() -> str | None:
    """Why Chromium cannot run here, or None."""
    if not CHROMIUM.is_file():
        return (
            f"Chromium is not installed at {CHROMIUM}: `make test` installs Debian's chromium "
            "package (apt-get install chromium); the browser tests need it"
        )
    return None


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    problem = chromium_problem()
    if problem is not None:
        raise RuntimeError(problem)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
