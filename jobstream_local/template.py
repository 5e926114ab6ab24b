"""Reading template.yaml: the resources, routes, queues and schedules the local stack reproduces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobstream_local.child import REPOSITORY

TEMPLATE = REPOSITORY / "template.yaml"
LOCAL_STACK_NAME = "jobstream-local"

# What the local stack knows of each created resource: its Ref value and its attributes.
Physical = Mapping[str, Mapping[str, str]]


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

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> Template:
        text = path.read_text(encoding="utf-8")
        return cls(yaml.load(text, Loader=_CfnLoader))  # noqa: S506 - a SafeLoader subclass

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
        """A function's timeout: its own, else the Globals' (parameters at their defaults)."""
        function = self.resources_of_type("AWS::Serverless::Function").get(name, {})
        timeout = function.get("Timeout", self.document["Globals"]["Function"]["Timeout"])
        return int(self.resolve(timeout, {}))

    def function_environment(
        self, overrides: Mapping[str, str], physical: Physical
    ) -> dict[str, str]:
        """Globals environment, resolved: parameters to defaults, resources to local values."""
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
            parameter = self.document.get("Parameters", {}).get(ref)
            if parameter is not None:
                return str(parameter.get("Default", ""))
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
        """A template condition, with parameters at their defaults (Equals, Not, And, Or)."""
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
