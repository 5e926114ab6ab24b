"""The console in a real browser (Debian's Chromium, headless, through Playwright) against one
local stack with two tenants: sign-in, the jobs list, a job's page, the CSP, isolation, widths
and the keyboard. One stack and one browser for the module; a context (a fresh tab's storage)
per test."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

# Not installed, it is an import error of this module: a failure, never a skip.
from playwright.sync_api import Browser, Locator, Page, Request, expect

from jobstream.http.console import CONTENT_SECURITY_POLICY
from tests.browser.console_stack import (
    MARKUP_CORRELATION,
    MARKUP_LABEL,
    ConsoleStack,
    chromium,
    chromium_problem,
    console_stack,
)

pytestmark = [pytest.mark.stack, pytest.mark.browser, pytest.mark.xdist_group("browser")]

NARROW, WIDE = 360, 1440
# A browser's own report of an answer the test expects (401, 404): the UI's text is asserted.
HTTP_ERROR_REPORT = re.compile(r"^Failed to load resource: the server responded with a status")


class Problems(list[str]):
    """What the page reported: page errors, console errors and warnings (CSP violations among
    them). A test that provokes one takes it out with `expect`; the rest fail the test."""

    def expect(self, pattern: str) -> None:
        found = [problem for problem in self if re.search(pattern, problem)]
        assert found, f"expected a report matching {pattern!r}, got {list(self)}"
        for problem in found:
            self.remove(problem)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    with console_stack(tmp_path_factory.mktemp("console")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    problem = chromium_problem()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with chromium() as running:
        yield running


@pytest.fixture
def problems() -> Problems:
    return Problems()


@pytest.fixture
def page(browser: Browser, problems: Problems) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    opened.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}")
            if message.type in {"error", "warning"} and not HTTP_ERROR_REPORT.match(message.text)
            else None
        ),
    )
    yield opened
    assert context.cookies() == [], "the console never sets a cookie"
    context.close()
    assert list(problems) == [], "the page reported problems"


def shown(page: Page, fragment: str) -> None:
    """Wait until the console shows the page at `fragment` (its main element says which)."""
    expect(page.locator("main")).to_have_attribute("data-shown", fragment)


def visit(page: Page, stack: ConsoleStack, fragment: str) -> None:
    page.goto(stack.console + fragment)
    shown(page, fragment)


def click(page: Page, link: Locator) -> None:
    """Follow a link of the console and wait until its page is shown."""
    fragment = link.get_attribute("href")
    assert fragment is not None
    assert fragment.startswith("#/")
    link.click()
    shown(page, fragment)


def sign_in(page: Page, stack: ConsoleStack, tenant: str = "acme") -> None:
    page.goto(stack.console)
    shown(page, "sign-in")
    page.get_by_label("Token").fill(stack.tokens[tenant])
    page.get_by_role("button", name="Sign in").click()
    shown(page, "#/jobs")
    expect(page.get_by_role("heading", level=1)).to_have_text("Jobs")


def job_links(page: Page) -> Locator:
    return page.get_by_role("table").get_by_role("link", name=re.compile("^job_"))


def job_row(page: Page, job_id: str) -> Locator:
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=job_id, exact=True))


def timeline_types(page: Page) -> list[str]:
    return page.locator(".timeline .event-type").all_inner_texts()


def fits(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_a_wrong_token_gets_the_apis_refusal_and_is_not_kept(
    page: Page, stack: ConsoleStack
) -> None:
    page.goto(stack.console)
    expect(page.get_by_label("Token")).to_be_focused()
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_label("Token").press("Enter")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("This token was refused")
    expect(alert).to_contain_text("HTTP 401, auth_error")
    expect(page.get_by_label("Token")).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("sessionStorage.length") == 0
    # A good token then works in the same tab.
    page.get_by_label("Token").fill(stack.tokens["acme"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Jobs")


def test_the_token_stays_in_the_tab_and_out_of_every_url(page: Page, stack: ConsoleStack) -> None:
    urls: list[str] = []
    authorizations: list[str | None] = []

    def record(request: Request) -> None:
        urls.append(request.url)
        if "/console/" not in request.url:
            authorizations.append(request.headers.get("authorization"))

    page.on("request", record)
    sign_in(page, stack)
    click(page, page.get_by_role("link", name=stack.jobs["succeeded"], exact=True))
    expect(page.locator(".timeline .event-type").first).to_have_text("job.accepted")
    token = stack.tokens["acme"]
    assert urls
    assert not [url for url in urls if token in url]
    assert token not in page.url
    assert set(authorizations) == {f"Bearer {token}"}
    assert page.evaluate("Object.values(sessionStorage)") == [token]
    assert page.evaluate("localStorage.length") == 0
    # Signing out forgets it; a new tab (context) never had it.
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    assert page.evaluate("sessionStorage.length") == 0


def test_the_jobs_list_shows_the_tenants_jobs_and_filters_them(
    page: Page, stack: ConsoleStack
) -> None:
    sign_in(page, stack)
    table = page.get_by_role("table", name="Jobs, newest first")
    headers = table.get_by_role("columnheader").all_inner_texts()
    assert headers == ["Job", "Status", "Type", "Age", "Correlation id", "Labels"]
    acme = {k: v for k, v in stack.jobs.items() if k != "globex"}
    for job_id in acme.values():
        expect(table.get_by_role("link", name=job_id, exact=True)).to_be_visible()
    row = table.get_by_role("row").filter(
        has=page.get_by_role("link", name=stack.jobs["succeeded"], exact=True)
    )
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text("candidate_search")
    expect(row).to_contain_text("console:chain-1")
    expect(row).to_contain_text("origin=console")
    expect(row).to_contain_text("ago")

    # By status, through the form.
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Show jobs").click()
    shown(page, "#/jobs?status=failed")
    links = job_links(page)
    expect(links).to_have_count(1)
    expect(links).to_have_text(stack.jobs["failed"])

    # By correlation id, following a job's correlation link.
    page.get_by_label("Status").select_option("")
    page.get_by_role("button", name="Show jobs").click()
    shown(page, "#/jobs")
    expect(job_links(page)).to_have_count(len(acme))
    click(page, page.get_by_role("link", name="console:chain-1").first)
    expect(page.get_by_label("Correlation id")).to_have_value("console:chain-1")
    expect(job_links(page)).to_have_count(2)


def test_the_jobs_list_pages_by_cursor(page: Page, stack: ConsoleStack) -> None:
    sign_in(page, stack)
    visit(page, stack, "#/jobs?limit=2")
    seen: list[str] = []
    for _ in range(10):
        page_ids = job_links(page).all_inner_texts()
        assert len(page_ids) <= 2
        seen += page_ids
        following = page.get_by_role("link", name="Next page")
        if following.count() == 0:
            break
        click(page, following)
        expect(page.get_by_role("link", name="First page")).to_be_visible()
    assert sorted(seen) == sorted(v for k, v in stack.jobs.items() if k != "globex")
    click(page, page.get_by_role("link", name="First page"))
    expect(page.get_by_role("link", name="First page")).to_have_count(0)
    expect(job_links(page)).to_have_count(2)


def test_a_succeeded_job_shows_its_timeline_progress_and_result(
    page: Page, stack: ConsoleStack
) -> None:
    sign_in(page, stack)
    job_id = stack.jobs["succeeded"]
    click(page, page.get_by_role("link", name=job_id, exact=True))
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {job_id}")
    expect(page.locator("#job-live")).to_have_text("The job succeeded: it is final.")
    _, events = stack.call("acme", "GET", f"/jobs/{job_id}/events")
    expected = [event["type"] for event in events["events"]]
    assert (expected[0], expected[-1]) == ("job.accepted", "job.succeeded")
    expect(page.locator(".timeline .event-type")).to_have_text(expected)
    expect(page.locator(".timeline time")).to_have_count(len(expected))
    expect(page.locator(".timeline .event").last).to_contain_text("candidate(s) from")
    # The bar is full once the job is final; no deadline is counting any more.
    expect(page.locator("#job-progress")).to_have_attribute("value", "1")
    expect(page.locator(".deadline")).to_be_hidden()
    result = page.get_by_role("region", name="Result")
    _, job = stack.call("acme", "GET", f"/jobs/{job_id}")
    (candidate,) = job["result"]["candidates"]
    candidates = result.get_by_role("table", name="Candidates", exact=True)
    expect(candidates).to_contain_text(candidate["candidate_id"])
    expect(candidates).to_contain_text(candidate["metadata"]["title"])
    assets = result.get_by_role("table", name="Assets of the candidates")
    expect(assets.get_by_role("row")).to_have_count(1 + len(candidate["assets"]))
    expect(page.get_by_role("region", name="Error")).to_be_hidden()
    summary = page.get_by_role("region", name="Summary")
    expect(summary).to_contain_text("console-ok")
    expect(summary).to_contain_text("origin=console")


def test_a_failed_job_shows_its_error_and_its_events(page: Page, stack: ConsoleStack) -> None:
    sign_in(page, stack)
    click(page, page.get_by_role("link", name=stack.jobs["failed"], exact=True))
    error = page.get_by_role("region", name="Error")
    expect(error).to_contain_text("no_candidate")
    expect(error).to_contain_text("no work matched the query")
    expect(error).to_contain_text("Retryable")
    expect(page.get_by_role("region", name="Result")).to_be_hidden()
    expect(page.locator(".timeline .event-type").last).to_have_text("job.failed")
    expect(page.locator(".timeline .event").last).to_contain_text("no_candidate")


def test_a_running_jobs_page_updates_itself(page: Page, stack: ConsoleStack) -> None:
    job_id = stack.submit(
        "acme", f"console-slow-{id(page)}", params={"target_id": "slow-illustration"}
    )
    sign_in(page, stack)
    visit(page, stack, f"#/jobs/{job_id}")
    expect(page.locator("#job-live")).to_contain_text("this page updates itself")
    page.evaluate("window.sameDocument = true")
    # The job starts and reports progress while the page is open: it shows them by itself.
    expect(page.locator(".timeline .event-type").filter(has_text="job.started")).to_have_count(
        1, timeout=30_000
    )
    expect(page.get_by_role("region", name="Summary")).to_contain_text("running")
    assert page.locator("#job-progress").get_attribute("value") is None  # moving: indeterminate
    expect(page.locator(".deadline")).to_be_visible()
    # A progress event (5 s or more after `job.started`) shows what the executor reported then.
    progressed = page.locator(".timeline .event-type").filter(has_text="job.progress")
    expect(progressed.first).to_be_visible(timeout=30_000)
    _, events = stack.call("acme", "GET", f"/jobs/{job_id}/events")
    progress = next(e for e in events["events"] if e["type"] == "job.progress")
    note = progress["payload"]["progress"]
    expect(page.locator(".event-progress .event-note").first).to_have_text(
        f"{note['stage']} — {note['message']}"
    )
    status, cancelled = stack.call("acme", "POST", f"/jobs/{job_id}/cancel")
    assert (status, cancelled["status"]) == (200, "cancelled")
    expect(page.locator("#job-live")).to_have_text("The job was cancelled: it is final.")
    expect(page.locator(".timeline .event-type").last).to_have_text("job.cancelled")
    expect(page.get_by_role("region", name="Error")).to_contain_text("cancelled_by_consumer")
    assert page.evaluate("window.sameDocument") is True  # no reload: the page polled


def test_a_running_job_is_cancelled_from_its_page_after_a_confirmation(
    page: Page, stack: ConsoleStack
) -> None:
    job_id = stack.submit(
        "acme", f"console-cancel-{id(page)}", params={"target_id": "slow-illustration"}
    )
    sign_in(page, stack)
    visit(page, stack, f"#/jobs/{job_id}")
    cancel = page.get_by_role("button", name="Cancel job")
    dialog = page.get_by_role("dialog", name="Cancel this job?")
    # Kept: nothing is sent.
    cancel.click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Keep it")).to_be_focused()
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_have_count(0)
    expect(cancel).to_be_focused()
    assert stack.call("acme", "GET", f"/jobs/{job_id}")[1]["status"] in {"queued", "running"}
    # Escape keeps it too.
    cancel.press("Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert stack.call("acme", "GET", f"/jobs/{job_id}")[1]["status"] in {"queued", "running"}
    # Confirmed: the API's cancel route, and the page shows the outcome at once.
    cancel.click()
    dialog.get_by_role("button", name="Cancel the job").click()
    expect(page.locator("#job-live")).to_have_text("The job was cancelled: it is final.")
    expect(cancel).to_be_hidden()
    expect(page.locator(".timeline .event-type").last).to_have_text("job.cancelled")
    assert stack.call("acme", "GET", f"/jobs/{job_id}")[1]["status"] == "cancelled"
    # A final job offers no cancel.
    visit(page, stack, f"#/jobs/{stack.jobs['succeeded']}")
    expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()


def test_every_value_is_inserted_as_text(page: Page, stack: ConsoleStack) -> None:
    sign_in(page, stack)
    row = job_row(page, stack.jobs["markup"])
    expect(row).to_contain_text(f"note={MARKUP_LABEL}")
    expect(row).to_contain_text(MARKUP_CORRELATION)
    click(page, page.get_by_role("link", name=stack.jobs["markup"], exact=True))
    expect(page.get_by_role("region", name="Summary")).to_contain_text(MARKUP_LABEL)
    click(page, page.get_by_role("link", name=MARKUP_CORRELATION, exact=True))
    expect(page.get_by_label("Correlation id")).to_have_value(MARKUP_CORRELATION)
    expect(job_links(page)).to_have_count(1)
    assert page.locator("#injected, #bold").count() == 0
    assert page.evaluate("window.injected") is None


def test_the_csp_holds_and_no_script_is_inline(
    page: Page, stack: ConsoleStack, problems: Problems
) -> None:
    response = page.goto(stack.console)
    assert response is not None
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    sign_in(page, stack)
    click(page, page.get_by_role("link", name=stack.jobs["succeeded"], exact=True))
    expect(page.locator(".timeline .event-type").first).to_have_text("job.accepted")
    scripts = page.evaluate(
        "[...document.scripts].map((s) => ({src: s.getAttribute('src'), text: s.text.trim()}))"
    )
    assert scripts == [{"src": "js/app.js", "text": ""}]
    inline_handlers = page.evaluate(
        "[...document.querySelectorAll('*')].flatMap((e) => [...e.attributes])"
        ".filter((a) => a.name.startsWith('on') || a.name === 'style').length"
    )
    assert inline_handlers == 0
    # An inline script and an inline style are refused by the policy, and reported.
    page.evaluate(
        """() => {
            window.violations = [];
            document.addEventListener('securitypolicyviolation',
                (e) => window.violations.push(e.violatedDirective));
            const script = document.createElement('script');
            script.textContent = 'window.inlineRan = true';
            document.body.append(script);
            const style = document.createElement('style');
            style.textContent = 'body { display: none }';
            document.head.append(style);
        }"""
    )
    page.wait_for_function("window.violations.length >= 2")
    assert page.evaluate("window.inlineRan") is None
    assert page.locator("body").is_visible()
    assert sorted(page.evaluate("window.violations")) == ["script-src-elem", "style-src-elem"]
    problems.expect("inline script violates .*script-src 'self'.* has been blocked")
    problems.expect("inline style violates .*style-src 'self'.* has been blocked")
    # The console's own element builder refuses handlers and style attributes outright.
    refused = page.evaluate(
        """async () => {
            const { el } = await import('./js/dom.js');
            const attempts = [
                { onclick: 'x()' }, { style: 'color: red' }, { href: 'javascript:x()' },
            ];
            return attempts.map((attributes) => {
                try { el('a', attributes); return 'built'; } catch { return 'refused'; }
            });
        }"""
    )
    assert refused == ["refused", "refused", "refused"]


def test_a_token_never_shows_another_tenants_jobs(page: Page, stack: ConsoleStack) -> None:
    sign_in(page, stack, "globex")
    links = job_links(page)
    expect(links).to_have_text([stack.jobs["globex"]])
    # Not by correlation id either (both tenants used it), nor by a job's own address.
    click(page, page.get_by_role("link", name="console:chain-1").first)
    expect(links).to_have_text([stack.jobs["globex"]])
    visit(page, stack, f"#/jobs/{stack.jobs['succeeded']}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Not found")
    expect(alert).to_contain_text("No job with this id is visible to this token")
    expect(page.locator(".timeline")).to_have_count(0)


@pytest.mark.parametrize("width", [NARROW, WIDE])
def test_every_view_fits_the_width(page: Page, stack: ConsoleStack, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(stack.console)
    expect(page.get_by_label("Token")).to_be_visible()
    assert fits(page), "sign-in"
    sign_in(page, stack)
    expect(page.get_by_role("table").first).to_be_visible()
    assert fits(page), "jobs"
    for name in ("succeeded", "failed", "markup"):
        visit(page, stack, f"#/jobs/{stack.jobs[name]}")
        expect(page.locator(".timeline .event").first).to_be_visible()
        assert fits(page), name
    click(page, page.get_by_role("link", name="Capabilities"))
    expect(page.get_by_role("table", name="Job types and their budgets")).to_be_visible()
    expect(page.get_by_role("table", name="Job types and their budgets")).to_contain_text(
        "candidate_search"
    )
    assert fits(page), "capabilities"


def test_the_console_works_from_the_keyboard(page: Page, stack: ConsoleStack) -> None:
    page.goto(stack.console)
    expect(page.get_by_label("Token")).to_be_focused()
    page.keyboard.type(stack.tokens["acme"])
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    target = stack.jobs["succeeded"]
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == target:
            break
    focused = page.locator(":focus")
    expect(focused).to_have_text(target)
    assert page.evaluate("document.activeElement.matches(':focus-visible')")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {target}")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    # The first event's details open from the keyboard.
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('.timeline summary')"):
            break
    page.keyboard.press("Enter")
    expect(page.locator(".timeline details").first).to_have_attribute("open", "")


def test_capabilities_show_each_job_type(page: Page, stack: ConsoleStack) -> None:
    sign_in(page, stack)
    click(page, page.get_by_role("link", name="Capabilities"))
    expect(page.get_by_role("link", name="Capabilities")).to_have_attribute("aria-current", "page")
    _, capabilities = stack.call("acme", "GET", "/capabilities")
    table = page.get_by_role("table", name="Job types and their budgets")
    for job_type in capabilities["job_types"]:
        expect(table).to_contain_text(job_type["name"])
    expect(table).to_contain_text("30 min")  # the queued budget, read as a duration
    # An unknown page of the console says so.
    visit(page, stack, "#/nowhere")
    expect(page.get_by_role("heading", level=1)).to_have_text("No such page")


def dead_callbacks(stack: ConsoleStack, job_id: str) -> list[dict[str, str]]:
    """The job's callbacks once every one of them is dead (the stack answers them 401)."""
    deadline = time.monotonic() + 60
    while True:
        status, view = stack.call("acme", "GET", f"/jobs/{job_id}/callbacks")
        assert status == 200, view
        callbacks: list[dict[str, str]] = view["callbacks"]
        done = len(callbacks) >= 3 and all(c["state"] == "dead" for c in callbacks)
        if done or time.monotonic() > deadline:
            assert done, callbacks
            return callbacks
        time.sleep(0.2)


