"""Admission target rules (reference §2.3) and the settings loader (design §2, §4; ref §4.5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobstream.config.settings import (
    ConfigurationError,
    Settings,
    Tenant,
    load_settings,
    load_targets,
    parse_api_tokens,
)
from jobstream.config.targets import TargetsFile
from jobstream.http.statuses import http_status
from jobstream.jobtypes import registry
from jobstream.jobtypes.candidate_search.params import CandidateSearchParams, parse_params
from jobstream.jobtypes.candidate_search.settings import search_settings
from jobstream.jobtypes.candidate_search.targets import (
    admit_target,
    check_account,
    check_work_type,
)
from jobstream.jobtypes.targeting import resolve_target
from jobstream.protocol.errors import ErrorCode, ProtocolError
from tests.support.validation import validate_error

CANDIDATE_SEARCH = "candidate_search"


def target(
    target_id: str,
    *,
    work_type: str = "illustration",
    enabled: bool = True,
    timeout_ms: int | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": target_id,
        "enabled": enabled,
        "work_type": work_type,
        "source": "catalog",
        "query": {"tags": ["landscape"]},
    }
    if timeout_ms is not None:
        entry["timeout_ms"] = timeout_ms
    return entry


def targets_file(*targets: dict[str, Any], account: str | None = None) -> TargetsFile:
    document: dict[str, Any] = {"targets": list(targets)}
    if account is not None:
        document["account"] = account
    return TargetsFile.model_validate(document)


def search(**params: Any) -> CandidateSearchParams:
    return parse_params(params)


def refused(call: Any, *args: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        call(*args)
    error = caught.value
    assert error.code is ErrorCode.INVALID_PARAMS
    body = error.body()
    validate_error(body)
    assert body["error"]["retryable"] is False
    assert body["error"]["code"] == "invalid_params"
    return error


ONE = targets_file(target("bot1-illust"))
FOUR = targets_file(
    target("bot1-illust"),
    target("bot1-novel", work_type="novel"),
    target("bot2-illust"),
    target("bot2-novel-marunomi", work_type="novel"),
)


# --------------------------------------------------------------------------------------------
# §2.3 step 1: the account


@pytest.mark.parametrize(
    ("requested", "configured"),
    [
        ("default", None),
        ("  default  ", None),
        ("\ufeffdefault\u3000", None),
        ("main", "main"),
        (" main ", "main"),
        ("main", "  main  "),
    ],
)
def test_the_configured_account_is_accepted(requested: str, configured: str | None) -> None:
    check_account(
        search(source={"account": requested}),
        targets_file(account=configured) if configured is not None else ONE,
    )


def test_no_account_in_the_request_is_never_checked() -> None:
    check_account(search(), targets_file(target("a"), account="main"))
    check_account(search(source={"platform": "pixiv"}), targets_file(target("a"), account="main"))


@pytest.mark.parametrize(
    ("requested", "configured", "wanted", "expected_configured"),
    [
        ("other", None, "other", "default"),
        (" other ", "main", "other", "main"),
        ("Default", None, "Default", "default"),
        ("main", " default ", "main", "default"),
        ("\u0085default", None, "\u0085default", "default"),
    ],
)
def test_an_unavailable_account_is_refused(
    requested: str, configured: str | None, wanted: str, expected_configured: str
) -> None:
    file = targets_file(target("a"), account=configured) if configured is not None else ONE
    error = refused(check_account, search(source={"account": requested}), file)
    assert http_status(error) == 400
    assert error.message == f"account '{wanted}' is not available in this deployment"
    assert error.detail == {
        "reason": "account_unavailable",
        "requested": wanted,
        "configured": expected_configured,
    }


# --------------------------------------------------------------------------------------------
# §2.3 step 2: target resolution


def test_the_only_enabled_target_is_chosen_without_a_selector() -> None:
    assert resolve_target(search(), ONE.enabled).id == "bot1-illust"


def test_disabled_targets_are_ignored_without_a_selector() -> None:
    file = targets_file(
        target("off-1", enabled=False), target("on"), target("off-2", enabled=False)
    )
    assert resolve_target(search(), file.enabled).id == "on"


def test_a_selector_chooses_among_several_targets() -> None:
    resolved = resolve_target(search(target_id="bot2-novel-marunomi"), FOUR.enabled)
    assert resolved.id == "bot2-novel-marunomi"
    assert resolved.settings["work_type"] == "novel"


def test_a_selector_is_matched_after_trimming() -> None:
    assert resolve_target(search(target_id="  bot1-novel\u00a0"), FOUR.enabled).id == "bot1-novel"


@pytest.mark.parametrize("selector", ["nope", "BOT1-ILLUST", "bot1", "bot1-illust-x"])
def test_an_unknown_selector_is_404(selector: str) -> None:
    error = refused(resolve_target, search(target_id=selector), FOUR.enabled)
    assert http_status(error) == 404
    assert error.message == "unknown target"
    assert error.detail == {"reason": "unknown_target", "target_id": selector}


def test_a_selector_naming_a_disabled_target_is_unknown() -> None:
    file = targets_file(target("live"), target("retired", enabled=False))
    error = refused(resolve_target, search(target_id="retired"), file.enabled)
    assert http_status(error) == 404
    assert error.detail == {"reason": "unknown_target", "target_id": "retired"}


def test_a_selector_matching_two_enabled_targets_is_ambiguous() -> None:
    file = targets_file(target("twin"), target("other"), target("twin", work_type="novel"))
    error = refused(resolve_target, search(target_id="twin"), file.enabled)
    assert http_status(error) == 409
    assert error.message == "ambiguous target"
    assert error.detail == {"reason": "ambiguous_target", "target_id": "twin"}


def test_a_duplicate_id_is_not_ambiguous_when_one_copy_is_disabled() -> None:
    file = targets_file(target("twin", enabled=False), target("twin", work_type="novel"))
    assert resolve_target(search(target_id="twin"), file.enabled).settings["work_type"] == "novel"


def test_several_enabled_targets_without_a_selector_are_ambiguous() -> None:
    file = targets_file(
        target("z-last"),
        target("off", enabled=False),
        target("a-first", work_type="novel"),
        target("m-middle"),
    )
    error = refused(resolve_target, search(), file.enabled)
    assert http_status(error) == 409
    assert error.message == "more than one candidate search target is configured"
    # config order, not sorted, and disabled targets are not listed
    assert error.detail == {
        "reason": "ambiguous_target",
        "targets": ["z-last", "a-first", "m-middle"],
    }


@pytest.mark.parametrize(
    "file",
    [targets_file(), targets_file(target("off", enabled=False), target("off2", enabled=False))],
)
def test_no_enabled_target_is_400(file: TargetsFile) -> None:
    error = refused(resolve_target, search(), file.enabled)
    assert http_status(error) == 400
    assert error.message == "no candidate search target is configured"
    assert error.detail == {"reason": "no_eligible_target"}


def test_a_selector_with_no_enabled_targets_is_unknown() -> None:
    error = refused(resolve_target, search(target_id="x"), targets_file().enabled)
    assert http_status(error) == 404
    assert error.detail == {"reason": "unknown_target", "target_id": "x"}


# --------------------------------------------------------------------------------------------
# §2.3 step 3: work_types


@pytest.mark.parametrize(
    ("work_types", "target_type"),
    [
        (None, "illustration"),
        ([], "illustration"),
        (["illustration"], "illustration"),
        (["illustration", "novel"], "illustration"),
        (["novel"], "novel"),
        (["novel", "illustration"], "novel"),
    ],
)
def test_work_types_including_the_target_type_are_accepted(
    work_types: list[str] | None, target_type: str
) -> None:
    file = targets_file(target("t", work_type=target_type))
    request = search(constraints={"work_types": work_types})
    check_work_type(request, resolve_target(request, file.enabled))
    assert admit_target(request, file, CANDIDATE_SEARCH).id == "t"


@pytest.mark.parametrize(
    ("work_types", "target_type", "listed"),
    [
        (["novel"], "illustration", "[novel]"),
        (["illustration"], "novel", "[illustration]"),
        (["Illustration"], "illustration", "[Illustration]"),
        (["video", "novel"], "illustration", "[video,novel]"),
        ([" illustration"], "illustration", "[ illustration]"),
    ],
)
def test_work_types_excluding_the_target_type_are_refused(
    work_types: list[str], target_type: str, listed: str
) -> None:
    file = targets_file(target("t", work_type=target_type))
    request = search(constraints={"work_types": work_types})
    error = refused(check_work_type, request, resolve_target(request, file.enabled))
    assert http_status(error) == 400
    assert error.message == f"work_types {listed} does not include the configured target work type"
    assert error.detail == {"reason": "work_type_not_available", "target_type": target_type}


def test_the_work_type_message_for_the_conformance_case() -> None:
    file = targets_file(target("bot1-novel", work_type="novel"))
    error = refused(
        admit_target, search(constraints={"work_types": ["illustration"]}), file, CANDIDATE_SEARCH
    )
    assert error.message == (
        "work_types [illustration] does not include the configured target work type"
    )


# --------------------------------------------------------------------------------------------
# admit_target: the order of the checks


def test_admit_target_returns_the_resolved_target() -> None:
    request = search(
        target_id="bot1-novel",
        source={"platform": "pixiv", "account": "default"},
        constraints={"work_types": ["novel"]},
    )
    resolved = admit_target(request, FOUR, CANDIDATE_SEARCH)
    assert resolved.id == "bot1-novel"
    assert resolved.settings["work_type"] == "novel"


def test_the_account_is_checked_before_the_target() -> None:
    request = search(source={"account": "other"}, target_id="nope")
    error = refused(admit_target, request, FOUR, CANDIDATE_SEARCH)
    assert error.detail is not None
    assert error.detail["reason"] == "account_unavailable"


def test_the_target_is_checked_before_the_work_type() -> None:
    unknown = search(target_id="nope", constraints={"work_types": ["video"]})
    assert http_status(refused(admit_target, unknown, FOUR, CANDIDATE_SEARCH)) == 404
    ambiguous = search(constraints={"work_types": ["video"]})
    assert http_status(refused(admit_target, ambiguous, FOUR, CANDIDATE_SEARCH)) == 409


def test_the_work_type_is_checked_against_the_selected_target() -> None:
    request = search(target_id="bot2-illust", constraints={"work_types": ["novel"]})
    error = refused(admit_target, request, FOUR, CANDIDATE_SEARCH)
    assert error.detail == {"reason": "work_type_not_available", "target_type": "illustration"}


# --------------------------------------------------------------------------------------------
# Settings

BASE_ENV = {"JOBSTREAM_TABLE": "jobstream", "JOBSTREAM_API_TOKENS": "acme=token-acme"}


def env(**overrides: str | None) -> dict[str, str]:
    values: dict[str, str] = dict(BASE_ENV)
    for name, value in overrides.items():
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value
    return values


def settings_error(environ: dict[str, str]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ)
    return str(caught.value)


def test_defaults() -> None:
    settings = load_settings(env())
    assert isinstance(settings, Settings)
    assert settings.table_name == "jobstream"
    assert settings.tenants is not None
    assert settings.tenants.authenticate("token-acme", 0) == "acme"
    assert list(settings.tenants.tenants) == ["acme"]
    assert settings.queued_timeout_ms == 1_800_000
    assert settings.stall_timeout_ms == 900_000
    assert settings.heartbeat_interval_ms == 30_000
    assert settings.lease_ms == 180_000
    # Every ceiling fits in the worker's Lambda timeout (900 s).
    assert settings.default_deadline_ms == 900_000
    assert settings.worker_timeout_s == 900
    assert settings.retention_days == 30
    # The default targets file ships with the project and is valid.
    assert settings.targets_path.is_file()


def test_load_settings_reads_only_the_given_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBSTREAM_QUEUED_TIMEOUT_MS", "abc")
    assert load_settings(env()).queued_timeout_ms == 1_800_000


def test_every_value_can_be_configured(tmp_path: Path) -> None:
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps({"targets": [target("only", timeout_ms=540_000)]}), "utf-8")
    settings = load_settings(
        env(
            JOBSTREAM_TARGETS=str(targets),
            JOBSTREAM_QUEUED_TIMEOUT_MS="660000",
            JOBSTREAM_STALL_TIMEOUT_MS=" 420000 ",
            JOBSTREAM_HEARTBEAT_INTERVAL_MS="10000",
            JOBSTREAM_LEASE_MS="60000",
            JOBSTREAM_DEFAULT_DEADLINE_MS="1200000",
            JOBSTREAM_WORKER_TIMEOUT_S="600",
            JOBSTREAM_RETENTION_DAYS="7",
        )
    )
    assert settings.targets_path == targets
    assert settings.queued_timeout_ms == 660_000
    assert settings.stall_timeout_ms == 420_000
    assert settings.heartbeat_interval_ms == 10_000
    assert settings.lease_ms == 60_000
    # No target goes without a timeout_ms: the default ceiling is never used, so it may exceed.
    assert settings.default_deadline_ms == 1_200_000
    assert settings.worker_timeout_s == 600
    assert settings.retention_days == 7


@pytest.mark.parametrize(
    ("targets", "variables", "named"),
    [
        ([target("slow", timeout_ms=900_001)], {}, "'slow' may run 900001 ms (its timeout_ms)"),
        (
            [target("fine", timeout_ms=300_000), target("default-ceiling")],
            {"JOBSTREAM_DEFAULT_DEADLINE_MS": "1800000"},
            "'default-ceiling' may run 1800000 ms (JOBSTREAM_DEFAULT_DEADLINE_MS",
        ),
        (
            [target("ten-minutes", timeout_ms=600_000)],
            {"JOBSTREAM_WORKER_TIMEOUT_S": "300"},
            "longer than the worker's timeout of 300000 ms (JOBSTREAM_WORKER_TIMEOUT_S)",
        ),
    ],
    ids=["timeout_ms", "default deadline", "shorter worker"],
)
def test_a_target_that_may_outlive_the_worker_stops_start_up(
    tmp_path: Path, targets: list[dict[str, Any]], variables: dict[str, str], named: str
) -> None:
    """A job the worker's Lambda timeout would cut off is a configuration error naming its
    target, not a job that ends `expired` 15 minutes in."""
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"targets": targets}), "utf-8")
    with pytest.raises(ConfigurationError) as raised:
        load_settings(env(JOBSTREAM_TARGETS=str(path), **variables))
    assert named in str(raised.value)
    # A disabled target cannot run: it does not count.
    for entry in targets:
        entry["enabled"] = False
    path.write_text(json.dumps({"targets": [*targets, target("ok", timeout_ms=60_000)]}), "utf-8")
    load_settings(env(JOBSTREAM_TARGETS=str(path), **variables))


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("JOBSTREAM_WORKER_TIMEOUT_S", "901"),
        ("JOBSTREAM_WORKER_TIMEOUT_S", "0"),
        ("JOBSTREAM_RETENTION_DAYS", "0"),
        ("JOBSTREAM_RETENTION_DAYS", "3651"),
        ("JOBSTREAM_RETENTION_DAYS", "30.5"),
    ],
)
def test_worker_timeout_and_retention_are_validated(variable: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_settings(env(**{variable: value}))
    assert variable in str(raised.value)


def test_empty_values_mean_the_default() -> None:
    settings = load_settings(env(JOBSTREAM_QUEUED_TIMEOUT_MS="", JOBSTREAM_STALL_TIMEOUT_MS="  "))
    assert settings.queued_timeout_ms == 1_800_000
    assert settings.stall_timeout_ms == 900_000


def test_the_budget_floor_is_sixty_seconds() -> None:
    assert load_settings(env(JOBSTREAM_QUEUED_TIMEOUT_MS="60000")).queued_timeout_ms == 60_000
    assert load_settings(env(JOBSTREAM_STALL_TIMEOUT_MS="60000")).stall_timeout_ms == 60_000


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "abc"),
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "59999"),
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "0"),
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "-1800000"),
        ("JOBSTREAM_QUEUED_TIMEOUT_MS", "1800000.5"),
        ("JOBSTREAM_STALL_TIMEOUT_MS", "59999"),
        ("JOBSTREAM_STALL_TIMEOUT_MS", "15m"),
        ("JOBSTREAM_HEARTBEAT_INTERVAL_MS", "0"),
        ("JOBSTREAM_HEARTBEAT_INTERVAL_MS", "x"),
        ("JOBSTREAM_LEASE_MS", "-5"),
        ("JOBSTREAM_DEFAULT_DEADLINE_MS", "999"),
        ("JOBSTREAM_DEFAULT_DEADLINE_MS", "never"),
    ],
)
def test_invalid_numbers_stop_with_the_variable_named(variable: str, value: str) -> None:
    message = settings_error(env(**{variable: value}))
    assert variable in message
    # Only the offending variable is blamed.
    others = [
        name
        for name in (
            "JOBSTREAM_QUEUED_TIMEOUT_MS",
            "JOBSTREAM_STALL_TIMEOUT_MS",
            "JOBSTREAM_HEARTBEAT_INTERVAL_MS",
            "JOBSTREAM_LEASE_MS",
            "JOBSTREAM_DEFAULT_DEADLINE_MS",
            "JOBSTREAM_TABLE",
            "JOBSTREAM_API_TOKENS",
        )
        if name != variable
    ]
    assert not any(name in message for name in others), message


def test_several_problems_are_all_named() -> None:
    message = settings_error(
        env(JOBSTREAM_QUEUED_TIMEOUT_MS="abc", JOBSTREAM_STALL_TIMEOUT_MS="1", JOBSTREAM_TABLE=None)
    )
    assert "JOBSTREAM_QUEUED_TIMEOUT_MS" in message
    assert "JOBSTREAM_STALL_TIMEOUT_MS" in message
    assert "JOBSTREAM_TABLE" in message


@pytest.mark.parametrize("value", [None, "", "   "])
def test_the_table_is_required(value: str | None) -> None:
    assert "JOBSTREAM_TABLE" in settings_error(env(JOBSTREAM_TABLE=value))


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        ",",
        " , ",
        "x",
        "acme",
        "acme=",
        "=token",
        " = ",
        "acme=token,beta",
        "acme=token,beta=",
        "acme=same,beta=same",
        "acme=same, beta = same ",
    ],
)
def test_api_tokens_must_be_well_formed(value: str | None) -> None:
    message = settings_error(env(JOBSTREAM_API_TOKENS=value))
    assert "JOBSTREAM_API_TOKENS" in message


def test_a_configuration_error_never_echoes_a_token() -> None:
    message = settings_error(env(JOBSTREAM_API_TOKENS="acme=s3cr3t-value,beta=s3cr3t-value"))
    assert "s3cr3t-value" not in message
    message = settings_error(env(JOBSTREAM_API_TOKENS="acme=s3cr3t-value,broken"))
    assert "s3cr3t-value" not in message


def test_parse_api_tokens() -> None:
    assert parse_api_tokens(" acme = t1 ,beta=t2,, ") == (
        Tenant(name="acme", token="t1"),
        Tenant(name="beta", token="t2"),
    )
    # One tenant may hold several tokens (rotation); a token belongs to one tenant only.
    assert parse_api_tokens("acme=t1,acme=t2") == (
        Tenant(name="acme", token="t1"),
        Tenant(name="acme", token="t2"),
    )
    assert parse_api_tokens("acme=a=b") == (Tenant(name="acme", token="a=b"),)
    with pytest.raises(ValueError, match="more than once"):
        parse_api_tokens("acme=t1,beta=t1")
    with pytest.raises(ValueError, match="tenant=token"):
        parse_api_tokens("x")


def test_a_missing_targets_file_stops(tmp_path: Path) -> None:
    message = settings_error(env(JOBSTREAM_TARGETS=str(tmp_path / "absent.json")))
    assert "JOBSTREAM_TARGETS" in message


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "",
        "[]",
        json.dumps({"targets": "none"}),
        json.dumps({"targets": [{"work_type": "novel"}]}),
        json.dumps({"targets": [target(" padded ")]}),
        json.dumps({"targets": [target("t", timeout_ms=999)]}),
        json.dumps({"account": "", "targets": [target("t")]}),
    ],
)
def test_an_invalid_targets_file_stops(tmp_path: Path, content: str) -> None:
    path = tmp_path / "targets.json"
    path.write_text(content, encoding="utf-8")
    message = settings_error(env(JOBSTREAM_TARGETS=str(path)))
    assert "JOBSTREAM_TARGETS" in message


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "t"},
        target("t", work_type="video"),
        {**target("t"), "source": "twitter"},
        {**target("t"), "unknown_key": 1},
        {**target("t"), "query": {"tags": []}},
        {**target("t"), "job_types": ["no_such_type"]},
    ],
)
def test_job_types_refuse_targets_their_settings_do_not_fit(tmp_path: Path, entry: Any) -> None:
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"targets": [entry]}), encoding="utf-8")
    targets = load_targets(path)  # the shared part is fine: each job type checks its own
    with pytest.raises(ConfigurationError) as caught:
        registry.checked_targets(targets)
    assert str(caught.value).startswith("JOBSTREAM_TARGETS: target 't'")


def test_a_target_serving_other_types_only_is_not_checked_by_candidate_search() -> None:
    entry = {"id": "t", "job_types": ["asset_fetch"], "work_type": "novel", "source": "pixiv"}
    targets = TargetsFile.model_validate({"targets": [entry]})
    assert registry.checked_targets(targets) is targets
    assert targets.enabled_for("asset_fetch") == targets.targets
    assert targets.enabled_for("candidate_search") == []


def test_the_file_keeps_its_flat_form_and_each_type_reads_its_settings() -> None:
    entry = {**target("t", timeout_ms=5_000), "limit": 4}
    parsed = TargetsFile.model_validate({"targets": [entry]}).targets[0]
    assert (parsed.id, parsed.timeout_ms, parsed.job_types) == ("t", 5_000, None)
    assert search_settings(parsed).limit == 4
    assert search_settings(parsed).query.tags == ["landscape"]
    assert set(parsed.settings) == {"work_type", "source", "query", "limit"}


def test_a_valid_targets_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "targets.json"
    path.write_text(
        json.dumps({"account": "main", "targets": [target("a"), target("b", enabled=False)]}),
        encoding="utf-8",
    )
    settings = load_settings(env(JOBSTREAM_TARGETS=str(path)))
    assert settings.targets_path == path


# -- shared resources -------------------------------------------------------------------------


def pixiv_target(target_id: str = "p1", **more: Any) -> dict[str, Any]:
    return {**target(target_id), "source": "pixiv", **more}


def test_a_pixiv_target_runs_against_the_builtin_pixiv_resource_one_job_at_a_time() -> None:
    file = registry.check_targets(targets_file(pixiv_target(), target("catalog-1")))
    name, limits = registry.resource_of(file, CANDIDATE_SEARCH, "p1") or ("", None)
    assert name == "pixiv"
    assert limits is not None
    assert (limits.max_concurrent, limits.per_minute) == (1, None)
    # A catalog target has no limit unless it names one.
    assert registry.resource_of(file, CANDIDATE_SEARCH, "catalog-1") is None
    assert registry.resource_of(file, "asset_fetch", "p1") == (name, limits)


def test_the_file_defines_resources_and_may_redefine_the_builtin_one() -> None:
    file = TargetsFile.model_validate(
        {
            "resources": {
                "pixiv": {"max_concurrent": 2, "per_minute": 90},
                "mirror": {"max_concurrent": 4},
            },
            "targets": [pixiv_target(), {**target("c1"), "resource": "mirror"}],
        }
    )
    registry.check_targets(file)
    pixiv = registry.resource_of(file, CANDIDATE_SEARCH, "p1")
    assert pixiv is not None
    assert (pixiv[1].max_concurrent, pixiv[1].request_interval_ms) == (2, 667)
    mirror = registry.resource_of(file, CANDIDATE_SEARCH, "c1")
    assert mirror is not None
    assert (mirror[0], mirror[1].max_concurrent) == ("mirror", 4)


def test_a_target_naming_an_undefined_resource_is_refused_with_its_name() -> None:
    file = targets_file({**target("c1"), "resource": "nowhere"})
    with pytest.raises(ValueError, match=r"target 'c1' names resource 'nowhere'"):
        registry.check_targets(file)


@pytest.mark.parametrize(
    "document",
    [
        {"resources": {"a": {"max_concurrent": 0}}, "targets": []},
        {"resources": {"a": {"max_concurrent": 501}}, "targets": []},
        {"resources": {"a": {"max_concurrent": 1, "per_minute": 0}}, "targets": []},
        {"resources": {"a": {"max_concurrent": 1, "burst": 3}}, "targets": []},
        {"resources": {"a#b": {"max_concurrent": 1}}, "targets": []},
        {"resources": {"a": {"max_concurrent": "2"}}, "targets": []},
        {"targets": [{**target("c1"), "resource": ""}]},
        {"targets": [{**target("c1"), "max_attempts": 0}]},
        {"targets": [{**target("c1"), "max_attempts": 11}]},
    ],
)
def test_invalid_resources_and_attempts_are_refused(document: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TargetsFile.model_validate(document)


def test_max_attempts_defaults_to_three() -> None:
    assert targets_file(target("c1")).targets[0].max_attempts == 3


def test_the_sweep_looks_after_the_resources_in_use_and_those_the_file_defines() -> None:
    catalog_only = registry.check_targets(targets_file(target("c1")))
    assert registry.resources_in_use(catalog_only) == {}  # the built-in pixiv one unused
    assert "pixiv" in registry.resources(catalog_only)  # still listed for the operator
    file = TargetsFile.model_validate(
        {"resources": {"spare": {"max_concurrent": 1}}, "targets": [pixiv_target(), target("c1")]}
    )
    assert sorted(registry.resources_in_use(registry.check_targets(file))) == ["pixiv", "spare"]
