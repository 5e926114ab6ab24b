"""The version `jobstream --version` prints: the project's, from pyproject.toml (its one source)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Final

PYPROJECT: Final = Path(__file__).resolve().parent.parent / "pyproject.toml"
PROTOCOL: Final = "Workflow Protocol v1"


def project_version(path: Path = PYPROJECT) -> str:
    """`[project] version` of pyproject.toml, or "unknown" when the file cannot tell."""
    try:
        with path.open("rb") as file:
            version = tomllib.load(file).get("project", {}).get("version")
    except (OSError, tomllib.TOMLDecodeError):
        return "unknown"
    return str(version) if version else "unknown"


def version_line() -> str:
    return f"jobstream {project_version()} ({PROTOCOL})"
