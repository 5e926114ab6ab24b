"""A minimal consumer of the job API through the emulated API Gateway (urllib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 30


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    text: str


@dataclass(frozen=True)
class ApiClient:
    """Requests go to the emulator's port with the API's execute-api host name, as a client
    of the real API Gateway sends them (the functions build URLs from that host)."""

    endpoint: str  # http://127.0.0.1:PORT
    api_id: str
    token: str | None

    @property
    def host(self) -> str:
        port = urllib.parse.urlsplit(self.endpoint).port
        return f"{self.api_id}.execute-api.localhost:{port}"

    @property
    def path_url(self) -> str:
        """The same API without a host name to resolve (ministack's path-based form)."""
        return f"{self.endpoint}/_aws/execute-api/{self.api_id}"

    def with_token(self, token: str | None) -> ApiClient:
        return ApiClient(self.endpoint, self.api_id, token)

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Answer:
        url = f"{self.endpoint}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Host": self.host, "Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return Answer(status, parsed, text)
