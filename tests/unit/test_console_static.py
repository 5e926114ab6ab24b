"""The console's static files, read as text: what the Content-Security-Policy and the layer's
size need of them, and that every value is inserted as text (no HTML parsing anywhere).
The browser tests (tests/browser) check the same page running."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

from jobstream.http.console import CONTENT_TYPES, STATIC, static_files

# The whole console; the layer carries it to every function, and the JobsFunction reads it once.
MAX_TOTAL_BYTES = 96 * 1024
SCRIPTS = sorted(STATIC.rglob("*.js"))
# Ways a string becomes markup or code; the console builds elements and text nodes only.
UNSAFE_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
    r"createContextualFragment|DOMParser|\.style\b|setAttribute\(\s*[\"'](?:style|on)"
)
IMPORT = re.compile(r"""^\s*(?:import|export)\b[^"']*?from\s+["']([^"']+)["']""", re.MULTILINE)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.inline_script = False
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_script = True


def _page() -> _Page:
    page = _Page()
    page.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    return page


def test_every_shipped_file_is_served_and_nothing_else_is_shipped() -> None:
    shipped = {p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file()}
    assert {PurePosixPath(name).suffix for name in shipped} <= set(CONTENT_TYPES)
    assert set(static_files()) == shipped


def test_the_console_stays_small() -> None:
    total = sum(len(file.body.encode("utf-8")) for file in static_files().values())
    assert total <= MAX_TOTAL_BYTES, f"{total} bytes"


def test_the_page_has_no_inline_script_or_style_and_loads_only_its_own_files() -> None:
    page = _page()
    assert not page.inline_script
    scripts = [attrs for tag, attrs in page.elements if tag == "script"]
    assert scripts == [{"type": "module", "src": "js/app.js"}]
    for tag, attrs in page.elements:
        assert tag != "style"
        assert not [name for name in attrs if name == "style" or name.startswith("on")], tag
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is None or value.startswith("#") or value == "data:,":
                continue
            # Relative and inside the console: no third-party host, no CDN.
            assert not re.search(r"//|:", value), value
            assert (STATIC / value).is_file(), value


def test_every_form_control_has_a_label() -> None:
    # The page's own controls; the views' are checked in the browser (tests/browser).
    page = _page()
    labelled = {attrs.get("for") for tag, attrs in page.elements if tag == "label"}
    for tag, attrs in page.elements:
        if tag in {"input", "select", "textarea"}:
            assert attrs.get("id") in labelled or attrs.get("aria-label"), attrs


def test_scripts_import_only_their_own_modules() -> None:
    assert SCRIPTS
    for script in SCRIPTS:
        for specifier in IMPORT.findall(script.read_text(encoding="utf-8")):
            assert specifier.startswith(("./", "../")), f"{script.name}: {specifier}"
            assert (script.parent / specifier).resolve().is_file(), f"{script.name}: {specifier}"


def test_scripts_insert_values_as_text_only() -> None:
    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        found = UNSAFE_SINKS.findall(text)
        assert not found, f"{script.relative_to(STATIC)}: {found}"
        # No absolute URL: the API is the page's own origin.
        assert not re.search(r"https?://", text), script.name


def test_the_stylesheet_loads_nothing() -> None:
    css = Path(STATIC / "console.css").read_text(encoding="utf-8")
    assert "@import" not in css
    assert "url(" not in css


def test_the_readme_shows_the_console() -> None:
    # `make console-screenshots` writes docs/console; the README shows one and links the rest.
    repository = STATIC.parents[5]
    shots = sorted(p.name for p in (repository / "docs" / "console").glob("*.png"))
    assert shots
    readme = (repository / "README.md").read_text(encoding="utf-8")
    assert re.search(r"!\[[^\]]+\]\(docs/console/[a-z0-9-]+\.png\)", readme)
    for name in shots:
        assert f"(docs/console/{name})" in readme, name
