"""The consumer registry model, tenant names, callback origins and the offline admission check."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.config.settings import ConfigurationError, load_settings
from jobstream.config.tenants import (
    ApiToken,
    RegistryError,
    TenantConfig,
    TenantRegistry,
    parse_registry,
    shorthand_registry,
    token_digest,
)
from jobstream.lifecycle.identity import derive_job_id
from jobstream.outbound.guard import check_at_admission, check_at_delivery
from jobstream.outbound.origins import OriginPattern
from jobstream.outbound.url import OutboundRefused as CallbackRefused
from jobstream.store import keys
from jobstream.tenant_names import TENANT_NAME_PATTERN, is_tenant_name

SECRET_A = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def document(tenants: dict[str, Any]) -> str:
    return json.dumps({"tenants": tenants})


def iso(moment: datetime) -> str:
    return moment.isoformat()


# ---------------------------------------------------------------------------- tenant names

ATTACKS = [
    "acme#C#x",  # reads acme's correlation range: T#acme#C#x...
    "acme#",
    "#",
    "acme\x00key",  # the job id separator
    "Acme",  # upper case: one tenant, two spellings
    "acme ",
    " acme",
    "acme\n",
    "",
    "-acme",
    "_acme",
    "a" * 64,
    "acme/x",
    "acmé",
    "acme.x",
]


@pytest.mark.parametrize("name", ATTACKS)
def test_a_name_outside_the_alphabet_is_refused_everywhere(name: str) -> None:
    assert not is_tenant_name(name)
    with pytest.raises(RegistryError):
        parse_registry(document({name: {}}))
    if name.strip() == name:  # the shorthand trims around its `tenant=token` parts
        with pytest.raises(ConfigurationError, match="JOBSTREAM_API_TOKENS"):
            load_settings({"JOBSTREAM_TABLE": "t", "JOBSTREAM_API_TOKENS": f"{name}=token"})
    # Defence in depth: no key or job id is ever built from such a name.
    with pytest.raises(ValueError, match="tenant name"):
        keys.tenant_pk(name, 0)
    with pytest.raises(ValueError, match="tenant name"):
        keys.correlation_pk(name, "x")
    with pytest.raises(ValueError, match="tenant name"):
        derive_job_id(name, "key")


@pytest.mark.parametrize("name", ["acme", "a", "telepost-prod", "bot_1", "0", "a" * 63])
def test_names_in_the_alphabet_are_accepted(name: str) -> None:
    assert is_tenant_name(name)
    assert list(parse_registry(document({name: {}})).tenants) == [name]


names = st.from_regex(TENANT_NAME_PATTERN, fullmatch=True)
texts = st.text(max_size=20)


@given(a=names, b=names, c1=texts, c2=texts)
def test_no_key_of_one_tenant_falls_in_another_tenants_range(
    a: str, b: str, c1: str, c2: str
) -> None:
    """The listing and correlation partitions of distinct tenants never coincide."""
    if a == b:
        return
    mine = {*keys.tenant_partitions(a), keys.correlation_pk(a, c1)}
    theirs = {*keys.tenant_partitions(b), keys.correlation_pk(b, c2)}
    assert not mine & theirs


@given(a=names, b=names, k1=texts, k2=texts)
def test_job_ids_name_one_tenant_and_key(a: str, b: str, k1: str, k2: str) -> None:
    # The hashed text `tenant\0key` is unambiguous: equal texts mean equal pairs.
    if (a, k1) != (b, k2):
        assert f"{a}\x00{k1}" != f"{b}\x00{k2}"
        assert derive_job_id(a, k1) != derive_job_id(b, k2)


# ------------------------------------------------------------------------------ API tokens


def test_tokens_are_stored_as_digests_and_matched_to_their_tenant() -> None:
    registry = parse_registry(
        document(
            {
                "acme": {"api_tokens": [{"sha256": token_digest("acme-token")}]},
                "globex": {"api_tokens": [{"sha256": token_digest("globex-token")}]},
            }
        )
    )
    assert registry.authenticate("acme-token", NOW_MS) == "acme"
    assert registry.authenticate("globex-token", NOW_MS) == "globex"
    for wrong in ("", "acme-token ", "ACME-TOKEN", token_digest("acme-token"), "\ud800"):
        assert registry.authenticate(wrong, NOW_MS) is None
    assert "acme-token" not in registry.to_json()


def test_two_tokens_are_valid_during_an_overlap_and_the_old_one_ends() -> None:
    registry = parse_registry(
        document(
            {
                "acme": {
                    "api_tokens": [
                        {"sha256": token_digest("new")},
                        {"sha256": token_digest("old"), "expires_at": iso(NOW)},
                    ]
                }
            }
        )
    )
    assert registry.authenticate("new", NOW_MS - 1) == "acme"
    assert registry.authenticate("old", NOW_MS - 1) == "acme"
    assert registry.authenticate("old", NOW_MS) is None
    assert registry.authenticate("new", NOW_MS + 10**9) == "acme"


def test_a_token_names_exactly_one_tenant() -> None:
    digest = token_digest("shared")
    with pytest.raises(RegistryError, match="more than once"):
        parse_registry(
            document(
                {
                    "a": {"api_tokens": [{"sha256": digest}]},
                    "b": {"api_tokens": [{"sha256": digest}]},
                }
            )
        )
    with pytest.raises(RegistryError, match="more than once"):
        parse_registry(document({"a": {"api_tokens": [{"sha256": digest}, {"sha256": digest}]}}))


def test_a_removal_leaves_a_tombstone_without_credentials() -> None:
    registry = parse_registry(
        document({"acme": {"api_tokens": [{"sha256": token_digest("t")}], "callback_token": "c"}})
    )
    removed = registry.remove("acme", NOW)
    assert (removed.get("acme"), removed.authenticate("t", NOW_MS)) == (None, None)
    tombstone = removed.removed("acme")
    assert tombstone is not None
    assert tombstone.removed_at == NOW
    # Stored and read back as it is; nothing of the consumer's credentials is kept.
    text = removed.to_json()
    assert parse_registry(text) == removed
    assert token_digest("t") not in text
    assert '"c"' not in text


def test_a_removed_name_is_refused_until_it_is_restored() -> None:
    removed = parse_registry(document({"acme": {}})).remove("acme", NOW)
    tenant = TenantConfig(api_tokens=(ApiToken(sha256=token_digest("new")),))
    with pytest.raises(RegistryError, match="both in force and removed"):
        removed.replace("acme", tenant)
    restored = removed.restore("acme", tenant)
    assert (restored.authenticate("new", NOW_MS), restored.removed("acme")) == ("acme", None)


def test_a_document_cannot_keep_a_removed_tenants_tokens_in_force() -> None:
    """A hand edit that leaves a tombstoned name among the tenants is refused, whole: a removed
    tenant's tokens never authenticate."""
    text = json.dumps(
        {
            "tenants": {"acme": {"api_tokens": [{"sha256": token_digest("t")}]}},
            "removed_tenants": {"acme": {"removed_at": "2030-01-01T00:00:00Z"}},
        }
    )
    with pytest.raises(RegistryError, match="tenant 'acme' is both in force and removed"):
        parse_registry(text)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"tenants": {"a": {}}, "tenants": {}}',  # a duplicate key is not last-one-wins
        '{"tenants": {"a": {}, "a": {}}}',
        document({"a": {"api_tokens": [{"sha256": "NOT-HEX"}]}}),
        document({"a": {"api_tokens": [{"sha256": "ab" * 32, "expires_at": "2030-01-01"}]}}),
        document({"a": {"unknown": 1}}),
        document({"a": {"callback_origins": ["ftp://x"]}}),
        document({"a": {"callback_token": ""}}),
        document({"a": {"signing_secrets": [{"secret": "whsec_!!"}]}}),
        '{"tenants": {}, "removed_tenants": {"a": {}}}',  # a tombstone says when
        '{"tenants": {}, "removed_tenants": {"A#x": {"removed_at": "2030-01-01T00:00:00Z"}}}',
    ],
)
def test_an_invalid_document_is_refused(text: str) -> None:
    with pytest.raises(RegistryError):
        parse_registry(text)


