"""verify_callback: the receiver's check, against the producer's own signer (the layer) and
the Standard Webhooks published example."""

from __future__ import annotations

import base64
import json

import pytest

from jobstream.delivery.signing import webhook_headers
from jobstream_client import CallbackVerificationError, sign, verify_callback

OLD = "whsec_" + base64.b64encode(b"the old key").decode()
NEW = "whsec_" + base64.b64encode(b"the new key").decode()
TOKEN = "consumer-issued-token"
NOW = 1_700_000_000
BODY = json.dumps(
    {
        "protocol_version": "1",
        "event_id": "evt-1-1",
        "job_id": "j-1",
        "type": "job.accepted",
        "at": NOW * 1000,
        "payload": {"note": "héllo ☃"},
    },
    ensure_ascii=False,
)


def signed(secret: str = NEW, body: str = BODY, timestamp: int = NOW) -> dict[str, str]:
    """Headers exactly as jobstream's callback delivery writes them."""
    headers = webhook_headers(
        message_id="job-event:j-1:evt-1-1", timestamp=timestamp, body=body, secrets=[secret]
    )
    return {**headers, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def test_a_callback_signed_by_the_producer_verifies_and_yields_its_event() -> None:
    event = verify_callback(signed(), BODY.encode(), NEW, token=TOKEN, now_s=NOW)
    assert (event.event_id, event.type, event.payload) == (
        "evt-1-1",
        "job.accepted",
        {"note": "héllo ☃"},
    )


def test_the_published_standard_webhooks_example() -> None:
    assert (
        sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            '{"test": 2432232314}',
        )
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


def test_rotation_either_side() -> None:
    # The producer signs with both secrets while it rotates; the receiver knows only the new one.
    both = signed(OLD)
    both["webhook-signature"] += " " + sign(NEW, both["webhook-id"], NOW, BODY)
    assert verify_callback(both, BODY, NEW, now_s=NOW).event_id == "evt-1-1"
    # The receiver accepts both secrets while the producer still signs with the old one.
    assert verify_callback(signed(OLD), BODY, [NEW, OLD], now_s=NOW).event_id == "evt-1-1"
    # Raw key bytes work as a secret too.
    assert verify_callback(signed(NEW), BODY, b"the new key", now_s=NOW).event_id == "evt-1-1"


@pytest.mark.parametrize(
    ("headers", "body", "now", "reason"),
    [
        (signed(OLD), BODY, NOW, "signature"),
        (signed(), BODY.replace("accepted", "succeeded"), NOW, "signature"),
        (signed(), BODY, NOW + 301, "timestamp"),
        (signed(), BODY, NOW - 301, "timestamp"),
        ({**signed(), "webhook-timestamp": "17e8"}, BODY, NOW, "timestamp"),
        ({**signed(), "webhook-signature": "v1a,abc v2,def"}, BODY, NOW, "signature"),
        ({**signed(), "webhook-signature": "v1,not base64!"}, BODY, NOW, "signature"),
        ({k: v for k, v in signed().items() if k != "webhook-id"}, BODY, NOW, "headers"),
        ({**signed(), "Authorization": "Bearer wrong"}, BODY, NOW, "token"),
        ({**signed(), "Authorization": f"Basic {TOKEN}"}, BODY, NOW, "token"),
        ({k: v for k, v in signed().items() if k != "Authorization"}, BODY, NOW, "token"),
    ],
)
def test_what_is_refused(headers: dict[str, str], body: str, now: int, reason: str) -> None:
    with pytest.raises(CallbackVerificationError) as raised:
        verify_callback(headers, body, NEW, token=TOKEN, now_s=now)
    assert raised.value.reason == reason


def test_the_body_must_be_an_event() -> None:
    body = '{"not": "an event"}'
    with pytest.raises(CallbackVerificationError) as raised:
        verify_callback(signed(body=body), body, NEW, now_s=NOW)
    assert raised.value.reason == "body"


def test_header_names_match_in_any_case_and_token_only_receivers() -> None:
    upper = {name.upper(): value for name, value in signed().items()}
    assert verify_callback(upper, BODY, NEW, token=[TOKEN, "next"], now_s=NOW).job_id == "j-1"
    unsigned = {"authorization": f"Bearer {TOKEN}"}
    assert verify_callback(unsigned, BODY, None, token=TOKEN).job_id == "j-1"


def test_configuration_mistakes_raise_value_error() -> None:
    with pytest.raises(ValueError, match="secret"):
        verify_callback(signed(), BODY, None)
    with pytest.raises(ValueError, match="base64"):
        verify_callback(signed(), BODY, "whsec_not base64", now_s=NOW)
