"""`jobstream tenants …` with Typer's runner: against a registry file (the running functions read
the same file) and against a Secrets Manager secret (moto)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner, Result

from jobstream import runtime as runtime_module
from jobstream.config import registry as registry_module
from jobstream.config.registry import load_registry
from jobstream.config.signing_secrets import decode_secret
from jobstream.config.tenants import TenantRegistry, parse_registry, token_digest
from jobstream.runtime import Runtime
from jobstream_cli.app import app
from jobstream_cli.errors import CliError
from jobstream_cli.tenant_registry import (
    EDIT_ATTEMPTS,
    FileStore,
    Issued,
    SecretStore,
    add_tenant,
    remove_tenant,
    rotate_token,
)
from tests.support.harness import Api, canonical_task
from tests.support.local_env import local_env_dir, published

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("JOBSTREAM_TENANTS", "JOBSTREAM_TENANTS_SECRET", "JOBSTREAM_API_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    registry_module.forget_cached()
    yield
    registry_module.forget_cached()


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(
        app, ["--output", "json", "tenants", *args], input=stdin, env={"COLUMNS": "240"}
    )


def ok(*args: str, stdin: str | None = None) -> Any:
    result = cli(*args, stdin=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    return tmp_path / "tenants.json"


@pytest.fixture
def served(rt: Runtime, registry_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The handlers read the consumer registry from the file the CLI edits."""
    settings = rt.settings.model_copy(update={"tenants": None, "tenants_path": registry_file})
    monkeypatch.setattr(runtime_module, "runtime", lambda: replace(rt, settings=settings))
    return registry_file


def test_add_prints_the_token_once_and_stores_only_its_digest(registry_file: Path) -> None:
    added = ok("--file", str(registry_file), "add", "acme", "--origin", "http://telepost:8080")
    token, secret = added["api_token"], added["signing_secret"]
    assert token.startswith("jst_")
    assert len(token) > 40
    assert len(decode_secret(secret)) == 32
    text = registry_file.read_text(encoding="utf-8")
    assert token not in text
    assert token_digest(token) in text
    registry = parse_registry(text)
    assert registry.authenticate(token, 0) == "acme"
    tenant = registry.get("acme")
    assert tenant is not None
    assert tenant.callback_origins == ("http://telepost:8080",)
    assert registry_file.stat().st_mode & 0o077 == 0  # only its owner may read the secrets
    # Listing shows what is set, never a value.
    listed = cli("--file", str(registry_file), "list")
    assert token not in listed.output
    assert secret not in listed.output
    (row,) = json.loads(listed.stdout)
    assert (row["tenant"], row["callback_token"], row["callback_origins"]) == (
        "acme",
        False,
        ["http://telepost:8080"],
    )
    assert [entry["in_force"] for entry in row["api_tokens"]] == [True]


def test_a_rotated_token_replaces_the_old_one_at_the_next_request(served: Path) -> None:
    token = ok("--file", str(served), "add", "acme")["api_token"]
    created = Api(token=token).post("/jobs", canonical_task())
    assert created.status == 202
    # With an overlap both work; the new one sees the same jobs.
    rotated = ok("--file", str(served), "rotate-token", "acme", "--overlap", "1h")["api_token"]
    assert Api(token=token).get("/jobs").status == 200
    assert (
        Api(token=rotated).get("/jobs").body["jobs"][0]["job_id"] == (created.body["job"]["job_id"])
    )
    listed = ok("--file", str(served), "list")[0]["api_tokens"]
    assert [entry["expires_at"] is None for entry in listed] == [True, False]
    # Without one the old token ends now: no deploy, no restart.
    final = ok("--file", str(served), "rotate-token", "acme", "--overlap", "0")["api_token"]
    for old in (token, rotated):
        assert Api(token=old).get("/jobs").status == 401
    assert Api(token=final).get("/jobs").status == 200


def test_a_consumers_existing_token_can_be_imported(served: Path) -> None:
    added = ok("--file", str(served), "add", "telepost", "--api-token-stdin", stdin="legacy\n")
    assert added["api_token"] is None  # nothing new to show
    assert Api(token="legacy").post("/jobs", canonical_task()).status == 202


