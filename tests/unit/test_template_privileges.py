"""Least privilege in the template as CloudFormation deploys it: after the SAM transform
(aws-sam-translator, the release SAM CLI and the rehearsal's emulator use), where the roles SAM
generates and the policies it attaches are visible.

Every role: no managed policy of AWS's but basic execution (and the X-Ray writer, only under
TracingEnabled); no Allow on `*` (or a service's whole account) for SQS, DynamoDB, S3 or Secrets
Manager; every function's role writes only its own log group and polls only the queue that
triggers it. The registry secret's resource policy names exactly the functions that read it
and the operator role.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from jobstream_local.template import TEMPLATE, Template

GUARDED_SERVICES = ("sqs:", "dynamodb:", "s3:", "secretsmanager:")
BASIC_EXECUTION = "AWSLambdaBasicExecutionRole"
XRAY_WRITER = "AWSXrayWriteOnlyAccess"
AWS_MANAGED = re.compile(r"iam::aws:policy/(?:service-role/)?([A-Za-z0-9_-]+)")
REGISTRY_READERS = {"AdmissionFunction", "JobsFunction", "EventsFunction", "AckFunction",
                    "CallbacksFunction"}  # fmt: skip


class _NoManagedPolicyNames:
    """The translator's loader for policies named by name: the template names none."""

    def load(self) -> dict[str, str]:
        return {}


