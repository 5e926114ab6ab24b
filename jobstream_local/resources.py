"""Creating the template's AWS resources on the local endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobstream_local.template import Template

_TABLE_KEYS = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")


def create_tables(
    template: Template, dynamodb: Any, name_for: Callable[[str], str] | None = None
) -> list[str]:
    """Create every AWS::DynamoDB::Table of the template; returns the local table names."""
    names = []
    for logical_id, properties in template.resources_of_type("AWS::DynamoDB::Table").items():
        name = (name_for or template.physical_name)(logical_id)
        request = {key: properties[key] for key in _TABLE_KEYS if key in properties}
        dynamodb.create_table(TableName=name, **request)
        ttl = properties.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        names.append(name)
    return names