def test_a_refusal_never_quotes_a_secret() -> None:
    secret = "whsec_" + "A" * 7  # not valid base64: refused
    token = "supersecret-callback-token-value"
    text = document(
        {
            "a": {
                "callback_token": token,
                "signing_secrets": [{"secret": secret}],
                "callback_origins": ["nope"],
            }
        }
    )
    with pytest.raises(RegistryError) as raised:
        parse_registry(text)
    assert secret not in str(raised.value)
    assert token not in str(raised.value)
    assert "signing_secrets" in str(raised.value)
    # Nor does the model's repr.
    registry = shorthand_registry([("a", "t")], callback_token=token, signing_secret=SECRET_A)
    assert token not in repr(registry)
    assert SECRET_A not in repr(registry)


def test_signing_secrets_in_force_sign() -> None:
    later = "whsec_" + "B" * 40
    registry = parse_registry(
        document(
            {
                "a": {
                    "signing_secrets": [
                        {"secret": later},
                        {"secret": SECRET_A, "expires_at": iso(NOW)},
                    ]
                }
            }
        )
    )
    tenant = registry.get("a")
    assert tenant is not None
    assert tenant.signing_keys(NOW_MS - 1) == [later, SECRET_A]
    assert tenant.signing_keys(NOW_MS) == [later]


