"""Standard Webhooks signing: known answers computed here independently, and the receiver side
(the consumer SDK's verifier, tests/support/signatures.py)."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.config.signing_secrets import decode_secret
from jobstream.delivery import signing
from jobstream.delivery.signing import sign, webhook_headers
from tests.support.signatures import signature_verifies

KEY = b"jobstream test key \x00\x01\x02\xff"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"another key").decode()
MESSAGE_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
TIMESTAMP = 1_700_000_000
BODY = '{"event_id":"evt_1","type":"job.succeeded","payload":{"result":{"n":1}}}'


def reference_signature(key: bytes, message_id: str, timestamp: int, body: str) -> str:
    """The spec's algorithm written out with the standard library, independent of `sign`."""
    content = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    secret: str = SECRET,
    message_id: str = MESSAGE_ID,
    timestamp: int = TIMESTAMP,
    body: str = BODY,
) -> dict[str, str]:
    return webhook_headers(message_id=message_id, timestamp=timestamp, body=body, secrets=[secret])


# --- decode_secret ---------------------------------------------------------------------------


def test_decode_secret_returns_the_raw_key() -> None:
    assert decode_secret(SECRET) == KEY


@pytest.mark.parametrize(
    ("secret", "fragment"),
    [
        ("", "must start with 'whsec_'"),
        (base64.b64encode(KEY).decode(), "must start with 'whsec_'"),
        ("WHSEC_" + base64.b64encode(KEY).decode(), "must start with 'whsec_'"),
        ("whsec_", "empty"),
        ("whsec_!!!!", "valid base64"),
        ("whsec_abc", "valid base64"),  # bad padding
        ("whsec_ab cd", "valid base64"),
        ("whsec_a-b_", "valid base64"),  # URL-safe alphabet is not the format's
    ],
)
def test_decode_secret_rejects_bad_secrets(secret: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        decode_secret(secret)


# --- sign: known answers ---------------------------------------------------------------------


def test_published_standard_webhooks_vector() -> None:
    # The example of the Standard Webhooks specification and its reference libraries.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    message_id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    timestamp = 1614265330
    body = '{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert reference_signature(key, message_id, timestamp, body) == expected
    assert sign(secret, message_id, timestamp, body) == expected


@pytest.mark.parametrize(
    ("message_id", "timestamp", "body"),
    [
        (MESSAGE_ID, TIMESTAMP, BODY),
        ("msg_1", 0, ""),
        ("evt.with.dots", 1, "body.with.dots"),
        ("msg_ü", 2_000_000_000, '{"text":"héllo ☃ 😀"}'),  # signed as UTF-8
        ("msg_nl", 42, "line 1\nline 2\r\n"),
    ],
)
def test_sign_matches_an_independent_computation(
    message_id: str, timestamp: int, body: str
) -> None:
    expected = reference_signature(KEY, message_id, timestamp, body)
    assert sign(SECRET, message_id, timestamp, body) == expected


def test_signature_is_v1_and_base64_of_a_sha256() -> None:
    version, _, encoded = sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY).partition(",")
    assert version == "v1"
    assert len(base64.b64decode(encoded, validate=True)) == 32


def test_sign_rejects_an_invalid_secret() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        sign("not-a-secret", MESSAGE_ID, TIMESTAMP, BODY)


# --- webhook_headers -------------------------------------------------------------------------


def test_headers_without_a_secret_are_unsigned() -> None:
    headers = webhook_headers(message_id=MESSAGE_ID, timestamp=TIMESTAMP, body=BODY, secrets=[])
    assert headers == {"webhook-id": MESSAGE_ID, "webhook-timestamp": str(TIMESTAMP)}


def test_headers_with_a_secret_carry_the_signature() -> None:
    assert signed_headers() == {
        "webhook-id": MESSAGE_ID,
        "webhook-timestamp": "1700000000",
        "webhook-signature": reference_signature(KEY, MESSAGE_ID, TIMESTAMP, BODY),
    }


def test_headers_reject_an_empty_secret_rather_than_send_unsigned() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        webhook_headers(message_id=MESSAGE_ID, timestamp=TIMESTAMP, body=BODY, secrets=[""])


def test_during_a_rotation_both_secrets_sign_space_separated() -> None:
    new_key = bytes(range(32))
    new_secret = "whsec_" + base64.b64encode(new_key).decode()
    headers = webhook_headers(
        message_id=MESSAGE_ID, timestamp=TIMESTAMP, body=BODY, secrets=[new_secret, SECRET]
    )
    assert headers["webhook-signature"] == " ".join(
        [
            reference_signature(new_key, MESSAGE_ID, TIMESTAMP, BODY),
            reference_signature(KEY, MESSAGE_ID, TIMESTAMP, BODY),
        ]
    )
    # A verifier holding either secret accepts; one holding neither does not.
    assert signature_verifies(new_secret, headers, BODY, now=TIMESTAMP)
    assert signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    assert not signature_verifies(other, headers, BODY, now=TIMESTAMP)