def test_secret_rotation_callback_token_origins_and_removal(registry_file: Path) -> None:
    where = ("--file", str(registry_file))
    first = ok(*where, "add", "acme")["signing_secret"]
    second = ok(*where, "rotate-secret", "acme", "--overlap", "2h")["signing_secret"]
    assert first != second
    tenant = parse_registry(registry_file.read_text(encoding="utf-8")).get("acme")
    assert tenant is not None
    assert [entry.secret for entry in tenant.signing_secrets] == [second, first]
    assert tenant.signing_secrets[1].expires_at is not None
    ok(*where, "set-callback-token", "acme", stdin="consumer-issued\n")
    ok(*where, "set-origins", "acme", "http://telepost:8080", "https://*.example.com")
    tenant = parse_registry(registry_file.read_text(encoding="utf-8")).get("acme")
    assert tenant is not None
    assert tenant.callback_token == "consumer-issued"
    assert tenant.callback_origins == ("http://telepost:8080", "https://*.example.com")
    ok(*where, "set-origins", "acme", "--any-public")
    ok(*where, "set-callback-token", "acme", "--clear")
    tenant = parse_registry(registry_file.read_text(encoding="utf-8")).get("acme")
    assert tenant is not None
    assert (tenant.callback_origins, tenant.callback_token) == (None, None)
    refused = cli(*where, "remove", "acme")
    assert (refused.exit_code, "--yes" in refused.stderr) == (1, True)
    ok(*where, "remove", "acme", "--yes")
    registry = parse_registry(registry_file.read_text(encoding="utf-8"))
    assert (registry.tenants, list(registry.removed_tenants)) == ({}, ["acme"])


def test_quotas_are_set_one_at_a_time_and_refuse_at_once(served: Path) -> None:
    token = ok("--file", str(served), "add", "acme")["api_token"]
    done = ok("--file", str(served), "set-quotas", "acme", "--max-open-jobs", "1")
    assert done["action"] == "quotas: max_open_jobs 1"
    ok("--file", str(served), "set-quotas", "acme", "--admissions-per-minute", "100")
    assert ok("--file", str(served), "list")[0]["quotas"] == {
        "max_open_jobs": 1,
        "admissions_per_minute": 100,
    }
    # In force at the next request: no deploy, no restart.
    assert Api(token=token).post("/jobs", canonical_task()).status == 202
    refused = Api(token=token).post("/jobs", canonical_task(idempotency_key="another"))
    assert refused.status == 429
    # A quota raise (the runbook's step) admits it at once.
    ok("--file", str(served), "set-quotas", "acme", "--max-open-jobs", "2")
    assert Api(token=token).post("/jobs", canonical_task(idempotency_key="another")).status == 202
    cleared = ok(
        "--file",
        str(served),
        "set-quotas",
        "acme",
        "--max-open-jobs",
        "unlimited",
        "--admissions-per-minute",
        "unlimited",
    )
    assert cleared["action"] == "quotas: none (unlimited)"
    assert ok("--file", str(served), "list")[0]["quotas"] is None
    assert "quotas" not in json.loads(served.read_text())["tenants"]["acme"]


def test_a_removed_name_is_not_added_again_by_accident(served: Path) -> None:
    """Job ids and listing keys derive from the tenant's name: a consumer added under a removed
    one's name would see, cancel and ack the old consumer's jobs. The name stays taken."""
    where = ("--file", str(served))
    old = ok(*where, "add", "acme")["api_token"]
    job_id = Api(token=old).post("/jobs", canonical_task()).body["job"]["job_id"]
    ok(*where, "remove", "acme", "--yes")
    assert Api(token=old).get("/jobs").status == 401
    before = served.read_bytes()
    refused = cli(*where, "add", "acme")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("jobstream: tenant 'acme' was removed on ")
    assert "`jobstream tenants add acme --restore` brings that consumer back" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert served.read_bytes() == before
    # Listed, so the operator sees why the name is taken.
    (row,) = ok(*where, "list")
    assert (row["tenant"], row["api_tokens"], row["removed_at"] is not None) == ("acme", [], True)
    # Restored on purpose: the same consumer, with new credentials and its own jobs.
    restored = ok(*where, "add", "acme", "--restore")
    assert restored["action"] == "restored"
    assert Api(token=restored["api_token"]).get("/jobs").body["jobs"][0]["job_id"] == job_id
    assert Api(token=old).get("/jobs").status == 401  # the removal ended the old token for good
    assert parse_registry(served.read_bytes()).removed_tenants == {}
    assert ok(*where, "list")[0]["removed_at"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("add", "acme#C#x"), "is not allowed"),
        (("add", "beta", "--origin", "telepost:8080"), "is not an origin"),
        (("rotate-token", "ghost"), "no tenant 'ghost'"),
        (("rotate-token", "acme", "--overlap", "soon"), "not a duration"),
        (("set-callback-token", "acme"), "no callback token on stdin"),
        (("set-origins", "acme"), "give the origins, or --any-public"),
        (("add", "acme"), "exists already"),
        (("add", "acme", "--restore"), "exists already"),
        (("add", "ghost", "--restore"), "tenant 'ghost' was never removed: nothing to restore"),
        (("rotate-token", "gone"), "tenant 'gone' was removed on 2026-12-03T00:00:00Z"),
        (("remove", "gone", "--yes"), "`jobstream tenants add gone --restore` brings it back"),
        (("set-quotas", "acme"), "give --max-open-jobs, --admissions-per-minute or both"),
        (("set-quotas", "acme", "--max-open-jobs", "0"), "a whole number from 1, or unlimited"),
        (("set-quotas", "acme", "--admissions-per-minute", "ten"), "a whole number from 1"),
        (("set-quotas", "gone", "--max-open-jobs", "5"), "tenant 'gone' was removed"),
    ],
)
def test_bad_requests_are_one_line_and_change_nothing(
    registry_file: Path, args: tuple[str, ...], message: str
) -> None:
    ok("--file", str(registry_file), "add", "acme")
    FileStore(registry_file).edit(lambda registry: (registry.remove("gone", NOW), None))
    before = registry_file.read_bytes()
    result = cli("--file", str(registry_file), *args, stdin="")
    assert result.exit_code in (1, 2)
    assert message in result.output
    assert "Traceback" not in result.output
    assert registry_file.read_bytes() == before


