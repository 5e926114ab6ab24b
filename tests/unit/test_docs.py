"""The operator docs keep up with the code: every variable, every route, every invariant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobstream_local.template import Template

REPOSITORY = Path(__file__).resolve().parents[2]
DOCS = REPOSITORY / "docs"
SOURCE_DIRS = ("layers", "functions", "jobstream_local", "jobstream_cli")
VARIABLE = re.compile(r"JOBSTREAM_[A-Z0-9_]+")


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _variables_in_code() -> set[str]:
    found: set[str] = set()
    for directory in SOURCE_DIRS:
        for path in (REPOSITORY / directory).rglob("*.py"):
            found |= set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    return found


def test_the_code_names_variables() -> None:
    # Guards the scan itself: an empty set would make the next test pass vacuously.
    assert {"JOBSTREAM_TABLE", "JOBSTREAM_PORT", "JOBSTREAM_CATALOG"} <= _variables_in_code()


@pytest.mark.parametrize("variable", sorted(_variables_in_code()))
def test_every_variable_is_documented(variable: str) -> None:
    assert re.search(rf"\b{variable}\b", _doc("configuration.md")), variable


ROUTES = sorted(
    f"{route.method} {route.path}"
    for route in Template.load().http_routes()
    if route.path != "$default"
)


def test_the_template_has_routes() -> None:
    assert "POST /jobs" in ROUTES
    assert len(ROUTES) == 8


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_is_in_the_protocol_doc(route: str) -> None:
    assert f"`{route}`" in _doc("protocol.md"), route


@pytest.mark.parametrize("number", range(1, 11))
def test_every_invariant_is_in_the_architecture_doc(number: int) -> None:
    assert re.search(rf"\bI{number}\b", _doc("architecture.md")), f"I{number}"
