"""`python -m tools.teardown --stack NAME [--yes]` (`make teardown STACK=NAME`): remove a deployed
jobstream stack and say exactly what stays, and how to delete or adopt it (docs/deploy.md).

CloudFormation cannot delete a bucket that holds a file, so the stack's own buckets (its
`AWS::S3::Bucket` resources, none other) are emptied first, every version and delete marker
included; then the stack is deleted and waited for. What the template keeps (`DeletionPolicy:
Retain`: the jobs table, the consumer registry secret and its resource policy) stays, and is
listed with the commands that delete it or hand it to a new stack, as is SAM's artifact bucket.
Nothing happens until the stack's name is typed back (or `--yes`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

BUCKET = "AWS::S3::Bucket"
SAM_MANAGED_STACK = "aws-sam-cli-managed-default"
# What each kept resource is and what to do with it ({id}: its physical id).
KEPT_ADVICE = {
    "AWS::DynamoDB::Table": (
        "the jobs table {id} (its jobs, events and callbacks). A new stack creates a new, "
        "empty table. Delete it: aws dynamodb update-table --table-name {id} "
        "--no-deletion-protection-enabled && aws dynamodb delete-table --table-name {id}"
    ),
    "AWS::SecretsManager::Secret": (
        "the consumer registry {id} (live API token digests, callback tokens, signing secrets). "
        "Adopt it: sam deploy --parameter-overrides ExistingTenantsSecretArn={id}. Delete it: "
        "aws secretsmanager delete-secret --secret-id {id} (recoverable for 30 days; "
        "--force-delete-without-recovery for never)"
    ),
    "AWS::SecretsManager::ResourcePolicy": (
        "the registry's resource policy on {id}: it keeps the kept secret unreadable but by an "
        "administrator (who may delete the policy); a stack that adopts the secret replaces it"
    ),
}


@dataclass
class Plan:
    stack: str
    buckets: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (resource type, physical id)


def plan(cloudformation: Any, stack: str) -> Plan:
    """The stack's buckets and the resources its processed template keeps when it is deleted."""
    body = cloudformation.get_template(StackName=stack, TemplateStage="Processed")["TemplateBody"]
    template = json.loads(body) if isinstance(body, str) else body
    physical = {
        summary["LogicalResourceId"]: summary.get("PhysicalResourceId", "")
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        for summary in page["StackResourceSummaries"]
    }
    found = Plan(stack)
    for logical, resource in template["Resources"].items():
        if logical not in physical:
            continue  # a condition left it out
        if resource["Type"] == BUCKET:
            found.buckets.append(physical[logical])
        if resource.get("DeletionPolicy") == "Retain":
            found.kept.append((resource["Type"], physical[logical]))
    return found


def _object_pages(s3: Any, bucket: str) -> Iterator[list[dict[str, str]]]:
    """Every object version and delete marker of `bucket`, a page at a time (<= 1000 keys)."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        keys = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        if keys:
            yield keys


def empty_bucket(s3: Any, bucket: str) -> int:
    """Delete every object of `bucket` (every version, every delete marker); how many."""
    deleted = 0
    for keys in _object_pages(s3, bucket):
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        if answer.get("Errors"):
            raise SystemExit(f"teardown: {bucket}: could not delete {answer['Errors'][:3]}")
        deleted += len(keys)
    return deleted


def sam_artifacts(cloudformation: Any, stack: str) -> str | None:
    """Where `sam deploy` (resolve_s3) uploaded this stack's code, if SAM's stack exists."""
    try:
        managed = cloudformation.describe_stacks(StackName=SAM_MANAGED_STACK)["Stacks"][0]
    except ClientError:
        return None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in managed.get("Outputs", [])}
    bucket = outputs.get("SourceBucket")
    return f"s3://{bucket}/{stack}/" if bucket else None


def what_stays(found: Plan, artifacts: str | None) -> list[str]:
    lines = [
        f"kept: {KEPT_ADVICE.get(kind, kind + ' {id}').format(id=id_)}" for kind, id_ in found.kept
    ]
    if artifacts:
        lines.append(
            f"kept: SAM's artifacts of this stack, {artifacts} (in the bucket of SAM's own stack "
            f"{SAM_MANAGED_STACK}, shared by every SAM stack of this account and region). "
            f"Delete them: aws s3 rm {artifacts} --recursive"
        )
    return lines


def confirmed(found: Plan, answer: Callable[[str], str]) -> bool:
    question = (
        f"Delete stack {found.stack}, emptying its bucket(s) {', '.join(found.buckets) or '-'}?"
        f" Type the stack name to confirm: "
    )
    return answer(question).strip() == found.stack


def teardown(stack: str, yes: bool, say: Callable[[str], None] = print,
             answer: Callable[[str], str] = input) -> int:  # fmt: skip
    cloudformation, s3 = boto3.client("cloudformation"), boto3.client("s3")
    found = plan(cloudformation, stack)
    if not yes and not confirmed(found, answer):
        say("teardown: nothing done")
        return 1
    for bucket in found.buckets:
        say(f"emptied {bucket}: {empty_bucket(s3, bucket)} object(s)")
    cloudformation.delete_stack(StackName=stack)
    cloudformation.get_waiter("stack_delete_complete").wait(
        StackName=stack, WaiterConfig={"Delay": 5, "MaxAttempts": 360}
    )
    say(f"deleted stack {stack}")
    for line in what_stays(found, sam_artifacts(cloudformation, stack)):
        say(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.teardown", description=__doc__)
    parser.add_argument("--stack", required=True, help="the stack's name (samconfig: jobstream)")
    parser.add_argument("--yes", action="store_true", help="do not ask for the stack's name")
    args = parser.parse_args(argv)
    return teardown(args.stack, args.yes)


if __name__ == "__main__":
    sys.exit(main())
