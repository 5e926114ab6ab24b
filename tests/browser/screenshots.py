"""`make console-screenshots`: the console's views as PNG files (docs/console, shown in the
README), taken from a local stack seeded as the browser tests seed theirs.

    python -m tests.browser.screenshots docs/console
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.console_stack import ConsoleStack, chromium, console_stack
from tests.browser.test_console import dead_callbacks

WIDE = {"width": 1280, "height": 860}
NARROW = {"width": 360, "height": 780}


def _show(page: Page, stack: ConsoleStack, fragment: str) -> None:
    page.goto(stack.console + fragment)
    expect(page.locator("main")).to_have_attribute("data-shown", fragment, timeout=30_000)


def take(stack: ConsoleStack, page: Page, folder: Path) -> list[Path]:
    written: list[Path] = []

    def shot(name: str) -> None:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), animations="disabled", caret="hide")
        written.append(path)

    page.goto(stack.console)
    expect(page.get_by_label("Token")).to_be_focused()
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("refused")
    shot("sign-in")
    page.get_by_label("Token").fill(stack.tokens["acme"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("main")).to_have_attribute("data-shown", "#/jobs")
    shot("jobs")
    _show(page, stack, f"#/jobs/{stack.jobs['succeeded']}")
    shot("job-succeeded")
    _show(page, stack, f"#/jobs/{stack.jobs['failed']}")
    shot("job-failed")
    running = stack.submit("acme", "screenshot-slow", params={"target_id": "slow-illustration"})
    _show(page, stack, f"#/jobs/{running}")
    progress = page.locator(".timeline .event-type").filter(has_text="job.progress")
    expect(progress.nth(1)).to_be_visible(timeout=30_000)
    shot("job-running")
    stack.call("acme", "POST", f"/jobs/{running}/cancel")
    # A job whose callbacks the stack itself refuses (401): each dead at its first attempt.
    undeliverable = stack.submit(
        "acme", "screenshot-undeliverable", callback_url=f"{stack.url}/nobody-listens"
    )
    dead_callbacks(stack, undeliverable)
    _show(page, stack, f"#/jobs/{undeliverable}")
    deliveries = page.get_by_role("region", name="Deliveries")
    expect(deliveries.locator(".delivery-dead").first).to_be_visible()
    deliveries.scroll_into_view_if_needed()
    shot("job-deliveries")
    _show(page, stack, "#/dead-letters")
    shot("dead-letters")
    page.set_viewport_size(NARROW)
    _show(page, stack, "#/jobs")
    shot("jobs-360")
    _show(page, stack, f"#/jobs/{stack.jobs['failed']}")
    shot("job-failed-360")
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as scratch,
        console_stack(Path(scratch)) as stack,
        chromium() as browser,
    ):
        page = browser.new_page(viewport=WIDE, color_scheme="light")
        for path in take(stack, page, folder):
            print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
