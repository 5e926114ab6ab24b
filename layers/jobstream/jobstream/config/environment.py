"""The process environment: the layer reads it here and in `settings.py` only.

Standard library only, so the units below the configuration (observability, the AWS clients,
outbound URLs) and the job types read their own variables through it without importing the
settings model (pydantic stays off their import path). Read at each call, never cached: a
test's `monkeypatch.setenv` shows at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def variable(name: str) -> str:
    """The variable's value; "" when it is not set."""
    return os.environ.get(name, "")


def environment() -> Mapping[str, str]:
    """The whole environment, as it is now."""
    return os.environ
