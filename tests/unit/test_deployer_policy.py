"""deploy/deployer-policy.json: what the identity that runs `sam deploy` (and `make teardown`)
needs, checked against the resource types the template deploys (after the SAM transform, both
tracing modes). A resource type the map below does not know fails the test: a template change
that adds one must say what creating, updating and deleting it takes."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest

from jobstream_local.child import REPOSITORY
from tests.unit.test_template_privileges import PROCESSED, as_list, transformed

POLICY = REPOSITORY / "deploy" / "deployer-policy.json"

# The API calls CloudFormation makes with the deployer's credentials for each type (create,
# update, delete, read back), and what `sam deploy` and `make teardown` call themselves.
TYPE_ACTIONS: dict[str, list[str]] = {
    "AWS::ApiGatewayV2::Api": ["apigateway:POST", "apigateway:GET", "apigateway:PUT",
                               "apigateway:PATCH", "apigateway:DELETE"],
    "AWS::ApiGatewayV2::Stage": ["apigateway:POST", "apigateway:PATCH", "apigateway:DELETE"],
    "AWS::CloudWatch::Alarm": ["cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms",
                               "cloudwatch:DeleteAlarms"],
    "AWS::CloudWatch::Dashboard": ["cloudwatch:PutDashboard", "cloudwatch:GetDashboard",
                                   "cloudwatch:DeleteDashboards"],
    "AWS::DynamoDB::Table": ["dynamodb:CreateTable", "dynamodb:DescribeTable",
                             "dynamodb:UpdateTable", "dynamodb:UpdateTimeToLive",
                             "dynamodb:DescribeTimeToLive", "dynamodb:UpdateContinuousBackups",
                             "dynamodb:DescribeContinuousBackups", "dynamodb:TagResource"],
    "AWS::IAM::ManagedPolicy": ["iam:CreatePolicy", "iam:CreatePolicyVersion", "iam:GetPolicy",
                                "iam:ListPolicyVersions", "iam:DeletePolicyVersion",
                                "iam:DeletePolicy"],
    "AWS::IAM::Role": ["iam:CreateRole", "iam:GetRole", "iam:PutRolePolicy",
                       "iam:DeleteRolePolicy", "iam:AttachRolePolicy", "iam:DetachRolePolicy",
                       "iam:UpdateAssumeRolePolicy", "iam:DeleteRole", "iam:TagRole"],
    "AWS::Lambda::EventSourceMapping": ["lambda:CreateEventSourceMapping",
                                        "lambda:GetEventSourceMapping",
                                        "lambda:UpdateEventSourceMapping",
                                        "lambda:DeleteEventSourceMapping"],
    "AWS::Lambda::Function": ["lambda:CreateFunction", "lambda:GetFunction",
                              "lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration",
                              "lambda:DeleteFunction", "lambda:TagResource", "iam:PassRole",
                              # the reserved concurrency ApiReservedConcurrency sets
                              "lambda:PutFunctionConcurrency", "lambda:GetFunctionConcurrency",
                              "lambda:DeleteFunctionConcurrency"],
    "AWS::Lambda::LayerVersion": ["lambda:PublishLayerVersion", "lambda:GetLayerVersion",
                                  "lambda:DeleteLayerVersion"],
    "AWS::Lambda::Permission": ["lambda:AddPermission", "lambda:RemovePermission"],
    "AWS::Logs::LogGroup": ["logs:CreateLogGroup", "logs:PutRetentionPolicy",
                            "logs:DescribeLogGroups", "logs:DeleteLogGroup"],
    "AWS::S3::Bucket": ["s3:CreateBucket", "s3:PutEncryptionConfiguration",
                        "s3:PutBucketPublicAccessBlock", "s3:PutBucketOwnershipControls",
                        "s3:PutLifecycleConfiguration", "s3:DeleteBucket",
                        # make teardown empties it first
                        "s3:ListBucketVersions", "s3:DeleteObject", "s3:DeleteObjectVersion"],
    "AWS::S3::BucketPolicy": ["s3:PutBucketPolicy", "s3:GetBucketPolicy",
                              "s3:DeleteBucketPolicy"],
    "AWS::Scheduler::Schedule": ["scheduler:CreateSchedule", "scheduler:GetSchedule",
                                 "scheduler:UpdateSchedule", "scheduler:DeleteSchedule",
                                 "iam:PassRole"],
    "AWS::SecretsManager::ResourcePolicy": ["secretsmanager:PutResourcePolicy",
                                            "secretsmanager:GetResourcePolicy",
                                            "secretsmanager:DeleteResourcePolicy"],
    "AWS::SecretsManager::Secret": ["secretsmanager:CreateSecret",
                                    "secretsmanager:DescribeSecret",
                                    "secretsmanager:UpdateSecret"],
    "AWS::SQS::Queue": ["sqs:CreateQueue", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes",
                        "sqs:DeleteQueue"],
}  # fmt: skip
# `sam deploy` itself: change sets on the transform, the artifact bucket, its own stack.
DEPLOY_ACTIONS = [
    "cloudformation:CreateChangeSet", "cloudformation:DescribeChangeSet",
    "cloudformation:ExecuteChangeSet", "cloudformation:DescribeStacks",
    "cloudformation:DescribeStackEvents", "cloudformation:GetTemplateSummary",
    "cloudformation:DeleteStack", "cloudformation:GetTemplate",
    "cloudformation:DescribeStackResources", "s3:PutObject", "s3:GetObject", "s3:ListBucket",
]  # fmt: skip


def granted_actions() -> list[str]:
    document = json.loads(POLICY.read_text(encoding="utf-8"))
    return [
        str(action)
        for statement in document["Statement"]
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
    ]


def missing(actions: list[str], granted: list[str]) -> list[str]:
    return [a for a in actions if not any(fnmatch.fnmatchcase(a, g) for g in granted)]


def resource_types(processed: dict[str, Any]) -> set[str]:
    return {resource["Type"] for resource in processed["Resources"].values()}


TYPES = sorted(
    resource_types(PROCESSED) | resource_types(transformed(parameters={"TracingMode": "Active"}))
)


def test_the_policy_is_allow_only_and_never_everything() -> None:
    granted = granted_actions()
    assert granted
    assert not [a for a in granted if a == "*" or a.endswith(":*")]


@pytest.mark.parametrize("resource_type", TYPES)
def test_the_deployer_may_manage_every_resource_type_of_the_template(resource_type: str) -> None:
    assert resource_type in TYPE_ACTIONS, f"{resource_type}: say what deploying it takes"
    assert missing(TYPE_ACTIONS[resource_type], granted_actions()) == []


def test_the_deployer_may_run_sam_deploy() -> None:
    assert missing(DEPLOY_ACTIONS, granted_actions()) == []


def test_the_map_names_no_type_the_template_lost() -> None:
    assert sorted(set(TYPE_ACTIONS) - set(TYPES)) == []


def test_the_check_catches_a_missing_action() -> None:
    granted = [a for a in granted_actions() if a != "sqs:SetQueueAttributes"]
    assert missing(TYPE_ACTIONS["AWS::SQS::Queue"], granted) == ["sqs:SetQueueAttributes"]
