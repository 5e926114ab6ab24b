"""The one table from a request error's kind to its HTTP status: nothing else chooses one."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from jobstream.protocol.errors import ErrorKind, ProtocolError

HTTP_STATUS: Final = MappingProxyType(
    {
        ErrorKind.INVALID: 400,
        ErrorKind.UNAUTHENTICATED: 401,
        ErrorKind.NOT_FOUND: 404,
        ErrorKind.CONFLICT: 409,
        ErrorKind.TOO_LARGE: 413,
        ErrorKind.UNSUPPORTED_MEDIA_TYPE: 415,
        ErrorKind.TOO_MANY_REQUESTS: 429,
        ErrorKind.INTERNAL: 500,
        ErrorKind.UNAVAILABLE: 503,
    }
)


def http_status(error: ProtocolError) -> int:
    """The status `error` is answered with."""
    return HTTP_STATUS[error.kind]
