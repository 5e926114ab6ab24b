"""The deployment rehearsal's own logic, without an emulator: what it derives from the template,
how it reads the processed template and the logs, the shims' policy checks, the mutations.
(The rehearsal itself and its mutants run in `make rehearse`, tests/rehearsal.)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from jobstream_local.template import TEMPLATE, Template
from rehearsal import deploy, emulator_main, gateway, mutations, plugins
from rehearsal.logs import explain, is_failure
from rehearsal.plan import (
    Credentials,
    for_architecture,
    parameter_overrides,
    python_version,
)
from rehearsal.run import emulator_shims, scheduled_functions
from rehearsal.stack import RouteSpec, routes_from_body
from rehearsal.toolchain import RehearsalError

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


def test_parameters_carry_the_rehearsals_secrets_and_the_receivers_allowances(
    document: dict[str, Any],
) -> None:
    overrides = parameter_overrides(document, CREDENTIALS)

    assert overrides == {
        "ApiTokens": "a=token-a,b=token-b",
        "CallbackToken": "callback-token",
        "CallbackSigningSecret": "whsec_c2VjcmV0",
        "CallbackAllowHttp": "true",
        "CallbackAllowPrivate": "true",
    }


def test_parameters_follow_the_variable_not_the_parameter_name(document: dict[str, Any]) -> None:
    parameters = document["Parameters"]
    parameters["ConsumerTokens"] = parameters.pop("ApiTokens")
    document["Globals"]["Function"]["Environment"]["Variables"]["JOBSTREAM_API_TOKENS"] = {
        "Ref": "ConsumerTokens"
    }
    assert parameter_overrides(document, CREDENTIALS)["ConsumerTokens"] == "a=token-a,b=token-b"


def test_a_template_without_a_tokens_parameter_is_a_clear_failure(document: dict[str, Any]) -> None:
    del document["Globals"]["Function"]["Environment"]["Variables"]["JOBSTREAM_API_TOKENS"]
    with pytest.raises(RehearsalError, match="no template parameter feeds JOBSTREAM_API_TOKENS"):
        parameter_overrides(document, CREDENTIALS)


def test_a_required_parameter_the_rehearsal_cannot_fill_is_a_clear_failure(
    document: dict[str, Any],
) -> None:
    document["Parameters"]["DomainName"] = {"Type": "String"}
    with pytest.raises(RehearsalError, match=r"without a default .*DomainName"):
        parameter_overrides(document, CREDENTIALS)


def test_credentials_are_fresh_and_the_signing_secret_is_valid() -> None:
    from jobstream.delivery.signing import decode_secret

    first, second = Credentials.generate(), Credentials.generate()
    assert len({first.token_a, first.token_b, second.token_a, first.callback_token}) == 4
    assert decode_secret(first.signing_secret)


def test_one_python_runtime_for_every_function(document: dict[str, Any]) -> None:
    assert python_version(document) == "3.11"
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
    assert "JOBSTREAM_TABLE" not in str(document)
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
    """Stands in for `python -m jobstream_cli`: which commands exist, what they exit with."""

    def __init__(self, commands: dict[str, int]) -> None:
        self.commands = commands
        self.calls: list[list[str]] = []

    def __call__(self, arguments: list[str], log: Path | None = None) -> Any:
        import subprocess

        self.calls.append(arguments)
        known = arguments[0] in self.commands
        code = 0 if known and arguments[1:] == ["--help"] else self.commands.get(arguments[0], 2)
        if log is not None:
            log.write_text("output\n", encoding="utf-8")
        return subprocess.CompletedProcess(arguments, code, "the suite's last line\n", "")


def test_suites_the_cli_lacks_are_reported_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = _FakeCli({})
    monkeypatch.setattr(plugins, "_cli", cli)

    outcomes = plugins.run_suites("http://127.0.0.1:1", "ta", "tb", tmp_path)

    assert outcomes == [
        "`jobstream smoke` is not in the CLI yet: not run",
        "`jobstream conformance` is not in the CLI yet: not run",
    ]
    assert cli.calls == [["smoke", "--help"], ["conformance", "--help"]]


def test_suites_run_against_the_rehearsal_api_with_both_tenants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = _FakeCli({"smoke": 0, "conformance": 0})
    monkeypatch.setattr(plugins, "_cli", cli)

    outcomes = plugins.run_suites("http://127.0.0.1:1", "ta", "tb", tmp_path)

    assert [o.split(" (")[0] for o in outcomes] == [
        "`jobstream smoke` passed",
        "`jobstream conformance` passed",
    ]
    assert ["smoke", "--url", "http://127.0.0.1:1", "--token", "ta"] in cli.calls
    assert [
        "conformance", "--url", "http://127.0.0.1:1", "--token", "ta", "--token-b", "tb"
    ] in cli.calls  # fmt: skip


def test_a_failing_suite_fails_the_rehearsal_with_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugins, "_cli", _FakeCli({"smoke": 0, "conformance": 1}))

    with pytest.raises(RehearsalError, match="the suite's last line") as failure:
        plugins.run_suites("http://127.0.0.1:1", "ta", "tb", tmp_path)
    assert failure.value.step == "jobstream conformance"


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
    assert echoed["path"] == "/_aws/execute-api/abc/jobs?x=1"
    assert echoed["headers"]["Host"] == base.removeprefix("http://")
    assert echoed["headers"]["X-Forwarded-Proto"] == "http"
    assert echoed["body"] == "{}"
