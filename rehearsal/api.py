"""A minimal consumer of the job API through the emulated API Gateway (urllib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_S = 30


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    text: str
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


@dataclass(frozen=True)
class ApiClient:
    base_url: str  # the API's base URL (rehearsal.gateway)
    token: str | None

    def with_token(self, token: str | None) -> ApiClient:
        return ApiClient(self.base_url, token)

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Answer:
        """`path` is under the base URL, or an absolute URL the API answered with."""
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
                status, raw, answered = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, raw, answered = error.code, error.read(), error.headers
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return Answer(status, parsed, text, {k.lower(): v for k, v in answered.items()})
