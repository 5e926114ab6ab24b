"""Rules read from the layer's source with `ast`: every logger is named after its module, and
the process environment is read in config/ only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "jobstream" / "jobstream"


def layer_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def named_loggers(source: str) -> list[int]:
    """The lines of `getLogger(...)` calls that name a logger other than `__name__`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if name != "getLogger":
            continue
        argument = node.args[0] if node.args else None
        if not (isinstance(argument, ast.Name) and argument.id == "__name__"):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", layer_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_every_logger_is_named_after_its_module(path: Path) -> None:
    # Records of `jobstream.…` loggers come out through the Powertools "jobstream" logger.
    assert named_loggers(path.read_text(encoding="utf-8")) == []


def test_a_logger_named_by_a_string_is_found() -> None:
    source = 'import logging\nfrom logging import getLogger\na = logging.getLogger("jobstream.x")\n'
    assert named_loggers(source + "b = getLogger()\nc = logging.getLogger(__name__)\n") == [3, 4]


ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb"})


def environment_reads(source: str) -> list[int]:
    """The lines that read the process environment through `os` (`os.environ`, `os.getenv`,
    `from os import environ`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )
        or (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in ENVIRONMENT_NAMES for alias in node.names)
        )
    ]


@pytest.mark.parametrize("path", layer_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_environment_is_read_in_config_only(path: Path) -> None:
    # Everything else reads its variables through config/ (environment.py or the settings).
    if path.relative_to(PACKAGE).parts[0] == "config":
        return
    assert environment_reads(path.read_text(encoding="utf-8")) == []


def test_config_reads_the_environment() -> None:
    # The scan sees what it looks for where it is allowed.
    assert environment_reads((PACKAGE / "config" / "environment.py").read_text()) != []


def test_an_environment_read_is_found() -> None:
    source = "import os\nfrom os import getenv\na = os.environ['X']\nb = os.getenv('Y')\n"
    assert environment_reads(source) == [2, 3, 4]
