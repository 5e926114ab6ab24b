"""`make teardown` (tools/teardown.py) against moto's CloudFormation: it empties only the stack's
own bucket (every version), deletes the stack, names what the template keeps and does nothing
until the stack's name is typed back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tools import teardown

# Unique per run: moto's state is shared with every other test of this process (the suite's own
# mock_aws is session-wide), so this file names only what it made.
STACK = f"jobstream-teardown-{uuid.uuid4().hex[:8]}"
OTHER_BUCKET = f"someone-elses-bucket-{uuid.uuid4().hex[:8]}"
TEMPLATE = {
    "Resources": {
        "AssetBucket": {"Type": "AWS::S3::Bucket"},
        "JobsTable": {
            "Type": "AWS::DynamoDB::Table",
            "DeletionPolicy": "Retain",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            },
        },
    }
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        cloudformation, s3 = boto3.client("cloudformation"), boto3.client("s3")
        tables_before = table_names()
        cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
        (bucket,) = teardown.plan(cloudformation, STACK).buckets
        # A versioned bucket holding two versions of a file and a deleted one.
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for body in (b"one", b"two"):
            s3.put_object(Bucket=bucket, Key="jobs/a/file", Body=body)
        s3.put_object(Bucket=bucket, Key="jobs/b/file", Body=b"x")
        s3.delete_object(Bucket=bucket, Key="jobs/b/file")
        s3.create_bucket(Bucket=OTHER_BUCKET)
        s3.put_object(Bucket=OTHER_BUCKET, Key="keep", Body=b"x")
        yield {
            "cloudformation": cloudformation,
            "s3": s3,
            "bucket": bucket,
            "tables_before": tables_before,
        }
        for name in stacks(cloudformation):
            if name in {STACK, teardown.SAM_MANAGED_STACK}:
                cloudformation.delete_stack(StackName=name)


def table_names() -> set[str]:
    # Every page: ListTables returns 100 names at most, and the suite's moto holds more.
    pages = boto3.client("dynamodb").get_paginator("list_tables").paginate()
    return {name for page in pages for name in page["TableNames"]}


def stacks(cloudformation: Any) -> list[str]:
    return [s["StackName"] for s in cloudformation.list_stacks()["StackSummaries"]
            if s["StackStatus"] != "DELETE_COMPLETE"]  # fmt: skip


def test_teardown_empties_the_stacks_bucket_deletes_it_and_names_what_stays(
    aws: dict[str, Any],
) -> None:
    kept = dict(teardown.plan(aws["cloudformation"], STACK).kept)
    said: list[str] = []
    assert teardown.teardown(STACK, yes=True, say=said.append) == 0

    assert STACK not in stacks(aws["cloudformation"])
    buckets = [b["Name"] for b in aws["s3"].list_buckets()["Buckets"]]
    assert aws["bucket"] not in buckets  # emptied, deleted
    assert OTHER_BUCKET in buckets  # no other bucket touched
    assert aws["s3"].list_objects_v2(Bucket=OTHER_BUCKET)["KeyCount"] == 1
    assert said[0] == f"emptied {aws['bucket']}: 4 object(s)"  # 3 versions, 1 delete marker
    (table,) = table_names() - aws["tables_before"]
    assert kept["AWS::DynamoDB::Table"] == table
    lines = [line for line in said if line.startswith("kept: ")]
    assert len(lines) == 1
    assert table in lines[0]
    assert "delete-table" in lines[0]


def test_a_kept_registry_secret_is_named_with_how_to_adopt_or_delete_it() -> None:
    # (moto's CloudFormation lists no secret among a stack's resources: checked on the rehearsal)
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:TenantsSecret-AbCdEf"
    found = teardown.Plan(STACK, kept=[("AWS::SecretsManager::Secret", secret)])
    (line,) = teardown.what_stays(found, None)
    assert f"ExistingTenantsSecretArn={secret}" in line
    assert f"delete-secret --secret-id {secret}" in line


def test_nothing_happens_unless_the_stacks_name_is_typed_back(aws: dict[str, Any]) -> None:
    questions: list[str] = []

    def answer(question: str) -> str:
        questions.append(question)
        return "yes"

    said: list[str] = []
    assert teardown.teardown(STACK, yes=False, say=said.append, answer=answer) == 1
    assert said == ["teardown: nothing done"]
    assert aws["bucket"] in questions[0]
    assert STACK in stacks(aws["cloudformation"])
    versions = aws["s3"].list_object_versions(Bucket=aws["bucket"])
    assert len(versions["Versions"]) == 3


def test_sams_artifacts_are_named_when_its_stack_exists(aws: dict[str, Any]) -> None:
    managed = {
        "Resources": {"SamCliSourceBucket": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {"SourceBucket": {"Value": {"Ref": "SamCliSourceBucket"}}},
    }
    aws["cloudformation"].create_stack(
        StackName=teardown.SAM_MANAGED_STACK, TemplateBody=json.dumps(managed)
    )
    artifacts = teardown.sam_artifacts(aws["cloudformation"], STACK)
    assert artifacts is not None
    assert artifacts.startswith("s3://")
    assert artifacts.endswith(f"/{STACK}/")
    assert any(artifacts in line for line in teardown.what_stays(teardown.Plan(STACK), artifacts))