# ------------------------------------------------------------------------------ shorthand


def test_the_shorthand_gives_callback_credentials_to_its_one_tenant() -> None:
    registry = shorthand_registry(
        [("acme", "t1"), ("acme", "t2")],
        callback_token="cb",
        signing_secret=SECRET_A,
        callback_origins=["http://telepost:8080"],
    )
    tenant = registry.get("acme")
    assert tenant is not None
    assert (tenant.callback_token, tenant.signing_keys(0)) == ("cb", [SECRET_A])
    assert tenant.callback_origins == ("http://telepost:8080",)
    assert registry.authenticate("t2", 0) == "acme"


@pytest.mark.parametrize(
    "variable",
    ["JOBSTREAM_CALLBACK_TOKEN", "JOBSTREAM_CALLBACK_SIGNING_SECRET", "JOBSTREAM_CALLBACK_ORIGINS"],
)
def test_global_callback_settings_are_refused_with_several_tenants(variable: str) -> None:
    """The leak of issue 11: one callback token sent to every tenant's callback URL."""
    value = {
        "JOBSTREAM_CALLBACK_TOKEN": "telepost-api-token",
        "JOBSTREAM_CALLBACK_SIGNING_SECRET": SECRET_A,
        "JOBSTREAM_CALLBACK_ORIGINS": "http://telepost:8080",
    }[variable]
    environ = {"JOBSTREAM_TABLE": "t", "JOBSTREAM_API_TOKENS": "telepost=a,beta=b", variable: value}
    with pytest.raises(ConfigurationError, match="exactly one tenant") as raised:
        load_settings(environ)
    if variable != "JOBSTREAM_CALLBACK_ORIGINS":  # origins are not secret; the rest is
        assert value not in str(raised.value)
    # With one tenant it is that tenant's own.
    settings = load_settings({**environ, "JOBSTREAM_API_TOKENS": "telepost=a"})
    assert settings.tenants is not None
    assert list(settings.tenants.tenants) == ["telepost"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("JOBSTREAM_CALLBACK_SIGNING_SECRET", "not-a-secret"),
        ("JOBSTREAM_CALLBACK_ORIGINS", "telepost:8080"),
    ],
)
def test_shorthand_values_are_checked_and_blamed(variable: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        load_settings({"JOBSTREAM_TABLE": "t", "JOBSTREAM_API_TOKENS": "a=t", variable: value})


def test_callback_settings_without_tokens_name_what_they_need() -> None:
    with pytest.raises(ConfigurationError, match="need JOBSTREAM_API_TOKENS"):
        load_settings(
            {
                "JOBSTREAM_TABLE": "t",
                "JOBSTREAM_TENANTS_SECRET": "s",
                "JOBSTREAM_CALLBACK_TOKEN": "x",
            }
        )


@pytest.mark.parametrize(
    "sources",
    [
        {},
        {"JOBSTREAM_TENANTS_SECRET": "s", "JOBSTREAM_API_TOKENS": "a=t"},
        {"JOBSTREAM_TENANTS_SECRET": "s", "JOBSTREAM_TENANTS": "/nowhere.json"},
    ],
)
def test_the_registry_has_exactly_one_source(sources: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="exactly one source"):
        load_settings({"JOBSTREAM_TABLE": "t", **sources})


@pytest.mark.parametrize(
    "variable", ["JOBSTREAM_CALLBACK_ALLOW_HTTP", "JOBSTREAM_CALLBACK_ALLOW_PRIVATE"]
)
def test_the_retired_global_switches_stop_start_up(variable: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{variable} is no longer read.*callback_origins"):
        load_settings({"JOBSTREAM_TABLE": "t", "JOBSTREAM_API_TOKENS": "a=t", variable: "true"})


def test_a_settings_copy_refuses_a_field_it_does_not_have() -> None:
    settings = load_settings({"JOBSTREAM_TABLE": "t", "JOBSTREAM_API_TOKENS": "a=t"})
    with pytest.raises(TypeError, match="callback_allow_private"):
        settings.model_copy(update={"callback_allow_private": True})
    # A copy does not validate: new shorthand tokens would never reach the registry.
    with pytest.raises(TypeError, match="api_tokens"):
        settings.model_copy(update={"api_tokens": ()})


# ---------------------------------------------------------------------------------- origins


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("https://hooks.example.com", "https://hooks.example.com:443"),
        ("HTTP://Telepost:8080/", "http://telepost:8080"),
        ("http://telepost", "http://telepost:80"),
        ("https://*.example.com:*", "https://*.example.com:*"),
        ("http://10.0.0.7:9000", "http://10.0.0.7:9000"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("https://example.com.", "https://example.com:443"),
    ],
)
def test_origin_patterns_parse(text: str, spelled: str) -> None:
    assert str(OriginPattern.parse(text)) == spelled


@pytest.mark.parametrize(
    "text",
    [
        "telepost:8080",
        "ftp://x",
        "https://",
        "https://example.com/path",
        "https://example.com?q",
        "https://user@example.com",
        "https://*",
        "https://*.*.com",
        "https://ex*ample.com",
        "https://example.com:0",
        "https://example.com:65536",
        "https://example.com:8x",
        "http://::1:8080",
        "https://[zz]:1",
        "https://exa mple.com",
    ],
)
def test_invalid_origin_patterns_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        OriginPattern.parse(text)


def refused(url: str, origins: list[str] | None) -> str:
    patterns = None if origins is None else [OriginPattern.parse(o) for o in origins]
    with pytest.raises(CallbackRefused) as raised:
        check_at_admission(url, patterns)
    return raised.value.reason


def admitted(url: str, origins: list[str] | None) -> None:
    check_at_admission(url, None if origins is None else [OriginPattern.parse(o) for o in origins])


def test_without_a_list_any_public_https_origin_is_admitted() -> None:
    admitted("https://consumer.example.com/hooks", None)
    admitted("https://consumer.example.com:8443/hooks", None)
    admitted("https://93.184.215.14/hooks", None)
    assert refused("http://consumer.example.com/hooks", None) == "scheme_not_allowed"
    # A literal private address needs no DNS to be refused.
    for url in (
        "https://127.0.0.1/x",
        "https://10.0.0.7/x",
        "https://[::1]/x",
        "https://169.254.169.254/",
    ):
        assert refused(url, None) == "host_not_allowed"


def test_a_list_allows_only_its_origins() -> None:
    origins = ["http://telepost:8080", "https://*.example.com:*"]
    admitted("http://telepost:8080/api/bot1/v1/jobs/events", origins)
    admitted("https://a.example.com/x", origins)
    admitted("https://a.b.example.com:9443/x", origins)
    admitted("https://A.Example.COM./x", origins)
    for url in (
        "http://telepost:8081/x",  # another port
        "https://telepost:8080/x",  # another scheme
        "http://telepost/x",  # the default port is 80, not 8080
        "https://example.com/x",  # the wildcard is for names under the domain
        "https://evilexample.com/x",
        "https://consumer.test/x",  # public, but not listed
        "http://a.example.com/x",
    ):
        assert refused(url, origins) == "origin_not_allowed", url


def test_an_exact_origin_may_be_private_a_wildcard_may_not() -> None:
    admitted("http://10.0.0.7:9000/x", ["http://10.0.0.7:9000"])
    admitted("http://[::1]:8080/x", ["http://[::1]:8080"])
    assert refused("https://10.1.2.3/x", ["https://*.example.com"]) == "origin_not_allowed"


def resolver_to(*addresses: str) -> Any:
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def test_delivery_pins_a_listed_private_origin_for_that_tenant_only() -> None:
    listed = [OriginPattern.parse("http://telepost:8080")]
    target = check_at_delivery("http://telepost:8080/hook", listed, resolver_to("172.18.0.5"))
    assert (target.host, target.port, target.addresses) == ("telepost", 8080, ("172.18.0.5",))
    # The same URL for a tenant without that origin: http refused before any DNS.
    with pytest.raises(CallbackRefused, match="scheme_not_allowed"):
        check_at_delivery("http://telepost:8080/hook", None, resolver_to("172.18.0.5"))
    # A wildcard origin stays public-only: DNS pointing inside is refused at delivery.
    wildcard = [OriginPattern.parse("https://*.example.com")]
    with pytest.raises(CallbackRefused, match="host_not_allowed"):
        check_at_delivery("https://a.example.com/x", wildcard, resolver_to("10.0.0.1"))
    with pytest.raises(CallbackRefused, match="host_not_allowed"):
        check_at_delivery("https://a.example.com/x", None, resolver_to("169.254.169.254"))


def test_admission_never_resolves() -> None:
    # check_at_admission takes no resolver at all; this pins that it never reaches DNS.
    import socket

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("DNS at admission")

    original = socket.getaddrinfo
    socket.getaddrinfo = boom
    try:
        admitted("https://does-not-resolve.invalid/x", None)
        admitted("http://telepost:8080/x", ["http://telepost:8080"])
    finally:
        socket.getaddrinfo = original


def test_registry_origins_are_parsed_once_valid() -> None:
    registry = TenantRegistry.model_validate(
        {"tenants": {"a": {"callback_origins": ["http://telepost:8080"]}}}
    )
    tenant = registry.get("a")
    assert tenant is not None
    assert tenant.origins == (OriginPattern("http", "telepost", 8080),)
    assert (registry.get("b"), TenantRegistry().tenants) == (None, {})


def test_an_expiry_in_any_time_zone_is_the_same_instant() -> None:
    # 09:00 in Tokyo is NOW (midnight UTC).
    registry = parse_registry(
        document(
            {
                "a": {
                    "api_tokens": [
                        {"sha256": token_digest("t"), "expires_at": "2030-01-01T09:00:00+09:00"}
                    ]
                }
            }
        )
    )
    assert registry.authenticate("t", NOW_MS - 1) == "a"
    assert registry.authenticate("t", NOW_MS) is None


def test_an_alert_url_is_optional_and_must_be_an_outbound_url() -> None:
    registry = parse_registry(
        json.dumps({"tenants": {"acme": {"alert_url": "https://hooks.acme.example/alerts"}}})
    )
    tenant = registry.get("acme")
    assert tenant is not None
    assert tenant.alert_url == "https://hooks.acme.example/alerts"
    assert parse_registry(json.dumps({"tenants": {"acme": {}}})).tenants["acme"].alert_url is None
    for refused in ("ftp://hooks.acme.example/alerts", "https://user:pw@hooks.acme.example/"):
        with pytest.raises(RegistryError, match="alert_url"):
            parse_registry(json.dumps({"tenants": {"acme": {"alert_url": refused}}}))