def transformed(path: Path = TEMPLATE, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    document = copy.deepcopy(Template.load(path).document)
    # What `sam package` does before CloudFormation transforms: code is uploaded, named by S3 URI.
    for resource in document["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://artifacts/{properties[key]}"
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": "us-east-1"}):
        processed: dict[str, Any] = transform(document, parameters or {}, _NoManagedPolicyNames())
    return processed


def of_type(processed: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        name: resource.get("Properties") or {}
        for name, resource in processed["Resources"].items()
        if resource["Type"] == resource_type
    }


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def managed_policy_names(node: Any, tracing_only: bool = False) -> Iterator[tuple[str, bool]]:
    """(AWS managed policy name, whether it is only there under TracingEnabled) below `node`."""
    if isinstance(node, dict):
        if "Fn::If" in node:
            condition, when_true, when_false = node["Fn::If"]
            yield from managed_policy_names(
                when_true, tracing_only or condition == "TracingEnabled"
            )
            yield from managed_policy_names(when_false, tracing_only)
            return
        for value in node.values():
            yield from managed_policy_names(value, tracing_only)
    elif isinstance(node, list):
        for value in node:
            yield from managed_policy_names(value, tracing_only)
    elif isinstance(node, str):
        yield from ((name, tracing_only) for name in AWS_MANAGED.findall(node))


def statements(document: Any) -> Iterator[dict[str, Any]]:
    """Every statement of a policy document, whichever branch of an Fn::If holds it."""
    if isinstance(document, dict) and "Fn::If" in document:
        for branch in document["Fn::If"][1:]:
            yield from statements(branch)
        return
    if isinstance(document, dict) and "PolicyDocument" in document:
        yield from statements(document["PolicyDocument"])
        return
    if isinstance(document, dict):
        yield from (s for s in as_list(document.get("Statement") or []) if isinstance(s, dict))


def all_policies(processed: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(owner, statement) of every identity policy: roles' inline ones, managed, standalone."""
    for name, role in of_type(processed, "AWS::IAM::Role").items():
        for policy in as_list(role.get("Policies") or []):
            yield from ((name, s) for s in statements(policy))
    for kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
        for name, policy in of_type(processed, kind).items():
            yield from ((name, s) for s in statements(policy))


def wide_grants(processed: dict[str, Any]) -> list[str]:
    problems = []
    for owner, statement in all_policies(processed):
        if statement.get("Effect") != "Allow":
            continue
        actions = [str(a) for a in as_list(statement.get("Action") or [])]
        guarded = [a for a in actions if a == "*" or a.lower().startswith(GUARDED_SERVICES)]
        resources = as_list(statement.get("Resource") or [])
        wild = [r for r in resources if isinstance(r, str) and (r == "*" or r.endswith(":*"))]
        if guarded and wild:
            problems.append(f"{owner}: {guarded} on {wild}")
        problems += [f"{owner}: grants {a!r}" for a in guarded if a.endswith(("*", ":*"))]
    return problems


def managed_policy_problems(processed: dict[str, Any]) -> list[str]:
    problems = []
    for name, role in of_type(processed, "AWS::IAM::Role").items():
        for policy, tracing_only in managed_policy_names(role.get("ManagedPolicyArns") or []):
            allowed = policy == BASIC_EXECUTION or (policy == XRAY_WRITER and tracing_only)
            if not allowed:
                problems.append(f"{name}: AWS managed policy {policy}")
    return problems


def function_role(processed: dict[str, Any], function: str) -> dict[str, Any]:
    role = of_type(processed, "AWS::Lambda::Function")[function]["Role"]
    assert isinstance(role, dict), f"{function}: Role {role!r}"
    assert "Fn::GetAtt" in role, f"{function}: Role {role!r}"
    return of_type(processed, "AWS::IAM::Role")[role["Fn::GetAtt"][0]]


def granted(role: dict[str, Any], action: str) -> list[Any]:
    """The resources a role's inline policies allow `action` on."""
    return [
        resource
        for policy in as_list(role.get("Policies") or [])
        for statement in statements(policy)
        if statement.get("Effect") == "Allow" and action in as_list(statement.get("Action"))
        for resource in as_list(statement.get("Resource"))
    ]


PROCESSED = transformed()
FUNCTIONS = sorted(of_type(PROCESSED, "AWS::Lambda::Function"))


def test_the_transform_gives_what_the_checks_walk() -> None:
    assert len(FUNCTIONS) == 8
    assert of_type(PROCESSED, "AWS::IAM::Role")
    assert of_type(PROCESSED, "AWS::Lambda::EventSourceMapping")


@pytest.mark.parametrize("tracing", ["Disabled", "Active"])
def test_no_role_carries_an_aws_managed_policy_but_basic_execution(tracing: str) -> None:
    processed = (
        PROCESSED if tracing == "Disabled" else transformed(parameters={"TracingMode": tracing})
    )
    assert managed_policy_problems(processed) == []


def test_no_policy_allows_sqs_dynamodb_s3_or_secrets_on_everything() -> None:
    assert wide_grants(PROCESSED) == []


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_writes_only_its_own_log_group(function: str) -> None:
    properties = of_type(PROCESSED, "AWS::Lambda::Function")[function]
    group = properties["LoggingConfig"]["LogGroup"]
    role = function_role(PROCESSED, function)
    assert group == {"Ref": f"{function.removesuffix('Function')}LogGroup"}
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        assert granted(role, action) == [{"Fn::GetAtt": [group["Ref"], "Arn"]}], action
    assert not granted(role, "logs:CreateLogGroup")


@pytest.mark.parametrize(
    "mapping",
    sorted(
        name
        for name, m in of_type(PROCESSED, "AWS::Lambda::EventSourceMapping").items()
        if "Fn::GetAtt" in m["EventSourceArn"] and m["EventSourceArn"]["Fn::GetAtt"][1] == "Arn"
    ),
)
def test_a_queue_triggered_function_polls_only_its_queue(mapping: str) -> None:
    properties = of_type(PROCESSED, "AWS::Lambda::EventSourceMapping")[mapping]
    function = properties["FunctionName"]["Ref"]
    role = function_role(PROCESSED, function)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert granted(role, action) == [properties["EventSourceArn"]], (function, action)


def test_the_registry_secret_admits_exactly_its_readers_and_the_operator() -> None:
    (policy,) = of_type(PROCESSED, "AWS::SecretsManager::ResourcePolicy").values()
    document = policy["ResourcePolicy"]
    readers = {
        function_role_name
        for function in REGISTRY_READERS
        for function_role_name in [
            of_type(PROCESSED, "AWS::Lambda::Function")[function]["Role"]["Fn::GetAtt"][0]
        ]
    }
    by_sid = {s["Sid"]: s for s in document["Statement"]}
    read = by_sid["ReadByTheFunctionsAndTheOperatorOnly"]
    write = by_sid["WrittenByTheOperatorOnly"]
    assert read["Effect"] == write["Effect"] == "Deny"
    read_principals = {
        p["Fn::GetAtt"][0] for p in read["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    }
    assert read_principals == readers | {"TenantsOperatorRole"}
    assert write["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == {
        "Fn::GetAtt": ["TenantsOperatorRole", "Arn"]
    }
    # Who else reads the registry by their own policy: the readers' roles and the operator.
    holders = {
        owner
        for owner, statement in all_policies(PROCESSED)
        if "secretsmanager:GetSecretValue" in as_list(statement.get("Action"))
        and "TenantsSecret" in str(statement.get("Resource"))
    }
    assert holders == {"TenantsReadPolicy", "TenantsOperatorRole"}


# ------------------------------------------------------- the checks fail on a broken template


def edited_and_transformed(tmp_path: Path, *edits: tuple[str, str]) -> dict[str, Any]:
    text = TEMPLATE.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    copy_path = tmp_path / "template.yaml"
    copy_path.write_text(text, encoding="utf-8")
    return transformed(copy_path)


def test_the_checks_catch_what_sam_generated_before(tmp_path: Path) -> None:
    """The worker on a role SAM generates, tracing as an !If, as before: SAM attaches
    AWSLambdaSQSQueueExecutionRole (every queue) and AWSXrayWriteOnlyAccess (tracing or not)."""
    processed = edited_and_transformed(
        tmp_path,
        ("      Role: !GetAtt WorkerRole.Arn\n", "      Policies: []\n"),
        (
            "    Tracing: !Ref TracingMode\n",
            "    Tracing: !If [TracingEnabled, Active, PassThrough]\n",
        ),
    )
    assert managed_policy_problems(processed) == [
        "WorkerFunctionRole: AWS managed policy AWSXrayWriteOnlyAccess",
        "WorkerFunctionRole: AWS managed policy AWSLambdaSQSQueueExecutionRole",
    ]


def test_the_wildcard_check_catches_a_star(tmp_path: Path) -> None:
    processed = edited_and_transformed(
        tmp_path,
        (
            "                Resource: !GetAtt CallbackDeadLetterQueue.Arn\n",
            '                Resource: "*"\n',
        ),
    )
    assert wide_grants(processed) == ["CallbacksRole: ['sqs:SendMessage'] on ['*']"]


def test_only_the_callbacks_function_publishes_endpoint_alerts_and_only_to_their_topic() -> None:
    """Endpoint transitions are made by callback attempts (service/endpoints.py), which tell the
    operator's topic: the callbacks function's role may publish to that topic, when one is set,
    and no other function's may publish at all."""
    for function in FUNCTIONS:
        role = function_role(PROCESSED, function)
        expected = [{"Ref": "EndpointAlertTopicArn"}] if function == "CallbacksFunction" else []
        assert granted(role, "sns:Publish") == expected, function
    role = function_role(PROCESSED, "CallbacksFunction")
    (conditional,) = [p for p in role["Policies"] if isinstance(p, dict) and "Fn::If" in p]
    condition, _, otherwise = conditional["Fn::If"]
    assert (condition, otherwise) == ("HasEndpointAlertTopic", {"Ref": "AWS::NoValue"})


def test_the_callbacks_function_sends_only_to_its_own_queue_and_its_dead_letters() -> None:
    """A resumed endpoint's parked callbacks are sent again by the attempt that resumed it."""
    role = function_role(PROCESSED, "CallbacksFunction")
    resources = granted(role, "sqs:SendMessage")
    assert sorted(map(str, resources)) == sorted(
        map(str, [{"Fn::GetAtt": ["CallbackQueue", "Arn"]},
                  {"Fn::GetAtt": ["CallbackDeadLetterQueue", "Arn"]}])
    )  # fmt: skip
