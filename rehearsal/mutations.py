"""Breakages `sam validate` and cfn-lint cannot see, applied to a copy of a SAM build.

The mutation tests (tests/rehearsal) deploy each mutant and show the rehearsal fails, with a
message that names the cause. Each mutation finds its target in the template by what it does
(the statement granting an action, the function behind a route), never by a resource name.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from jobstream_local.template import Template
from rehearsal.plan import FUNCTION, functions
from rehearsal.stack import Stack

POLICY_HOLDERS = ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy")
MUTANT_ROLE = "RehearsalMutantScheduleRole"


class MutationError(Exception):
    """The template no longer has what a mutation breaks: the mutation must be updated."""


def copy_build(build_dir: Path, destination: Path) -> Path:
    shutil.copytree(build_dir, destination, symlinks=True)
    return destination


def load(build_dir: Path) -> dict[str, Any]:
    return Template.load(build_dir / "template.yaml").document


def save(build_dir: Path, document: dict[str, Any]) -> Path:
    """Write the mutant in place of the built template (JSON is YAML: sam deploy reads it)."""
    path = build_dir / "template.yaml"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def _statement_lists(document: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(owner, statements) of every policy the template writes itself."""
    found = []
    for name, resource in document["Resources"].items():
        properties = resource.get("Properties") or {}
        if resource["Type"] in POLICY_HOLDERS:
            found.append((name, properties["PolicyDocument"]["Statement"]))
        if resource["Type"] == FUNCTION:
            policies = properties.get("Policies") or []
            found.extend(
                (name, policy["Statement"])
                for policy in (policies if isinstance(policies, list) else [policies])
                if isinstance(policy, dict) and "Statement" in policy
            )
    return found


def drop_permission(document: dict[str, Any], action: str) -> str:
    """Remove `action` from every statement that grants it (and statements left empty)."""
    changed = []
    for owner, statements in _statement_lists(document):
        for statement in list(statements):
            actions = statement.get("Action")
            listed = actions if isinstance(actions, list) else [actions]
            if statement.get("Effect") == "Allow" and action in listed:
                remaining = [a for a in listed if a != action]
                if remaining:
                    statement["Action"] = remaining
                else:
                    statements.remove(statement)
                changed.append(owner)
    if not changed:
        raise MutationError(f"no policy statement grants {action}")
    return f"removed {action} from {sorted(set(changed))}"


def function_behind(document: dict[str, Any], route_key: str) -> str:
    """The function whose HttpApi event serves `route_key` ("GET /capabilities")."""
    method, _, path = route_key.partition(" ")
    for name, properties in functions(document).items():
        for event in (properties.get("Events") or {}).values():
            spec = event.get("Properties") or {}
            if (
                event["Type"] == "HttpApi"
                and spec.get("Path") == path
                and str(spec.get("Method")).upper() == method
            ):
                return name
    raise MutationError(f"no function serves {route_key}")


def break_handler(document: dict[str, Any], route_key: str) -> str:
    """Point the Handler of the function behind `route_key` at a module its code does not have."""
    name = function_behind(document, route_key)
    properties = document["Resources"][name]["Properties"]
    module, _, attribute = properties["Handler"].rpartition(".")
    properties["Handler"] = f"{module}_renamed.{attribute}"
    return f"{name} Handler -> {properties['Handler']}"


def drop_variable(document: dict[str, Any], variable: str) -> str:
    """Remove an environment variable from Globals and every function."""
    removed = []
    environments = [("Globals", ((document.get("Globals") or {}).get("Function") or {}))] + [
        (name, properties) for name, properties in functions(document).items()
    ]
    for owner, holder in environments:
        variables = (holder.get("Environment") or {}).get("Variables") or {}
        if variables.pop(variable, None) is not None:
            removed.append(owner)
    if not removed:
        raise MutationError(f"the template does not set {variable}")
    return f"removed {variable} from {removed}"


def drop_layer_package(build_dir: Path, package: str) -> str:
    """Delete an installed distribution (its package and its dist-info) from every built layer."""
    removed = []
    for layer in sorted(p for p in build_dir.iterdir() if (p / "python").is_dir()):
        site = layer / "python"
        targets = [site / package, *site.glob(f"{package}-*.dist-info")]
        for target in targets:
            if target.exists():
                shutil.rmtree(target)
                removed.append(f"{layer.name}/python/{target.name}")
    if not removed:
        raise MutationError(f"no built layer holds {package}")
    return f"deleted {removed}"


def schedule_role_without_invoke(document: dict[str, Any]) -> str:
    """Give every ScheduleV2 event its own role, trusted by the Scheduler but allowed nothing."""
    changed = []
    for name, properties in functions(document).items():
        for event in (properties.get("Events") or {}).values():
            if event["Type"] == "ScheduleV2":
                event["Properties"]["RoleArn"] = {"Fn::GetAtt": [MUTANT_ROLE, "Arn"]}
                changed.append(name)
    if not changed:
        raise MutationError("no function has a ScheduleV2 event")
    document["Resources"][MUTANT_ROLE] = {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": ["scheduler.amazonaws.com"]},
                        "Action": ["sts:AssumeRole"],
                    }
                ],
            }
        },
    }
    return f"schedules of {changed} now use {MUTANT_ROLE}, which may invoke nothing"


def revoke_api_invoke(stack: Stack, function_logical_id: str) -> str:
    """Remove every resource-policy statement of a deployed function (API Gateway's permission)."""
    name = stack.function_names()[function_logical_id]
    lambda_client = stack.client("lambda")
    policy = json.loads(lambda_client.get_policy(FunctionName=name)["Policy"])
    sids = [statement["Sid"] for statement in policy["Statement"]]
    for sid in sids:
        lambda_client.remove_permission(FunctionName=name, StatementId=sid)
    return f"removed {sids} from {function_logical_id}'s resource policy"
