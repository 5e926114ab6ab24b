"""Driving the real Lambda handlers with API Gateway v2 events, as API Gateway would."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jobstream_local.gateway import LocalHttpApi
from jobstream_local.template import Template

START_MS = 1_790_481_174_000


@dataclass
class Clock:
    """A controllable clock in epoch ms."""

    now: int = START_MS

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@cache
def _http_api() -> LocalHttpApi:
    # The same routing the local stack uses: the routes template.yaml declares.
    return LocalHttpApi(Template.load().http_routes())


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Api:
    token: str | None
    host: str = "jobs.example.test"

    def call(
        self,
        method: str,
        target: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        request_headers = {"host": self.host}
        if self.token is not None:
            request_headers["authorization"] = f"Bearer {self.token}"
        data = raw if raw is not None else b""
        if body is not None and raw is None:
            data = json.dumps(body).encode()
            request_headers["content-type"] = "application/json"
        request_headers.update(headers or {})
        response = _http_api().invoke(method, target, request_headers, data)
        text = response.get("body") or ""
        return Response(
            status=int(response["statusCode"]),
            body=json.loads(text) if text else None,
            headers=dict(response.get("headers") or {}),
        )

    def get(self, target: str, **kwargs: Any) -> Response:
        return self.call("GET", target, **kwargs)

    def post(self, target: str, body: Any = None, **kwargs: Any) -> Response:
        return self.call("POST", target, body, **kwargs)


def canonical_task(**overrides: Any) -> dict[str, Any]:
    """The reference conformance Task (fixture shape, illustration only)."""
    task: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "6eb50329-20f2-4ea7-b95b-e4676b50d9f1",
        "correlation_id": "review-chain:135",
        "labels": {"origin": "moderation", "tenant": "bot1"},
        "callback_url": "https://consumer.example.test/api/bot1/v1/jobs/events",
        "deadline_ms": 5_400_000,
        "params": {
            "source": {"platform": "pixiv", "account": "default"},
            "query": {"tags": ["西瓜肚"], "expand": True},
            "constraints": {
                "exclude": [{"kind": "work", "id": "149713091"}],
                "limit": 1,
                "scan_limit": 5,
                "work_types": ["illustration"],
            },
        },
    }
    task.update(overrides)
    return task
