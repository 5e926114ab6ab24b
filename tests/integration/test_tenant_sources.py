"""Where the registry is read from: a file re-read on change, a Secrets Manager secret read again
after its cache age (moto), and what neither costs the request path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from jobstream.config import registry as registry_module
from jobstream.config import stored
from jobstream.config.registry import load_registry, load_registry_file
from jobstream.config.settings import ConfigurationError, Settings, load_settings
from jobstream.config.tenants import token_digest
from tests.conftest import REFERENCE_TARGETS

REPOSITORY = Path(__file__).resolve().parents[2]


def document(**tokens: str) -> str:
    return json.dumps(
        {
            "tenants": {
                name: {"api_tokens": [{"sha256": token_digest(t)}]} for name, t in tokens.items()
            }
        }
    )


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    registry_module.forget_cached()
    yield
    registry_module.forget_cached()


@pytest.fixture
def secret(aws: None) -> str:
    name = f"tenants-{uuid.uuid4().hex[:8]}"
    boto3.client("secretsmanager").create_secret(Name=name, SecretString=document(acme="a1"))
    return name


def secret_settings(tmp_path: Path, secret_id: str, max_age_s: int) -> Settings:
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps(REFERENCE_TARGETS), encoding="utf-8")
    return Settings(
        table_name="t", targets_path=targets, tenants_secret=secret_id, tenants_max_age_s=max_age_s
    )


def put(secret_id: str, text: str) -> None:
    boto3.client("secretsmanager").put_secret_value(SecretId=secret_id, SecretString=text)


def counted_reads() -> list[str]:
    """The GetSecretValue calls made from now on (their secret ids), as they are made."""
    reads: list[str] = []

    def count(params: dict[str, Any], **_kwargs: Any) -> None:
        reads.append(params["SecretId"])

    stored.client("secretsmanager").meta.events.register(
        "provide-client-params.secrets-manager.GetSecretValue", count
    )
    return reads


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    path.write_text(document(acme="a1"), encoding="utf-8")
    assert load_registry_file(path).authenticate("a1", 0) == "acme"
    path.write_text(document(acme="a2", globex="g1"), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    current = load_registry_file(path)
    assert (current.authenticate("a1", 0), current.authenticate("a2", 0)) == (None, "acme")
    assert current.authenticate("g1", 0) == "globex"


def test_an_invalid_or_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    with pytest.raises(ConfigurationError, match="JOBSTREAM_TENANTS: cannot read"):
        load_registry_file(path)
    path.write_text('{"tenants": {"acme#C#x": {}}}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"JOBSTREAM_TENANTS: tenants.json is invalid"):
        load_registry_file(path)
    # Checked at start-up, like the targets file.
    with pytest.raises(ConfigurationError, match="JOBSTREAM_TENANTS"):
        load_settings({"JOBSTREAM_TABLE": "t", "JOBSTREAM_TENANTS": str(path)})


def test_the_secret_is_used_for_its_cache_age_then_read_again(tmp_path: Path, secret: str) -> None:
    settings = secret_settings(tmp_path, secret, max_age_s=60)
    reads = counted_reads()
    assert load_registry(settings, 1_000_000).authenticate("a1", 0) == "acme"
    put(secret, document(acme="a2"))
    # Within the cache age (by the caller's clock) the value read is used: no call per request.
    for now_ms in (1_000_000, 1_030_000, 1_059_999):
        assert load_registry(settings, now_ms).authenticate("a1", 0) == "acme"
    assert reads == [secret]
    # After it, the rotation is in force without a deploy, and is itself kept for the age.
    current = load_registry(settings, 1_060_000)
    assert (current.authenticate("a1", 0), current.authenticate("a2", 0)) == (None, "acme")
    assert load_registry(settings, 1_119_999) is current
    assert reads == [secret, secret]
    # A clock set back proves nothing about the age: the secret is read again.
    assert load_registry(settings, 1_000_000) is current
    assert reads == [secret, secret, secret]


def test_a_zero_cache_age_reads_the_secret_every_time(tmp_path: Path, secret: str) -> None:
    settings = secret_settings(tmp_path, secret, max_age_s=0)
    reads = counted_reads()
    assert load_registry(settings, 0).authenticate("a1", 0) == "acme"
    put(secret, document(acme="a2"))
    assert load_registry(settings, 0).authenticate("a2", 0) == "acme"
    assert reads == [secret, secret]


def test_a_binary_secret_is_read_as_its_text(tmp_path: Path, aws: None) -> None:
    name = f"tenants-{uuid.uuid4().hex[:8]}"
    binary = document(acme="a1").encode("utf-8")
    boto3.client("secretsmanager").create_secret(Name=name, SecretBinary=binary)
    settings = secret_settings(tmp_path, name, max_age_s=0)
    assert load_registry(settings).authenticate("a1", 0) == "acme"


def test_an_unreadable_secret_keeps_the_registry_read_before(tmp_path: Path, secret: str) -> None:
    settings = secret_settings(tmp_path, secret, max_age_s=0)
    assert load_registry(settings).authenticate("a1", 0) == "acme"
    boto3.client("secretsmanager").delete_secret(SecretId=secret, ForceDeleteWithoutRecovery=True)
    # Secrets Manager unreachable or refusing: the API keeps working with what it knew.
    assert load_registry(settings).authenticate("a1", 0) == "acme"
    # A process that never read it cannot guess: a configuration error (the API answers 503).
    registry_module.forget_cached()
    with pytest.raises(ConfigurationError, match="cannot read the tenants secret"):
        load_registry(settings)


def test_an_invalid_secret_is_a_configuration_error(tmp_path: Path, secret: str) -> None:
    settings = secret_settings(tmp_path, secret, max_age_s=0)
    put(secret, '{"tenants": {"Acme": {}}}')
    with pytest.raises(ConfigurationError, match="JOBSTREAM_TENANTS_SECRET is invalid"):
        load_registry(settings)


def test_the_request_path_imports_no_aws_client_for_a_file_or_the_shorthand(
    tmp_path: Path,
) -> None:
    """No AWS client (nor botocore's session) is made where the secret is not configured."""
    path = tmp_path / "tenants.json"
    path.write_text(document(acme="a1"), encoding="utf-8")
    script = f"""
import sys
from jobstream.config.registry import load_registry
from jobstream.config.settings import load_settings
import jobstream.http.api
for env in ({{"JOBSTREAM_TENANTS": {str(path)!r}}}, {{"JOBSTREAM_API_TOKENS": "acme=a1"}}):
    settings = load_settings({{"JOBSTREAM_TABLE": "t", **env}})
    assert load_registry(settings).authenticate("a1", 0) == "acme"
aws = ("boto3", "botocore.session", "botocore.client", "aws_lambda_powertools.utilities")
print([m for m in sys.modules if m.startswith(aws)])
"""
    result = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)]
            ),
        },
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
