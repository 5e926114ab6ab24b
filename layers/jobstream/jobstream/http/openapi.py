"""The OpenAPI document this API serves at `GET /openapi.json` (bundled at build time)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DOCUMENT = Path(__file__).with_name("openapi.json")


@cache
def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    return document
