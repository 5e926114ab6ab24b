"""The deployment rehearsal's own logic, without an emulator: what it derives from the template,
how it reads the processed template and the logs, the shims' policy checks, the mutations.
(The rehearsal itself and its mutants run in `make rehearse`, tests/rehearsal.)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from jobstream_local.template import TEMPLATE, Template
from rehearsal import deploy, emulator_main, gateway, guided, mutations, plan, plugins, tenants
from rehearsal.logs import explain, is_failure
from rehearsal.plan import (
    Credentials,
    for_architecture,
    for_runtime,
    layer_build_environment,
    parameter_overrides,
    python_version,
    registry_secret,
)
from rehearsal.run import emulator_shims, scheduled_functions
from rehearsal.stack import RouteSpec, routes_from_body
from rehearsal.toolchain import REPOSITORY, RehearsalError

CREDENTIALS = Credentials(
    tenant_a="a",
    token_a="token-a",
    tenant_b="b",
    token_b="token-b",
    callback_token="callback-token",
    signing_secret="whsec_c2VjcmV0",
)


@pytest.fixture
def document() -> dict[str, Any]:
    return Template.load(TEMPLATE).document


def _architectures(document: dict[str, Any]) -> list[Any]:
    found = [document["Globals"]["Function"].get("Architectures")]
    for resource in document["Resources"].values():
        found += [
            resource.get("Properties", {}).get("Architectures"),
            resource.get("Properties", {}).get("CompatibleArchitectures"),
            resource.get("Metadata", {}).get("BuildArchitecture"),
        ]
    return [value for value in found if value is not None]


def test_the_host_build_names_only_the_hosts_architecture(document: dict[str, Any]) -> None:
    original = copy.deepcopy(document)
    rewritten, changes = for_architecture(document, "x86_64")

    assert "arm64" in str(_architectures(original))
    assert all(value in (["x86_64"], "x86_64") for value in _architectures(rewritten))
    assert changes
    assert all("-> " in change for change in changes)
    assert document == original  # the template itself is untouched


def test_a_template_already_for_the_host_needs_no_change(document: dict[str, Any]) -> None:
    rewritten, _ = for_architecture(document, "x86_64")
    assert for_architecture(rewritten, "x86_64") == (rewritten, [])


def test_the_layer_makefile_is_told_the_architecture_it_builds_for(
    document: dict[str, Any],
) -> None:
    # sam hands a Makefile no architecture: the host build must not ship the template's wheels.
    assert layer_build_environment(document) == {
        "LAYER_ARCHITECTURE": "arm64",
        "LAYER_PYTHON_VERSION": "3.13",
    }
    rewritten, _ = for_architecture(document, "x86_64")
    rewritten, _ = for_runtime(rewritten, "3.11")
    assert layer_build_environment(rewritten) == {
        "LAYER_ARCHITECTURE": "x86_64",
        "LAYER_PYTHON_VERSION": "3.11",
    }


def test_the_runtime_shim_rewrites_every_runtime_and_only_them(
    document: dict[str, Any],
) -> None:
    rewritten, changes = for_runtime(document, "3.11")
    assert python_version(rewritten) == "3.11"
    layers = [r for r in rewritten["Resources"].values() if r["Type"] == plan.LAYER]
    assert all(r["Properties"]["CompatibleRuntimes"] == ["python3.11"] for r in layers)
    assert changes == [
        "CompatibleRuntimes ['python3.13'] -> ['python3.11']",
        "Runtime python3.13 -> python3.11",
    ]
    assert python_version(document) == "3.13"  # the template itself is untouched
    assert for_runtime(document, "3.13") == (document, [])


def test_no_parameter_carries_a_secret(document: dict[str, Any]) -> None:
    # The tenants go into the deployed registry after the deploy, as an operator adds them.
    assert parameter_overrides(document) == {}


def test_a_required_parameter_the_rehearsal_cannot_fill_is_a_clear_failure(
    document: dict[str, Any],
) -> None:
    document["Parameters"]["DomainName"] = {"Type": "String"}
    with pytest.raises(RehearsalError, match=r"without a default .*DomainName"):
        parameter_overrides(document)


def test_the_registry_is_the_secret_that_feeds_the_registry_variable(
    document: dict[str, Any],
) -> None:
    assert document["Resources"][registry_secret(document)]["Type"] == (
        "AWS::SecretsManager::Secret"
    )
    # Found by the variable the code reads, not by the resource's name.
    resources = document["Resources"]
    resources["ConsumerRegistry"] = resources.pop(registry_secret(document))
    variables = document["Globals"]["Function"]["Environment"]["Variables"]
    variables["JOBSTREAM_TENANTS_SECRET"] = {"Ref": "ConsumerRegistry"}
    assert registry_secret(document) == "ConsumerRegistry"
    # Created by the stack or adopted by a parameter: the created one is the rehearsal's.
    variables["JOBSTREAM_TENANTS_SECRET"] = {
        "Fn::If": ["Creates", {"Ref": "ConsumerRegistry"}, {"Ref": "ExistingTenantsSecretArn"}]
    }
    assert registry_secret(document) == "ConsumerRegistry"


def test_a_template_without_a_registry_secret_is_a_clear_failure(
    document: dict[str, Any],
) -> None:
    del document["Globals"]["Function"]["Environment"]["Variables"]["JOBSTREAM_TENANTS_SECRET"]
    with pytest.raises(RehearsalError, match="feed JOBSTREAM_TENANTS_SECRET"):
        registry_secret(document)


def test_one_python_runtime_for_every_function(document: dict[str, Any]) -> None:
    assert python_version(document) == "3.13"
    first = next(r for r in document["Resources"].values() if r["Type"] == mutations.FUNCTION)
    first["Properties"]["Runtime"] = "python3.12"
    with pytest.raises(RehearsalError, match=r"one python3\.x runtime"):
        python_version(document)


def _integration(function: str) -> dict[str, Any]:
    uri = (
        "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/"
        f"${{{function}.Arn}}/invocations"
    )
    return {
        "x-amazon-apigateway-integration": {
            "httpMethod": "POST",
            "type": "aws_proxy",
            "uri": {"Fn::Sub": uri},
            "payloadFormatVersion": "2.0",
        },
        "responses": {},
    }


def test_routes_come_from_sams_openapi_body() -> None:
    body = {
        "paths": {
            "/jobs": {
                "post": _integration("AdmissionFunction"),
                "get": _integration("JobsFunction"),
            },
            "/jobs/{job_id}": {"get": _integration("JobsFunction")},
            "$default": {"x-amazon-apigateway-any-method": _integration("JobsFunction")},
        }
    }
    assert routes_from_body(body) == [
        RouteSpec("POST /jobs", "AdmissionFunction", "2.0"),
        RouteSpec("GET /jobs", "JobsFunction", "2.0"),
        RouteSpec("GET /jobs/{job_id}", "JobsFunction", "2.0"),
        RouteSpec("$default", "JobsFunction", "2.0"),
    ]


def test_a_route_to_anything_but_a_function_is_refused() -> None:
    body = {"paths": {"/x": {"get": {"x-amazon-apigateway-integration": {"uri": "http://x"}}}}}
    with pytest.raises(RehearsalError, match="unsupported integration"):
        routes_from_body(body)


def _api_permission(pattern: str, service: str = "apigateway.amazonaws.com") -> dict[str, Any]:
    return {
        "Statement": [
            {
                "Sid": "permission",
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "lambda:InvokeFunction",
                "Resource": "arn:aws:lambda:us-east-1:000000000000:function:f",
                "Condition": {"ArnLike": {"AWS:SourceArn": pattern}},
            }
        ]
    }


API = "arn:aws:execute-api:us-east-1:000000000000:abc"


@pytest.mark.parametrize(
    ("pattern", "source", "allowed"),
    [
        (f"{API}/*/POST/jobs", f"{API}/$default/POST/jobs", True),
        (f"{API}/*/POST/jobs", f"{API}/$default/GET/jobs", False),
        (f"{API}/*/GET/jobs/*/events", f"{API}/$default/GET/jobs/job_1/events", True),
        (f"{API}/*/*", f"{API}/$default/DELETE/anything/else", True),
        (f"{API}/*/*", "arn:aws:execute-api:us-east-1:000000000000:other/$default/GET/x", False),
    ],
)
def test_api_gateway_needs_a_matching_invoke_permission(
    pattern: str, source: str, allowed: bool
) -> None:
    assert emulator_main.source_arn_allowed(_api_permission(pattern), source) is allowed


def test_an_invoke_permission_for_another_service_does_not_let_api_gateway_in() -> None:
    policy = _api_permission(f"{API}/*/*", service="events.amazonaws.com")
    assert not emulator_main.source_arn_allowed(policy, f"{API}/$default/GET/x")
    assert not emulator_main.source_arn_allowed({}, f"{API}/$default/GET/x")


def test_a_schedule_role_must_trust_the_scheduler() -> None:
    def trust(service: str) -> dict[str, Any]:
        statement = {"Effect": "Allow", "Principal": {"Service": [service]}}
        return {"Statement": [{**statement, "Action": ["sts:AssumeRole"]}]}

    assert emulator_main.trusts_service(trust("scheduler.amazonaws.com"), "scheduler.amazonaws.com")
    assert not emulator_main.trusts_service(
        trust("lambda.amazonaws.com"), "scheduler.amazonaws.com"
    )


def test_sqs_batch_calls_need_the_single_message_permission() -> None:
    assert emulator_main.SQS_BATCH_ACTIONS["sqs:SendMessageBatch"] == "sqs:SendMessage"
    assert emulator_main.SQS_BATCH_ACTIONS["sqs:DeleteMessageBatch"] == "sqs:DeleteMessage"


def test_the_report_names_every_emulator_shim() -> None:
    shims = emulator_shims()
    assert len(shims) == len(emulator_main.SHIMS)
    assert all(shim.startswith("emulator: ") and shim.endswith(".") for shim in shims)


@pytest.mark.parametrize(
    ("line", "failure"),
    [
        ('{"level":"ERROR","message":"job dispatch failed"}', True),
        ('{"level":"INFO","message":"sweep finished"}', False),
        ("START RequestId: 1 Version: $LATEST", False),
        ("AccessDenied: not allowed", True),
        ("Worker init failed: No module named 'pydantic'", True),
    ],
)
def test_failure_lines_are_recognised(line: str, failure: bool) -> None:
    assert is_failure(line) is failure


def test_a_failure_is_explained_by_its_message_and_the_exceptions_last_line() -> None:
    line = (
        '{"level":"ERROR","message":"job dispatch failed",'
        '"exception":"Traceback...\\nbotocore.exceptions.ClientError: AccessDenied"}'
    )
    assert explain(line) == "job dispatch failed - botocore.exceptions.ClientError: AccessDenied"
    assert explain("plain text") == "plain text"


def _layer(build: Path, *distributions: str) -> None:
    site = build / "Layer" / "python"
    site.mkdir(parents=True)
    for distribution in distributions:
        (site / f"{distribution}.dist-info").mkdir()


def test_parity_compares_the_distributions_of_each_layer(tmp_path: Path) -> None:
    _layer(tmp_path / "host", "pydantic-2.1", "wrapt-2.5")
    _layer(tmp_path / "same", "pydantic-2.1", "wrapt-2.5")
    _layer(tmp_path / "other", "pydantic-2.1", "wrapt-2.4")

    assert deploy.build_parity(tmp_path / "host", tmp_path / "same") == []
    [problem] = deploy.build_parity(tmp_path / "host", tmp_path / "other")
    assert "['wrapt-2.5']" in problem
    assert "['wrapt-2.4']" in problem


def test_scheduled_functions_are_found_in_schedules_and_scheduled_rules() -> None:
    target = {"Arn": {"Fn::GetAtt": ["Sweep", "Arn"]}, "RoleArn": "r"}
    processed = {
        "Resources": {
            "Every": {"Type": "AWS::Scheduler::Schedule", "Properties": {"Target": target}},
            "Rule": {
                "Type": "AWS::Events::Rule",
                "Properties": {
                    "ScheduleExpression": "rate(5 minutes)",
                    "Targets": [{"Arn": {"Fn::GetAtt": ["Nightly", "Arn"]}}],
                },
            },
            "Pattern": {
                "Type": "AWS::Events::Rule",
                "Properties": {"Targets": [{"Arn": {"Fn::GetAtt": ["OnEvent", "Arn"]}}]},
            },
        }
    }
    assert scheduled_functions(processed) == ["Nightly", "Sweep"]


def test_dropping_a_permission_removes_it_where_it_is_granted(document: dict[str, Any]) -> None:
    said = mutations.drop_permission(document, "sqs:SendMessage")

    assert "QueueSendPolicy" in said
    assert "sqs:SendMessage" not in str(document["Resources"]["QueueSendPolicy"])
    with pytest.raises(mutations.MutationError):
        mutations.drop_permission(document, "sqs:SendMessage")


def test_breaking_a_handler_targets_the_function_behind_the_route(
    document: dict[str, Any],
) -> None:
    assert mutations.function_behind(document, "POST /jobs") == "AdmissionFunction"
    mutations.break_handler(document, "GET /capabilities")
    assert document["Resources"]["JobsFunction"]["Properties"]["Handler"] == "app_renamed.handler"
    with pytest.raises(mutations.MutationError):
        mutations.function_behind(document, "PUT /nowhere")


def test_dropping_a_variable_removes_it_everywhere(document: dict[str, Any]) -> None:
    mutations.drop_variable(document, "JOBSTREAM_TABLE")
    # Gone from every environment (an Output's description may still name it).
    assert "JOBSTREAM_TABLE" not in str([document["Globals"], document["Resources"]])
    with pytest.raises(mutations.MutationError):
        mutations.drop_variable(document, "JOBSTREAM_TABLE")


def test_a_schedule_role_mutant_replaces_the_generated_role(document: dict[str, Any]) -> None:
    mutations.schedule_role_without_invoke(document)
    role = document["Resources"][mutations.MUTANT_ROLE]
    assert "Policies" not in role["Properties"]
    assert "RehearsalMutantScheduleRole" in str(document["Resources"]["ReconcileFunction"])


def test_dropping_a_layer_package_removes_the_package_and_its_metadata(tmp_path: Path) -> None:
    _layer(tmp_path, "pydantic-2.1", "wrapt-2.5")
    (tmp_path / "Layer" / "python" / "pydantic").mkdir()

    mutations.drop_layer_package(tmp_path, "pydantic")

    assert sorted(p.name for p in (tmp_path / "Layer" / "python").iterdir()) == [
        "wrapt-2.5.dist-info"
    ]
    with pytest.raises(mutations.MutationError):
        mutations.drop_layer_package(tmp_path, "pydantic")


class _FakeCli:
    """Stands in for `python -m jobstream_cli`: what each command exits with and prints."""

    def __init__(self, outputs: dict[str, tuple[int, Any]]) -> None:
        self.outputs = outputs
        self.calls: list[tuple[list[str], str | None]] = []

    def __call__(
        self,
        arguments: list[str],
        env: Any = None,
        stdin: str | None = None,
        log: Path | None = None,
    ) -> Any:
        import json
        import subprocess

        self.calls.append((arguments, stdin))
        command = next(a for a in arguments if a in self.outputs)
        if command == "tenants":
            command = arguments[arguments.index("tenants") + 3]  # after --secret ID
        code, document = self.outputs[command]
        if log is not None:
            log.write_text("output\n", encoding="utf-8")
        text = json.dumps(document, indent=1)
        if command in {"smoke", "conformance"}:
            text = "a progress line\n" + text  # the suites print progress before the report
        return subprocess.CompletedProcess(arguments, code, text, "the suite's last line\n")


SMOKE_PASSED = {"ok": True, "steps": [{"step": "submit", "ok": True}, {"step": "ack", "ok": True}]}
CONFORMANT = {
    "conformant": True,
    "totals": {"pass": 71, "fail": 0, "skip": 0, "n/a": 17},
    "items": [{"id": "R8", "outcome": "pass"}, {"id": "R1", "outcome": "n/a"}],
}


def test_suites_run_against_the_rehearsal_api_as_tenant_a_with_both_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = _FakeCli({"smoke": (0, SMOKE_PASSED), "conformance": (0, CONFORMANT)})
    monkeypatch.setattr(plugins, "run_cli", cli)

    outcomes = plugins.run_suites("http://127.0.0.1:1", CREDENTIALS, "127.0.0.1:9", tmp_path)

    assert outcomes == [
        "`jobstream smoke` passed: steps submit, ack (log: jobstream-smoke.log)",
        (
            "`jobstream conformance` passed: 0 fail, 17 n/a, 71 pass, 0 skip "
            "(log: jobstream-conformance.log)"
        ),
    ]
    (smoke, _), (conformance, _) = cli.calls
    root = ["--url", "http://127.0.0.1:1", "--token", "token-a", "-o", "json"]
    assert smoke[: len(root) + 1] == [*root, "smoke"]
    assert "--cancel-target-id" in smoke  # two enabled targets: each run names its own
    assert conformance[: len(root) + 1] == [*root, "conformance"]
    options = dict(
        zip(conformance[len(root) + 1 :: 2], conformance[len(root) + 2 :: 2], strict=True)
    )
    assert options["--token-b"] == "token-b"
    assert options["--callback-receiver"] == "127.0.0.1:9"
    assert options["--callback-secret"] == CREDENTIALS.signing_secret
    assert options["--callback-token"] == CREDENTIALS.callback_token
    assert "target_id" in options["--params"]
    assert "target_id" in options["--cancel-params"]


@pytest.mark.parametrize(
    ("outputs", "step"),
    [
        ({"smoke": (0, SMOKE_PASSED), "conformance": (1, CONFORMANT)}, "jobstream conformance"),
        ({"smoke": (0, {"ok": False, "steps": []}), "conformance": (0, CONFORMANT)}, "smoke"),
        (
            {
                "smoke": (0, SMOKE_PASSED),
                "conformance": (0, {**CONFORMANT, "items": [{"id": "C9", "outcome": "skip"}]}),
            },
            "jobstream conformance",
        ),
    ],
    ids=["conformance exits 1", "smoke reports no pass", "a conformance item skipped"],
)
def test_a_failing_suite_fails_the_rehearsal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: dict[str, Any], step: str
) -> None:
    monkeypatch.setattr(plugins, "run_cli", _FakeCli(outputs))

    with pytest.raises(RehearsalError) as failure:
        plugins.run_suites("http://127.0.0.1:1", CREDENTIALS, "127.0.0.1:9", tmp_path)
    assert step in failure.value.step


def _listed(origins: list[str], callback_token: bool = True) -> list[dict[str, Any]]:
    token = [{"in_force": True}]
    return [
        {"tenant": tenants.TENANT_A, "api_tokens": token, "callback_token": callback_token,
         "callback_origins": origins},
        {"tenant": tenants.TENANT_B, "api_tokens": token, "callback_token": False,
         "callback_origins": []},
    ]  # fmt: skip


def test_tenants_are_added_with_the_cli_as_an_operator_adds_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    origins = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    issued = {"api_token": "jst_a", "signing_secret": "whsec_c2VjcmV0"}
    cli = _FakeCli(
        {
            "add": (0, issued),
            "set-callback-token": (0, {"action": "callback token set"}),
            "list": (0, _listed(origins)),
            "tenants": (0, None),
        }
    )
    monkeypatch.setattr(tenants, "run_cli", cli)

    credentials = tenants.register(
        tenants.Registry("arn:aws:secretsmanager:r:1:secret:s", {}), origins
    )

    commands = [arguments[arguments.index("--secret") + 2 :] for arguments, _ in cli.calls]
    assert commands == [
        ["add", "rehearsal-a", "--origin", origins[0], "--origin", origins[1]],
        ["set-callback-token", "rehearsal-a"],
        ["add", "rehearsal-b", "--no-signing-secret"],
        ["list"],
    ]
    assert all(a[a.index("--secret") + 1] == "arn:aws:secretsmanager:r:1:secret:s"
               for a, _ in cli.calls)  # fmt: skip
    # The callback token goes in on stdin, never on the command line.
    (_, stdin) = cli.calls[1]
    assert stdin == credentials.callback_token
    assert credentials.callback_token not in str([arguments for arguments, _ in cli.calls])
    assert (credentials.token_a, credentials.signing_secret) == ("jst_a", "whsec_c2VjcmV0")


def test_a_registry_that_does_not_hold_what_was_added_fails_the_rehearsal() -> None:
    origins = ["http://127.0.0.1:8001"]

    def listing(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {entry["tenant"]: entry for entry in entries}

    assert tenants.check_listing(listing(_listed(origins)), origins) == ""
    assert "origins" in tenants.check_listing(listing(_listed(["https://x.example"])), origins)
    no_token = listing(_listed(origins, callback_token=False))
    assert "callback token" in tenants.check_listing(no_token, origins)
    assert "tenants" in tenants.check_listing(listing(_listed(origins)[:1]), origins)


def test_a_refused_tenants_command_fails_with_its_error_not_its_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tenants, "run_cli", _FakeCli({"add": (1, {"api_token": "jst_x"})}))
    with pytest.raises(RehearsalError, match="the suite's last line") as failure:
        tenants.register(tenants.Registry("s", {}), [])
    assert "jst_x" not in failure.value.message  # stdout may hold a new token


def test_the_secret_shim_finds_a_secret_by_its_arn() -> None:
    stored = [("jobstream-TenantsSecret-1", {"ARN": "arn:aws:secretsmanager:r:1:secret:x-AbCdEf"})]
    assert emulator_main.secret_name(stored, "arn:aws:secretsmanager:r:1:secret:x-AbCdEf") == (
        "jobstream-TenantsSecret-1"
    )
    assert emulator_main.secret_name(stored, "jobstream-TenantsSecret-1") == (
        "jobstream-TenantsSecret-1"
    )


def test_the_event_source_shim_makes_the_concurrency_an_integer() -> None:
    props = {"BatchSize": 1, "ScalingConfig": {"MaximumConcurrency": "100"}}
    assert emulator_main.integer_scaling(props) == {
        "BatchSize": 1,
        "ScalingConfig": {"MaximumConcurrency": 100},
    }
    assert emulator_main.integer_scaling({"BatchSize": 10}) == {"BatchSize": 10}


@pytest.mark.parametrize(
    ("path", "stripped"),
    [
        ("/console/", "/console"),
        ("/jobs//", "/jobs"),
        ("/console", None),
        ("/", None),
        ("//", None),
    ],
)
def test_the_trailing_slash_shim_strips_only_a_trailing_slash(
    path: str, stripped: str | None
) -> None:
    # As on AWS, `/console/` reaches `GET /console`; `/` stays the root.
    assert emulator_main.slash_stripped(path) == stripped


def test_the_api_proxy_keeps_the_clients_host_and_says_http(tmp_path: Path) -> None:
    import json
    import threading
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            answer = json.dumps(
                {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
            ).encode()
            self.send_response(201)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: Any) -> None:
            return

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with gateway.serve_api(f"http://127.0.0.1:{upstream.server_address[1]}", "abc") as base:
            request = urllib.request.Request(f"{base}/jobs?x=1", data=b"{}", method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                status, echoed = response.status, json.load(response)
    finally:
        upstream.shutdown()
        upstream.server_close()

    assert status == 201
    assert echoed["path"] == "/_aws/execute-api/abc/$default/jobs?x=1"
    assert echoed["headers"]["Host"] == base.removeprefix("http://")
    assert echoed["headers"]["X-Forwarded-Proto"] == "http"
    assert echoed["body"] == "{}"


def test_a_metric_math_alarm_is_recorded_on_its_first_metric() -> None:
    metric = {"Namespace": "AWS/SQS", "MetricName": "Visible", "Dimensions": [{"Name": "Q"}]}
    props = {
        "AlarmDescription": "d",
        "Metrics": [
            {"Id": "visible", "MetricStat": {"Metric": metric, "Stat": "Maximum", "Period": 60}},
            {"Id": "alarmed", "Expression": "DIFF(FILL(visible, 0))"},
        ],
        "Threshold": 0,
    }
    assert emulator_main.first_metric(props) == {
        "AlarmDescription": "d",
        "Threshold": 0,
        "Namespace": "AWS/SQS",
        "MetricName": "Visible",
        "Dimensions": [{"Name": "Q"}],
        "Statistic": "Maximum",
        "Period": 60,
    }
    plain = {"Namespace": "n", "MetricName": "m"}
    assert emulator_main.first_metric(plain) is plain
    with pytest.raises(ValueError, match="MetricStat and an Expression"):
        emulator_main.first_metric({"Metrics": [{"Id": "x", "Expression": "1"}]})


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        (
            "arn:aws:sts::000000000000:assumed-role/jobstream-AckRole-X/session",
            "arn:aws:iam::000000000000:role/jobstream-AckRole-X",
        ),
        ("arn:aws:iam::000000000000:user/alice", "arn:aws:iam::000000000000:user/alice"),
        ("arn:aws:iam::000000000000:root", "arn:aws:iam::000000000000:root"),
    ],
)
def test_the_principal_arn_of_a_role_session_is_the_roles(principal: str, expected: str) -> None:
    assert emulator_main.principal_arn(principal) == expected


def test_the_guides_guided_answers_are_the_ones_the_rehearsal_pipes(
    document: dict[str, Any],
) -> None:
    """docs/deploy.md's table and rehearsal.guided ask the same of SAM CLI 1.170's prompts."""
    answers = guided.guided_answers(document)
    assert answers == guided.GuidedAnswers(parameters=len(document["Parameters"]),
                                           unauthenticated_events=18)  # fmt: skip
    guide = (REPOSITORY / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert f"Parameter … (one per parameter, {answers.parameters})" in guide
    assert f"Is this okay?` ({answers.unauthenticated_events}: " in guide
    lines = answers.lines("jobstream-guided", "us-east-1", deploy=False)
    assert len(lines) == 2 + answers.parameters + 3 + answers.unauthenticated_events + 2
    assert lines[-2:] == ["n", "n"]  # arguments not saved; the change set not executed
