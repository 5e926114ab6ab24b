"""Reading template.yaml: the resources, routes, queues and schedules the local stack reproduces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from jobstream_local.child import REPOSITORY

TEMPLATE = REPOSITORY / "template.yaml"
LOCAL_STACK_NAME = "jobstream-local"

# What the local stack knows of each created resource: its Ref value and its attributes.
Physical = Mapping[str, Mapping[str, str]]
TABLE = "AWS::DynamoDB::Table"
# What `{"Ref": "AWS::NoValue"}` evaluates to: the property or list member is left out.
_NO_VALUE: Any = object()


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !Sub, ...) as data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    code_dir: Path
    handler: str


@dataclass(frozen=True)
class HttpRoute:
    method: str
    path: str
    function: FunctionSpec

    @property
    def route_key(self) -> str:
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class QueueSource:
    """An SQS event source: which queue feeds which function, how many messages at a time."""

    queue: str
    function: FunctionSpec
    batch_size: int


@dataclass(frozen=True)
class StreamSource:
    """A DynamoDB Streams event source: which table's stream feeds which function, how."""

    table: str
    function: FunctionSpec
    batch_size: int
    filters: tuple[dict[str, Any], ...]
    starting_position: str
    max_retries: int


@dataclass(frozen=True)
class Template:
    document: dict[str, Any]
    # Parameter values as `--parameter-overrides` gives them; the others keep their defaults.
    parameters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> Template:
        text = path.read_text(encoding="utf-8")
        return cls(yaml.load(text, Loader=_CfnLoader))  # noqa: S506 - a SafeLoader subclass

    def with_parameters(self, values: Mapping[str, str]) -> Template:
        """This template as deployed with `values` for some of its parameters; ValueError for
        a parameter it does not declare or a value its AllowedValues leave out."""
        declared = self.document.get("Parameters") or {}
        for name, value in values.items():
            if name not in declared:
                raise ValueError(f"the template declares no parameter {name}")
            allowed = declared[name].get("AllowedValues")
            if allowed is not None and value not in [str(a) for a in allowed]:
                raise ValueError(f"{name}={value}: not one of {allowed}")
        return replace(self, parameters={**self.parameters, **values})

    def parameter(self, name: str) -> str:
        """A parameter's value: the one given (`with_parameters`), else its default."""
        if name in self.parameters:
            return self.parameters[name]
        return str(self.document["Parameters"][name].get("Default", ""))

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.document["Resources"]
        return resources

    def physical_name(self, logical_id: str) -> str:
        return f"{LOCAL_STACK_NAME}-{logical_id}"

    def resources_of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource.get("Properties", {})
            for logical_id, resource in self.resources.items()
            if resource["Type"] == resource_type
        }

    def tables(self) -> dict[str, dict[str, Any]]:
        """Every AWS::DynamoDB::Table as these parameters deploy it (a table under a false
        condition left out), its properties `evaluated`: what a table is created from."""
        return {
            logical_id: self.evaluated(resource.get("Properties", {}))
            for logical_id, resource in self.resources.items()
            if resource["Type"] == TABLE
            and ("Condition" not in resource or self.condition(resource["Condition"], {}))
        }

    def table_indexes(self, logical_id: str) -> list[dict[str, Any]]:
        """A table's global secondary indexes as declared, conditions evaluated."""
        return list(self.tables()[logical_id].get("GlobalSecondaryIndexes", []))

    def evaluated(self, value: Any) -> Any:
        """`value` with its conditions evaluated as CloudFormation does: each Fn::If replaced
        by the branch its condition chooses, and a Ref to AWS::NoValue left out of its list or
        mapping (None if `value` itself comes to none). Other intrinsic functions are kept."""
        chosen = self._chosen(value)
        return None if chosen is _NO_VALUE else chosen

    def _chosen(self, value: Any) -> Any:
        if isinstance(value, list):
            members = (self._chosen(member) for member in value)
            return [member for member in members if member is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if value == {"Ref": "AWS::NoValue"}:
            return _NO_VALUE
        if "Fn::If" in value:
            condition, when_true, when_false = value["Fn::If"]
            return self._chosen(when_true if self.condition(condition, {}) else when_false)
        entries = {key: self._chosen(entry) for key, entry in value.items()}
        return {key: entry for key, entry in entries.items() if entry is not _NO_VALUE}

    def _function_events(self, event_type: str) -> list[tuple[FunctionSpec, dict[str, Any]]]:
        found = []
        for name, properties in self.resources_of_type("AWS::Serverless::Function").items():
            spec = FunctionSpec(name, REPOSITORY / properties["CodeUri"], properties["Handler"])
            events = (properties.get("Events") or {}).values()
            found += [(spec, e["Properties"]) for e in events if e["Type"] == event_type]
        return found

    def http_routes(self) -> list[HttpRoute]:
        return [
            HttpRoute(method=props["Method"].upper(), path=props["Path"], function=spec)
            for spec, props in self._function_events("HttpApi")
        ]

    def queue_sources(self) -> list[QueueSource]:
        return [
            QueueSource(props["Queue"]["Fn::GetAtt"][0], spec, int(props.get("BatchSize", 10)))
            for spec, props in self._function_events("SQS")
        ]

    def stream_sources(self) -> list[StreamSource]:
        return [
            StreamSource(
                table=props["Stream"]["Fn::GetAtt"][0],
                function=spec,
                batch_size=int(props.get("BatchSize", 100)),
                filters=tuple((props.get("FilterCriteria") or {}).get("Filters") or ()),
                starting_position=str(props.get("StartingPosition", "LATEST")),
                max_retries=int(props.get("MaximumRetryAttempts", 3)),
            )
            for spec, props in self._function_events("DynamoDB")
        ]

    def scheduled_functions(self) -> list[FunctionSpec]:
        return [
            spec
            for event_type in ("Schedule", "ScheduleV2")
            for spec, _ in self._function_events(event_type)
        ]

    def function_timeout_s(self, name: str) -> int:
        """A function's timeout: its own, else the Globals' (parameters at their values)."""
        function = self.resources_of_type("AWS::Serverless::Function").get(name, {})
        timeout = function.get("Timeout", self.document["Globals"]["Function"]["Timeout"])
        return int(self.resolve(timeout, {}))

    def function_environment(
        self, overrides: Mapping[str, str], physical: Physical
    ) -> dict[str, str]:
        """Globals environment, resolved: parameters to their values, resources to local ones."""
        variables = self.document["Globals"]["Function"]["Environment"]["Variables"]
        return {
            name: overrides.get(name) or self.resolve(value, physical)
            for name, value in variables.items()
        }

    def resolve(self, value: Any, physical: Physical) -> str:
        if isinstance(value, dict) and "Ref" in value:
            ref = value["Ref"]
            if ref == "AWS::StackName":
                return LOCAL_STACK_NAME
            if ref in self.document.get("Parameters", {}):
                return self.parameter(ref)
            return physical[ref]["Ref"]
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            return physical[logical_id][attribute]
        if isinstance(value, dict) and "Fn::If" in value:
            condition, when_true, when_false = value["Fn::If"]
            chosen = when_true if self.condition(condition, physical) else when_false
            return self.resolve(chosen, physical)
        return str(value)

    def condition(self, name: str, physical: Physical) -> bool:
        """A template condition, with parameters at their values (Equals, Not, And, Or)."""
        return self._evaluate(self.document["Conditions"][name], physical)

    def _evaluate(self, expression: Any, physical: Physical) -> bool:
        ((function, arguments),) = expression.items()
        if function == "Fn::Equals":
            left, right = (self.resolve(argument, physical) for argument in arguments)
            return left == right
        if function == "Fn::Not":
            return not self._evaluate(arguments[0], physical)
        if function == "Fn::And":
            return all(self._evaluate(argument, physical) for argument in arguments)
        if function == "Fn::Or":
            return any(self._evaluate(argument, physical) for argument in arguments)
        if function == "Condition":
            return self.condition(arguments, physical)
        raise ValueError(f"unsupported condition function {function}")
