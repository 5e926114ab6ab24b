"""The local gateway's body framing: Content-Length or chunked, and every way a frame breaks."""

from __future__ import annotations

import io

import pytest

from jobstream_local.request_body import OversizedBody, UnreadableBody, read_body

LIMIT = 64


def _read(headers: dict[str, str], raw: bytes = b"") -> bytes:
    return read_body(headers, io.BytesIO(raw), LIMIT)


def test_content_length_frames_the_body() -> None:
    assert _read({"content-length": "5"}, b"hello, and the next request") == b"hello"
    assert _read({"content-length": " 0 "}, b"") == b""


def test_no_framing_header_is_no_body() -> None:
    assert _read({}, b"whatever follows") == b""


@pytest.mark.parametrize("declared", [":", "", "-1", "+1", "1.0", "0x10", "1 1", "9" * 20])
def test_a_length_that_is_not_a_number_of_bytes_is_unreadable(declared: str) -> None:
    with pytest.raises(UnreadableBody, match="Content-Length must be a number of bytes"):
        _read({"content-length": declared}, b"body")


def test_a_body_shorter_than_its_length_is_unreadable() -> None:
    with pytest.raises(UnreadableBody, match="shorter than its Content-Length"):
        _read({"content-length": "5"}, b"hey")


def test_a_client_that_stops_sending_is_unreadable() -> None:
    class Stalled(io.BytesIO):
        def read(self, size: int | None = -1, /) -> bytes:
            raise TimeoutError

    with pytest.raises(UnreadableBody, match="shorter than its Content-Length"):
        read_body({"content-length": "5"}, Stalled(), LIMIT)


def test_a_length_over_the_limit_is_not_read() -> None:
    with pytest.raises(OversizedBody):
        _read({"content-length": str(LIMIT + 1)}, b"x" * (LIMIT + 1))


def test_chunks_are_joined_with_extensions_and_trailers_skipped() -> None:
    raw = b"4;name=value\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT"
    assert _read({"transfer-encoding": "chunked"}, raw) == b"Wikipedia"
    assert _read({"transfer-encoding": " Chunked "}, b"0\r\n\r\n") == b""


@pytest.mark.parametrize(
    "raw",
    [
        b"zz\r\nWiki\r\n0\r\n\r\n",  # size is not hexadecimal
        b"4\r\nWikiX\r\n0\r\n\r\n",  # data longer than its size
        b"9\r\nWiki",  # data shorter than its size
        b"",  # nothing at all
        b"-4\r\nWiki\r\n0\r\n\r\n",
    ],
)
def test_broken_chunks_are_unreadable(raw: bytes) -> None:
    with pytest.raises(UnreadableBody, match="chunked"):
        _read({"transfer-encoding": "chunked"}, raw)


def test_chunks_over_the_limit_are_not_read_further() -> None:
    raw = b"40\r\n" + b"x" * 64 + b"\r\n1\r\nx\r\n0\r\n\r\n"
    with pytest.raises(OversizedBody):
        _read({"transfer-encoding": "chunked"}, raw)


def test_another_transfer_encoding_is_unreadable() -> None:
    with pytest.raises(UnreadableBody, match="Transfer-Encoding must be chunked"):
        _read({"transfer-encoding": "gzip, chunked"}, b"0\r\n\r\n")
