"""Parsing an API Gateway v2 event into what routes need; bad requests become protocol errors."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, unquote

from jobstream.protocol.errors import ErrorKind, invalid_params
from jobstream.store.budgets import TASK_BODY_BYTES

# Every body within it can be stored: the job item's budget is sized from it (store/budgets.py).
MAX_BODY_BYTES: Final = TASK_BODY_BYTES


# Objects and arrays within one another in a request body: deeper than any Task needs.
MAX_JSON_DEPTH: Final = 64


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether `value` holds objects or arrays more than `limit` levels deep (counted without
    recursion: the body is as deep as the parser allowed)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children)
    return False


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    route_key: str
    headers: Mapping[str, str]
    query: Mapping[str, list[str]]
    path_parameters: Mapping[str, str]
    raw_body: bytes
    base_url: str | None
    # The request's path as the client sent it (rawPath): the console's routes tell `/console`
    # from `/console/`, which API Gateway routes alike.
    path: str = ""

    def path_parameter(self, name: str) -> str:
        # Consumers percent-encode ids with nothing safe; API Gateway may pass them encoded.
        return unquote(self.path_parameters.get(name, ""))

    def json_body(self, *, empty: Any = None) -> Any:
        """The body as JSON; `empty` stands in for no body at all."""
        if len(self.raw_body) > MAX_BODY_BYTES:
            raise invalid_params(
                f"request body must be at most {MAX_BODY_BYTES} bytes",
                kind=ErrorKind.TOO_LARGE,
                detail={"limit_bytes": MAX_BODY_BYTES},
            )
        content_type = self.headers.get("content-type", "")
        media_type = content_type.split(";", 1)[0].strip().lower()
        if not self.raw_body.strip():
            return {} if empty is None else empty
        if media_type and media_type != "application/json" and not media_type.endswith("+json"):
            raise invalid_params(
                "request body must be application/json",
                kind=ErrorKind.UNSUPPORTED_MEDIA_TYPE,
                detail={"content_type": content_type},
            )
        try:
            body = json.loads(self.raw_body, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise invalid_params("request body must be valid JSON") from None
        if _nests_deeper(body, MAX_JSON_DEPTH):
            # An answer may echo a value a few levels deeper (an error's detail): a body as deep
            # as the parser allows would fail that answer instead of being refused.
            raise invalid_params(
                f"request body must nest at most {MAX_JSON_DEPTH} levels of objects and arrays"
            )
        # Written back out to check it is text (below).
        written = json.dumps(body, ensure_ascii=False)
        try:
            written.encode("utf-8")
        except UnicodeEncodeError:
            # JSON's \\uXXXX escapes can carry a surrogate without its pair (json.loads joins the
            # pairs). Such a string is not Unicode text: it cannot be stored (DynamoDB strings
            # are UTF-8) or answered, so the body is refused as not valid JSON.
            raise invalid_params(
                "request body must be valid JSON", detail={"reason": "unpaired_surrogate"}
            ) from None
        return body


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON.
    raise ValueError(name)


def parse_event(event: Mapping[str, Any]) -> Request:
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            raw_body = base64.b64decode(body)
        except (binascii.Error, ValueError):
            raise invalid_params("request body is not valid base64") from None
    else:
        raw_body = body.encode("utf-8", "surrogatepass")
    return Request(
        method=str(http.get("method", "GET")).upper(),
        route_key=str(event.get("routeKey", "")),
        headers=headers,
        query=parse_qs(str(event.get("rawQueryString") or ""), keep_blank_values=True),
        path_parameters=dict(event.get("pathParameters") or {}),
        raw_body=raw_body,
        base_url=_base_url(headers, context),
        path=str(event.get("rawPath") or http.get("path") or ""),
    )


def _base_url(headers: Mapping[str, str], context: Mapping[str, Any]) -> str | None:
    host = headers.get("host") or context.get("domainName")
    if not host:
        return None
    scheme = headers.get("x-forwarded-proto", "https").split(",", 1)[0].strip() or "https"
    stage = context.get("stage")
    prefix = f"/{stage}" if stage and stage != "$default" else ""
    return f"{scheme}://{host}{prefix}"