# --- the receiver's side: the consumer SDK's verifier accepts exactly our signatures ---------


def test_round_trip_verifies() -> None:
    assert signature_verifies(SECRET, signed_headers(), BODY, now=TIMESTAMP)


def test_header_names_match_case_insensitively() -> None:
    headers = {name.title(): value for name, value in signed_headers().items()}
    assert set(headers) == {"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
    assert signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("body", BODY.replace("1", "2")),
        ("body", BODY + " "),
        ("body", ""),
        ("webhook-id", MESSAGE_ID + "x"),
        ("webhook-id", "msg_other"),
        ("webhook-timestamp", str(TIMESTAMP + 1)),
        ("webhook-timestamp", str(TIMESTAMP - 60)),
    ],
)
def test_tampering_is_detected(field: str, value: str) -> None:
    headers = signed_headers()
    body = BODY
    if field == "body":
        body = value
    else:
        headers[field] = value
    assert not signature_verifies(SECRET, headers, body, now=TIMESTAMP)


def test_another_secret_does_not_verify() -> None:
    assert not signature_verifies(OTHER_SECRET, signed_headers(), BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    ("now", "ok"),
    [
        (TIMESTAMP, True),
        (TIMESTAMP + 300, True),
        (TIMESTAMP - 300, True),
        (TIMESTAMP + 301, False),  # too old: a replay
        (TIMESTAMP - 301, False),  # too far in the future
        (TIMESTAMP + 86_400, False),
    ],
)
def test_timestamp_tolerance(now: int, ok: bool) -> None:
    assert signature_verifies(SECRET, signed_headers(), BODY, now=now) is ok


def test_tolerance_is_configurable() -> None:
    assert signature_verifies(
        SECRET, signed_headers(), BODY, now=TIMESTAMP + 3_000, tolerance_s=3_600
    )
    assert not signature_verifies(SECRET, signed_headers(), BODY, now=TIMESTAMP + 10, tolerance_s=5)


@pytest.mark.parametrize(
    "template",
    [
        "{good}",
        "v1,AAAA {good}",
        "{good} v1,AAAA",
        "v1,bogus {good} v1,alsobogus",
        "v1a,xyz {good}",
        "{other} {good}",
    ],
)
def test_any_of_several_signatures_may_match(template: str) -> None:
    good = sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    other = sign(OTHER_SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    headers = signed_headers()
    headers["webhook-signature"] = template.format(good=good, other=other)
    assert signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    "signature_header",
    [
        "",
        "v1,AAAA v1,BBBB",
        "{other}",
        "v2,{digest}",  # the right digest under another version is not a v1 signature
        "{digest}",
        "v1, {digest}",
        "v1,{digest}x",
        "V1,{digest}",
    ],
)
def test_no_matching_signature_is_rejected(signature_header: str) -> None:
    good = sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    other = sign(OTHER_SECRET, MESSAGE_ID, TIMESTAMP, BODY)
    headers = signed_headers()
    headers["webhook-signature"] = signature_header.format(
        other=other, digest=good.removeprefix("v1,")
    )
    assert not signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_rejected(missing: str) -> None:
    headers = signed_headers()
    del headers[missing]
    assert not signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    "timestamp", ["", "abc", "1.7e9", "-1700000000", "\u0661\u0667" + "\u0660" * 8, "0x10"]
)
def test_a_malformed_timestamp_is_rejected(timestamp: str) -> None:
    headers = signed_headers()
    headers["webhook-timestamp"] = timestamp
    assert not signature_verifies(SECRET, headers, BODY, now=TIMESTAMP)


def test_verify_raises_on_an_invalid_secret() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        signature_verifies("plain-secret", signed_headers(), BODY, now=TIMESTAMP)


@given(
    message_id=st.text(min_size=1, max_size=40).filter(lambda s: s.strip() == s),
    timestamp=st.integers(0, 2**40),
    body=st.text(max_size=200),
    key=st.binary(min_size=1, max_size=64),
)
def test_round_trip_property(message_id: str, timestamp: int, body: str, key: bytes) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    headers = webhook_headers(
        message_id=message_id, timestamp=timestamp, body=body, secrets=[secret]
    )
    assert headers["webhook-signature"] == reference_signature(key, message_id, timestamp, body)
    assert signature_verifies(secret, headers, body, now=timestamp)
    assert not signature_verifies(secret, headers, body + "x", now=timestamp)


# --- no third-party dependency ---------------------------------------------------------------


def test_signing_imports_only_the_standard_library() -> None:
    source = Path(signing.__file__).read_text(encoding="utf-8")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "jobstream"}
    assert "standardwebhooks" not in imported


def test_signing_works_when_standardwebhooks_cannot_be_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes `import standardwebhooks` fail, installed or not.
    monkeypatch.setitem(sys.modules, "standardwebhooks", None)
    monkeypatch.setitem(sys.modules, "svix", None)
    reloaded = importlib.reload(signing)
    assert reloaded.sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY) == reference_signature(
        KEY, MESSAGE_ID, TIMESTAMP, BODY
    )
