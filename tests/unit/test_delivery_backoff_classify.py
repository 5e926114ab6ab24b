"""Retry timing (backoff, Retry-After) and the classification of one delivery attempt."""

from __future__ import annotations

import http.client
import math
import socket
import ssl
import time
import urllib.error
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.backoff import parse_retry_after, retry_delay_ms
from jobstream.delivery.classify import (
    MAX_ERROR_CHARS,
    Outcome,
    Verdict,
    classify_exception,
    classify_status,
)
from jobstream.outbound.url import OutboundRefused as CallbackRefused

BASE_MS = 30_000
MAX_MS = 21_600_000
JUST_BELOW_ONE = math.nextafter(1.0, 0.0)


def delay(attempt: int, rand: float, **kwargs: int) -> int:
    options = {"base_ms": BASE_MS, "max_ms": MAX_MS} | kwargs
    return retry_delay_ms(attempt, rand=lambda: rand, **options)


def never_called() -> float:
    raise AssertionError("rand must not be drawn when Retry-After decides")


# --- retry_delay_ms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [
        (1, 15_000, 30_000),
        (2, 30_000, 60_000),
        (3, 60_000, 120_000),
        (4, 120_000, 240_000),
        (5, 240_000, 480_000),
        (6, 480_000, 960_000),
        (7, 960_000, 1_920_000),
        (8, 1_920_000, 3_840_000),
    ],
)
def test_delay_bounds_with_default_settings(attempt: int, low: int, high: int) -> None:
    assert delay(attempt, 0.0) == low
    assert delay(attempt, 0.5) == (low + high) // 2
    assert low <= delay(attempt, JUST_BELOW_ONE) < high
    for _ in range(200):
        assert low <= retry_delay_ms(attempt, base_ms=BASE_MS, max_ms=MAX_MS) < high


@pytest.mark.parametrize("rand", [JUST_BELOW_ONE, 1.0, 0.999_999_999])
def test_delay_never_reaches_the_cap_even_for_rand_at_one(rand: float) -> None:
    assert delay(1, rand) == 29_999
    assert delay(30, rand) == MAX_MS - 1


@pytest.mark.parametrize("attempt", [10, 11, 12, 19, 20, 100, 10_000, 10**9])
def test_delay_is_capped_at_max(attempt: int) -> None:
    cap = min(MAX_MS, BASE_MS * 2 ** min(attempt - 1, 18))
    assert delay(attempt, 0.0) == cap // 2
    assert cap // 2 <= delay(attempt, JUST_BELOW_ONE) < cap
    assert delay(attempt, JUST_BELOW_ONE) < MAX_MS


def test_attempt_eleven_is_the_first_at_the_cap() -> None:
    assert delay(10, 0.0) == BASE_MS * 2**9 // 2  # 7.68 min below the cap
    assert delay(11, 0.0) == MAX_MS // 2


@given(
    attempt=st.integers(1, 10_000),
    rand=st.floats(0.0, 1.0, exclude_max=True),
    base_ms=st.integers(1, 10**7),
    max_ms=st.integers(1, 10**9),
)
def test_delay_is_always_in_the_upper_half_below_the_cap(
    attempt: int, rand: float, base_ms: int, max_ms: int
) -> None:
    cap = min(max_ms, base_ms * 2 ** min(attempt - 1, 18))
    result = delay(attempt, rand, base_ms=base_ms, max_ms=max_ms)
    assert math.floor(cap / 2) <= result < cap


@pytest.mark.parametrize(
    ("retry_after_ms", "expected"),
    [
        (0, 0),
        (1, 1),
        (120_000, 120_000),
        (MAX_MS, MAX_MS),
        (MAX_MS + 1, MAX_MS),
        (10**15, MAX_MS),
        (-5, 0),
    ],
)
@pytest.mark.parametrize("attempt", [1, 8, 50])
def test_retry_after_decides_exactly_capped_at_max(
    retry_after_ms: int, expected: int, attempt: int
) -> None:
    result = retry_delay_ms(
        attempt, base_ms=BASE_MS, max_ms=MAX_MS, rand=never_called, retry_after_ms=retry_after_ms
    )
    assert result == expected


def test_zero_base_or_cap_means_no_wait() -> None:
    assert retry_delay_ms(5, base_ms=0, max_ms=MAX_MS) == 0
    assert retry_delay_ms(5, base_ms=BASE_MS, max_ms=0) == 0


@pytest.mark.parametrize(
    ("attempt", "base_ms", "max_ms"),
    [(0, BASE_MS, MAX_MS), (-1, BASE_MS, MAX_MS), (1, -1, MAX_MS), (1, BASE_MS, -1)],
)
def test_invalid_arguments_raise(attempt: int, base_ms: int, max_ms: int) -> None:
    with pytest.raises(ValueError, match=r"attempt|base_ms"):
        retry_delay_ms(attempt, base_ms=base_ms, max_ms=max_ms)


