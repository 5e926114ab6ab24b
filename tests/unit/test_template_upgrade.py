"""The jobs table's indexes over the two deployments that upgrade a stack of the earlier release
(docs/operations.md, "The tenant index after an upgrade"): CloudFormation creates or deletes at
most one global secondary index per stack update, and changes none in place."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from bench.billing import Table
from bench.cost import table_from_template
from jobstream.store import keys
from jobstream_local.resources import create_tables
from jobstream_local.template import Template

REPOSITORY = Path(__file__).resolve().parents[2]
TABLE = "JobsTable"
PARAMETER = "PreviousReleaseCompatible"


def _index(name: str, hash_key: str, range_key: str, projection: dict[str, Any]) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": hash_key, "KeyType": "HASH"},
            {"AttributeName": range_key, "KeyType": "RANGE"},
        ],
        "Projection": projection,
    }


def _include(*attributes: str) -> dict[str, Any]:
    return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(attributes)}


# The jobs table's indexes as the release before `tenant_jobs` declared them.
EARLIER_RELEASE = {
    index["IndexName"]: index
    for index in (
        _index("by_tenant", "gsi1pk", "gsi1sk", _include("status")),
        _index("by_correlation", "gsi2pk", "gsi2sk", _include("status")),
        _index("sweep", "sweep_pk", "sweep_sk", {"ProjectionType": "KEYS_ONLY"}),
        _index(
            "feed",
            "feed_pk",
            "feed_sk",
            _include("kind", "at", "progress_stage", "progress_message"),
        ),
    )
}


def indexes(template: Template) -> dict[str, dict[str, Any]]:
    return {index["IndexName"]: index for index in template.table_indexes(TABLE)}


def changed_indexes(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """The indexes one stack update creates, deletes or would have to replace."""
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def test_by_default_the_table_has_the_releases_indexes_and_not_by_tenant() -> None:
    found = indexes(Template.load())
    assert set(found) == {keys.TENANT_INDEX, keys.CORRELATION_INDEX, keys.SWEEP_INDEX, "feed"}
    assert keys.TENANT_INDEX == "tenant_jobs"
    assert "listed" in found[keys.TENANT_INDEX]["Projection"]["NonKeyAttributes"]


def test_kept_the_earlier_by_tenant_index_is_declared_exactly_as_before() -> None:
    found = indexes(Template.load().with_parameters({PARAMETER: "true"}))
    assert set(found) == {"by_tenant", keys.TENANT_INDEX} | (set(EARLIER_RELEASE) - {"by_tenant"})
    assert found["by_tenant"] == EARLIER_RELEASE["by_tenant"]


def test_each_deployment_of_the_upgrade_creates_or_deletes_one_index() -> None:
    template = Template.load()
    first = indexes(template.with_parameters({PARAMETER: "true"}))
    second = indexes(template.with_parameters({PARAMETER: "false"}))
    assert changed_indexes(EARLIER_RELEASE, first) == {keys.TENANT_INDEX}  # created
    assert changed_indexes(first, second) == {"by_tenant"}  # deleted
    # What the parameter exists for: the earlier release's stack cannot take the template in one.
    assert changed_indexes(EARLIER_RELEASE, second) == {"by_tenant", keys.TENANT_INDEX}
    assert indexes(template) == second


def test_the_parameter_defaults_to_one_update_for_a_new_stack_and_takes_true_or_false() -> None:
    template = Template.load()
    assert template.parameter(PARAMETER) == "false"
    assert not template.condition("KeepsPreviousRelease", {})
    assert template.with_parameters({PARAMETER: "true"}).condition("KeepsPreviousRelease", {})
    with pytest.raises(ValueError, match="not one of"):
        template.with_parameters({PARAMETER: "yes"})
    with pytest.raises(ValueError, match="declares no parameter"):
        template.with_parameters({"PreviousReleaseCompatiblees": "true"})


def test_evaluated_leaves_out_what_a_false_condition_gives_no_value() -> None:
    template = Template.load()
    no_value = {"Ref": "AWS::NoValue"}
    value = {
        "kept": {"Fn::If": ["KeepsPreviousRelease", "a", no_value]},
        "list": [1, {"Fn::If": ["KeepsPreviousRelease", 2, no_value]}, {"Ref": "JobsTable"}],
        "nested": {"Fn::If": ["TracingEnabled", "x", {"Fn::If": ["HasAlarmTopic", "y", "z"]}]},
    }
    assert template.evaluated(value) == {"list": [1, {"Ref": "JobsTable"}], "nested": "z"}
    assert template.with_parameters({PARAMETER: "true"}).evaluated(value)["list"] == [
        1,
        2,
        {"Ref": "JobsTable"},
    ]
    assert template.evaluated(no_value) is None


@pytest.mark.parametrize("keep", ["true", "false"])
def test_the_local_tables_and_the_bench_have_the_indexes_the_parameters_deploy(
    aws: None, keep: str
) -> None:
    template = Template.load().with_parameters({PARAMETER: keep})
    name = f"upgrade-{uuid.uuid4().hex[:8]}"
    client = boto3.client("dynamodb")
    create_tables(template, client, name_for=lambda _logical_id: name)
    created = client.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    expected = set(indexes(template))
    assert ("by_tenant" in expected) is (keep == "true")
    assert {index["IndexName"] for index in created} == expected
    projections = {index["IndexName"]: index["Projection"] for index in created}
    assert projections == {name: index["Projection"] for name, index in indexes(template).items()}
    assert {index.name for index in table_from_template(template, name).indexes} == expected


def test_the_bench_refuses_an_index_list_with_its_conditions_unevaluated() -> None:
    (properties,) = Template.load().resources_of_type("AWS::DynamoDB::Table").values()
    with pytest.raises(ValueError, match="not evaluated"):
        Table.from_template("t", properties)


def test_the_template_points_at_the_upgrade_note() -> None:
    operations = (REPOSITORY / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "The tenant index after an upgrade" in operations
    assert f"--parameter-overrides {PARAMETER}=true" in operations