def test_deliveries_dead_letters_and_their_redrive_after_a_confirmation(
    page: Page, stack: ConsoleStack
) -> None:
    # Its callbacks go to the stack itself, which answers 401: each is dead at its first attempt.
    job_id = stack.submit(
        "acme", f"console-undeliverable-{id(page)}", callback_url=f"{stack.url}/nobody-listens"
    )
    dead = dead_callbacks(stack, job_id)
    sign_in(page, stack)
    visit(page, stack, f"#/jobs/{job_id}")
    deliveries = page.get_by_role("region", name="Deliveries")
    expect(deliveries).to_contain_text(f"{stack.url}/nobody-listens")
    expect(deliveries.locator(".delivery-dead")).to_have_count(len(dead))
    expect(deliveries).to_contain_text("HTTP 401")
    expect(deliveries).to_contain_text("dead since")
    expect(deliveries.locator(".endpoint")).to_contain_text(stack.url)
    expect(deliveries).to_contain_text("1 of 8")
    # A job without a callback URL says so.
    visit(page, stack, f"#/jobs/{stack.jobs['succeeded']}")
    expect(page.get_by_role("region", name="Deliveries")).to_contain_text("No callback URL")
    click(page, page.get_by_role("link", name="Dead letters"))
    expect(page.get_by_role("link", name="Dead letters")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("table")).to_contain_text(job_id)
    send = page.get_by_role("button", name="Send all again")
    dialog = page.get_by_role("dialog", name="Send every dead callback again?")
    # Left: nothing is sent.
    send.click()
    dialog.get_by_role("button", name="Leave them").click()
    expect(dialog).to_have_count(0)
    expect(send).to_be_focused()
    assert all(
        c["state"] == "dead"
        for c in stack.call("acme", "GET", f"/jobs/{job_id}/callbacks")[1]["callbacks"]
    )
    # Confirmed: the API's redrive route; each callback is tried again (and dies again: 401).
    send.click()
    dialog.get_by_role("button", name="Send them all again").click()
    expect(page.get_by_role("status").filter(has_text="sent again")).to_contain_text(
        f"{len(dead)} callback(s) sent again"
    )
    again = dead_callbacks(stack, job_id)
    assert all(int(c["attempts"]) == 1 for c in again)
    # Another tenant sees none of them.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, stack, "globex")
    visit(page, stack, "#/dead-letters")
    expect(page.get_by_text("No dead callbacks.")).to_be_visible()
