"""Raw HTTP for the kit: every exchange is recorded, and every document answered is validated
against the protocol schema as what its route and status say it must be."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jobstream_client.transport import Query, Transport, query_string, segment
from jobstream_conformance.schema import protocol

ENVELOPE: Final = "error envelope"
RECEIPT: Final = "{job}"


class Omitted:
    """No Authorization header at all."""


NO_TOKEN: Final = Omitted()


@dataclass
class Exchange:
    method: str
    target: str  # path and query as sent
    status: int
    headers: dict[str, str]
    body: bytes
    definition: str | None
    authenticated: bool  # sent with the consumer's own token
    received_at_ms: int  # the kit's clock when the answer came
    schema_errors: list[str] = field(default_factory=list)

    @property
    def document(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    def __str__(self) -> str:
        return f"{self.method} {self.target} → {self.status}"

    @property
    def jobs(self) -> list[dict[str, Any]]:
        """The Job documents in a valid answer (a Job, a {job} receipt, a JobPage's jobs)."""
        document = self.document
        if self.schema_errors or not isinstance(document, dict):
            return []
        if self.definition == "Job":
            return [document]
        if self.definition == RECEIPT:
            return [document["job"]]
        if self.definition == "JobPage":
            return list(document["jobs"])
        return []

    @property
    def error(self) -> Mapping[str, Any]:
        """The envelope's `error` ({} when there is none)."""
        document = self.document
        error = document.get("error") if isinstance(document, dict) else None
        return error if isinstance(error, dict) else {}


def definition_for(method: str, route: str, status: int) -> str | None:
    """What the protocol says a `route` (e.g. `/jobs/{id}/events`) answers with `status`."""
    if status >= 300:
        return ENVELOPE
    return {
        ("GET", "/capabilities"): "Capabilities",
        ("POST", "/jobs"): RECEIPT,
        ("GET", "/jobs"): "JobPage",
        ("GET", "/jobs/{id}"): "Job",
        ("POST", "/jobs/{id}/cancel"): "Job",
        ("GET", "/jobs/{id}/events"): "EventPage",
        ("POST", "/jobs/{id}/events/ack"): "AckResult",
    }.get((method, route))


def schema_errors(document: Any, definition: str) -> list[str]:
    if document is None:
        return ["the body is not JSON"]
    if definition == ENVELOPE:
        if not isinstance(document, dict) or set(document) != {"error"}:
            return [f"not an {{error}} envelope: {_short(document)}"]
        return [f"error.{line}" for line in protocol().errors(document["error"], "Error")]
    if definition == RECEIPT:
        if not isinstance(document, dict) or "job" not in document:
            return [f"no job in {_short(document)}"]
        return [f"job.{line}" for line in protocol().errors(document["job"], "Job")]
    return protocol().errors(document, definition)


def _short(document: Any) -> str:
    text = json.dumps(document, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


class Probe:
    """One consumer (one bearer token) speaking raw HTTP to the producer."""

    def __init__(
        self, transport: Transport, token: str, log: list[Exchange], *, name: str = "A"
    ) -> None:
        self.transport = transport
        self.token = token
        self.log = log
        self.name = name

    def send(
        self,
        method: str,
        path: str,
        *,
        route: str | None = None,
        query: Query | None = None,
        body: Any = None,
        raw_body: bytes | None = None,
        content_type: str = "application/json",
        authorization: str | Omitted | None = None,
        timeout_s: float | None = None,
    ) -> Exchange:
        """One request. `route` names the protocol route (for validation); `authorization`
        replaces the bearer header (NO_TOKEN: none at all); `timeout_s` replaces the
        transport's for a request that waits at the producer (a long-poll)."""
        headers: dict[str, str] = {}
        if authorization is None:
            headers["Authorization"] = f"Bearer {self.token}"
        elif isinstance(authorization, str):
            headers["Authorization"] = authorization
        data = raw_body
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        if data is not None:
            headers["Content-Type"] = content_type
        response = self.transport.send(
            method, path, query=query, body=data, headers=headers, timeout_s=timeout_s
        )
        definition = definition_for(method, route or path, response.status)
        exchange = Exchange(
            method=method,
            target=path + query_string(query),
            status=response.status,
            headers=response.headers,
            body=response.body,
            definition=definition,
            authenticated=authorization is None,
            received_at_ms=int(time.time() * 1000),
        )
        if definition is not None:
            exchange.schema_errors = schema_errors(exchange.document, definition)
        self.log.append(exchange)
        return exchange

    # The protocol's routes.

    def capabilities(self, **options: Any) -> Exchange:
        return self.send("GET", "/capabilities", **options)

    def submit(self, task: Any, **options: Any) -> Exchange:
        return self.send("POST", "/jobs", body=task, **options)

    def list(self, query: Query, **options: Any) -> Exchange:
        return self.send("GET", "/jobs", query=query, **options)

    def job(self, job_id: str, **options: Any) -> Exchange:
        return self.send("GET", f"/jobs/{segment(job_id)}", route="/jobs/{id}", **options)

    def cancel(self, job_id: str, **options: Any) -> Exchange:
        path = f"/jobs/{segment(job_id)}/cancel"
        return self.send("POST", path, route="/jobs/{id}/cancel", **options)

    def events(self, job_id: str, query: Query | None = None, **options: Any) -> Exchange:
        path = f"/jobs/{segment(job_id)}/events"
        return self.send("GET", path, route="/jobs/{id}/events", query=query, **options)

    def ack(self, job_id: str, body: Any, **options: Any) -> Exchange:
        path = f"/jobs/{segment(job_id)}/events/ack"
        return self.send("POST", path, route="/jobs/{id}/events/ack", body=body, **options)