# --- parse_retry_after -----------------------------------------------------------------------

DATE = datetime(2015, 10, 21, 7, 28, tzinfo=UTC)
DATE_MS = int(DATE.timestamp()) * 1000
NOW_MS = DATE_MS - 90_000  # 90 s before DATE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("1", 1_000),
        ("120", 120_000),
        (" 120 ", 120_000),
        ("0007", 7_000),
        ("86400", 86_400_000),
        ("9" * 40, 10**15),  # absurdly long: clamped, not converted (the caller caps it)
        ("Wed, 21 Oct 2015 07:28:00 GMT", 90_000),  # IMF-fixdate
        ("Wednesday, 21-Oct-15 07:28:00 GMT", 90_000),  # RFC 850
        ("Wed Oct 21 07:28:00 2015", 90_000),  # asctime
        ("Wed, 21 Oct 2015 09:28:00 +0200", 90_000),
        ("21 Oct 2015 07:28:00 -0000", 90_000),  # naive: read as GMT
        ("Wed, 21 Oct 2015 07:26:30 GMT", 0),  # exactly now
        ("Wed, 21 Oct 2015 07:00:00 GMT", 0),  # in the past: never negative
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
    ],
)
def test_parse_retry_after(value: str, expected: int) -> None:
    assert parse_retry_after(value, now_ms=NOW_MS) == expected


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local zone far from UTC, so a date read as local time is visibly wrong."""
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_from_utc")
@pytest.mark.parametrize(
    "value", ["21 Oct 2015 07:28:00 -0000", "Wed, 21 Oct 2015 07:28:00", "Wed Oct 21 07:28:00 2015"]
)
def test_a_date_without_zone_is_gmt_whatever_the_local_zone(value: str) -> None:
    assert time.localtime(0).tm_gmtoff != 0
    assert parse_retry_after(value, now_ms=NOW_MS) == 90_000


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "-5",
        "+5",
        "1.5",
        "1e3",
        "0x10",
        "120s",
        "\u0661\u0662\u0660",  # non-ASCII digits
        "soon",
        "Wed, 32 Oct 2015 07:28:00 GMT",
        "Wed, 21 Oct 2015 25:28:00 GMT",
        "Wed, 21 Oct 99999 07:28:00 GMT",
        "Mon, 99 Foo 2015",
    ],
)
def test_invalid_retry_after_is_none(value: str | None) -> None:
    assert parse_retry_after(value, now_ms=NOW_MS) is None


@given(st.text(max_size=40), st.integers(0, 2**45))
def test_parse_retry_after_never_raises_or_goes_negative(value: str, now_ms: int) -> None:
    result = parse_retry_after(value, now_ms=now_ms)
    assert result is None or result >= 0


def test_retry_after_feeds_the_delay() -> None:
    retry_after = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_ms=NOW_MS)
    assert retry_delay_ms(3, base_ms=BASE_MS, max_ms=MAX_MS, retry_after_ms=retry_after) == 90_000
    huge = parse_retry_after("9" * 40, now_ms=NOW_MS)
    assert retry_delay_ms(3, base_ms=BASE_MS, max_ms=MAX_MS, retry_after_ms=huge) == MAX_MS


# --- classify_status -------------------------------------------------------------------------

STATUS_TABLE = [
    (200, Outcome.DELIVERED),
    (201, Outcome.DELIVERED),
    (202, Outcome.DELIVERED),
    (204, Outcome.DELIVERED),
    (299, Outcome.DELIVERED),
    (409, Outcome.DELIVERED),  # the receiver already has it
    (300, Outcome.DEAD),
    (301, Outcome.DEAD),
    (302, Outcome.DEAD),
    (303, Outcome.DEAD),
    (307, Outcome.DEAD),
    (308, Outcome.DEAD),
    (400, Outcome.DEAD),
    (401, Outcome.DEAD),
    (403, Outcome.DEAD),
    (404, Outcome.DEAD),
    (405, Outcome.DEAD),
    (408, Outcome.DEAD),
    (410, Outcome.GONE),
    (413, Outcome.DEAD),
    (422, Outcome.DEAD),
    (499, Outcome.DEAD),
    (429, Outcome.RETRY),
    (500, Outcome.RETRY),
    (501, Outcome.RETRY),
    (502, Outcome.RETRY),
    (503, Outcome.RETRY),
    (504, Outcome.RETRY),
    (599, Outcome.RETRY),
    (600, Outcome.RETRY),
    (100, Outcome.RETRY),  # an interim status as the final answer: a broken receiver
    (199, Outcome.RETRY),
]


@pytest.mark.parametrize(("status", "outcome"), STATUS_TABLE)
def test_classify_status(status: int, outcome: Outcome) -> None:
    verdict = classify_status(status, "some body")
    assert verdict.outcome is outcome
    assert verdict.status == status
    if outcome is Outcome.DELIVERED:
        assert verdict.error == ""
    else:
        assert verdict.error.startswith(f"HTTP {status}")
        assert verdict.error.endswith(": some body")


@pytest.mark.parametrize(
    ("status", "excerpt", "error"),
    [
        (503, "", "HTTP 503"),
        (503, "Service Unavailable", "HTTP 503: Service Unavailable"),
        (404, "  not here\n", "HTTP 404: not here"),
        (500, "line 1\r\nline 2\x00\x1b[31m", "HTTP 500: line 1 line 2 [31m"),
        (301, "", "HTTP 301 (redirects are not followed)"),
        (302, "moved", "HTTP 302 (redirects are not followed): moved"),
    ],
)
def test_status_error_text(status: int, excerpt: str, error: str) -> None:
    assert classify_status(status, excerpt).error == error


def test_delivered_ignores_the_body() -> None:
    assert classify_status(200, "x" * 5000) == Verdict(Outcome.DELIVERED, 200, "")


@pytest.mark.parametrize("status", [400, 503, 302])
def test_status_error_is_truncated(status: int) -> None:
    error = classify_status(status, "é" * 5000).error
    assert len(error) == MAX_ERROR_CHARS
    assert error.startswith(f"HTTP {status}")
    assert error.endswith("…")


# --- classify_exception ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (TimeoutError("timed out"), "TimeoutError: timed out"),
        # socket.timeout is TimeoutError itself since Python 3.10.
        (TimeoutError("read timed out"), "TimeoutError: read timed out"),
        (TimeoutError(), "TimeoutError"),
        (
            ConnectionRefusedError(111, "Connection refused"),
            "ConnectionRefusedError: [Errno 111] Connection refused",
        ),
        (ConnectionResetError(104, "Connection reset by peer"), None),
        (ConnectionAbortedError("aborted"), "ConnectionAbortedError: aborted"),
        (BrokenPipeError(32, "Broken pipe"), None),
        (ConnectionError("no address to connect to"), "ConnectionError: no address to connect to"),
        (OSError(101, "Network is unreachable"), "OSError: [Errno 101] Network is unreachable"),
        (socket.gaierror(-2, "Name or service not known"), None),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), None),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), None),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), None),
        (
            http.client.RemoteDisconnected("Remote end closed connection without response"),
            "RemoteDisconnected: Remote end closed connection without response",
        ),
        (http.client.BadStatusLine("HTTP/9 banana"), None),
        (http.client.IncompleteRead(b"partial"), None),
        (http.client.LineTooLong("header line"), None),
        (urllib.error.URLError("unreachable"), None),
        (ValueError("something unexpected"), "ValueError: something unexpected"),
        (RuntimeError(), "RuntimeError"),
    ],
)
def test_transient_exceptions_retry(error: BaseException, text: str | None) -> None:
    verdict = classify_exception(error)
    assert verdict.outcome is Outcome.RETRY
    assert verdict.status is None
    assert verdict.error.startswith(type(error).__name__)
    if text is not None:
        assert verdict.error == text


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("host_not_allowed", "internal.example resolves to 10.0.0.1, which is not public"),
        ("unresolvable", "nowhere.example cannot be resolved"),
        ("scheme_not_allowed", "the scheme must be https, not 'http'"),
    ],
)
def test_refused_url_is_dead(reason: str, message: str) -> None:
    verdict = classify_exception(CallbackRefused(reason, message))
    assert verdict == Verdict(Outcome.DEAD, None, f"refused: {reason}: {message}")


def test_exception_error_is_truncated_and_one_line() -> None:
    verdict = classify_exception(OSError("x\n" * 2000))
    assert len(verdict.error) == MAX_ERROR_CHARS
    assert verdict.error.startswith("OSError: x x")
    assert "\n" not in verdict.error
    refused = classify_exception(CallbackRefused("invalid_url", "y" * 3000))
    assert len(refused.error) == MAX_ERROR_CHARS
    assert refused.outcome is Outcome.DEAD


@pytest.mark.parametrize(
    ("length", "kept"),
    [
        (0, 0),
        (1, 1),
        (MAX_ERROR_CHARS - 1, MAX_ERROR_CHARS - 1),
        (MAX_ERROR_CHARS, MAX_ERROR_CHARS),
    ],
)
def test_verdict_keeps_errors_up_to_the_limit(length: int, kept: int) -> None:
    assert len(Verdict(Outcome.RETRY, None, "e" * length).error) == kept


@pytest.mark.parametrize("length", [MAX_ERROR_CHARS + 1, 5000])
def test_verdict_truncates_longer_errors(length: int) -> None:
    error = Verdict(Outcome.DEAD, 400, "e" * length).error
    assert error == "e" * (MAX_ERROR_CHARS - 1) + "…"


def test_outcome_values() -> None:
    assert [o.value for o in Outcome] == ["delivered", "retry", "dead", "gone"]
    assert MAX_ERROR_CHARS == 1000