def test_the_registry_must_be_named_and_the_shorthand_cannot_be_edited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = cli("list")
    assert (result.exit_code, "--file PATH" in result.stderr) == (1, True)
    monkeypatch.setenv("JOBSTREAM_API_TOKENS", "acme=token")
    result = cli("list")
    assert (result.exit_code, "shorthand" in result.stderr) == (1, True)


def test_the_environment_names_the_registry_and_local_reads_the_stacks(
    registry_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBSTREAM_TENANTS", str(registry_file))
    ok("add", "acme")
    monkeypatch.delenv("JOBSTREAM_TENANTS")
    values = {"JOBSTREAM_TENANTS": str(registry_file)}
    with local_env_dir(tmp_path) as folder, published(folder, "http://127.0.0.1:3000", **values):
        result = CliRunner().invoke(app, ["--local", "--output", "json", "tenants", "list"])
    assert result.exit_code == 0, result.output
    assert [row["tenant"] for row in json.loads(result.stdout)] == ["acme"]


@pytest.fixture
def secret(aws: None) -> str:
    name = f"jobstream-tenants-{uuid.uuid4().hex[:8]}"
    boto3.client("secretsmanager").create_secret(Name=name, SecretString='{"tenants": {}}')
    return name


def test_the_deployed_registry_is_edited_in_secrets_manager(
    rt: Runtime, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = ok("--secret", secret, "add", "acme")["api_token"]
    stored = boto3.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]
    assert token not in stored
    # The functions read it as they do on AWS.
    settings = rt.settings.model_copy(
        update={"tenants": None, "tenants_secret": secret, "tenants_max_age_s": 0}
    )
    monkeypatch.setattr(runtime_module, "runtime", lambda: replace(rt, settings=settings))
    assert load_registry(settings).authenticate(token, 0) == "acme"
    assert Api(token=token).post("/jobs", canonical_task()).status == 202
    rotated = ok("--secret", secret, "rotate-token", "acme", "--overlap", "0")["api_token"]
    assert Api(token=token).get("/jobs").status == 401
    assert Api(token=rotated).get("/jobs").status == 200
    # The environment names it as on AWS.
    monkeypatch.setenv("JOBSTREAM_TENANTS_SECRET", secret)
    assert [row["tenant"] for row in ok("list")] == ["acme"]
    missing = cli("--secret", "no-such-secret", "list")
    assert (missing.exit_code, "AWS ResourceNotFoundException" in missing.stderr) == (1, True)


# --- concurrent edits -------------------------------------------------------------------------


def _adding(name: str) -> Callable[[TenantRegistry], tuple[TenantRegistry, Issued]]:
    def change(registry: TenantRegistry) -> tuple[TenantRegistry, Issued]:
        return add_tenant(registry, name, now=NOW, origins=None, signing_secret=False)

    return change


def _current_text(secret: str) -> str:
    text: str = boto3.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]
    return text


def _current(secret: str) -> tuple[str, set[str]]:
    response = boto3.client("secretsmanager").get_secret_value(SecretId=secret)
    return response["VersionId"], set(parse_registry(response["SecretString"]).tenants)


def test_a_secret_edit_racing_another_keeps_both(secret: str) -> None:
    """Another operator's edit lands between this edit's read and its write: this one is read
    again and applied on top, so neither is lost."""
    store = SecretStore(secret, boto3.client("secretsmanager"), pause=lambda _seconds: None)
    other = SecretStore(secret, boto3.client("secretsmanager"))
    runs: list[set[str]] = []

    def racing(registry: TenantRegistry) -> tuple[TenantRegistry, Issued]:
        runs.append(set(registry.tenants))
        if len(runs) == 1:
            other.edit(_adding("globex"))
        return _adding("acme")(registry)

    assert store.edit(racing).tenant == "acme"
    assert runs == [set(), {"globex"}]
    assert _current(secret)[1] == {"acme", "globex"}


