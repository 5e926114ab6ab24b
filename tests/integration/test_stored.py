"""config/stored.py against moto: the credentials kept in Secrets Manager and SSM, and every way
a read can fail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from jobstream import aws
from jobstream.config import stored


@pytest.fixture(autouse=True)
def fresh_clients(aws: None) -> Iterator[None]:
    stored.forget_clients()
    yield
    stored.forget_clients()


def name() -> str:
    return f"stored-{uuid.uuid4().hex[:8]}"


def test_a_secret_s_string_or_binary_is_its_text() -> None:
    secrets = boto3.client("secretsmanager")
    text, binary = name(), name()
    secrets.create_secret(Name=text, SecretString="the text")
    secrets.create_secret(Name=binary, SecretBinary="the bytes ✓".encode())
    assert stored.secret_text(text) == "the text"
    assert stored.secret_text(binary) == "the bytes ✓"


def test_a_secure_string_parameter_is_read_decrypted() -> None:
    parameter = f"/jobstream/{name()}"
    boto3.client("ssm").put_parameter(Name=parameter, Value="s3cr3t", Type="SecureString")
    assert stored.parameter_text(parameter) == "s3cr3t"


@pytest.mark.parametrize("read", [stored.secret_text, stored.parameter_text])
def test_what_is_not_there_is_unreadable_and_the_message_names_it(read: object) -> None:
    missing = f"/missing/{name()}"
    with pytest.raises(stored.StoreUnreadableError, match=missing) as caught:
        read(missing)  # type: ignore[operator]
    assert not caught.value.passing  # no retry makes it appear


def test_a_throttled_store_is_unreadable_for_now() -> None:
    secret = name()
    boto3.client("secretsmanager").create_secret(Name=secret, SecretString="the text")

    def throttle(**_kwargs: object) -> None:
        raise ClientError(
            {
                "Error": {"Code": "ThrottlingException", "Message": "slow down"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "GetSecretValue",
        )

    events = stored.client("secretsmanager").meta.events
    events.register("before-call.secrets-manager.GetSecretValue", throttle)
    try:
        with pytest.raises(stored.StoreUnreadableError, match=secret) as caught:
            stored.secret_text(secret)
    finally:
        events.unregister("before-call.secrets-manager.GetSecretValue", throttle)
    assert caught.value.passing


def test_one_client_per_store_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    first = stored.client("secretsmanager")
    assert stored.client("secretsmanager") is first
    assert stored.client("ssm") is not first
    monkeypatch.setenv(aws.ENDPOINT_VARIABLE, "http://localhost:1")
    assert stored.client("secretsmanager") is not first


def test_no_client_can_be_made_without_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(stored.StoreClientError, match="secretsmanager"):
        stored.secret_text(name())
