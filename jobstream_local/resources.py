"""Creating the template's AWS resources on the local endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jobstream.store import keys
from jobstream.store.sweep_index import record_legacy_shards_retired
from jobstream_local.template import Template

_TABLE_KEYS = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")
_QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds")


def create_tables(
    template: Template,
    dynamodb: Any,
    name_for: Callable[[str], str] | None = None,
    *,
    upgraded: bool = False,
) -> dict[str, dict[str, str]]:
    """Create every AWS::DynamoDB::Table of the template as its parameters deploy it
    (`Template.tables`: an index under a false condition is not created); their Ref values
    (and the ARN of their stream, `StreamArn`) by logical id. A table with the sweep index is
    recorded as created by this release (the earlier release's sweep shards never held
    anything: store/sweep_index.py) unless `upgraded` (as a table an upgrade finds)."""
    created = {}
    for logical_id, properties in template.tables().items():
        name = (name_for or template.physical_name)(logical_id)
        request = {key: properties[key] for key in _TABLE_KEYS if key in properties}
        stream = properties.get("StreamSpecification")
        if stream:
            # CloudFormation names the view type only; the API wants the stream enabled too.
            request["StreamSpecification"] = {"StreamEnabled": True, **stream}
        description = dynamodb.create_table(TableName=name, **request)["TableDescription"]
        ttl = properties.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        created[logical_id] = {"Ref": name}
        indexes = {index["IndexName"] for index in request.get("GlobalSecondaryIndexes", [])}
        if keys.SWEEP_INDEX in indexes and not upgraded:
            record_legacy_shards_retired(dynamodb, name, now=0)
        if "LatestStreamArn" in description:
            created[logical_id]["StreamArn"] = description["LatestStreamArn"]
    return created


def create_queues(
    template: Template, sqs: Any, name_for: Callable[[str], str] | None = None
) -> dict[str, dict[str, str]]:
    """Create every AWS::SQS::Queue, dead-letter queues first; Ref (URL), Arn and QueueName."""
    queues = template.resources_of_type("AWS::SQS::Queue")
    # Queues without a redrive policy are the targets of the others: create them first.
    ordered = sorted(queues.items(), key=lambda item: "RedrivePolicy" in item[1])
    created: dict[str, dict[str, str]] = {}
    for logical_id, properties in ordered:
        name = (name_for or template.physical_name)(logical_id)
        attributes = {key: str(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties}
        redrive = properties.get("RedrivePolicy")
        if redrive:
            target = template.resolve(redrive["deadLetterTargetArn"], created)
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target, "maxReceiveCount": int(redrive["maxReceiveCount"])}
            )
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        created[logical_id] = {"Ref": url, "Arn": arn, "QueueName": name}
    return created


def create_secrets(
    template: Template, secretsmanager: Any, name_for: Callable[[str], str] | None = None
) -> dict[str, dict[str, str]]:
    """Create every AWS::SecretsManager::Secret with its template value; Ref is the ARN."""
    created = {}
    for logical_id, properties in template.resources_of_type("AWS::SecretsManager::Secret").items():
        name = (name_for or template.physical_name)(logical_id)
        arn = secretsmanager.create_secret(
            Name=name, SecretString=properties.get("SecretString", "")
        )["ARN"]
        created[logical_id] = {"Ref": arn, "Name": name}
    return created


def create_buckets(
    template: Template, s3: Any, name_for: Callable[[str], str] | None = None
) -> dict[str, dict[str, str]]:
    """Create every AWS::S3::Bucket with its lifecycle rules; Ref is the bucket name."""
    created: dict[str, dict[str, str]] = {}
    for logical_id, properties in template.resources_of_type("AWS::S3::Bucket").items():
        name = (name_for or template.physical_name)(logical_id)
        s3.create_bucket(Bucket=name)
        lifecycle = properties.get("LifecycleConfiguration")
        if lifecycle:
            s3.put_bucket_lifecycle_configuration(
                Bucket=name, LifecycleConfiguration=_lifecycle(template, lifecycle, created)
            )
        created[logical_id] = {"Ref": name, "Arn": f"arn:aws:s3:::{name}"}
    return created


def _lifecycle(
    template: Template, lifecycle: dict[str, Any], physical: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """CloudFormation's lifecycle rules in the S3 API's shape (parameters at their defaults)."""
    rules = []
    for rule in lifecycle["Rules"]:
        api_rule: dict[str, Any] = {
            "ID": rule["Id"],
            "Status": rule["Status"],
            "Filter": {"Prefix": rule.get("Prefix", "")},
        }
        if "ExpirationInDays" in rule:
            days = template.resolve(rule["ExpirationInDays"], physical)
            api_rule["Expiration"] = {"Days": int(days)}
        if "AbortIncompleteMultipartUpload" in rule:
            api_rule["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
        rules.append(api_rule)
    return {"Rules": rules}