def test_a_secret_edit_that_always_loses_the_race_takes_no_effect(secret: str) -> None:
    waits: list[float] = []
    store = SecretStore(secret, boto3.client("secretsmanager"), pause=waits.append)
    other = SecretStore(secret, boto3.client("secretsmanager"))
    rivals = iter(f"rival-{index}" for index in range(EDIT_ATTEMPTS))

    def always_racing(registry: TenantRegistry) -> tuple[TenantRegistry, Issued]:
        other.edit(_adding(next(rivals)))
        return _adding("acme")(registry)

    with pytest.raises(CliError, match=f"kept changing while this edit ran \\({EDIT_ATTEMPTS}"):
        store.edit(always_racing)
    _, tenants = _current(secret)
    assert tenants == {f"rival-{index}" for index in range(EDIT_ATTEMPTS)}
    # Tries apart, longer each time, so that racing edits stop colliding.
    assert len(waits) == EDIT_ATTEMPTS - 1
    assert all(0.1 * n <= wait <= 0.5 * n for n, wait in enumerate(waits, start=1))


def test_a_promotion_whose_answer_was_lost_is_not_applied_twice(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore repeats a request whose answer was lost: the repeat of a move that landed is
    refused, and the edit is still this one's success, applied once."""
    client = boto3.client("secretsmanager")
    move = client.update_secret_version_stage

    def landed_then_repeated(**kwargs: Any) -> Any:
        move(**kwargs)
        return move(**kwargs)

    monkeypatch.setattr(client, "update_secret_version_stage", landed_then_repeated)
    runs: list[int] = []

    def counted(registry: TenantRegistry) -> tuple[TenantRegistry, Issued]:
        runs.append(1)
        return _adding("acme")(registry)

    issued = SecretStore(secret, client).edit(counted)
    assert (issued.tenant, len(runs)) == ("acme", 1)
    assert issued.api_token is not None
    stored = parse_registry(_current_text(secret)).tenants["acme"]
    assert token_digest(issued.api_token) in json.dumps(stored.model_dump(mode="json"))


def test_a_refused_promotion_that_is_no_race_is_an_error(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = boto3.client("secretsmanager")
    version, _ = _current(secret)

    def refuse(**_kwargs: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "InvalidParameterException", "Message": "no"}},
            "UpdateSecretVersionStage",
        )

    monkeypatch.setattr(client, "update_secret_version_stage", refuse)
    with pytest.raises(ClientError):
        SecretStore(secret, client).edit(_adding("acme"))
    # The version written is not current: the functions still read the one before.
    assert _current(secret) == (version, set())


def test_each_cli_edit_of_the_secret_is_a_promoted_version(secret: str) -> None:
    versions = [_current(secret)[0]]
    for name in ("acme", "globex"):
        ok("--secret", secret, "add", name, "--no-signing-secret")
        versions.append(_current(secret)[0])
    assert len(set(versions)) == 3
    assert _current(secret)[1] == {"acme", "globex"}
    labels = {
        entry["VersionId"]: entry["VersionStages"]
        for entry in boto3.client("secretsmanager").list_secret_version_ids(SecretId=secret)[
            "Versions"
        ]
    }
    assert sorted(labels[versions[2]]) == ["AWSCURRENT", "jobstream-edit"]
    assert labels[versions[1]] == ["AWSPREVIOUS"]


def test_an_edit_racing_a_removal_never_brings_the_tenant_back(secret: str) -> None:
    """A rotation read the registry before another operator removed the tenant: it is read
    again, finds the tombstone, and changes nothing."""
    SecretStore(secret, boto3.client("secretsmanager")).edit(_adding("acme"))
    store = SecretStore(secret, boto3.client("secretsmanager"), pause=lambda _seconds: None)
    other = SecretStore(secret, boto3.client("secretsmanager"))
    runs: list[set[str]] = []

    def racing(registry: TenantRegistry) -> tuple[TenantRegistry, Issued]:
        runs.append(set(registry.tenants))
        if len(runs) == 1:
            other.edit(lambda current: (remove_tenant(current, "acme", now=NOW), None))
        return rotate_token(registry, "acme", now=NOW, overlap=timedelta(0))

    with pytest.raises(CliError, match="tenant 'acme' was removed on"):
        store.edit(racing)
    assert runs == [{"acme"}, set()]
    registry = parse_registry(_current_text(secret))
    assert (registry.tenants, list(registry.removed_tenants)) == ({}, ["acme"])


def test_concurrent_file_edits_are_all_kept(registry_file: Path) -> None:
    names = [f"tenant-{index}" for index in range(12)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda name: FileStore(registry_file).edit(_adding(name)), names))
    assert set(FileStore(registry_file).read().tenants) == set(names)
