"""A small client of the jobstream HTTP API (stdlib only: the CLI needs no HTTP library)."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

from jobstream_cli.errors import CliError

TIMEOUT_S: Final = 30.0


class UnreachableError(CliError):
    """Nothing answered at the base URL (refused, unresolvable, timed out)."""


class ApiError(CliError):
    """The API answered with an error envelope (or some other non-2xx)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Submitted:
    """The answer to `POST /jobs`: the job, and whether it is new (202) or a replay (200) of a
    Task submitted before under the same idempotency key."""

    job: dict[str, Any]
    replayed: bool


@dataclass(frozen=True)
class ApiClient:
    base_url: str
    token: str
    timeout_s: float = TIMEOUT_S

    def list_jobs(self, **filters: str | int | None) -> dict[str, Any]:
        return self._request("GET", "/jobs", query=filters)

    def get_job(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{_segment(job_id)}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._request("POST", f"/jobs/{_segment(job_id)}/cancel")

    def events(
        self, job_id: str, after: str | None = None, *, unacked: bool = False
    ) -> dict[str, Any]:
        query: dict[str, str | int | None] = {"after": after, "unacked": 1 if unacked else None}
        return self._request("GET", f"/jobs/{_segment(job_id)}/events", query=query)

    def capabilities(self) -> dict[str, Any]:
        return self._request("GET", "/capabilities")

    def ack(self, job_id: str, through: str) -> dict[str, Any]:
        """Move the ack cursor through `through` (an event id of the job)."""
        return self._request(
            "POST", f"/jobs/{_segment(job_id)}/events/ack", body={"ack_through": through}
        )

    def submit(self, task: dict[str, Any]) -> Submitted:
        status, answer = self._exchange("POST", "/jobs", body=task)
        job = answer.get("job")
        if not isinstance(job, dict):
            raise CliError(f"POST /jobs: the answer has no job (HTTP {status})")
        return Submitted(job=job, replayed=status == HTTPStatus.OK)

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str | int | None] | None = None,
        body: Any = None,
    ) -> dict[str, Any]:
        return self._exchange(method, path, query=query, body=body)[1]

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str | int | None] | None = None,
        body: Any = None,
    ) -> tuple[int, dict[str, Any]]:
        """The status and the JSON object of a 2xx answer; ApiError for any other."""
        url = self.base_url.rstrip("/") + path
        present = {name: value for name, value in (query or {}).items() if value is not None}
        if present:
            url += "?" + urlencode(present)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            # The scheme is checked to be http(s) before a client is made (Cli.client).
            with urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                status: int = response.status
                payload: bytes = response.read()
        except HTTPError as error:
            raise _api_error(error) from None
        except URLError as error:
            raise UnreachableError(
                f"cannot reach {self.base_url}: {_reason(error.reason)}"
            ) from None
        except OSError as error:
            # Timeouts and connections dropped mid-response are not wrapped in URLError.
            raise UnreachableError(f"cannot reach {self.base_url}: {_reason(error)}") from None
        try:
            decoded = json.loads(payload) if payload else {}
        except ValueError:
            raise CliError(f"{method} {path}: the answer is not JSON") from None
        if not isinstance(decoded, dict):
            raise CliError(f"{method} {path}: unexpected answer {decoded!r}")
        return status, decoded


def _segment(value: str) -> str:
    # A job id is one path segment whatever it contains.
    return quote(value, safe="")


def _api_error(error: HTTPError) -> ApiError:
    """The envelope's code and message; API Gateway's own answers carry only a message."""
    try:
        document = json.loads(error.read() or b"null")
    except (OSError, ValueError):
        document = None
    envelope = document.get("error") if isinstance(document, dict) else None
    if isinstance(envelope, dict):
        code = str(envelope.get("code") or "error")
        return ApiError(error.code, code, str(envelope.get("message") or error.reason))
    plain = document.get("message") if isinstance(document, dict) else None
    return ApiError(error.code, f"http_{error.code}", str(plain or error.reason))


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the stack running? see --url / JOBSTREAM_URL)"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host ({reason.strerror})"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
