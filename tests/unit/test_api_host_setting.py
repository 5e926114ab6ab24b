"""A pixiv target's `api_host`: an exact origin, checked where the targets file is checked, and
refused on any other source."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from jobstream.config.settings import ConfigurationError
from jobstream.config.targets import TargetsFile
from jobstream.jobtypes import registry
from jobstream.jobtypes.candidate_search.settings import CandidateSearchSettings
from jobstream.jobtypes.sources.api_host import parse_api_host
from jobstream.jobtypes.sources.settings import SourceSettings
from jobstream.observability import LAMBDA_FUNCTION_VARIABLE


def entry(**extra: Any) -> dict[str, Any]:
    return {"work_type": "illustration", "source": "pixiv", "query": {"tags": ["a"]}, **extra}


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        ("https://app-api.pixivlite.com", "https://app-api.pixivlite.com"),
        ("HTTPS://Mirror.Example.COM/", "https://mirror.example.com"),
        ("https://mirror.example.com:443", "https://mirror.example.com"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://10.0.0.7", "http://10.0.0.7"),
        ("http://[::1]:9000", "http://[::1]:9000"),
        ("https://mirror.internal:8443", "https://mirror.internal:8443"),
    ],
)
def test_an_exact_origin_is_kept_in_the_form_pixivpy3_takes(text: str, origin: str) -> None:
    assert parse_api_host(text) == origin
    settings = SourceSettings.model_validate(entry(api_host=text))
    assert settings.api_host == origin
    assert CandidateSearchSettings.model_validate(entry(api_host=text)).api_host == origin


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ftp://mirror.example.com", "the scheme must be https or http"),
        ("mirror.example.com", "is not an origin"),
        ("https://mirror.example.com/api", "must have no path"),
        ("https://mirror.example.com?x=1", "no query or fragment"),
        ("https://mirror.example.com/#top", "no query or fragment"),
        ("https://user:secret@mirror.example.com", "user name or password"),
        ("https://*.example.com", "one host and one port"),
        ("https://mirror.example.com:*", "one host and one port"),
        ("https://mirror.example.com:0", "the port must be"),
        ("https://mirror.example.com:70000", "the port must be"),
        ("https://exa mple.com", "the host must be"),
        ("http://[::1", "is not an origin"),
    ],
)
def test_anything_but_an_exact_origin_is_refused_saying_why(text: str, words: str) -> None:
    with pytest.raises(ValueError, match="api_host") as caught:
        parse_api_host(text)
    assert words in str(caught.value)
    with pytest.raises(ValidationError) as invalid:
        SourceSettings.model_validate(entry(api_host=text))
    assert words in str(invalid.value)


def test_api_host_must_be_a_string() -> None:
    with pytest.raises(ValidationError):
        SourceSettings.model_validate(entry(api_host=8080))


def test_on_aws_an_address_of_this_host_or_its_link_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LAMBDA_FUNCTION_VARIABLE, "jobstream-worker")
    for text in ("http://127.0.0.1:9001", "http://169.254.169.254", "http://[::1]"):
        with pytest.raises(ValueError, match="never reached on AWS"):
            parse_api_host(text)
    # A private address or a name is an operator's mirror: allowed there too.
    assert parse_api_host("http://10.0.0.7:8080") == "http://10.0.0.7:8080"
    assert parse_api_host("http://localhost:8080") == "http://localhost:8080"


def test_a_catalog_target_with_an_api_host_is_a_configuration_error_naming_it() -> None:
    catalog = {**entry(source="catalog", api_host="http://127.0.0.1:8080"), "id": "local-demo"}
    targets = TargetsFile.model_validate({"targets": [catalog]})
    with pytest.raises(ConfigurationError) as caught:
        registry.checked_targets(targets)
    message = str(caught.value)
    assert message.startswith("JOBSTREAM_TARGETS: target 'local-demo'")
    assert "api_host is a setting of a pixiv target, not of a catalog one" in message
    # asset_fetch, which reads the shared source settings only, refuses it too.
    fetching = {**catalog, "job_types": ["asset_fetch"]}
    with pytest.raises(ConfigurationError, match="target 'local-demo' is invalid for asset_fetch"):
        registry.checked_targets(TargetsFile.model_validate({"targets": [fetching]}))


def test_a_pixiv_target_without_api_host_uses_pixivs_own_hosts() -> None:
    assert SourceSettings.model_validate(entry()).api_host is None
    mirrored = {**entry(api_host="http://127.0.0.1:8080"), "id": "mirror"}
    targets = TargetsFile.model_validate({"targets": [mirrored]})
    assert registry.checked_targets(targets) is targets
