"""Reading an HTTP request body the way API Gateway does before it invokes anything.

A body is framed by `Content-Length` or by chunked `Transfer-Encoding`. A frame that cannot be
read (a length that is not a number, a body shorter than its length, a client that stops sending,
broken chunks) is the client's error: the local gateway answers it with a 400 envelope and closes
the connection, instead of dropping the connection or waiting forever.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Protocol

# How long a client may pause while sending its body.
BODY_TIMEOUT_S: Final = 10.0
_LENGTH: Final = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})(;[^\r\n]*)?\r?\n")
_MAX_LINE: Final = 4096


class Stream(Protocol):
    def read(self, size: int, /) -> bytes: ...

    def readline(self, size: int, /) -> bytes: ...


class UnreadableBody(Exception):  # noqa: N818 - a client's framing error, not a failure of ours
    """The request's body cannot be read as framed; the message says why."""


class OversizedBody(Exception):  # noqa: N818
    """The body is larger than the gateway accepts (not read any further)."""


def read_body(headers: Mapping[str, str], stream: Stream, limit: int) -> bytes:
    """The body of a request with these (lower-cased) headers, at most `limit` bytes.

    Raises UnreadableBody or OversizedBody; a timeout of the underlying socket reads as a body
    shorter than announced.
    """
    try:
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            if encoding.strip().lower() != "chunked":
                raise UnreadableBody("Transfer-Encoding must be chunked")
            return _read_chunks(stream, limit)
        declared = headers.get("content-length")
        if declared is None:
            return b""
        if not _LENGTH.fullmatch(declared.strip()):
            raise UnreadableBody("Content-Length must be a number of bytes")
        length = int(declared)
        if length > limit:
            raise OversizedBody
        return _read_exactly(stream, length, "request body is shorter than its Content-Length")
    except TimeoutError:
        raise UnreadableBody("request body is shorter than its Content-Length") from None


def _read_exactly(stream: Stream, length: int, short: str) -> bytes:
    data = stream.read(length) if length else b""
    if len(data) < length:
        raise UnreadableBody(short)
    return data


def _read_chunks(stream: Stream, limit: int) -> bytes:
    body = bytearray()
    while True:
        line = stream.readline(_MAX_LINE)
        match = _CHUNK_SIZE.fullmatch(line)
        if match is None:
            raise UnreadableBody("request body is not valid chunked encoding")
        size = int(match.group(1), 16)
        if size == 0:
            _skip_trailers(stream)
            return bytes(body)
        if len(body) + size > limit:
            raise OversizedBody
        body += _read_exactly(stream, size, "request body is not valid chunked encoding")
        if stream.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
            raise UnreadableBody("request body is not valid chunked encoding")


def _skip_trailers(stream: Stream) -> None:
    while True:
        line = stream.readline(_MAX_LINE)
        if line in (b"\r\n", b"\n", b""):
            return
